"""The parameter axis (--parameters): allowed_length 0..3 x (multiplier, base) pairs, judged bit-exactly against
the as-shipped output model in the plain and the canonical walk; a broken penalty model is caught."""


import numpy as np
import pytest

from dryz.oracle import shipped as model
from dryz.case import f32
from dryz.enumerate.certificate import merge
from dryz.enumerate.run import run_configs
from dryz.config import PARAMETER_PAIRS, parameter_names, space_config

NAMES = ("base", "window4", "breaker")
SHARED = ("cases", "histories", "mismatches", "oracle_disagreements", "penalized_cases", "off_by_one_flagged",
          "max_L", "cases_by_length", "L_histogram", "logit_bits_histogram")


def pspecs(k, n, names=NAMES):
    return [space_config(x, k, n) for x in parameter_names(names)]


def strip(r):
    return {key: r.to_json()[key] for key in SHARED}


def test_parameter_names_round_trip():
    names = parameter_names(["base"])
    assert len(names) == 15 and "base/allowed1/m1/b2" not in names  # the seed parameters are `base` itself
    assert names[0] == "base/allowed0/m1/b2" and "base/allowed3/m0.8/b1.75" in names
    for x in names:
        s = space_config(x, 3, 6)
        assert s.name == x and not s.invertible and s.penalty_last_n == 64
        assert (s.multiplier, s.base) in PARAMETER_PAIRS and 0 <= s.allowed_length <= 3
    s = space_config("breaker/allowed0/m0.8/b1.75", 3, 6)
    assert (s.breakers, s.multiplier, s.base, s.allowed_length) == (("c",), f32(0.8), 1.75, 0)
    assert space_config("window4/allowed2", 3, 6).penalty_last_n == 4
    for bad in ("base/allowed", "base/x1", "base/m1/m2", "base/minf", "nope/m1"):
        with pytest.raises(ValueError):
            space_config(bad, 3, 6)


def test_parameter_axis_bit_exact_plain_and_canonical(lib):
    """3 symbols <= 6, every parameter configuration: 0 mismatches, and the canonical walk covers the plain
    one exactly (down to the histogram of the library's logit bits); the fresh symbol stays +0.0."""
    specs = pspecs(3, 6)
    full = run_configs(lib, 3, 6, specs)
    red = run_configs(lib, 3, 6, specs, canonical=True)
    for f, r in zip(full, red):
        assert f.cases == 3 * sum(3 ** n for n in range(1, 7))
        assert f.mismatches == f.oracle_disagreements == 0, f.config.name
        assert strip(r) == strip(f), f.config.name
        assert r.fresh_violations == 0 and r.to_json()["comparison"] == "bits"
        assert sum(f.logit_bits_histogram.values()) == f.cases
        # Non-vacuity: the off-by-one reference is flagged wherever the penalty depends on L (base > 1).
        if f.config.base > 1:
            assert f.off_by_one_flagged == f.penalized_cases > 0
        else:
            assert f.off_by_one_flagged == 0 and len(f.logit_bits_histogram) == 2  # 0 and -multiplier
    by = {r.config.name: r for r in full}
    # allowed_length 0 penalizes candidates with L = 0 that follow some window position: more than allowed 1.
    assert by["base/allowed0/m0.8/b1.75"].penalized_cases > by["base/allowed1/m0.8/b1.75"].penalized_cases
    assert by["base/allowed3/m2/b1.1"].penalized_cases < by["base/allowed2/m2/b1.1"].penalized_cases


def test_broken_penalty_is_caught(lib, monkeypatch):
    """A penalty model one ulp off makes every penalized case a mismatch, plain and canonical."""
    real = model.penalties

    def off(L, cfg):
        p = real(L, cfg)
        return np.nextafter(p, np.float32(np.inf)).astype(np.float32)
    monkeypatch.setattr(model, "penalties", off)
    names = ["base/allowed0/m0.8/b1.75", "breaker/allowed2/m2/b1.1", "window4/allowed1/m1/b1"]
    specs = [space_config(x, 3, 5) for x in names]
    for canonical in (False, True):
        for r in run_configs(lib, 3, 5, specs, canonical=canonical):
            assert r.mismatches == r.penalized_cases > 0 and r.oracle_disagreements == 0, (canonical, r.config.name)
            assert r.examples and r.examples[0][0] == "mismatch"
            assert r.examples[0][1].allowed_length == r.config.allowed_length


