"""The verdict on a trace: the library runs it (subject.run_trace), the state model (dryz/oracle/trace_model.py)
gives every apply's equivalent Case, and check_batch judges the applies, as batches, against the oracles.

check_trace(trace, subject) -> TraceVerdict. Per apply, the class is exactly what dryz.check.check gives the
equivalent Case with the trace's output at that apply as the library's output; the fresh-sampler control
requires a fresh sampler's output on that Case to be bit-identical to the trace's. How that is computed:

- Judging. check(case) is check_batch on a batch of one (case_config, case_arrays, the case's logits as the
  initial array, its sorted flag). All applies of a trace share the configuration (trace_config), so all of
  them are one batch of check_batch (ROWS_MAX rows at a time), each row judged as the batch of its own case
  would judge it: the held histories right-aligned with their own lengths (check_batch's `lengths`: window,
  early exits and presence per row, PAD equal to no token in either oracle) and each row's own candidate array
  within the union of the trace's candidate ids (`present`, with the row's initial logits and sorted flag: the
  model predicts each candidate on its own, and only the row's own candidates are compared). Batch.odd_rows
  gives every row the class row_class gives it, which is check()'s class of that row's case (the same
  row_status and promises; the enumerator tallies batches the same way); tests/test_batch.py checks every row
  of such batches against its case judged alone. An apply whose output changed the array's size or ids is
  judged by check() itself (its own path for that). The full Verdict of an apply (per-candidate L, expected
  logits, differing candidates, detail) is check() on the equivalent Case with the recorded output, made when
  first read; it must give the batch's class, else the harness is in doubt (HarnessError).
- The control. The fresh samplers run in one call (subject.run_many: per case init_dry, accept the held tokens,
  apply, free: run()'s own sequence), and each output is compared with the trace's bit for bit (size, ids,
  float32 logits, sorted flag), as before. One judgement covers both: when the trace's output agrees with the
  oracles, the fresh output equals it exactly when it agrees too (an agreeing output is determined: the
  array's ids, the model's logits, the model's sorted flag), so judging the fresh outputs as well would add
  nothing; when the two differ, the apply is a mismatch (a state the model does not describe, or a fresh
  sampler that disagrees with the oracles), as it always was.
"""

from __future__ import annotations

import numpy as np

from .case import Case
from .verdict import AGREE, CRASH, MEMORY, MISMATCH, ORACLE_DISAGREEMENT, HarnessError, Verdict
from .judge import check
from .check import check_batch
from .config import config_of, effective_last_n, with_deviations
from .oracle.windows import PAD, ROWS_MAX
from .oracle.trace_model import capacity, equivalent_case, held_spans
from .subject.answers import Capabilities, Crash, Outputs
from .trace import Trace
from .subject.isolation import Worker
from .verdict import crash_fields

CONTROL_DIFFERS = "fresh sampler's output differs from the trace's"
_STATUS = {MISMATCH: MISMATCH, "mismatch-multi-token": MISMATCH, ORACLE_DISAGREEMENT: ORACLE_DISAGREEMENT}


class _Recorded:
    """A subject whose run() returns an output already observed (the trace's, at one apply): check() then
    compares that output with the oracles exactly as it compares a fresh run's (with the capabilities, so the
    declared deviations, of the subject that produced it)."""

    kind = "recorded"

    def __init__(self, abi: int, output, caps: Capabilities = Capabilities()):
        self.abi, self.output, self.caps = abi, output, caps

    def run(self, case):
        return self.output

    def served(self, case):
        return None


def same_output(a, b) -> bool:
    """Bit-identical outputs: ids, size, logits (float32 bits) and the sorted flag."""
    return (a.ids == b.ids and a.size == b.size and a.sorted == b.sorted
            and np.asarray(a.logits, dtype=np.float32).tobytes() == np.asarray(b.logits, dtype=np.float32).tobytes())


