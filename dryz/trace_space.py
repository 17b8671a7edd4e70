"""The trace space: every sequence of 1..N events over the event alphabet (accept one of k symbols, apply,
reset, clone) that holds an apply, with `free` also each such sequence of at most N-1 events followed by a free;
its enumeration, shortest first, and its closed-form size: per length n, (k+3)^n - (k+2)^n sequences, plus
(k+3)^(n-1) - (k+2)^(n-1) ending in free. `dryz exhaustive --traces` walks it (dryz.enumerate.traces, which
checks the walk against the count) and the trace minimizer proves a reproducer shortest over it."""

from __future__ import annotations

import itertools

from .trace import Trace


# name: configuration (the seed sweep's, with a window the ring buffer wraps within a few events)
CONFIGS = {
    "base": dict(penalty_last_n=64),
    "window3": dict(penalty_last_n=3),
    "breaker": dict(penalty_last_n=64, breakers=("b",)),
    "allowed0": dict(penalty_last_n=2, allowed_length=0),  # a two-token ring buffer; every repeat penalized
}


DEFAULT = dict(multiplier=1.0, base=2.0, allowed_length=1, breakers=())


def event_alphabet(k: int) -> list[tuple]:
    return [("accept", (t,)) for t in range(k)] + [("apply", None), ("reset",), ("clone",)]


def count_traces(n_max: int, k: int, free: bool = True) -> int:
    """The closed form of the space's size (see the module docstring)."""
    a, b = k + 3, k + 2
    total = sum(a ** n - b ** n for n in range(1, n_max + 1))
    if free:
        total += sum(a ** (n - 1) - b ** (n - 1) for n in range(2, n_max + 1))
    return total


def count_traces_of_length(n: int, k: int, free: bool = True) -> int:
    """The traces of exactly n events (count_traces(n) - count_traces(n - 1))."""
    if n < 1:
        return 0
    a, b = k + 3, k + 2
    return a ** n - b ** n + (a ** (n - 1) - b ** (n - 1) if free and n >= 2 else 0)


def iter_traces_of_length(n: int, k: int, free: bool = True):
    """Every event sequence of the space with exactly n events, in event-alphabet order (the free-terminated
    ones after the others)."""
    alpha = event_alphabet(k)
    for seq in itertools.product(alpha, repeat=n):
        if ("apply", None) in seq:
            yield seq
    if free and n >= 2:
        for seq in itertools.product(alpha, repeat=n - 1):
            if ("apply", None) in seq:
                yield seq + (("free",),)


def iter_traces(n_max: int, k: int, free: bool = True):
    """Every event sequence of the space, shortest first (then in event-alphabet order)."""
    for n in range(1, n_max + 1):
        yield from iter_traces_of_length(n, k, free)


def iter_traces_from(n_max: int, k: int, free: bool = True, start: int = 0):
    """iter_traces from position `start` on (0: the first), the lengths before it skipped by their counts."""
    n = 1
    while n <= n_max and start >= count_traces_of_length(n, k, free):
        start -= count_traces_of_length(n, k, free)
        n += 1
    for m in range(n, n_max + 1):
        yield from itertools.islice(iter_traces_of_length(m, k, free), start if m == n else 0, None)


def trace_of(events, k: int, cfg: dict) -> Trace:
    return Trace(events=tuple(events), alphabet=k, **{**DEFAULT, **cfg})
