import random

import pytest

from minimize import Result, ddmin, is_one_minimal, minimize_int, shrink_towards


def contains_in_order(targets):
    def predicate(items):
        it = iter(items)
        return all(t in it for t in targets)  # `in` on an iterator consumes it
    return predicate


def assert_one_minimal(items, predicate):
    """Explicitly check that every single-element removal fails."""
    assert predicate(items)
    for i in range(len(items)):
        assert not predicate(items[:i] + items[i + 1:]), f"removing index {i} still passes"


class Counting:
    def __init__(self, predicate):
        self.predicate = predicate
        self.seen = []

    def __call__(self, items):
        self.seen.append(tuple(items))
        return self.predicate(items)


def test_three_targets_in_1000():
    predicate = Counting(contains_in_order([17, 500, 983]))
    result = ddmin(list(range(1000)), predicate)
    assert result.items == [17, 500, 983]
    assert result.indices == [17, 500, 983]
    assert result.one_minimal
    # Measured: 140 real calls, 107 cache hits.
    assert result.calls == len(predicate.seen) <= 150


def test_first_and_last():
    seq = [f"x{i}" for i in range(300)]
    result = ddmin(seq, lambda s: "x0" in s and "x299" in s)
    assert result.items == ["x0", "x299"]
    assert result.indices == [0, 299]
    assert result.one_minimal


def test_order_preserved_with_duplicates():
    seq = [3, 1, 3, 2, 1, 3]
    result = ddmin(seq, contains_in_order([1, 2, 3]))
    assert result.items == [1, 2, 3]
    assert result.indices == [1, 3, 5]


def test_non_monotone_odd_length_containing_x():
    def predicate(items):
        return len(items) % 2 == 1 and 7 in items

    result = ddmin(list(range(21)), predicate)
    assert result.items == [7]
    assert result.one_minimal
    assert_one_minimal(result.items, predicate)


def test_non_monotone_subset_passes_but_supersets_fail():
    # {3, 8} passes, the full input passes, everything in between fails:
    # no 9-element removal passes, so the full input is already 1-minimal.
    def predicate(items):
        return set(items) in ({3, 8}, set(range(10)))

    result = ddmin(list(range(10)), predicate)
    assert predicate(result.items)
    assert result.one_minimal
    assert_one_minimal(result.items, predicate)


def test_final_sweep_removes_what_chunking_cannot():
    # Chunking stops at a single element and never tries []; the sweep does.
    def predicate(items):
        return len(items) != 2

    result = ddmin([1, 2, 3, 4], predicate)
    assert result.items == []
    assert result.one_minimal


def test_non_monotone_sum_divisible():
    def predicate(items):
        return bool(items) and sum(items) % 5 == 0

    result = ddmin([1, 1, 1, 1, 1, 2, 3], predicate)
    assert result.one_minimal
    assert_one_minimal(result.items, predicate)


@pytest.mark.parametrize("seed", range(12))
def test_random_results_are_one_minimal(seed):
    rng = random.Random(seed)
    seq = [rng.randrange(50) for _ in range(rng.randrange(1, 120))]
    m = rng.randrange(2, 9)
    predicates = [
        contains_in_order([seq[i] for i in sorted(rng.sample(range(len(seq)), min(len(seq), 4)))]),
        lambda s: bool(s) and sum(s) % m == sum(seq) % m,          # non-monotone
        lambda s: len(set(s)) >= min(len(set(seq)), 5),            # monotone
        lambda s: (len(s) % 3 == len(seq) % 3) and seq[0] in s,    # non-monotone
    ]
    for predicate in predicates:
        result = ddmin(seq, predicate)
        assert result.one_minimal
        assert is_one_minimal(result.items, predicate)
        assert_one_minimal(result.items, predicate)
        assert result.items == [seq[i] for i in result.indices]
        assert result.indices == sorted(set(result.indices))


def test_cache_counts_and_no_duplicate_evaluations():
    predicate = Counting(contains_in_order([5, 60, 61, 190]))
    result = ddmin(list(range(200)), predicate)
    assert result.calls == len(predicate.seen)
    # Elements are distinct, so item tuples correspond one-to-one to index tuples.
    assert len(predicate.seen) == len(set(predicate.seen))
    assert result.cache_hits > 0


def test_without_cache_every_call_is_real():
    predicate = Counting(contains_in_order([5, 60, 61, 190]))
    result = ddmin(list(range(200)), predicate, cache=False)
    assert result.items == [5, 60, 61, 190]
    assert result.calls == len(predicate.seen)
    assert result.cache_hits == 0
    assert len(predicate.seen) > len(set(predicate.seen))