class ApplyVerdict:
    """One apply: its index, its event, its class (from the trace's batches), the control, and, made when
    first read, the equivalent Case and check()'s full Verdict on it."""

    def __init__(self, index: int, event: int, klass: str, fresh_equal: bool | None, make_case, make_output, abi,
                 caps: Capabilities = Capabilities()):
        self.index, self.event, self.fresh_equal = index, event, fresh_equal
        self._klass, self._make_case, self._make_output, self._abi = klass, make_case, make_output, abi
        self._caps = caps

    @property
    def case(self) -> Case:
        c = self.__dict__.get("_case")
        if c is None:
            c = self.__dict__["_case"] = self._make_case()
        return c

    @property
    def output(self):
        """What the library left at this apply (an Output)."""
        o = self.__dict__.get("_output")
        return o if o is not None else self._make_output()

    def __getstate__(self) -> dict:
        """Pickled (an isolation worker's answer) with its case, output and verdict made, without the makers."""
        d = dict(self.__dict__, _case=self.case, _output=self.output, _verdict=self.verdict)
        d.pop("_make_case", None), d.pop("_make_output", None)
        return d

    @property
    def verdict(self) -> Verdict:
        v = self.__dict__.get("_verdict")
        if v is None:
            v = check(self.case, lib=_Recorded(self._abi, self.output, self._caps))
            if v.klass != self._klass:
                raise HarnessError(f"apply {self.index}: check() gives {v.klass}, the trace's batch {self._klass}")
            if self.fresh_equal is False and v.status == AGREE:
                v.detail = (v.detail + "; " if v.detail else "") + CONTROL_DIFFERS
            self.__dict__["_verdict"] = v
        return v

    @property
    def status(self) -> str:
        s = _STATUS.get(self._klass, AGREE)
        return MISMATCH if s == AGREE and self.fresh_equal is False else s

    @property
    def klass(self) -> str:
        """check()'s class at this apply (a broken promise included); mismatch when only the control differed."""
        if self.fresh_equal is False and _STATUS.get(self._klass, AGREE) == AGREE:
            return MISMATCH
        return self._klass

    def to_json(self) -> dict:
        return {"apply": self.index, "event": self.event, "status": self.status, "class": self.klass,
                "fresh_equal": self.fresh_equal, "case": self.case.to_json(), "verdict": self.verdict.to_json()}


class TraceVerdict:
    """A trace's verdict: its status (the first bad apply's, agree when none), that apply's index, its class
    (TraceVerdict.klass), and per apply an ApplyVerdict, made when first read. Status crash (TraceVerdict.crashed,
    with `crash`: detail, signal, stderr) when the subject's process died or hung on the trace."""

    crash: dict | None = None

    @classmethod
    def crashed(cls, trace: Trace, crash: Crash) -> "TraceVerdict":
        v = cls(trace, [], [], None)
        v.status = CRASH
        v.crash = {"detail": crash.detail, "signal": crash.signal, "stderr": crash.stderr, **crash_fields(crash)}
        return v

    def __init__(self, trace: Trace, classes: list, fresh: list, make_apply):
        self.trace, self._classes, self._fresh, self._make_apply = trace, classes, fresh, make_apply
        self.status, self.first_bad_apply = AGREE, None
        if classes.count(AGREE) != len(classes) or False in fresh:
            for i, (k, f) in enumerate(zip(classes, fresh)):
                st = _STATUS.get(k, AGREE)
                if st == AGREE and f is False:
                    st = MISMATCH
                if st != AGREE:
                    self.status, self.first_bad_apply = st, i
                    break

    @property
    def applies(self) -> list[ApplyVerdict]:
        a = self.__dict__.get("_applies")
        if a is None:
            a = self.__dict__["_applies"] = [self._make_apply(i) for i in range(len(self._classes))]
        return a

    def __getstate__(self) -> dict:
        """Pickled (an isolation worker's answer) with every apply made, without the maker."""
        d = dict(self.__dict__, _applies=self.applies)
        d.pop("_make_apply", None)
        return d

    @property
    def ok(self) -> bool:
        return self.status == AGREE

    @property
    def klass(self) -> str:
        """The trace's class, what a corpus entry's `expect` records: the first apply whose class is not agree
        (a mismatch, an oracle self-disagreement, a broken promise, a documented limitation; a fresh-sampler
        control that differs where the class is agree counts as mismatch), else agree; crash when the subject's
        process died on the trace (dryz.check.check_trace_in)."""
        if self.status == CRASH:  # memory: the process died of a sanitizer report
            return "memory" if (getattr(self, "crash", None) or {}).get("sanitizer") else CRASH
        for k, f in zip(self._classes, self._fresh):
            if f is False and _STATUS.get(k, AGREE) == AGREE:
                return MISMATCH
            if k != AGREE:
                return k
        return AGREE

    def signature(self) -> tuple:
        """'Fails the same way' for the minimizer: the status and, at the first bad apply, check()'s
        signature (class and per-candidate directions) and whether the fresh control differed; for a trace the
        subject died on, as for a case (Verdict.signature): the same kind of error in the same function (a
        sanitizer report), else the same signal."""
        if self.status == CRASH:
            c = getattr(self, "crash", None) or {}
            if c.get("sanitizer"):
                return (MEMORY, f"{c.get('kind')} in {c.get('function', '')}")
            return (CRASH, c.get("signal") or "crash")
        if self.first_bad_apply is None:
            return (self.status,)
        a = self.applies[self.first_bad_apply]
        return (self.status, a.verdict.signature(), a.fresh_equal)

    def to_json(self) -> dict:
        return {"class": self.klass, "status": self.status, "first_bad_apply": self.first_bad_apply,
                "trace": self.trace.to_json(),
                "applies": [a.to_json() for a in self.applies]}


