"""The sampler's state across a trace, and the verdict on a trace.

Read from llama-sampler.cpp (llama-cpp-python 0.3.36, vendored llama.cpp 0c1e570), struct llama_sampler_dry:

- State that survives between calls: `last_tokens`, a ring_buffer<llama_token>; `dry_repeat_count` and
  `dry_max_token_repeat` are scratch: apply assigns the first (`assign(last_n_repeat, 0)`) and clears the second
  before any read, once past the early exits, and nothing else reads them. The configuration fields and
  `dry_processed_breakers` never change after init.
- init (llama_sampler_init_dry): penalty_last_n' = max(penalty_last_n, 0); DRY is enabled when
  multiplier != 0, base >= 1 and penalty_last_n' != 0, else an empty sampler (accept, apply, reset do nothing;
  its clone is another empty sampler). Enabled: the ring buffer's capacity is penalty_last_n'.
  The 8-argument init_dry (llama-cpp-python <= 0.3.34): enabled when penalty_last_n != 0 (as given), capacity
  (penalty_last_n == -1 ? n_ctx_train : max(penalty_last_n, 0)); a capacity <= 0 there throws on the first
  accept (the trace driver refuses those configurations).
- accept: push_back(token), which once the buffer is full drops the oldest token. So the buffer holds the last
  `capacity` tokens accepted since init or the last reset.
- apply: reads the buffer (rat), never writes it. The window is min(size, penalty_last_n') (0.3.34:
  min(size, effective, n_ctx_train)): the buffer never holds fewer than the window needs.
- reset: last_tokens.clear() (size, first, pos = 0), and clears the two scratch members.
- clone: a new sampler by init_dry with the same parameters and no breakers, then copies
  dry_processed_breakers, the scratch members and last_tokens (capacity, size, positions and data).

Hence, at every apply the sampler is equivalent to a fresh sampler of the same configuration that accepted
exactly the tokens the buffer holds: the last `capacity` tokens accepted on this sampler's lineage since the
most recent reset (a clone inherits its original's tokens). That fresh sampler with the apply's candidate array
is the "equivalent single Case"; its expected output is the single-case oracle's (dryz.check.check), and the
library's output at that apply is compared with it by check() itself.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ..case import Case, f32
from ..check import AGREE, MISMATCH, Verdict, check
from ..trace import Trace

CONTROL_DIFFERS = "fresh sampler's output differs from the trace's"


def capacity(trace: Trace, abi: int = 7) -> int:
    """The ring buffer's capacity as llama_sampler_init_dry sets it; 0 for the empty (disabled) sampler."""
    m, b = f32(trace.multiplier), f32(trace.base)
    if abi == 8:
        if not (m != 0.0 and b >= 1.0 and trace.penalty_last_n != 0):
            return 0
        cap = trace.n_ctx_train if trace.penalty_last_n == -1 else max(trace.penalty_last_n, 0)
        return max(cap, 0)
    last_n = max(trace.penalty_last_n, 0)
    if not (m != 0.0 and b >= 1.0 and last_n != 0):
        return 0
    return last_n


def held_tokens(trace: Trace, abi: int = 7) -> list[tuple[int, ...]]:
    """Per apply, in order: the tokens the current sampler's ring buffer holds, oldest first."""
    return held_tokens_of(trace.events, capacity(trace, abi))


def held_tokens_of(events, cap: int) -> list[tuple[int, ...]]:
    """held_tokens for valid events and a ring buffer capacity (the enumerator calls it directly)."""
    cur: deque = deque(maxlen=cap)
    kept: list[deque] = []  # the originals a clone left behind (never observed again; kept to mirror the driver)
    out = []
    for e in events:
        name = e[0]
        if name == "accept":
            if cap:
                cur.extend(e[1])
        elif name == "apply":
            out.append(tuple(cur))
        elif name == "reset":
            cur.clear()
        elif name == "clone":
            kept.append(cur)
            cur = deque(cur, maxlen=cap)
        # free: the last event; nothing is observed after it
    return out


def equivalent_cases(trace: Trace, abi: int = 7) -> list[Case]:
    """Per apply: the single Case (fresh sampler, history, candidate array) the sampler is equivalent to."""
    held = held_tokens(trace, abi)
    cases = []
    for h, i in zip(held, trace.applies):
        e = trace.events[i]
        cases.append(trace.config_case(history=h, candidates=e[1], sorted_flag=len(e) == 3 and e[2]))
    return cases


