"""A small exhaustive run with exact counts, controls, workers, and a comparison that can fail."""


from dryz import check as check_mod
from dryz.judge import check
from dryz.enumerate.controls import multiplier_zero_control, periodic_control
from dryz.enumerate.run import run_configs
from dryz.config import space_config
from dryz.space import case_count, plain_slices as slices


def specs(k, n):
    return [space_config(name, k, n) for name in ("base", "window4", "breaker")]


def test_counts_formula():
    assert case_count(3, 11) == 797_157
    assert case_count(4, 8) == 349_520
    assert case_count(3, 7) == 9_837


def test_small_space_certified(lib):
    res = run_configs(lib, 3, 7, specs(3, 7))
    for r in res:
        assert r.cases == 9_837
        assert r.by_length == {n: 3 * 3 ** n for n in range(1, 8)}
        assert r.mismatches == 0 and r.oracle_disagreements == 0
        # The off-by-one reference is flagged exactly where the library penalizes.
        assert r.off_by_one_flagged == r.penalized_cases > 0
    assert [r.max_L for r in res] == [6, 3, 6]


def test_workers_give_identical_results(lib):
    one = run_configs(lib, 3, 7, specs(3, 7), workers=1)
    two = run_configs(lib, 3, 7, specs(3, 7), workers=2)
    assert [r.to_json() | {"seconds": 0} for r in one] == [r.to_json() | {"seconds": 0} for r in two]


def test_slices_partition_the_space():
    sl = slices(3, 7, 2)
    assert sl[0] == {"top": 3} and len(sl) == 1 + 27
    assert slices(3, 7, 1) == [{"top": 7}]


def test_controls_fire(lib):
    assert periodic_control(lambda c: check(c, lib))["passed"]
    mz = multiplier_zero_control(lib, 3, 5, specs(3, 5))
    assert mz["nonzero_deltas"] == 0 and mz["cases"] == 3 * case_count(3, 5)


def test_broken_oracle_is_caught(lib, monkeypatch):
    """The comparison can fail: an oracle A that is off by one makes A and B disagree;
    both off by one make the library mismatch."""
    (_, real_A), (_, real_B) = check_mod.MATCH_LENGTHS
    monkeypatch.setattr(check_mod, "MATCH_LENGTHS", (("A", lambda W, c: real_A(W, c) + 1), ("B", real_B)))
    r = run_configs(lib, 3, 5, specs(3, 5)[:1])[0]
    assert r.oracle_disagreements > 0 and r.examples and r.examples[0][0] == "oracle-disagreement"
    monkeypatch.setattr(check_mod, "MATCH_LENGTHS", (("A", lambda W, c: real_A(W, c) + 1),
                                                     ("B", lambda W, c: real_B(W, c) + 1)))
    r = run_configs(lib, 3, 5, specs(3, 5)[:1])[0]
    assert r.mismatches > 0 and r.oracle_disagreements == 0 and r.examples[0][0] == "mismatch"


def test_a_library_off_by_one_is_a_finding_not_void(lib, tmp_path):
    """The off-by-one reference goes unflagged exactly when the library is itself off by one: its mismatches
    make that a finding (mismatch), never a void run."""
    from dryz.enumerate.certificate import judge
    from dryz.enumerate.exhaustive import run_exhaustive
    r = run_exhaustive(lib, 3, 4, specs(3, 4)[:1], str(tmp_path / "r.json"), False, 1, True)
    assert r["verdict"] == "certified"
    for c in r["configs"]:
        c["off_by_one_flagged"], c["mismatches"] = 0, c["penalized_cases"]
    assert judge(r)[0] == "mismatch" and judge(r)[1]["off_by_one"]
    for c in r["configs"]:
        c["mismatches"] = 0
    assert judge(r)[0] == "void" and not judge(r)[1]["off_by_one"]  # no mismatch and no flag: vacuous
    # a subject that crashed every slice leaves no case counted, so nothing to flag: its crash is the finding
    for c in r["configs"]:
        c["crashes"] = [{"signal": "SIGABRT", "slice": {"top": 5}}]
        c["cases"] = c["penalized_cases"] = 0
    assert judge(r)[0] == "crash" and all(judge(r)[1].values())
    r["controls"]["periodic"]["off_by_one_flagged"] = 0  # (its controls crashed too)
    assert judge(r)[0] == "crash" and "off_by_one" not in judge(r)[1]
