"""The verdict and its classes: every class a verdict can have, what it means and whether it is a finding (the
one registry: corpus entries, sweeps, certificates, the fuzz target, the gate, the command line and the
glossary read it), and the Verdict on one case (what the judge, dryz.judge, returns; dryz.check computes it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .case import Case, json_number
from .errors import DryzError
from .oracle import MATCH_LENGTHS, verdict_keys
from .subject.answers import Crash


class HarnessError(RuntimeError, DryzError):
    """The harness itself is in doubt (exit 2), never the library's doing."""
    prefix = "harness error: "


AGREE, MISMATCH, ORACLE_DISAGREEMENT, HARNESS_ERROR = "agree", "mismatch", "oracle-disagreement", "harness-error"
CRASH = "crash"
MEMORY = "memory"  # a crash with a sanitizer report (a subject built with --sanitize): crash_verdict


# Every verdict class, in report order (the one list: corpus entries, sweeps, certificates and the CLI read it).
CLASSES = (AGREE, "documented-contained-restart", "documented-breaker-truncated", "documented-tail-cap",
           "promise-restart-order", "promise-finite-penalty", "promise-breaker-in-token",
           "promise-breaker-across-tokens", "promise-breaker-phantom", MISMATCH,
           "mismatch-multi-token", ORACLE_DISAGREEMENT, HARNESS_ERROR, CRASH, MEMORY)


@dataclass(frozen=True)
class Kind:
    """One entry of the class registry: a verdict class, or a family of them (a name ending in -*), whether it is
    a finding (the subject's doing: exit 1), what it means, and which modes give it."""
    name: str
    finding: bool
    meaning: str
    given_by: str = "every mode that judges a case (check, exhaustive, fuzz, replay, minimize, the gate)"


# The registry of verdict classes (the glossary is generated from it; is_finding reads it). A family's members are
# named by what follows its prefix (PROMISE_CLASSES, dryz.oracle.served.CLASSES, dryz.oracle.deviations).
KINDS = (
    Kind(AGREE, False, "The subject's output equals the shipped model's, bit for bit (every logit, the candidate "
                       "array, the sorted flag), both oracles agree, and no promise of the source is broken."),
    Kind("documented-*", False, "A limitation the source states itself: the output equals the shipped model's and "
                                "differs from what a comment promises, where the source says it may "
                                "(documented-contained-restart: a breaker completing inside another; "
                                "documented-breaker-truncated, documented-tail-cap: init_dry cuts a breaker to 40 "
                                "bytes and its tail to 20 tokens)."),
    Kind("declared-*", False, "A deviation from llama.cpp's semantics that the subject's adapter declares, citing "
                              "the engine's own user documentation, or a fix of a finding that a patched llama.cpp "
                              "declares (dryz --declare; the gate's --expect-change of the finding): the output "
                              "equals llama.cpp's model with that deviation or fix applied "
                              "(dryz.oracle.deviations)."),
    Kind("promise-*", True, "The output equals the shipped model's but breaks what the source promises (a comment "
                            "or the code's stated purpose): promise-finite-penalty (the clamp meant to keep "
                            "penalties finite does not), promise-restart-order (not the most recently completed "
                            "restart sequence limits the repeat), promise-breaker-in-token, -across-tokens, "
                            "-phantom (a breaker string as the text prints it does not stop a repeat)."),
    Kind("served-*", True, "llama-server's request layer makes of a /completion request something other than the "
                           "library's semantics for the same numbers, which its documentation does not state "
                           "(dryz.oracle.served: served-base-replaced, -window-refused, -allowed-refused, "
                           "-breakers-required, -empty-prompt).", "a llama-server subject (server:PATH)"),
    Kind(MISMATCH, True, "The subject's output differs from the shipped model's, and both oracles agree on what "
                         "it must be: a logit, the candidate array or the sorted flag."),
    Kind("mismatch-multi-token", True, "A mismatch where a breaker is a multi-token restart sequence."),
    Kind(ORACLE_DISAGREEMENT, True, "Oracles A and B disagree on a match length: the subject is not judged on that "
                                    "case, and the case is kept as a witness against the oracles."),
    Kind(HARNESS_ERROR, False, "A control of the harness failed: the run is void (exit 2), never the subject's "
                               "doing."),
    Kind(CRASH, True, "The subject's process died (a signal, an abort), hung, or its server stopped answering on "
                      "the case: judged in an isolation worker, so the rest is judged too."),
    Kind(MEMORY, True, "A crash with a sanitizer report (a subject built with --sanitize): its kind, summary and "
                       "first frames; minimized as the same kind of error in the same function."),
)
KIND = {k.name: k for k in KINDS}


