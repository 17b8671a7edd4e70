"""The minimal upstream test set (dryz mutate --test-set, dryz/mutate/testset.py): its pool, how a vector kills,
the greedy cover. The whole run over 0.3.36's mutants is recorded in docs/results/upstream-test-set/."""

from __future__ import annotations

import numpy as np

from dryz.check import expected_output
from dryz import export
from dryz.mutate import testset


def test_the_pool_is_what_test_dry_expresses():
    cases = testset.pool()
    assert len(cases) == len(set(cases)) > 30000
    assert all(export.refusal_of_test_dry(c) is None for c in cases)
    assert cases[0].history == ()  # the empty history first, then the short ones
    lengths = [len(c.history) for c in cases[:len(testset.pool(corpus=None))]]
    assert lengths == sorted(lengths) and max(lengths) == testset.POOL_LENGTH
    assert any(len(c.history) > testset.POOL_LENGTH for c in cases)  # the project corpus's entries
    assert any(len(s) > 1 for c in cases for s in c.breakers)  # multi-token restart sequences


def test_a_vector_kills_when_the_tester_would_fail():
    """The tester reads probabilities: an output off by a logit kills, one within 1e-5 after softmax does not,
    NaN kills."""
    c = next(c for c in testset.pool() if c.symbols == "abab" and c.penalty_last_n == 64 and not c.breakers
             and c.allowed_length == 1 and c.multiplier == 1.0)
    good = expected_output(c).logits
    want = [export.tester_probabilities(c, good)]
    for logits, killed in ((good, False), (good + np.float32(1e-7), False),
                           (good - np.array([1, 0, 0], np.float32), True),
                           (np.array([np.nan, 0, 0], np.float32), True),
                           (np.array([0, 0], np.float32), True),  # another array size
                           (np.array([np.inf, 0, 0], np.float32), True)):  # +inf: every probability NaN
        out: set[int] = set()
        testset._tally([c], want, [0], [logits], out)
        assert (out == {0}) is killed, logits


def test_the_pristine_library_survives_the_pool(lib):
    cases = testset.pool()[::7]
    want = testset.expectations(cases)
    assert testset.kills(lib.spec, cases, want) == set()


def test_greedy_cover():
    cases = testset.pool()[:5]
    sets = {0: {"m1"}, 1: {"m1", "m2"}, 2: {"m3"}, 3: {"m2", "m3"}, 4: {"m4"}}
    assert testset.cover({"m1", "m2", "m3"}, sets, cases) == [1, 2]
    assert testset.cover({"m1", "m2", "m3"}, sets, cases, limit=1) == [1]
    assert testset.cover(set(), sets, cases) == []


def test_the_committed_test_set_is_what_the_oracles_say():
    """docs/results/upstream-test-set/: each chosen vector's test_dry call in the committed patch is the one the
    oracles give today (an oracle change that moves an expected probability fails here), and the vectors cover
    the mutants the record says."""
    import json
    from pathlib import Path

    from dryz.case import Case
    root = Path(__file__).resolve().parent.parent / "docs" / "results" / "upstream-test-set"
    t = json.loads((root / "test-set.json").read_text())
    diff = (root / "test-sampling-dryz.diff").read_text().splitlines()
    cases = [Case.from_json(c["case"]) for c in t["chosen"]]
    assert len(cases) == t["vectors"] <= testset.MAX_VECTORS
    for line in testset.calls(cases).splitlines():
        assert "+" + line in diff, line
    assert t["covered_by_choice"] == t["target"] and not t["predicted_not_after"]
    # no mutant dryz left alive (argued equivalent, or a gap) is killed by test-sampling with the vectors
    assert not [m for m, v in t["per_mutant"].items() if v["dryz"] == "survived" and v["after"] in
                ("killed", "crash", "memory", "timeout")]
    assert t["expressible_killed_after"] >= 0.9 * t["expressible"]