def test_precondition_violation_raises():
    with pytest.raises(ValueError, match="precondition"):
        ddmin([1, 2, 3], lambda s: False)


@pytest.mark.parametrize("max_calls", [1, 2, 5, 17, 40])
def test_max_calls_budget(max_calls):
    full_predicate = contains_in_order([17, 500, 983])
    predicate = Counting(full_predicate)
    result = ddmin(list(range(1000)), predicate, max_calls=max_calls)
    assert result.calls == len(predicate.seen) <= max_calls
    assert not result.one_minimal
    assert full_predicate(result.items)  # best so far still passes


def test_max_calls_large_enough_completes():
    result = ddmin(list(range(1000)), contains_in_order([17, 500, 983]), max_calls=10_000)
    assert result.one_minimal
    assert result.items == [17, 500, 983]


def test_max_calls_must_be_positive():
    with pytest.raises(ValueError):
        ddmin([1], lambda s: True, max_calls=0)


def test_unhashable_elements():
    seq = [[i] for i in range(50)]
    result = ddmin(seq, lambda s: [3] in s and [40] in s)
    assert result.items == [[3], [40]]
    assert result.indices == [3, 40]


def test_progress_callback_sizes_decrease():
    reports = []
    result = ddmin(list(range(100)), contains_in_order([10, 90]),
                   on_progress=lambda size, calls: reports.append((size, calls)))
    sizes = [size for size, _ in reports]
    calls = [c for _, c in reports]
    assert sizes == sorted(set(sizes), reverse=True)
    assert sizes[-1] == len(result.items) == 2
    assert calls == sorted(calls) and calls[-1] <= result.calls


def test_empty_and_trivial_inputs():
    assert ddmin([], lambda s: True) == Result([], [], 1, 0, True)
    # An always-true predicate minimizes to the empty list.
    assert ddmin([1, 2, 3], lambda s: True).items == []
    assert ddmin([1, 2, 3], lambda s: 2 in s).items == [2]


def test_is_one_minimal():
    predicate = contains_in_order([1, 2])
    assert is_one_minimal([1, 2], predicate)
    assert not is_one_minimal([1, 5, 2], predicate)
    assert is_one_minimal([], predicate)


def test_minimize_int():
    assert minimize_int(1000, 0, lambda v: v >= 37) == 37
    assert minimize_int(1000, 0, lambda v: True) == 0
    assert minimize_int(10, 10, lambda v: v >= 10) == 10
    assert minimize_int(-5, -100, lambda v: v >= -42) == -42
    with pytest.raises(ValueError):
        minimize_int(10, 0, lambda v: v > 10)
    with pytest.raises(ValueError):
        minimize_int(0, 1, lambda v: True)


def test_minimize_int_calls_are_logarithmic():
    calls = []
    minimize_int(10**6, 0, lambda v: calls.append(v) or v >= 123_456)
    assert len(calls) <= 21


def test_shrink_towards():
    assert shrink_towards([0, 1, 2, 3], lambda v: v >= 2) == 2
    assert shrink_towards(["", "a", "ab"], lambda s: len(s) > 5) is None
    assert shrink_towards([], lambda v: True) is None


def test_fixpoint_runs_passes_until_nothing_changes_and_counts_them():
    from minimize import fixpoint
    calls = [0]

    def halve(x):
        calls[0] += 1
        return x // 2 if x % 2 == 0 else x

    def minus_one(x):
        calls[0] += 1
        return x - 1 if x > 1 else x
    item, stats = fixpoint(12, [("halve", halve), ("minus_one", minus_one)], lambda: calls[0])
    assert item == 1
    # rounds: 12 -> 6 -> 5 | 5 -> 5 -> 4 | 4 -> 2 -> 1 | 1 -> 1 -> 1 (a round with no change ends it)
    assert (stats["halve"].runs, stats["halve"].wins) == (4, 2)
    assert (stats["minus_one"].runs, stats["minus_one"].wins) == (4, 3)
    assert stats["halve"].calls == 4 and stats["minus_one"].calls == 4


def test_first_shorter_finds_the_first_or_proves_none_or_refuses_over_budget():
    from minimize import BUDGET, first_shorter
    words = lambda m: ("".join(w) for w in __import__("itertools").product("ab", repeat=m))  # noqa: E731
    count = lambda m: 2 ** m  # noqa: E731
    assert first_shorter(4, words, count, lambda w: w.count("b") == 2, 100) == "bb"
    assert first_shorter(4, words, count, lambda w: len(w) > 5, 100) is None
    assert first_shorter(4, words, count, lambda w: True, 14) == BUDGET  # 1 + 2 + 4 + 8 = 15 > 14