def kind_of(klass: str) -> Kind | None:
    """The registry's entry for a class: its own, else its family's (a prefix ending in -)."""
    k = KIND.get(klass)
    if k is None and "-" in klass:
        k = KIND.get(klass.split("-", 1)[0] + "-*")
    return k


def is_finding(klass: str) -> bool:
    """A class that is the subject's doing (exit 1), as the registry says: anything but agree, the source's own
    documented limitations, the deviations an engine declares, and the harness's own errors (exit 2)."""
    k = kind_of(klass)
    return True if k is None else k.finding


def class_order(klass: str) -> int:
    return CLASSES.index(klass) if klass in CLASSES else len(CLASSES)


# A broken promise's class is "promise-" + its name, except the limitation the source documents itself.
PROMISE_CLASSES = {"contained-restart": "documented-contained-restart",
                   # the text-level promise over a real vocabulary (dryz.oracle.promise_text): init_dry cuts a
                   # breaker to 40 bytes and a tail to 20 tokens, and says so
                   "breaker-truncated": "documented-breaker-truncated", "tail-cap": "documented-tail-cap"}


class _lazy:
    """A value computed on first read and then kept in the instance (functools.cached_property without its
    per-read lock, which costs ~1 us a read on Python 3.11: a fuzz input reads a dozen)."""

    def __init__(self, fn):
        self.fn, self.name = fn, fn.__name__

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        v = self.fn(obj)
        obj.__dict__[self.name] = v
        return v


def promise_class(name: str) -> str:
    """A broken promise's class: "promise-" + its name, except the limitation the source documents itself."""
    return PROMISE_CLASSES.get(name, "promise-" + name)


def _list_of(array_field: str) -> _lazy:
    """A Verdict field's list form, made when first read."""
    return _lazy(lambda v: getattr(v, array_field).tolist())


