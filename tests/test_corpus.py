"""The corpus: format, validation, and replay of every stored entry through check()."""

import json
import subprocess
import sys

import numpy as np
import pytest

from dryz.case import Case
from dryz.judge import check
from dryz.corpus import (DEFAULT_DIR, CorpusError, entries, entry_json, file_name, load_entry, replay,
                         validate_entry, write_entry)
from dryz.fuzz.seeds import upstream_cases


def test_whole_corpus_replays_as_expected(lib):
    rows = replay(DEFAULT_DIR, lib)
    assert len(rows) >= 14
    bad = [(str(r.path), r.expect, r.got, r.error) for r in rows if not r.ok]
    assert not bad


def test_corpus_holds_upstream_unit_cases():
    notes = [load_entry(p).data["note"] for p in entries(DEFAULT_DIR)]
    upstream = [n for n in notes if "test_dry" in n]
    assert len(upstream) == 5


def test_upstream_expected_probabilities_reproduced(lib):
    """llama.cpp's own expected probabilities (softmax after DRY) from the shipped output, within 1e-5."""
    for case, expected in upstream_cases():
        v = check(case, lib)
        assert v.ok
        lg = np.array(v.observed_logits, dtype=np.float64)
        p = np.exp(lg - lg.max())
        p /= p.sum()
        assert np.abs(p - np.array(expected)).max() < 1e-5


def test_findings_have_shortest_witness():
    finite = [load_entry(p) for p in entries(DEFAULT_DIR) if load_entry(p).expect == "promise-finite-penalty"]
    assert any(e.data["shortest"] == "proven" and len(e.case.history) == 2 for e in finite)


def _entry(tmp_path, case, expect, lib):
    v = check(case, lib)
    return write_entry(tmp_path, entry_json(case, v, expect=expect, shortest="not-minimized",
                                            provenance={"found_by": "test"}, subject={}))


def test_replay_flags_changed_verdict(tmp_path, lib):
    case = Case(history=(0, 1, 0, 1), alphabet=2, penalty_last_n=8)
    p = _entry(tmp_path, case, "mismatch", lib)           # agrees, but the entry claims a mismatch
    assert p.name == file_name(json.loads(p.read_text())) and p.name.startswith("mismatch-")
    rows = replay(tmp_path, lib)
    assert [(r.ok, r.expect, r.got) for r in rows] == [(False, "mismatch", "agree")]
    out = subprocess.run([sys.executable, "-m", "dryz", "replay", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 1 and f"CHANGED {p}: expected mismatch, now agree" in out.stdout


def test_replay_cli_green_on_good_corpus(tmp_path, lib):
    _entry(tmp_path, Case(history=(0, 1, 0, 1), alphabet=2, penalty_last_n=8), "agree", lib)
    out = subprocess.run([sys.executable, "-m", "dryz", "replay", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0 and "1 as expected, 0 changed" in out.stdout


@pytest.mark.parametrize("patch,fragment", [
    ({"schema": "dryz.corpus/0"}, "schema 'dryz.corpus/0' is not"),
    ({"expect": "maybe"}, "is not a known class"),
    ({"expect": "declared-bogus"}, "is not a known class"),
    ({"shortest": "short"}, "shortest 'short' is not one of"),
    ({"case": {"history": [9], "alphabet": 2, "penalty_last_n": 3}}, "case: history token 9"),
    ({"history_symbols": "zzz"}, "does not match the case"),
])
def test_entry_validation(tmp_path, patch, fragment, lib):
    p = _entry(tmp_path, Case(history=(0, 1), alphabet=2, penalty_last_n=8), "agree", lib)
    d = json.loads(p.read_text())
    d.update(patch)
    with pytest.raises(CorpusError) as e:
        validate_entry(d, "x.json")
    assert fragment in str(e.value)


def test_an_entry_expects_the_class_of_declared_models(tmp_path, lib):
    """declared-<model>[+<model>] of models dryz has is a class an entry may expect (an engine's declared
    deviation: a gate's differential records such witnesses and reads them back)."""
    p = _entry(tmp_path, Case(history=(0, 1), alphabet=2, penalty_last_n=8), "agree", lib)
    d = json.loads(p.read_text())
    for k in ("declared-occurrence-cap:8", "declared-repeat-min:2+no-clamp", "declared-finite-penalty:saturate"):
        validate_entry({**d, "expect": k}, "x.json")


def test_invalid_entry_exits_2(tmp_path):
    (tmp_path / "bad.json").write_text("{ nope")
    out = subprocess.run([sys.executable, "-m", "dryz", "replay", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 2 and "INVALID" in out.stdout and "not valid JSON" in out.stdout
