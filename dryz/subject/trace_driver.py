"""A Trace on the real library through ctypes: one llama_sampler_init_dry, then the trace's events as libllama
calls, the candidate array read back after every apply: Subject.run_trace's generic form. LibLlama runs the same
calls in C (dryz/subject/_drive.c, run_trace) and uses this sequencer when DRYZ_DRIVE=ctypes or the extension is
not built.

Only libllama's own functions run the sampler (llama_sampler_init_dry, _accept, _apply, _reset, _clone, _free,
all bound by dryz/subject/binding.py); this module sequences them from Python through ctypes.

Memory: every sampler made (the first, and one per clone) is recorded the moment it exists and freed exactly
once: a `free` event frees the current sampler and marks it freed; at the end (normally or on an exception)
the current sampler, unless freed, and then the kept originals, newest first, are freed. No event can reach a
freed sampler: Trace validation only allows `free` as the last event.
"""

from __future__ import annotations

from .binding import SubjectError
from .answers import Output


def run_trace(trace, lib) -> list[Output]:
    """The Output of every apply of the trace, in order, through the per-event sampler calls of `lib` (any
    subject with Subject.SAMPLER_CALLS; Subject.run_trace's generic form)."""
    return run_events(lib, trace.sampler_args(), trace.events, trace.alphabet, trace.n_ctx_train)


def refuse_old_abi_crash(lib, sampler_args, n_ctx_train: int) -> None:
    multiplier, base, allowed, last_n, breakers = sampler_args
    if lib.abi == 8 and _crashes_on_old_abi(multiplier, base, last_n, n_ctx_train):
        raise SubjectError("on the 8-argument init_dry this configuration makes a sampler with a ring buffer of "
                           "capacity <= 0, which throws on the first accept (run it as a single case, in its own "
                           "process, to see the crash)")


_ALL: dict[int, tuple] = {}


def _every_symbol(k: int) -> tuple:
    if k not in _ALL:
        _ALL[k] = (tuple(range(k)), (0.0,) * k)
    return _ALL[k]


def run_events(lib, sampler_args, events, alphabet: int, n_ctx_train: int = 4096) -> list[Output]:
    """run_trace's body for a configuration and events that are valid (the enumerator calls it directly)."""
    multiplier, base, allowed, last_n, breakers = sampler_args
    refuse_old_abi_crash(lib, sampler_args, n_ctx_train)
    accept, apply_once, reset, clone, free = lib.accept, lib.apply_once, lib.reset, lib.clone, lib.free
    outs: list[Output] = []
    kept: list = []
    cur = lib.new_sampler(multiplier, base, allowed, last_n, breakers, n_ctx_train=n_ctx_train)
    cur_freed = False
    try:
        for e in events:
            name = e[0]
            if name == "accept":
                for t in e[1]:
                    accept(cur, t)
            elif name == "apply":
                if e[1] is None:
                    ids, logits = _every_symbol(alphabet)
                else:
                    ids, logits = zip(*e[1])
                outs.append(apply_once(cur, ids, logits, len(e) == 3 and e[2]))
            elif name == "reset":
                reset(cur)
            elif name == "clone":
                c = clone(cur)
                if not c:
                    raise SubjectError("llama_sampler_clone returned NULL")
                kept.append(cur)
                cur = c
            elif name == "free":
                cur_freed = True  # marked first: a free that fails is never retried
                free(cur)
            else:
                raise SubjectError(f"unknown event {name!r}")
    finally:
        if not cur_freed:
            free(cur)
        while kept:
            free(kept.pop())
    return outs


def _crashes_on_old_abi(multiplier, base, last_n, n_ctx_train) -> bool:
    """0.3.34's llama_sampler_init_dry enables DRY when multiplier != 0, base >= 1 and penalty_last_n != 0, and
    gives the ring buffer capacity (penalty_last_n == -1 ? n_ctx_train : max(penalty_last_n, 0)): when that is
    <= 0 the first accept throws ("ring buffer: capacity is zero"), or the allocation fails."""
    enabled = multiplier != 0.0 and base >= 1.0 and last_n != 0
    cap = n_ctx_train if last_n == -1 else max(last_n, 0)
    return enabled and cap <= 0
