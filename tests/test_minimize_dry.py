"""DRY reduction on the generic ddmin core: same-class predicate, 1-minimality, proven shortest."""

import json
import subprocess
import sys

import pytest

from dryz.case import Case, f32
from dryz.shrink import canonical_form, count_histories, reduce_case, restricted_growth, signature_in, signature_isolated
from dryz.subject.isolation import Worker


def long_failing_case():
    junk = [5, 3, 9, 1, 7, 2, 8, 4, 6, 0] * 30
    hist = tuple(junk[:150] + [0, 1, 2] * 100 + junk[150:])
    return Case(history=hist, alphabet=12, penalty_last_n=len(hist), breakers=("j", "kl"),
                multiplier=f32(0.8), base=f32(1.75), allowed_length=2)


def test_fault_injected_reduction_is_proven_shortest(monkeypatch, lib):
    monkeypatch.setenv("DRYZ_FAULT", "off-by-one")
    case = long_failing_case()
    signature_in_process = signature_in(lib)
    target = signature_in_process(case)
    # Two candidates (a, b) follow a repeat of length >= 2, and the faulty reference overstates both.
    assert target == ("mismatch", ("less", "less"))
    reduced, shortest, calls = reduce_case(case, target, signature_in_process)
    assert signature_in_process(reduced) == target
    assert shortest == "proven" and len(reduced.history) == 6 and calls < 2000
    # 1-minimal: removing any single history token loses the failure.
    for i in range(len(reduced.history)):
        smaller = reduced.with_history(reduced.history[:i] + reduced.history[i + 1:])
        assert signature_in_process(smaller) != target
    # ... and it is in canonical form with simplified parameters.
    assert reduced.symbols == "aaabaa" and reduced.breakers == () and (reduced.multiplier, reduced.base) == (1.0, 2.0)
    assert reduced.allowed_length == 0 and reduced.penalty_last_n == 6 and reduced.alphabet == 2


def test_nothing_to_minimize(lib):
    case = Case(history=(0, 1), alphabet=2, penalty_last_n=4)
    with pytest.raises(ValueError, match="does not fail"):
        reduce_case(case, ("mismatch", ("more",)), signature_in(lib))


def test_isolated_signature_survives_abort(monkeypatch, lib):
    """A case that aborts the subject's process is a crash signature, and the worker goes on (restarted)."""
    case = Case(history=(0,) * 6, alphabet=1, penalty_last_n=8)
    with Worker(lib.spec, lib) as w:
        isolated = signature_isolated(w)
        assert isolated(case) == signature_in(lib)(case) == ("agree", ())
        monkeypatch.setenv("DRYZ_FAULT", "abort")  # read per call, in the worker too (forked: same environment)
        w.close()  # the next call forks a worker that sees the fault
        assert isolated(case) == ("crash", ("SIGABRT",))
        assert isolated(case) == ("crash", ("SIGABRT",)) and w.restarts == 2
        monkeypatch.delenv("DRYZ_FAULT")
        w.close()
        assert isolated(case) == ("agree", ())


def test_restricted_growth_counts():
    assert sum(1 for _ in restricted_growth(8, 3)) == count_histories(3, 8, True) == 1094
    assert count_histories(3, 8, False) == 6561
    assert sum(1 for _ in restricted_growth(6, 6)) == 203  # Bell(6)


def test_canonical_form_renames_in_first_occurrence_order():
    c = Case(history=(3, 1, 3), alphabet=4, penalty_last_n=5, breakers=("b",))
    assert canonical_form(c).history == (0, 1, 0) and canonical_form(c).breakers == ("b",)
    assert canonical_form(c).alphabet == 2


def test_minimize_cli_on_crash_file_and_case_json(tmp_path, monkeypatch):
    """dryz minimize on a fuzz crash file (decoded with the harness's decoder) and on a Case JSON."""
    import os
    env = dict(os.environ, DRYZ_FAULT="off-by-one")
    case_file = tmp_path / "case.json"
    case_file.write_text(long_failing_case().dumps())
    crash = tmp_path / "crash-1"
    crash.write_bytes(long_failing_case().dumps().encode())  # a seed-style crash file
    for path in (case_file, crash):
        out_dir = tmp_path / f"out-{path.name}"
        p = subprocess.run([sys.executable, "-m", "dryz", "minimize", str(path), "--corpus", str(out_dir)],
                           capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 0, p.stderr
        assert "shortest: proven" in p.stdout and "history" in p.stdout
        [entry] = list(out_dir.glob("*.json"))
        d = json.loads(entry.read_text())
        assert d["expect"] == "mismatch" and d["shortest"] == "proven" and d["history_symbols"] == "aaabaa"
        assert d["provenance"]["fault"] == "off-by-one" and d["provenance"]["original_length"] == 600
        assert d["subject"]["libllama_sha256"]
        assert [(c["symbol"], c["oracle_L"]) for c in d["candidates"]] == [("a", 3), ("b", 3)]  # injected +1
        assert [c["observed_logit"] for c in d["candidates"]] == [-4.0, -4.0]  # the library: L = 2


def test_minimize_rejects_agreeing_input(tmp_path):
    f = tmp_path / "ok.json"
    f.write_text(Case(history=(0, 1), alphabet=2, penalty_last_n=4).dumps())
    p = subprocess.run([sys.executable, "-m", "dryz", "minimize", str(f), "--corpus", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "nothing to minimize" in p.stderr
    assert "(read as a case JSON)" in p.stderr


def test_minimize_refuses_a_broken_json_with_where(tmp_path):
    """A file that starts like JSON is JSON: a typo is one line with line and column, exit 2, never read as
    fuzz bytes and judged as an unrelated case."""
    f = tmp_path / "typo.json"
    f.write_text('{"history": [0, 1], "alphabet": 2')
    p = subprocess.run([sys.executable, "-m", "dryz", "minimize", str(f), "--corpus", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0
    assert "not valid JSON" in p.stderr and "line 1 column" in p.stderr
