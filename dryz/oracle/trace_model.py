"""The sampler's state across a trace: which tokens the ring buffer holds at every apply (a pure model: it runs no
subject; dryz/trace_check.py judges a trace with it).

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
is the "equivalent single Case".

No event acts on a clone's original after the clone (Trace: every later event acts on the clone), so one
sequence of tokens describes the current sampler: every token accepted, in order; a reset moves the start of
what the buffer can hold to the end of that sequence; a clone changes nothing the model sees. At an apply the
buffer holds tokens[max(last reset, end - capacity) : end] (held_spans: a few array operations per trace,
whatever its length; held_tokens_of keeps the event-by-event ring buffer it is checked against).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..case import Case, f32
from ..trace import Trace


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


def held_spans(ops: bytes, counts: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """Per apply, in order, (start, end) into the trace's accepted tokens (Program.tokens): the ring buffer holds
    tokens[start:end]. ops: one byte per event (Program.ops); counts: each accept's token count."""
    op = np.frombuffer(ops, dtype=np.uint8)
    added = np.zeros(len(op), dtype=np.int64)
    added[np.equal(op, ord("a"))] = counts
    seen = np.cumsum(added)                          # tokens accepted up to and including each event
    applies = np.equal(op, ord("p"))
    ends = seen[applies]
    if not cap:                                      # the empty sampler holds nothing
        return ends, ends
    resets = np.equal(op, ord("r"))
    if resets.any():                                 # where the buffer was last emptied, as of each event
        start = np.maximum.accumulate(np.where(resets, seen, 0))[applies]
    else:
        start = np.zeros(len(ends), dtype=np.int64)
    return np.maximum(start, ends - cap), ends


def held_tokens(trace: Trace, abi: int = 7) -> list[tuple[int, ...]]:
    """Per apply, in order: the tokens the current sampler's ring buffer holds, oldest first."""
    p = trace.program()
    toks = p.tokens.tolist()
    return [tuple(toks[a:b]) for a, b in zip(*held_spans(p.ops, p.counts, capacity(trace, abi)))]


def held_tokens_of(events, cap: int) -> list[tuple[int, ...]]:
    """held_tokens event by event, a ring buffer per sampler (the enumerator calls it directly; held_spans is
    checked against it)."""
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


def equivalent_case(trace: Trace, held, apply_event) -> Case:
    """The single Case (fresh sampler, history, candidate array) an apply is equivalent to."""
    return trace.config_case(history=held, candidates=apply_event[1],
                             sorted_flag=len(apply_event) == 3 and apply_event[2])


def equivalent_cases(trace: Trace, abi: int = 7) -> list[Case]:
    """Per apply: the single Case the sampler is equivalent to."""
    return [equivalent_case(trace, h, trace.events[i]) for h, i in zip(held_tokens(trace, abi), trace.applies)]
