"""`dryz restarts --vocab`: the construction probes and the text promise over real vocabularies as a command
(dryz.enumerate.vocab_restarts): the same counts as the sweep run in-process, findings with a Case, a time
budget that says what it covered, bad input in one line. Skips when a vocabulary cannot be had, unless
DRYZ_REQUIRE_BUILDS=1."""

from __future__ import annotations

import json

import pytest

from dryz.case import Case

import conftest


def dryz(*args, timeout=900):
    return conftest.dryz(*args, timeout=timeout)




def test_promise_on_a_vocabulary_is_the_sweep(spm, tmp_path, lib):
    from dryz.enumerate.promise_sweep import promise_sweep
    from dryz.oracle.promise_text import PROMISE_SETS
    out = tmp_path / "r.json"
    p = dryz("restarts", "--vocab", "llama-spm", "--check", "promise", "--json", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "subject: llama-cpp-python 0.3.36" in p.stdout and "verdict   agree: 0 finding(s)" in p.stdout
    r = json.loads(out.read_text())
    assert r["tool"] == "dryz restarts --vocab" and r["verdict"] == "agree" and not r["partial"]
    (row,) = r["vocabularies"]
    assert row["vocab"] == "llama-spm" and row["tokens"] == 32000 and "construction" not in row
    assert row["promise"]["sets_complete"] == row["promise"]["sets"] == len(PROMISE_SETS)
    s = promise_sweep("llama-spm", lib)
    assert row["promise"]["windows"] == s.counts and row["promise"]["vocabulary_histories"] == s.vocab_counts
    # the source's documented classes and the corpus's known ones are no findings
    assert set(row["promise"]["witnesses"]) == set(s.witnesses) and r["findings"] == []


def test_a_time_budget_says_what_it_covered(spm, tmp_path):
    out = tmp_path / "r.json"
    p = dryz("restarts", "--vocab", "all", "--time", "1", "--json", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(out.read_text())
    assert r["partial"] and r["time_budget"] == 1
    rows = r["vocabularies"]
    assert len(rows) == 19 and [x["vocab"] for x in rows[:2]] == ["llama-spm", "gpt-2"]
    skipped = [x for x in rows if "skipped" in x]
    assert skipped and all(x["skipped"] == "time budget spent" for x in skipped)
    assert f"over {19 - len(skipped)} of 19 vocabularies (time budget 1 s: partial)" in p.stdout


def test_a_construction_disagreement_is_a_finding_with_a_case(spm, monkeypatch, lib):
    """The probes' own control (a model whose tails are cut at 19 tokens, not 20) run through the command's
    logic: each disagreement becomes a finding whose Case is the probe, over the vocabulary."""
    from dryz.enumerate import vocab_probes, vocab_restarts
    from dryz.enumerate.vocab_restarts import run
    from dryz.oracle import restarts_vocab as rv
    monkeypatch.setattr(rv, "MAX_SEQ_LEN", 19)
    suite = tuple(x for x in vocab_probes.BREAKER_SUITE if x[0] in ("tail-length", "all"))[:1]
    for mod in (vocab_probes, vocab_restarts):  # the suite as both modules read it
        monkeypatch.setattr(mod, "BREAKER_SUITE", suite)
    r = run(lib, ["llama-spm"], ("construction",))
    c = r["vocabularies"][0]["construction"]
    assert r["verdict"] == "finding" and c["disagreements"] > 0 and c["sets_complete"] == 1
    assert 0 < len(r["findings"]) <= 3 * 3  # the 3 shortest of each probe kind
    for f in r["findings"]:
        case = Case.from_json(f["case"])
        assert f["klass"] == "construction-disagreement" and f["check"] == "construction"
        assert case.vocab == "llama-spm" and case.vocab_sha256 == spm.ref.sha256 and case.alphabet == 32000
        assert (case.multiplier, case.base, case.allowed_length, case.penalty_last_n) == (1.0, 2.0, 0, 4096)
        assert case.breakers == tuple(dict(vocab_probes.BREAKER_SUITE)["tail-length"])


@pytest.mark.parametrize("args,msg", [
    (["--vocab", "nosuch"], "unknown vocabulary 'nosuch'"),
    (["--time", "5"], "--check and --time go with --vocab"),
    (["--check", "promise"], "--check and --time go with --vocab"),
    (["--vocab", "llama-spm", "--time", "0"], "--time must be in 1..86400"),
])
def test_bad_input_is_one_line(args, msg):
    p = dryz("restarts", *args, timeout=120)
    assert p.returncode == 2 and p.stderr.startswith("dryz: error: ") and p.stderr.count("\n") == 1, p.stderr
    assert msg in p.stderr