def check_trace(trace: Trace, lib, control: bool = True, outputs=None) -> TraceVerdict:
    """Run the trace on the subject `lib` (any Subject that runs traces: Subject.run_trace_flat, its generic
    form or a native one; or judge `outputs`, one Output per apply, already observed) and judge every apply
    (the module docstring says how). With `control`, every apply's equivalent Case also runs on a fresh
    sampler (Subject.run_many), whose output must be bit-identical to the trace's. The trace's status is the
    first bad apply's (agree when none); crash when the subject answered a Crash."""
    p = trace.program()
    napply = len(p.sizes)
    starts, ends = held_spans(p.ops, p.counts, capacity(trace, lib.abi))
    out = lib.run_trace_flat(trace) if outputs is None else Outputs.of(outputs)
    if isinstance(out, Crash):
        return TraceVerdict.crashed(trace, out)
    if len(out) != napply:
        raise ValueError(f"{len(out)} outputs for {napply} applies")
    classes = _judge(trace, p, starts, ends, out, lib)
    fresh = _control(trace, p, starts, ends, out, lib) if control else [None] * napply
    if isinstance(fresh, Crash):
        return TraceVerdict.crashed(trace, fresh)
    caps = getattr(lib, "caps", Capabilities())

    def make_apply(i: int) -> ApplyVerdict:
        ev = _apply_events(p.ops)[i]
        s, e = int(starts[i]), int(ends[i])
        return ApplyVerdict(i, ev, classes[i], fresh[i],
                            lambda: equivalent_case(trace, tuple(p.tokens[s:e].tolist()), trace.events[ev]),
                            lambda: out.output(i), lib.abi, caps)
    return TraceVerdict(trace, classes, fresh, make_apply)


def _apply_events(ops: bytes) -> list[int]:
    return np.flatnonzero(np.equal(np.frombuffer(ops, dtype=np.uint8), ord("p"))).tolist()


def _unchanged(p, out: Outputs) -> np.ndarray:
    """Per apply: the library left the array's size and ids as they were given."""
    same = np.equal(out.sizes, p.sizes)
    if not same.all():
        return np.array([bool(same[i]) and np.array_equal(out.ids[out.starts[i]:out.starts[i] + out.sizes[i]],
                                                          p.ids[p.starts[i]:p.starts[i] + p.sizes[i]])
                         for i in range(len(same))], dtype=bool)
    bad = np.not_equal(out.ids, p.ids)
    if not bad.any():
        return same
    return np.equal(np.add.reduceat(bad, p.starts), 0) if len(p.starts) else same


def _judge(trace: Trace, p, starts, ends, out: Outputs, lib) -> list[str]:
    """Each apply's class as check() gives it: the applies as one check_batch (ROWS_MAX at a time), ragged over
    the held histories' lengths and over the candidate arrays (each row's own array, within the union of the
    trace's candidate ids)."""
    napply = len(p.sizes)
    classes = [AGREE] * napply
    unchanged = _unchanged(p, out)
    lengths = ends - starts
    cfg = trace_config(trace, lib.abi, getattr(lib, "caps", Capabilities()).deviations)
    for i in np.flatnonzero(np.logical_not(unchanged)).tolist():  # the sampler changed the array: check()'s
        classes[i] = _single(trace, p, starts, ends, out, lib, i).klass  # own path for that
    rows = np.flatnonzero(unchanged)
    if not len(rows):
        return classes
    # the held tokens, PAD before each (lengths.PAD): row r of a batch is padded[ends[r] - width: ends[r]]
    width = int(lengths.max())
    padded = np.concatenate([np.full(width, PAD, dtype=np.int16), p.tokens.astype(np.int16)])
    cands = np.unique(p.ids).astype(np.uint8)  # every candidate id of the trace (symbol ids, < 64)
    col = np.searchsorted(cands, p.ids)        # each array entry's column
    for k in range(0, len(rows), ROWS_MAX):
        rows_a = rows[k:k + ROWS_MAX]
        N, C = len(rows_a), len(cands)
        ln = lengths[rows_a]
        n = int(ln.max())
        H = padded[(width + ends[rows_a] - n)[:, None] + np.arange(n, dtype=np.int64)[None, :]]
        # a history starts after its last reset: what lies before it in the stream is not held
        np.copyto(H, PAD, where=np.less(np.arange(n)[None, :], (n - ln)[:, None]))
        # each row's array scattered into the union's columns: present, initial logits, the output's logits
        sz = p.sizes[rows_a].astype(np.int64)
        entry = np.repeat(p.starts[rows_a] - np.concatenate(([0], np.cumsum(sz)[:-1])), sz) + np.arange(sz.sum())
        at = np.repeat(np.arange(N) * C, sz) + col[entry]
        present, initial, observed = np.zeros(N * C, dtype=bool), np.zeros(N * C, dtype=np.float32), \
            np.zeros(N * C, dtype=np.float32)
        present[at], initial[at] = True, p.logits[entry]
        observed[at] = out.logits[np.repeat(out.starts[rows_a] - np.concatenate(([0], np.cumsum(sz)[:-1])), sz)
                                  + np.arange(sz.sum())]
        b = check_batch(cfg, H, cands, observed.reshape(N, C), initial.reshape(N, C), p.sorted[rows_a],
                        out.sorted[rows_a], lengths=ln, present=present.reshape(N, C))
        for r, klass in b.odd_rows():
            classes[int(rows_a[r])] = klass
    return classes