@dataclass
class Verdict:
    case: Case
    status: str
    # Per candidate, in array order, as arrays; the list forms below are made when first read (most fuzz
    # inputs' verdicts are only classified).
    oracle_L_array: np.ndarray    # int64: the primary oracle's L (dryz.oracle.MATCH_LENGTHS[0])
    other_L_arrays: tuple         # int64 arrays: every other registered oracle's L, in MATCH_LENGTHS order
    expected_array: np.ndarray    # float32
    observed_array: np.ndarray    # float32
    expected_sorted: bool
    observed_sorted: bool
    library_L: list | None = None  # None when the configuration does not invert to L; None entries: overflow
    detail: str = ""
    multi_token: bool = False
    differing: list[dict] = field(default_factory=list)  # per differing candidate: id, expected, observed
    broken_promises: list[str] = field(default_factory=list)  # promises the shipped output breaks
    crash: dict | None = None  # status crash: the signal and the subject's last words (+ a sanitizer report)
    declared: str | None = None  # the class of the deviation the subject declares that explains its output
    served: str | None = None    # the served-* class: the subject's request layer differs from the library

    @_lazy
    def candidates(self) -> list[int]:
        return list(self.case.ids)

    oracle_L = _list_of("oracle_L_array")

    @property
    def oracle_Ls(self) -> dict:
        """Every registered oracle's L per candidate, by its verdict key (oracle_L, oracle_B_L, ...)."""
        arrays = (self.oracle_L_array, *self.other_L_arrays)
        return {k: [int(x) for x in a] for k, a in zip(verdict_keys(), arrays)}
    expected_logits = _list_of("expected_array")
    observed_logits = _list_of("observed_array")

    @property
    def klass(self) -> str:
        """The verdict's class: what replay compares with a corpus entry's `expect`."""
        if self.status == MISMATCH and self.multi_token:
            return "mismatch-multi-token"
        if self.status == CRASH and (self.crash or {}).get("sanitizer"):
            return MEMORY
        if self.status != AGREE:
            return self.status
        if self.served:
            return self.served
        if self.declared:
            return self.declared
        if self.broken_promises:
            return promise_class(self.broken_promises[0])
        return AGREE

    @property
    def ok(self) -> bool:
        return self.status == AGREE

    def signature(self) -> tuple:
        """The disagreement class, for 'fails the same way': status plus, per differing candidate,
        the direction of the error (the library penalizing more or less than expected); for a crash, how the
        subject died."""
        if self.status == CRASH and (self.crash or {}).get("sanitizer"):  # the same kind of error, same function
            return (MEMORY, ((-1, f"{self.crash['kind']} in {self.crash.get('function', '')}"),))
        if self.status == CRASH:
            return (CRASH, ((-1, (self.crash or {}).get("signal") or "crash"),))
        # A multi-token mismatch that survives without the multi-token breaker is the same failure.
        klass = MISMATCH if self.klass == "mismatch-multi-token" else self.klass
        return (klass, tuple(sorted((d["id"], d["direction"]) for d in self.differing)))

    def to_json(self) -> dict:
        return {
            "class": self.klass,
            "status": self.status,
            "detail": self.detail,
            "candidates": self.candidates,
            **self.oracle_Ls,
            "library_L": self.library_L,
            "expected_logits": [json_number(x) for x in self.expected_logits],
            "observed_logits": [json_number(x) for x in self.observed_logits],
            "expected_sorted": self.expected_sorted,
            "observed_sorted": self.observed_sorted,
            "multi_token_breakers": self.multi_token,
            "differing": self.differing,
            "broken_promises": self.broken_promises,
            **(self.crash if self.crash is not None else {}),
            **({"declared": self.declared} if self.declared else {}),
            **({"served": self.served} if self.served else {}),
        }


def refused_verdict(case: Case, detail: str) -> Verdict:
    """A mismatch in which nothing was observed: the subject refused where its semantics say it runs, or ran
    where they say it refuses."""
    empty_i, empty_f = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    v = Verdict(case=case, status=MISMATCH, oracle_L_array=empty_i,
                other_L_arrays=(empty_i,) * (len(MATCH_LENGTHS) - 1), expected_array=empty_f, observed_array=empty_f, expected_sorted=False, observed_sorted=False,
                detail=detail)
    v.differing.append({"id": -1, "expected": "as the served model says", "observed": detail, "direction": "served"})
    return v


def crash_fields(crash: Crash) -> dict:
    """A Crash's sanitizer report as verdict fields (sanitizer, kind, summary, frames, function), or nothing."""
    r = crash.report
    return {k: r[k] for k in ("sanitizer", "kind", "summary", "frames", "function")} if r else {}


def crash_verdict(case: Case, crash: Crash) -> Verdict:
    """The verdict on a case the subject crashed on (its process died or hung, or its server stopped
    answering): class crash, a finding; nothing observed, so nothing compared. The one place a sanitizer report
    is judged: a Crash carrying one (a subject built with --sanitize died of it) is class memory, with the
    report's kind, summary and first frames (PREREG, amendment 2026-12-03)."""
    empty_i, empty_f = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    fields = crash_fields(crash)
    return Verdict(case=case, status=CRASH, oracle_L_array=empty_i,
                   other_L_arrays=(empty_i,) * (len(MATCH_LENGTHS) - 1), expected_array=empty_f,
                   observed_array=empty_f, expected_sorted=False, observed_sorted=False,
                   detail=fields.get("summary") or crash.detail,
                   crash={"signal": crash.signal, "stderr": crash.stderr, **fields})
