"""Canonical enumeration: counts, the symmetry cross-check against the full enumeration, controls that fire,
refusals, every alphabet, every window cap, and shards + merge."""

import json
import subprocess
import sys
from math import comb

import pytest

from dryz import check as check_mod
from dryz.space import CanonicalError, Space, bell, canonical_strings, expected_canonical, space_for
from dryz.enumerate.certificate import MergeError, merge
from dryz.enumerate.run import run_configs
from dryz.space import case_count
from dryz.config import SpaceConfig, space_config, window_cap_names

NAMES = ("base", "window4", "breaker")
SHARED = ("cases", "histories", "mismatches", "oracle_disagreements", "penalized_cases", "off_by_one_flagged",
          "max_L", "cases_by_length", "L_histogram")


def specs(k, n, names=NAMES):
    return [space_config(name, k, n) for name in names]


def rgs_count(K, n):
    """Restricted-growth strings of length n with at most K labels: sum_{j<=K} S(n, j)."""
    def stirling(n, j):
        return sum((-1) ** i * comb(j, i) * (j - i) ** n for i in range(j + 1)) // _fact(j)
    return sum(stirling(n, j) for j in range(1, K + 1))


def _fact(j):
    out = 1
    for i in range(2, j + 1):
        out *= i
    return out


def test_counts_match_closed_forms():
    assert Space(3, None, 8).counts()[8] and sum(Space(3, None, 8).counts()[8].values()) == 1094
    for K in range(1, 6):
        for n in range(1, 8):
            assert sum(Space(K, None, n).counts()[n].values()) == rgs_count(K, n)
    for n in range(1, 12):
        assert sum(Space(None, None, n).counts()[n].values()) == bell(n)
        assert sum(Space(None, 63, n).counts()[n].values()) == bell(n + 1)
    assert [bell(n) for n in range(8)] == [1, 1, 2, 5, 15, 52, 203, 877] and bell(13) == 27_644_437
    # Multiplicities cover the plain space exactly: k * sum k^n, with and without the fixed breaker.
    for k in range(1, 6):
        for N in range(1, 7):
            for name in NAMES:
                sp = space_for(space_config(name, k, N), k, N)
                assert expected_canonical(sp, N)["covered_cases"] == case_count(k, N), (k, N, name)


def test_canonical_strings_are_the_patterns():
    sp = space_for(space_config("breaker", 4, 6), 4, 6)
    strs = canonical_strings(sp, 6)
    assert len(strs) == len(set(strs)) == sum(sp.counts()[6].values())
    for s in strs:  # first-occurrence order over the symmetric digits, breaker digit anywhere
        seen = []
        for d in s:
            if d != sp.bdigit and d not in seen:
                assert d == len(seen)
                seen.append(d)


def strip(r):
    return {k: r.to_json()[k] for k in SHARED}


@pytest.mark.parametrize("name", NAMES)
def test_symmetry_cross_check_4_symbols_length_7(lib, name):
    """The symmetry argument, checked: the full enumeration and the canonical one give identical verdicts
    and identical covered counts, down to the histogram of library L values."""
    full = run_configs(lib, 4, 7, specs(4, 7, [name]))[0]
    red = run_configs(lib, 4, 7, specs(4, 7, [name]), canonical=True)[0]
    assert full.mismatches == red.mismatches == 0 and full.oracle_disagreements == red.oracle_disagreements == 0
    assert red.cases == full.cases == case_count(4, 7)
    assert strip(red) == strip(full)
    assert red.fresh_violations == 0 and red.canonical_histories < full.histories / 4
    e = expected_canonical(space_for(red.config, 4, 7), 7)
    assert red.canonical_by_length == e["histories_by_length"] and red.canonical_cases == e["cases"]


def test_canonical_workers_identical(lib):
    one = run_configs(lib, 3, 8, specs(3, 8), workers=1, canonical=True)
    two = run_configs(lib, 3, 8, specs(3, 8), workers=2, canonical=True)
    assert [r.to_json() | {"seconds": 0} for r in one] == [r.to_json() | {"seconds": 0} for r in two]


def test_broken_oracle_is_caught_in_canonical_mode(lib, monkeypatch):
    (_, real_A), (_, real_B) = check_mod.MATCH_LENGTHS
    monkeypatch.setattr(check_mod, "MATCH_LENGTHS", (("A", lambda W, c: real_A(W, c) + 1), ("B", real_B)))
    for name in NAMES:
        r = run_configs(lib, 3, 5, specs(3, 5, [name]), canonical=True)[0]
        assert r.oracle_disagreements > 0 and r.examples[0][0] == "oracle-disagreement"
    monkeypatch.setattr(check_mod, "MATCH_LENGTHS", (("A", lambda W, c: real_A(W, c) + 1),
                                                     ("B", lambda W, c: real_B(W, c) + 1)))
    for name in NAMES:
        r = run_configs(lib, 3, 5, specs(3, 5, [name]), canonical=True)[0]
        assert r.mismatches > 0 and r.oracle_disagreements == 0 and r.examples[0][0] == "mismatch"


def test_fresh_symbol_penalty_is_a_mismatch(lib, monkeypatch):
    """A library that penalized the fresh (absent) candidate would be caught even where the oracles agree."""
    penalize_fresh(monkeypatch)
    r = run_configs(lib, 3, 4, specs(3, 4, ["base"]), canonical=True)[0]
    assert r.fresh_violations > 0 and r.mismatches > 0


