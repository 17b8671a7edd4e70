"""Delta debugging (Zeller & Hildebrandt's ddmin) plus tiny scalar shrinkers.

The predicate is called with a list of the kept elements, in their original
order, and returns True when that list still "passes" (still shows the
interesting behaviour).  Candidates are identified by the tuple of kept
original indices, so elements never need to be hashable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, Optional, Sequence, TypeVar

T = TypeVar("T")

Predicate = Callable[[list], bool]
ProgressCallback = Callable[[int, int], None]


@dataclass
class Result(Generic[T]):
    items: list          # the kept elements, in original order
    indices: list        # their positions in the original sequence
    calls: int           # real predicate evaluations (cache misses)
    cache_hits: int      # evaluations answered from the cache
    one_minimal: bool    # True once no single removal keeps the predicate true


class _BudgetExhausted(Exception):
    pass


class _Tester:
    """Runs the predicate on index tuples, with caching and a call budget."""

    def __init__(self, items, predicate, cache, max_calls):
        self.items = items
        self.predicate = predicate
        self.cache = {} if cache else None
        self.max_calls = max_calls
        self.calls = 0
        self.cache_hits = 0

    def __call__(self, indices: tuple) -> bool:
        if self.cache is not None and indices in self.cache:
            self.cache_hits += 1
            return self.cache[indices]
        if self.max_calls is not None and self.calls >= self.max_calls:
            raise _BudgetExhausted
        self.calls += 1
        outcome = bool(self.predicate([self.items[i] for i in indices]))
        if self.cache is not None:
            self.cache[indices] = outcome
        return outcome


def _split(seq: tuple, n: int) -> list:
    """Split seq into n contiguous, non-empty chunks of near-equal size."""
    length = len(seq)
    return [seq[i * length // n:(i + 1) * length // n] for i in range(n)]


def ddmin(
    seq: Sequence[T],
    predicate: Predicate,
    *,
    cache: bool = True,
    max_calls: Optional[int] = None,
    on_progress: Optional[ProgressCallback] = None,
) -> Result[T]:
    """Return a 1-minimal, order-preserving subsequence of seq satisfying predicate.

    Requires predicate(list(seq)) to be True (ValueError otherwise).  With
    max_calls set, stops once that many real predicate calls have been made
    and returns the smallest passing subsequence found so far, with
    one_minimal=False.  on_progress(size, calls) is called after each
    reduction to a smaller passing subsequence.
    """
    if max_calls is not None and max_calls < 1:
        raise ValueError("max_calls must be at least 1 (the precondition check is a call)")
    items = list(seq)
    test = _Tester(items, predicate, cache, max_calls)
    current = tuple(range(len(items)))
    if not test(current):
        raise ValueError("ddmin precondition failed: predicate(seq) is False for the full input")

    def accept(candidate: tuple) -> None:
        nonlocal current
        current = candidate
        if on_progress is not None:
            on_progress(len(current), test.calls)

    one_minimal = False
    try:
        # Classic ddmin: try each chunk, then each complement, refining granularity.
        n = 2
        while len(current) >= 2:
            chunks = _split(current, n)
            for chunk in chunks:
                if test(chunk):
                    accept(chunk)
                    n = 2
                    break
            else:
                # With n == 2 the complements are the chunks just tested.
                for i in range(len(chunks) if n > 2 else 0):
                    complement = tuple(x for j, c in enumerate(chunks) if j != i for x in c)
                    if test(complement):
                        accept(complement)
                        n = max(n - 1, 2)
                        break
                else:
                    if n >= len(current):
                        break
                    n = min(2 * n, len(current))

        # Confirm 1-minimality: sweep single removals until len(current)
        # consecutive ones are rejected.  The loop above never tries the empty
        # list and cannot split a single element, so this is what catches
        # e.g. predicate([]) being True; other candidates are usually cached.
        i = rejected = 0
        while rejected < len(current):
            if i >= len(current):
                i = 0
            candidate = current[:i] + current[i + 1:]
            if test(candidate):
                accept(candidate)
                rejected = 0
            else:
                i += 1
                rejected += 1
        one_minimal = True
    except _BudgetExhausted:
        pass

    return Result(
        items=[items[i] for i in current],
        indices=list(current),
        calls=test.calls,
        cache_hits=test.cache_hits,
        one_minimal=one_minimal,
    )


def is_one_minimal(items: Sequence[T], predicate: Predicate) -> bool:
    """True if removing any single element (including the last one) makes predicate False.

    Does not check predicate(items) itself.
    """
    items = list(items)
    return not any(predicate(items[:i] + items[i + 1:]) for i in range(len(items)))


def minimize_int(value: int, lo: int, predicate: Callable[[int], bool]) -> int:
    """Smallest v in [lo, value] with predicate(v), by binary search.

    Assumes predicate is monotone on [lo, value]: once True, it stays True for
    every larger v.  If it is not, the result still satisfies predicate but
    may not be the smallest such v.  Raises ValueError if predicate(value)
    is False.
    """
    if lo > value:
        raise ValueError(f"lo ({lo}) must not exceed value ({value})")
    low, high, high_passed = lo, value, False
    while low < high:
        mid = (low + high) // 2
        if predicate(mid):
            high, high_passed = mid, True
        else:
            low = mid + 1
    if not high_passed and not predicate(high):
        raise ValueError(f"predicate({value}) is False; nothing to minimize")
    return high


def shrink_towards(candidates, predicate: Callable[[T], bool]) -> Optional[T]:
    """First candidate (ordered simplest first) for which predicate holds, else None."""
    for candidate in candidates:
        if predicate(candidate):
            return candidate
    return None