# -- the verdict ------------------------------------------------------------------------------------------


class _Recorded:
    """A subject whose run() returns an output already observed (the trace's, at one apply): check() then
    compares that output with the oracles exactly as it compares a fresh run's."""

    from ..subject.protocol import Capabilities
    caps = Capabilities()

    def __init__(self, abi: int, output):
        self.abi, self.output = abi, output

    def run(self, case):
        return self.output

    def served(self, case):
        return None


def same_output(a, b) -> bool:
    """Bit-identical outputs: ids, size, logits (float32 bits) and the sorted flag."""
    return (a.ids == b.ids and a.size == b.size and a.sorted == b.sorted
            and np.asarray(a.logits, dtype=np.float32).tobytes() == np.asarray(b.logits, dtype=np.float32).tobytes())


@dataclass
class ApplyVerdict:
    index: int          # which apply (0-based)
    event: int          # its index in trace.events
    case: Case          # the equivalent single Case
    verdict: Verdict    # check(case) on the trace's output at this apply
    fresh_equal: bool | None = None  # the control: a fresh sampler on `case` gave the identical output

    @property
    def status(self) -> str:
        if self.verdict.status == AGREE and self.fresh_equal is False:
            return MISMATCH
        return self.verdict.status

    @property
    def klass(self) -> str:
        """check()'s class at this apply (a broken promise included); mismatch when only the control differed."""
        if self.verdict.status == AGREE and self.fresh_equal is False:
            return MISMATCH
        return self.verdict.klass

    def to_json(self) -> dict:
        return {"apply": self.index, "event": self.event, "status": self.status, "class": self.klass,
                "fresh_equal": self.fresh_equal, "case": self.case.to_json(), "verdict": self.verdict.to_json()}


@dataclass
class TraceVerdict:
    trace: Trace
    status: str
    first_bad_apply: int | None
    applies: list[ApplyVerdict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == AGREE

    @property
    def klass(self) -> str:
        """The trace's class, what a corpus entry's `expect` records: the first apply whose class is not agree
        (a mismatch, an oracle self-disagreement, a broken promise, a documented limitation), else agree; crash
        when the subject's process died on the trace (dryz.check.check_trace_in)."""
        if self.status == "crash":
            return "memory" if (getattr(self, "crash", None) or {}).get("sanitizer") else "crash"
        return next((a.klass for a in self.applies if a.klass != AGREE), AGREE)

    def signature(self) -> tuple:
        """'Fails the same way' for the minimizer: the status and, at the first bad apply, check()'s
        signature (class and per-candidate directions) and whether the fresh control differed."""
        if self.first_bad_apply is None:
            return (self.status,)
        a = self.applies[self.first_bad_apply]
        return (self.status, a.verdict.signature(), a.fresh_equal)

    def to_json(self) -> dict:
        return {"class": self.klass, "status": self.status, "first_bad_apply": self.first_bad_apply,
                "trace": self.trace.to_json(),
                "applies": [a.to_json() for a in self.applies]}




def check_trace(trace: Trace, lib, control: bool = True, outputs=None) -> TraceVerdict:
    """Run the trace on the library (or judge `outputs`, one per apply, already observed) and judge every
    apply with dryz.check.check on its equivalent Case. With `control`, every apply's equivalent Case is also
    run on a fresh sampler (one init_dry, the history accepted, one apply: dryz's single-case path) and the
    two outputs must be bit-identical. The trace's status is the first bad apply's (agree when none)."""
    if outputs is None:
        from ..subject.trace_driver import run_trace
        outputs = run_trace(trace, lib)
    cases = equivalent_cases(trace, lib.abi)
    if len(outputs) != len(cases):
        raise ValueError(f"{len(outputs)} outputs for {len(cases)} applies")
    applies = []
    first = None
    for i, (case, out, ev) in enumerate(zip(cases, outputs, trace.applies)):
        v = check(case, lib=_Recorded(lib.abi, out))
        a = ApplyVerdict(i, ev, case, v)
        if control:
            a.fresh_equal = same_output(lib.run(case), out)
            if a.fresh_equal is False and v.status == AGREE:
                v.detail = (v.detail + "; " if v.detail else "") + CONTROL_DIFFERS
        applies.append(a)
        if first is None and a.status != AGREE:
            first = i
    status = AGREE if first is None else applies[first].status
    return TraceVerdict(trace, status, first, applies)
