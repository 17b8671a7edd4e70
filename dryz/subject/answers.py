"""What a subject answers (dryz.subject.protocol): what DRY left after an apply (`Output`, many of them flat:
`Outputs`), or why there is no such answer: the subject crashed (`Crash`), its request layer refused the case
(`Refused`), the answer cannot be read back exactly (`Unrecoverable`); a case it cannot express is
`Unsupported`; what it can be asked is its `Capabilities`. Plain data: the judge (dryz.check) reads these, and
every subject kind makes them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DryzError


CALLS = ("accept", "apply", "reset", "clone", "free")


@dataclass
class Output:
    """What the sampler left in the candidate array after one apply."""
    ids: tuple[int, ...]
    logits: np.ndarray  # float32, in array order
    sorted: bool | None  # the array's sorted flag; None from a subject that has none (not judged)
    size: int


@dataclass
class Outputs:
    """What many applies left, flat (the C sequencer's form): every apply's ids (int32) and logits (float32)
    concatenated, each apply's size (int32), start in the concatenation (int64) and sorted flag (bool)."""
    ids: np.ndarray
    logits: np.ndarray
    sizes: np.ndarray
    sorted: np.ndarray
    starts: np.ndarray

    @classmethod
    def of_buffers(cls, ids: bytes, logits: bytes, sizes: bytes, sorted_flags: bytes) -> "Outputs":
        sz = np.frombuffer(sizes, dtype=np.int32)
        starts = np.zeros(len(sz), dtype=np.int64)
        np.cumsum(sz[:-1], out=starts[1:])
        return cls(np.frombuffer(ids, dtype=np.int32), np.frombuffer(logits, dtype=np.float32), sz,
                   np.frombuffer(sorted_flags, dtype=np.bool_), starts)

    @classmethod
    def of(cls, outs) -> "Outputs":
        """The flat form of a list of Output (a sorted flag of None, from a subject without one, reads False)."""
        sizes = np.array([len(o.ids) for o in outs], dtype=np.int32)
        starts = np.zeros(len(outs), dtype=np.int64)
        np.cumsum(sizes[:-1], out=starts[1:])
        ids = np.array([t for o in outs for t in o.ids], dtype=np.int32)
        logits = (np.concatenate([np.asarray(o.logits, dtype=np.float32).reshape(-1) for o in outs]) if outs
                  else np.zeros(0, dtype=np.float32))
        return cls(ids, logits, sizes, np.array([bool(o.sorted) for o in outs], dtype=np.bool_), starts)

    def __len__(self) -> int:
        return len(self.sizes)

    def output(self, i: int) -> Output:
        a, n = int(self.starts[i]), int(self.sizes[i])
        return Output(tuple(self.ids[a:a + n].tolist()), self.logits[a:a + n].copy(), bool(self.sorted[i]), n)

    def outputs(self) -> list[Output]:
        return [self.output(i) for i in range(len(self))]


@dataclass(frozen=True)
class Crash:
    """The subject failed on this input instead of answering: its process died (a signal, an abort), hung, or
    its server stopped answering. A verdict of class crash (a finding), never a harness error; of class memory
    when it died with a sanitizer report (dryz.check.crash_verdict)."""
    detail: str
    signal: str = ""      # e.g. SIGABRT, SIGSEGV, "hang", "exit 3"
    stderr: str = ""      # the subject's last words
    # A sanitizer report in what the process printed before it died (a subject built with --sanitize;
    # dryz.subject.sanitizer.report: sanitizer, kind, summary, frames, function): judged class memory.
    report: dict | None = None


@dataclass(frozen=True)
class Refused:
    """The subject's own request layer refused the case instead of running DRY (llama-server: an HTTP error):
    judged against what that layer is documented to do (dryz.oracle.served), never a crash."""
    status: int
    message: str
    request: dict | None = None
    response: object = None


@dataclass(frozen=True)
class Unrecoverable:
    """The subject answered, but what DRY did cannot be read back exactly from the answer (e.g. a probability
    that several float32 logits give): reported with the reason, never guessed, never judged."""
    detail: str
    request: dict | None = None


class Unsupported(DryzError):
    """A case this subject cannot run as given (Capabilities.lacks): bad input for it, never a finding."""


class SubjectCrashed(Exception):
    """Raised by a walk (which has no per-case answer) when the subject crashes on one of the tree's cases."""

    def __init__(self, crash: Crash, case=None):
        super().__init__(crash.detail)
        self.crash, self.case = crash, case


@dataclass(frozen=True)
class Capabilities:
    """What a subject can be asked (a mode skips, with a reason, what its subject cannot do)."""
    calls: frozenset = frozenset(CALLS)   # sampler calls it exposes; traces need reset, clone and free
    vocabularies: str = "any"             # "any", or "symbols" (dryz's symbol vocabulary only)
    initial_logits: bool = True           # candidates can start at given logits (else every logit is 0)
    candidate_arrays: bool = True         # any candidate subset and order
    sorted_flag: bool = True              # the array's sorted flag is set from the case and read back
    batch: int = 1                        # cases one run_batch call handles at once to advantage
    in_process: bool = True               # native code mapped into this process: a crash takes the process
    deviations: tuple = ()                # documented deviations from llama.cpp's semantics it declares
    # A request layer of its own between the user and DRY, whose documented semantics dryz models
    # (dryz.oracle.served.LAYERS: "llama-server"): the judge asks that model what the layer makes of a case.
    request_layer: str = ""
    # The engine's input domain (its adapter declares it, citing the engine): the shortest history it accepts.
    min_history: int = 0
    domain: str = ""
    # It runs request sequences: requests sent in turn to one fresh instance of the engine (Subject.run_sequence;
    # the adapter protocol's `sequence` op), each answered as that instance answers it.
    sequences: bool = False
    # Every case is the first request of a fresh instance (a sequence of one request): each costs the instance's
    # start-up, so a mode that enumerates tens of thousands of cases is not run on it (its timed campaigns are).
    instance_per_case: bool = False

    def lacks(self, case) -> str | None:
        """Why this subject cannot run the case as given, or None."""
        if len(case.history) < self.min_history:
            return f"outside the engine's input domain: a history of at least {self.min_history} token(s) " \
                   f"({self.domain})"
        if case.vocab is not None and self.vocabularies == "symbols":
            return "the subject runs dryz's symbol vocabulary only"
        if not self.initial_logits and any(case.logits):
            return "the subject cannot set initial logits (every candidate starts at 0)"
        if not self.candidate_arrays and (case.candidates is not None or case.sorted):
            return "the subject cannot take a candidate subset, order or sorted flag"
        if not self.sorted_flag and case.sorted:
            return "the subject cannot take a candidate array marked sorted"
        return None

    def to_json(self) -> dict:
        return {"calls": sorted(self.calls), "vocabularies": self.vocabularies,
                "initial_logits": self.initial_logits, "candidate_arrays": self.candidate_arrays,
                "sorted_flag": self.sorted_flag,
                "batch": self.batch, "in_process": self.in_process, "deviations": list(self.deviations),
                **({"request_layer": self.request_layer} if self.request_layer else {}),
                **({"min_history": self.min_history, "domain": self.domain} if self.min_history else {}),
                **({"sequences": True} if self.sequences else {}),
                **({"instance_per_case": True} if self.instance_per_case else {})}
