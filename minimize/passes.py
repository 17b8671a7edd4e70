"""Running named shrink passes to a fixpoint, and the "every shorter candidate" search.

Generic: an item (anything comparable with ==), passes that map an item to an item that still passes the
caller's predicate (or to the same item), and a predicate. Nothing here knows what the item is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence, TypeVar

T = TypeVar("T")


@dataclass
class PassStats:
    runs: int = 0    # times the pass ran
    wins: int = 0    # runs that changed the item
    calls: int = 0   # predicate evaluations the pass spent (as the caller counts them)


def fixpoint(item: T, passes: Sequence[tuple[str, Callable[[T], T]]], calls: Callable[[], int] = lambda: 0,
             log: Optional[Callable[[str], None]] = None, describe: Callable[[T], str] = repr
             ) -> tuple[T, dict[str, PassStats]]:
    """Run every pass in order, again and again, until a whole round changes nothing. Returns the item and
    per-pass statistics; calls() reads the caller's predicate-call counter; log gets "name: describe(item)"
    after each pass that changed the item."""
    stats = {name: PassStats() for name, _ in passes}
    while True:
        before = item
        for name, fn in passes:
            c0 = calls()
            new = fn(item)
            s = stats[name]
            s.runs += 1
            s.calls += calls() - c0
            if new != item:
                s.wins += 1
                if log:
                    log(f"{name}: {describe(new)}")
            item = new
        if item == before:
            return item, stats


BUDGET = "budget"


def first_shorter(length: int, candidates: Callable[[int], Iterable[T]], count: Callable[[int], int],
                  predicate: Callable[[T], bool], budget: int) -> T | None | str:
    """Every candidate shorter than `length` (candidates(m) for m = 0 .. length-1, count(m) of them), in
    order: the first that passes the predicate, None when none does (the item is proven shortest), or BUDGET
    when there are more than `budget` to check (nothing is checked then)."""
    if sum(count(m) for m in range(length)) > budget:
        return BUDGET
    for m in range(length):
        for c in candidates(m):
            if predicate(c):
                return c
    return None


def shortest(item: T, reduce: Callable[[T], T], length: Callable[[T], int],
             search: Callable[[T], T | None | str], log: Optional[Callable[[str], None]] = None
             ) -> tuple[T, str]:
    """reduce to a fixpoint, then search every shorter candidate; continue from a shorter one that passes.
    Returns (item, "proven" | "1-minimal") — "1-minimal" when the search was over budget."""
    while True:
        item = reduce(item)
        found = search(item)
        if found is None:
            return item, "proven"
        if found == BUDGET:
            return item, "1-minimal"
        if log:
            log(f"shortest-search found a shorter one ({length(found)}); continuing")
        item = found