def test_refuses_configurations_it_cannot_reduce():
    with pytest.raises(CanonicalError, match="multi-token"):
        space_for(SpaceConfig("x", 64, ("ab",)), 3, 5)
    with pytest.raises(CanonicalError, match="last symbol"):
        space_for(SpaceConfig("x", 64, ("a",)), 3, 5)
    with pytest.raises(CanonicalError, match="last symbol"):
        space_for(SpaceConfig("x", 64, ("b", "c")), 3, 5)
    assert space_for(SpaceConfig("x", 64, ("c",)), 3, 5) == Space(2, 2, 5)


def test_all_alphabets_bell_counts(lib):
    res = run_configs(lib, None, 6, specs(64, 6), canonical=True)
    for r, shift in zip(res, (0, 0, 1)):
        assert r.canonical_by_length == {n: bell(n + shift) for n in range(1, 7)}
        assert r.mismatches == 0 and r.oracle_disagreements == 0 and r.fresh_violations == 0
        assert r.off_by_one_flagged > 0
    assert res[2].config.breakers == ("#",)


def test_every_window_cap_matches_plain(lib):
    caps = [space_config(n, 3, 6) for n in window_cap_names(6)]
    assert [s.penalty_last_n for s in caps] == [1, 2, 3, 4, 5, 6]
    full = run_configs(lib, 3, 6, caps)
    red = run_configs(lib, 3, 6, caps, canonical=True)
    assert [strip(r) for r in red] == [strip(r) for r in full]
    assert all(r.mismatches == 0 for r in red) and red[0].penalized_cases == 0  # a window of 1 never penalizes


def run(tmp_path, name, lib, **kw):
    from dryz.enumerate.exhaustive import run_exhaustive
    p = tmp_path / name
    return run_exhaustive(lib, 3, 7, specs(3, 7), str(p), False, 1, True, **kw), p


def test_shards_merge_to_the_single_run(tmp_path, lib):
    whole, _ = run(tmp_path, "whole.json", lib)
    parts = [run(tmp_path, f"s{i}.json", lib, shard=(i, 3))[0] for i in (1, 2, 3)]
    assert all(p["verdict"] == "partial" for p in parts)
    assert sorted(j for p in parts for j in p["shard"]["tasks"]) == list(range(parts[0]["shard"]["total_tasks"]))
    m = merge(parts, ["s1", "s2", "s3"])
    assert m["verdict"] == whole["verdict"] == "certified" and all(m["checks"].values())
    assert m["totals"] == whole["totals"] and m["canonical_totals"] == whole["canonical_totals"]
    for a, b in zip(m["configs"], whole["configs"]):
        assert {k: a[k] for k in SHARED} == {k: b[k] for k in SHARED}
    # Shards that do not fit are refused.
    with pytest.raises(MergeError, match="missing slices"):
        merge(parts[:2], ["s1", "s2"])
    with pytest.raises(MergeError, match="overlapping"):
        merge(parts + [parts[0]], ["s1", "s2", "s3", "s1again"])
    other = json.loads(json.dumps(parts[2]))
    other["subject"]["libllama_sha256"] = "0" * 64
    with pytest.raises(MergeError, match="different subject"):
        merge(parts[:2] + [other], ["s1", "s2", "x"])
    other = json.loads(json.dumps(parts[2]))
    other["space"]["max_length"] = 8
    with pytest.raises(MergeError, match="different space"):
        merge(parts[:2] + [other], ["s1", "s2", "x"])
    with pytest.raises(MergeError, match="not a shard"):
        merge([whole], ["whole"])


def test_merge_cli_refuses_with_one_line(tmp_path, lib):
    _, p1 = run(tmp_path, "s1.json", lib, shard=(1, 2))
    out = tmp_path / "m.json"
    p = subprocess.run([sys.executable, "-m", "dryz", "merge", str(p1), str(p1), "--json", str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "overlapping slices" in p.stderr and not out.exists()


@pytest.mark.parametrize("k,n", [(1, 9), (2, 8), (5, 5)])
def test_symmetry_cross_check_other_alphabets(lib, k, n):
    full = run_configs(lib, k, n, specs(k, n))
    red = run_configs(lib, k, n, specs(k, n), canonical=True)
    assert [strip(r) for r in red] == [strip(r) for r in full]
    assert all(r.mismatches == 0 and r.fresh_violations == 0 for r in red)


def test_cli_all_alphabets_and_window_caps(tmp_path):
    out = tmp_path / "a.json"
    p = subprocess.run([sys.executable, "-m", "dryz", "exhaustive", "--all-alphabets", "--window-caps", "-n", "5",
                        "-j", "1", "--no-progress", "--json", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    r = json.loads(out.read_text())
    assert r["verdict"] == "certified" and all(r["checks"].values())
    assert [c["name"] for c in r["configs"]] == ["base"] + [f"window{w}" for w in range(1, 6)]
    assert all(c["canonical_histories_by_length"] == {str(n): bell(n) for n in range(1, 6)} for c in r["configs"])
    assert r["space"]["alphabet"] == "all" and r["space"]["expected_cases"] is None


def penalize_fresh(monkeypatch):
    """A library that also penalizes the fresh (absent) candidate: the walk's output with the last column
    (base config: the fresh candidate whenever m < k) lowered by 1.0."""
    from dryz.subject.libllama import LibLlama
    real = LibLlama.walk

    def walk(self, space, max_len, args, sink, prefixes=((),)):
        def fake(n, m, H, logits, cands):
            logits = logits.copy()
            if space.fresh(m):
                logits[:, m] -= 1.0
            sink(n, m, H, logits, cands)
        return real(self, space, max_len, args, fake, prefixes)
    monkeypatch.setattr(LibLlama, "walk", walk)