def trace_config(trace: Trace, abi: int, declared=()):
    """case_config of every equivalent Case of the trace (they differ only in history and candidates): the
    symbol vocabulary's Config of the trace's parameters, made without a Case, with the deviations the subject
    declares as variants (as case_config adds them)."""
    cfg = config_of(trace.multiplier, trace.base, trace.allowed_length,
                    effective_last_n(trace.penalty_last_n, trace.n_ctx_train, abi), trace.breakers)
    return with_deviations(cfg, declared, trace.breakers) if declared else cfg


def _single(trace, p, starts, ends, out, lib, i) -> Verdict:
    ev = _apply_events(p.ops)[i]
    case = equivalent_case(trace, tuple(p.tokens[starts[i]:ends[i]].tolist()), trace.events[ev])
    return check(case, lib=_Recorded(lib.abi, out.output(i), getattr(lib, "caps", Capabilities())))


def _control(trace: Trace, p, starts, ends, out: Outputs, lib):
    """Per apply: a fresh sampler on the equivalent Case left exactly what the trace's sampler left (or the
    subject's Crash)."""
    lengths = (ends - starts).astype(np.int32)
    idx = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths) + np.arange(lengths.sum())
    fresh = lib.run_many(trace.sampler_args(), trace.n_ctx_train, p.tokens[idx], lengths, p.ids, p.logits,
                         p.sizes, p.sorted, clone=True)
    if isinstance(fresh, Crash):
        return fresh
    same = np.equal(fresh.sizes, out.sizes) & np.equal(fresh.sorted, out.sorted)
    if not same.all() or len(fresh.ids) != len(out.ids):
        return [bool(same[i]) and fresh.output(i).ids == out.output(i).ids
                and fresh.output(i).logits.tobytes() == out.output(i).logits.tobytes() for i in range(len(same))]
    differ = np.not_equal(fresh.ids, out.ids) | np.not_equal(fresh.logits.view(np.uint32), out.logits.view(np.uint32))
    if differ.any():
        same &= np.equal(np.add.reduceat(differ, out.starts), 0)
    return same.tolist()


def trace_report(trace: Trace, kind: str, lib, isolate: bool = True) -> dict:
    """What `dryz check` prints for a trace (judge_trace on the subject)."""
    v = judge_trace(trace, lib, isolate)
    return {"input": kind, "trace": trace.to_json(), "verdict": trace_verdict_json(v), "subject": lib.identity}


def trace_verdict_json(v) -> dict:
    out = {"class": v.klass, "status": v.status, "first_bad_apply": v.first_bad_apply,
           "applies": [a.to_json() for a in v.applies]}
    crash = getattr(v, "crash", None)
    if crash:
        out.update(crash)
    return out


def judge_trace(trace: Trace, lib, isolate: bool = True):
    """check_trace on the subject, in an isolation worker unless isolate is False: a trace that kills or hangs
    the subject's process is class crash."""
    if not isolate:
        return check_trace(trace, lib)
    with Worker(lib.spec, lib) as w:
        return check_trace_in(w, trace)


def check_trace_op(subject, trace):
    """check_trace() as a call an isolation worker runs."""
    return check_trace(trace, subject)


def check_trace_in(worker, trace):
    """check_trace() in an isolation worker: a TraceVerdict, or one of class crash when the subject's process
    died or hung on the trace."""
    out = worker.call(check_trace_op, trace)
    if isinstance(out, Crash):
        return TraceVerdict.crashed(trace, out)
    return out
