"""The Trace: one DRY configuration plus a sequence of events on one sampler, as a generation loop or a server
drives it. Run on the library by LibLlama.run_trace (dryz/subject/_drive.c; dryz/subject/trace_driver.py through
ctypes); its state modelled by dryz/oracle/trace_model.py; judged after every apply by dryz/trace_check.py.

Events (tuples; the JSON form is the same with lists):

  ("accept", (t, ...))   llama_sampler_accept(current, t) for each token, in order (at least one token).
  ("apply", None)        llama_sampler_apply(current, array) on every symbol of the alphabet in id order,
                         each with logit 0, sorted false. The trace's outputs are the arrays after each apply.
  ("apply", ((id, logit), ...))         the same on this candidate array (ids distinct, < 64; logits float32
                         or -inf), sorted false;
  ("apply", ((id, logit), ...), True)   ... with the array's sorted flag set. (A sorted flag is written only
                         when true: ("apply", c, False) normalises to ("apply", c).)
  ("reset",)             llama_sampler_reset(current).
  ("clone",)             c = llama_sampler_clone(current); every later event acts on c. The original is kept
                         alive, untouched, until the trace ends, and freed then.
  ("free",)              llama_sampler_free(current). Only as the last event (nothing acts on a freed sampler).

The sampler is made with llama_sampler_init_dry from the configuration before the first event. At the end the
driver frees every sampler still alive exactly once: the current one (unless a free event did), then the kept
originals, newest first.

A trace must contain at least one apply. JSON: {"schema": "dryz.trace/1", "alphabet", "penalty_last_n",
"breakers", "multiplier", "base", "allowed_length", ["n_ctx_train"], ["note"], "events": [...]}, logits as in
a Case ("-inf" for -inf). Everything dryz refuses is a TraceError with one line naming the first problem.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from .case import MAX_HISTORY, N_CTX_TRAIN, Case, CaseError, _logit_from_json, _logit_to_json
from .params import DryParams, is_int as _is_int
from .symbols import to_symbols
from .errors import DryzError

TRACE_SCHEMA = "dryz.trace/1"
EVENT_NAMES = ("accept", "apply", "reset", "clone", "free")
MAX_EVENTS = 1 << 14          # events per trace
MAX_TRACE_TOKENS = MAX_HISTORY  # tokens accepted over the whole trace
MAX_APPLIES = 4096            # each apply is one verdict
MAX_CLONES = 64               # every clone keeps one more sampler alive until the end
MAX_SAMPLER_BYTES = 1 << 28   # the samplers alive at once: (clones + 1) * 8 * penalty_last_n bytes (ring buffer
                              # and repeat counts, int32 each) must stay below this


class TraceError(ValueError, DryzError):
    """A Trace (or its JSON) that dryz refuses, with a one-line reason."""


@dataclass(frozen=True)
class Trace(DryParams):
    """DRY's parameters (DryParams: the fields a Case holds too), the vocabulary's size and the calls."""
    events: tuple = field(kw_only=True)
    alphabet: int = field(kw_only=True)
    note: str = field(default="", compare=False)

    def __post_init__(self):
        # Every construction validates (replace() included); the events are stored in their normal form.
        try:
            events = tuple(_normal_event(e, i) for i, e in enumerate(self.events))
        except TypeError:
            raise TraceError("events must be a sequence of event tuples") from None
        object.__setattr__(self, "events", events)
        object.__setattr__(self, "breakers", tuple(self.breakers))
        # The configuration is validated (and multiplier/base rounded to float32, as the C parameter receives
        # them) by the Case it shares with every apply's equivalent case.
        try:
            base = self.config_case()
        except CaseError as e:
            raise TraceError(str(e)) from None
        object.__setattr__(self, "multiplier", base.multiplier)
        object.__setattr__(self, "base", base.base)
        _validate_events(self)

    # -- views ---------------------------------------------------------------------------------------
    def config_case(self, history=(), candidates=None, sorted_flag=False) -> Case:
        """A Case with this trace's configuration (the equivalent single case of an apply, given its history)."""
        return Case(history=tuple(history), alphabet=self.alphabet, penalty_last_n=self.penalty_last_n,
                    breakers=tuple(self.breakers), multiplier=self.multiplier, base=self.base,
                    allowed_length=self.allowed_length, candidates=candidates, sorted=sorted_flag,
                    n_ctx_train=self.n_ctx_train)

    def params(self) -> DryParams:
        return DryParams(self.penalty_last_n, tuple(self.breakers), self.multiplier, self.base, self.allowed_length,
                         self.n_ctx_train)

    @property
    def applies(self) -> list[int]:
        """Indices (in events) of the apply events, in order."""
        return [i for i, e in enumerate(self.events) if e[0] == "apply"]

    def size(self) -> tuple[int, int]:
        """(events, tokens accepted): what the minimizer makes small, in that order."""
        return len(self.events), sum(len(e[1]) for e in self.events if e[0] == "accept")

    def with_events(self, events) -> "Trace":
        return replace(self, events=tuple(events))

    @classmethod
    def trusted(cls, program: "Program | None" = None, **kw) -> "Trace":
        """A Trace from fields that are valid and in normal form by construction (dryz.decode.traces.decode_trace:
        tuples, float32 multiplier and base, in-range tokens and arrays), without the validation every other
        construction runs (most of a fuzz input's decoding time), with its Program if the constructor made it.
        tests/test_traces.py checks the decoder's traces and Programs equal their validated construction's."""
        t = object.__new__(cls)
        for f in fields(cls):
            object.__setattr__(t, f.name, kw[f.name] if f.name in kw else f.default)
        if program is not None:  # the events' Program, as the constructor collected it
            object.__setattr__(t, "_program", program)
        return t

    def program(self) -> "Program":
        """The events as flat arrays (Program), made once per Trace: what the C sequencer runs and what the
        verdict groups applies by."""
        p = self.__dict__.get("_program")
        if p is None:
            p = Program.of(self)
            object.__setattr__(self, "_program", p)
        return p

    def spelled(self) -> str:
        """A compact human form: accepts as symbols, A apply, R reset, C clone, F free."""
        out = []
        for e in self.events:
            if e[0] == "accept":
                out.append("+" + to_symbols(e[1]))
            else:
                out.append({"apply": "A", "reset": "R", "clone": "C", "free": "F"}[e[0]]
                           + ("*" if e[0] == "apply" and e[1] is not None else ""))
        return " ".join(out)

    # -- JSON ------------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "schema": TRACE_SCHEMA,
            "alphabet": self.alphabet,
            "penalty_last_n": self.penalty_last_n,
            "breakers": list(self.breakers),
            "multiplier": self.multiplier,
            "base": self.base,
            "allowed_length": self.allowed_length,
        }
        if self.n_ctx_train != N_CTX_TRAIN:
            d["n_ctx_train"] = self.n_ctx_train
        if self.note:
            d["note"] = self.note
        d["events"] = [_event_to_json(e) for e in self.events]
        d["spelled"] = self.spelled()
        return d

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(", ", ": "))

    @classmethod
    def from_json(cls, d: Any) -> "Trace":
        if not isinstance(d, dict):
            raise TraceError("a trace must be a JSON object")
        schema = d.get("schema")
        if schema != TRACE_SCHEMA:
            raise TraceError(f"unknown trace schema {schema!r} (this dryz reads {TRACE_SCHEMA!r})")
        known = {"schema", "alphabet", "penalty_last_n", "breakers", "multiplier", "base", "allowed_length",
                 "n_ctx_train", "note", "events", "spelled"}
        extra = sorted(set(d) - known)
        if extra:
            raise TraceError(f"unknown trace field(s): {', '.join(extra)}")
        for key in ("alphabet", "penalty_last_n", "events"):
            if key not in d:
                raise TraceError(f"trace is missing required field {key!r}")
        if not _is_int(d["alphabet"]):
            raise TraceError("'alphabet' must be an integer")
        params = DryParams.read_json(d, TraceError)
        events = d["events"]
        if not isinstance(events, list):
            raise TraceError("'events' must be a list")
        if len(events) > MAX_EVENTS:
            raise TraceError(f"trace has {len(events)} events; at most {MAX_EVENTS} are supported")
        t = cls(events=tuple(_event_from_json(e, i) for i, e in enumerate(events)), alphabet=d["alphabet"],
                **params, note=str(d.get("note", "")))
        if "spelled" in d and d["spelled"] != t.spelled():
            raise TraceError("'spelled' does not spell 'events'")
        return t

    @classmethod
    def loads(cls, text: str) -> "Trace":
        try:
            return cls.from_json(json.loads(text))
        except json.JSONDecodeError as e:
            raise TraceError(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None


_OP_CODES = {"accept": b"a", "apply": b"p", "reset": b"r", "clone": b"c", "free": b"f"}


@dataclass
class Program:
    """A Trace's events as flat arrays: one op byte per event (b'a' accept, b'p' apply, b'r' reset, b'c' clone,
    b'f' free); every accepted token in order (int32) and each accept's count; every apply's candidate array
    (ids int32, logits float32, concatenated; ("apply", None) is every symbol of the alphabet at logit 0),
    its size, its start in the concatenation, its sorted flag; and per apply the index of its array among the
    trace's distinct (array, sorted flag) pairs, `arrays` (the events' own tuples), in order of first use."""
    ops: bytes
    tokens: np.ndarray
    counts: np.ndarray
    ids: np.ndarray
    logits: np.ndarray
    sizes: np.ndarray
    starts: np.ndarray
    sorted: np.ndarray
    array_of: np.ndarray
    arrays: list

    @classmethod
    def of(cls, t: "Trace") -> "Program":
        ops, tokens, counts, applies = [], [], [], []
        code = _OP_CODES
        for e in t.events:
            name = e[0]
            ops.append(code[name])
            if name == "accept":
                tokens += e[1]
                counts.append(len(e[1]))
            elif name == "apply":
                applies.append(e)
        return cls.of_parts(t.alphabet, b"".join(ops), tokens, counts, applies)

    @classmethod
    def of_parts(cls, alphabet: int, ops: bytes, tokens, counts, applies) -> "Program":
        """The Program of events given as their op bytes, every accepted token, each accept's count and the
        apply events in order (what Program.of collects; dryz.decode.traces.decode_trace collects them as it
        decodes)."""
        index, arrays, array_of = {}, [], []
        for e in applies:
            j = index.get(e)
            if j is None:
                j = index[e] = len(arrays)
                arrays.append(e[1:])
            array_of.append(j)
        # the distinct arrays once, then every apply's gathered from them
        d_ids, d_logits, d_sizes = [], [], []
        for key in arrays:
            if key[0] is None:
                d_ids.append(np.arange(alphabet, dtype=np.int32))
                d_logits.append(np.zeros(alphabet, dtype=np.float32))
            else:
                d_ids.append(np.array([c[0] for c in key[0]], dtype=np.int32))
                d_logits.append(np.array([c[1] for c in key[0]], dtype=np.float32))
            d_sizes.append(len(d_ids[-1]))
        of = np.array(array_of, dtype=np.int64)
        sizes_of = np.array(d_sizes, dtype=np.int32)
        sizes = sizes_of[of]
        starts = np.zeros(len(sizes), dtype=np.int64)
        np.cumsum(sizes[:-1], out=starts[1:])
        if arrays:
            d_start = np.zeros(len(arrays), dtype=np.int64)
            np.cumsum(sizes_of[:-1], out=d_start[1:])
            gather = np.repeat(d_start[of] - starts, sizes) + np.arange(int(sizes.sum()))
            ids, logits = np.concatenate(d_ids)[gather], np.concatenate(d_logits)[gather]
            srt = np.array([len(key) == 2 and bool(key[1]) for key in arrays], dtype=bool)[of]
        else:
            ids, logits, srt = np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32), np.zeros(0, dtype=bool)
        return cls(bytes(ops), np.array(tokens, dtype=np.int32), np.array(counts, dtype=np.int32), ids, logits,
                   sizes, starts, srt, of, arrays)

    def __eq__(self, other) -> bool:
        return isinstance(other, Program) and self.ops == other.ops and self.arrays == other.arrays and all(
            np.array_equal(getattr(self, f), getattr(other, f)) and getattr(self, f).dtype == getattr(other, f).dtype
            for f in ("tokens", "counts", "ids", "logits", "sizes", "starts", "sorted", "array_of"))

    def array(self, j: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """Array j of `arrays`: (ids, logits, sorted flag)."""
        i = int(np.flatnonzero(np.equal(self.array_of, j))[0])
        a, n = int(self.starts[i]), int(self.sizes[i])
        return self.ids[a:a + n], self.logits[a:a + n], bool(self.sorted[i])


def trace_of_case(case: Case) -> Trace:
    """The single Case as a trace: its history accepted (one event), then one apply of its candidate array."""
    events = ([("accept", tuple(case.history))] if case.history else []) + [
        ("apply", case.candidates, True) if case.candidates is not None and case.sorted else ("apply", case.candidates)]
    return Trace(events=tuple(events), alphabet=case.alphabet, penalty_last_n=case.penalty_last_n,
                 breakers=tuple(case.breakers), multiplier=case.multiplier, base=case.base,
                 allowed_length=case.allowed_length, n_ctx_train=case.n_ctx_train)


# -- events -----------------------------------------------------------------------------------------------


def _normal_event(e, i: int) -> tuple:
    """The canonical tuple form of one event (types checked; ranges are _validate_events')."""
    if isinstance(e, (str, bytes)) or not isinstance(e, (tuple, list)) or not e:
        raise TraceError(f"event {i}: an event is a non-empty tuple starting with its name, got {e!r:.60}")
    name = e[0]
    if name not in EVENT_NAMES:
        raise TraceError(f"event {i}: unknown event {name!r:.40} (known: {', '.join(EVENT_NAMES)})")
    if name == "accept":
        if len(e) != 2:
            raise TraceError(f"event {i}: accept takes one list of tokens")
        toks = e[1]
        if isinstance(toks, (str, bytes)) or not isinstance(toks, (tuple, list)):
            raise TraceError(f"event {i}: accept takes a list of integer tokens")
        if not all(_is_int(t) for t in toks):
            raise TraceError(f"event {i}: accept token {next(t for t in toks if not _is_int(t))!r:.40} is not "
                             "an integer")
        if not toks:
            raise TraceError(f"event {i}: accept with no tokens")
        return ("accept", tuple(toks))
    if name == "apply":
        if len(e) not in (2, 3):
            raise TraceError(f"event {i}: apply takes candidates (or None) and optionally a sorted flag")
        sorted_flag = e[2] if len(e) == 3 else False
        if not isinstance(sorted_flag, bool):
            raise TraceError(f"event {i}: apply's sorted flag must be true or false")
        cands = e[1]
        if cands is not None:
            if isinstance(cands, (str, bytes)) or not isinstance(cands, (tuple, list)):
                raise TraceError(f"event {i}: apply's candidates must be None or (id, logit) pairs")
            if not all(isinstance(c, (tuple, list)) and len(c) == 2 and _is_int(c[0]) for c in cands):
                raise TraceError(f"event {i}: apply's candidates must be (integer id, logit) pairs")
            if not all(isinstance(c[1], (int, float)) and not isinstance(c[1], bool) for c in cands):
                raise TraceError(f"event {i}: apply's candidate logits must be numbers")
            cands = tuple((int(t), float(lg)) for t, lg in cands)
        if sorted_flag and cands is None:
            raise TraceError(f"event {i}: a sorted flag needs an explicit candidate array")
        return ("apply", cands, True) if sorted_flag else ("apply", cands)
    if len(e) != 1:
        raise TraceError(f"event {i}: {name} takes no arguments")
    return (name,)


def _validate_events(t: Trace) -> None:
    ev = t.events
    if len(ev) > MAX_EVENTS:
        raise TraceError(f"trace has {len(ev)} events; at most {MAX_EVENTS} are supported")
    k = t.alphabet
    tokens = applies = clones = 0
    for i, e in enumerate(ev):
        name = e[0]
        if name == "accept":
            bad = [x for x in e[1] if not 0 <= x < k]
            if bad:
                raise TraceError(f"event {i}: accept token {bad[0]} is outside the alphabet 0..{k - 1}")
            tokens += len(e[1])
        elif name == "apply":
            applies += 1
            if e[1] is not None:
                if not e[1]:
                    raise TraceError(f"event {i}: apply's candidate array, when given, must not be empty")
                try:
                    t.config_case(candidates=e[1])  # a Case's candidate rules: ids distinct, < 64, float32
                except CaseError as err:
                    raise TraceError(f"event {i}: {err}") from None
        elif name == "clone":
            clones += 1
        elif name == "free" and i != len(ev) - 1:
            raise TraceError(f"event {i}: free must be the last event ({len(ev) - 1 - i} event(s) after it "
                             "would act on a freed sampler)")
    if not applies:
        raise TraceError("a trace needs at least one apply (nothing else is judged)")
    if applies > MAX_APPLIES:
        raise TraceError(f"trace has {applies} applies; at most {MAX_APPLIES} are supported")
    if tokens > MAX_TRACE_TOKENS:
        raise TraceError(f"trace accepts {tokens} tokens; at most {MAX_TRACE_TOKENS} are supported")
    if clones > MAX_CLONES:
        raise TraceError(f"trace clones {clones} times; at most {MAX_CLONES} (each keeps a sampler alive)")
    mem = (clones + 1) * 8 * max(t.penalty_last_n, 0)
    if mem > MAX_SAMPLER_BYTES:
        raise TraceError(f"{clones + 1} samplers of penalty_last_n {t.penalty_last_n} would hold {mem:,} bytes; "
                         f"at most {MAX_SAMPLER_BYTES:,}")


def _event_to_json(e: tuple) -> list:
    if e[0] == "accept":
        return ["accept", list(e[1])]
    if e[0] == "apply":
        cands = None if e[1] is None else [[t, _logit_to_json(lg)] for t, lg in e[1]]
        return ["apply", cands, True] if len(e) == 3 else ["apply", cands]
    return [e[0]]


def _event_from_json(e, i: int) -> tuple:
    if not isinstance(e, list) or not e or not isinstance(e[0], str):
        raise TraceError(f"event {i}: an event is a list starting with its name")
    if e[0] == "apply" and len(e) >= 2 and isinstance(e[1], list):
        try:
            cands = [c if not (isinstance(c, list) and len(c) == 2) else [c[0], _logit_from_json(c[1])]
                     for c in e[1]]
        except CaseError as err:
            raise TraceError(f"event {i}: {err}") from None
        return ("apply", cands, *e[2:])
    return tuple(e)