def test_oracle_self_disagreement_counted_separately(lib, monkeypatch):
    from dryz import check as check_mod
    (_, real_A), B = check_mod.MATCH_LENGTHS
    monkeypatch.setattr(check_mod, "MATCH_LENGTHS", (("A", lambda W, c: real_A(W, c) + 1), B))
    r = run_configs(lib, 3, 5, [space_config("base/allowed2/m0.8/b1.75", 3, 5)])[0]
    assert r.oracle_disagreements > 0 and r.examples[0][0] == "oracle-disagreement"


def test_a_registered_oracle_is_judged_everywhere(lib, monkeypatch):
    """One line in dryz.oracle.MATCH_LENGTHS registers an oracle: every verdict carries its L (oracle_C_L), and
    where it disagrees with the others the row is an oracle-disagreement; the periodic control checks it too."""
    import dryz.oracle as oracles
    from dryz import check as check_mod
    from dryz.case import Case
    from dryz.enumerate.controls import periodic_control
    from dryz.judge import check
    (_, real_A), B = check_mod.MATCH_LENGTHS
    C = ("C", lambda W, c: real_A(W, c))
    for mod in (oracles, check_mod):
        monkeypatch.setattr(mod, "MATCH_LENGTHS", (("A", real_A), B, C))
    v = check(Case(history=(0, 1, 0), alphabet=2, penalty_last_n=64), lib)
    assert v.ok and v.to_json()["oracle_C_L"] == v.oracle_L == [0, 1]
    assert periodic_control(lambda case: check(case, lib))["oracles_passed"]
    wrong = ("C", lambda W, c: real_A(W, c) + 1)
    for mod in (oracles, check_mod):
        monkeypatch.setattr(mod, "MATCH_LENGTHS", (("A", real_A), B, wrong))
    v = check(Case(history=(0, 1, 0), alphabet=2, penalty_last_n=64), lib)
    assert v.klass == "oracle-disagreement" and v.to_json()["oracle_C_L"] == [1, 2]


def test_fresh_symbol_touched_is_caught(lib, monkeypatch):
    """Canonical exact mode: a fresh candidate whose logit is not bit-identical +0.0 is a fresh violation."""
    from test_canonical import penalize_fresh
    penalize_fresh(monkeypatch)
    r = run_configs(lib, 3, 4, [space_config("base/allowed0/m1/b2", 3, 4)], canonical=True)[0]
    assert r.fresh_violations > 0 and r.mismatches > 0


def test_parameter_shards_merge_to_the_single_run(tmp_path, lib):
    from dryz.enumerate.exhaustive import run_exhaustive
    specs = [space_config(x, 3, 5) for x in ["base"] + parameter_names(["breaker"])[:4]]
    whole = run_exhaustive(lib, 3, 5, specs, str(tmp_path / "w.json"), False, 1, True)
    parts = [run_exhaustive(lib, 3, 5, specs, str(tmp_path / f"s{i}.json"), False, 1, True, shard=(i, 2))
             for i in (1, 2)]
    m = merge(parts, ["s1", "s2"])
    assert whole["verdict"] == m["verdict"] == "certified" and all(m["checks"].values())
    for a, b in zip(m["configs"], whole["configs"]):
        assert {k: a.get(k) for k in SHARED + ("comparison",)} == {k: b.get(k) for k in SHARED + ("comparison",)}


def test_model_logits_is_output_logits():
    """output_logits_zero's table evaluation equals output_logits(zeros, pa, cfg) called on the whole batch."""
    from dryz.check import predict_all
    from dryz.config import case_config
    from dryz.oracle.shipped import output_logits_zero as model_logits
    from dryz.space import histories
    for name in parameter_names(NAMES)[::4]:
        spec = space_config(name, 3, 7)
        cfg = case_config(spec.case(3, ()))
        H = histories(3, 7, np.arange(3 ** 7))
        pa, _ = predict_all(H, np.arange(3), cfg)
        direct = model.output_logits(np.zeros(3, dtype=np.float32), pa, cfg)
        assert np.array_equal(model_logits(pa, cfg).view(np.uint32), direct.view(np.uint32)), name
