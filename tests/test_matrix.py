"""dryz matrix and the differential comparison of subjects.

The two-subject matrix (the pinned release and the last old-ABI one, both built by `dryz subject build`, cached
between tests) runs in CI with short budgets; the witnesses of differences in the project corpus are checked to
still separate the subjects they name.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dryz.case import Case
from dryz.differential import Result, classify
from dryz.matrix import MatrixError, Spec, parse_versions

import conftest



def test_versions_are_parsed_or_refused_in_one_line():
    assert parse_versions("0.3.16, 0.3.36,xllamacpp") == [Spec("llama-cpp-python", "0.3.16"),
                                                          Spec("llama-cpp-python", "0.3.36"),
                                                          Spec("xllamacpp", "latest")]
    assert parse_versions("xllamacpp==2026.10.11549") == [Spec("xllamacpp", "2026.10.11549")]
    for bad, msg in (("0.3", "neither"), ("", "no subject"), ("0.3.36,0.3.36", "twice"), ("xllamacpp==a b", "bad")):
        with pytest.raises(MatrixError, match=msg):
            parse_versions(bad)


def test_differences_are_classed_by_what_each_side_did():
    ok = lambda k, bits: Result("ok", k, bits, False)  # noqa: E731
    assert classify(ok("agree", (1,)), ok("agree", (1,))) is None
    assert classify(ok("agree", (1,)), Result("crash", detail="SIGABRT: x")) == "crash"
    assert classify(ok("agree", (1,)), Result("hang")) == "crash"
    assert classify(ok("agree", (1,)), ok("agree", (2,))) == "semantic-change"
    assert classify(ok("agree", (1,)), ok("mismatch", (2,))) == "promise-broken-in-one"
    # The same output with a different class (each judged against its own ABI's model) is no difference.
    assert classify(ok("agree", (1,)), ok("mismatch", (1,))) is None


def test_judge_answers_a_crash_and_goes_on(tmp_path):
    """A subject's judge (a spawned isolation worker) answers every case; a case that kills the library is a
    crash answer, not the end."""
    from dryz.differential import Judge
    s = Judge(f"libllama:{_pip_lib()}")
    try:
        a = s.run(Case(history=(0, 0), alphabet=1, penalty_last_n=4))
        assert a.kind == "ok" and a.klass == "agree" and a.bits == (0xBF800000,)  # -1.0: L = 1
    finally:
        s.close()


def _pip_lib():
    from dryz.subject.libllama import pip_library
    return str(pip_library())


def _build(version):
    return conftest.build(version)


@pytest.fixture(scope="module")
def two_subjects(tmp_path_factory):
    new, old = _build("0.3.36"), _build("0.3.34")
    work = tmp_path_factory.mktemp("matrix")
    p = subprocess.run([sys.executable, "-m", "dryz", "matrix", "--release", "0.3.36", "--release", "0.3.34", "--time-per-subject", "5",
                        "--random", "100", "--workdir", str(work / "w"), "--corpus", str(work / "corpus"),
                        "--json", str(work / "m.json"), "--markdown", str(work / "m.md")],
                       capture_output=True, text=True, timeout=1800, cwd=work)
    return p, work, new, old


def test_two_subject_matrix(two_subjects):
    p, work, _, _ = two_subjects
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]  # the releases differ: findings
    m = json.loads((work / "m.json").read_text())
    rows = {r["subject"]: r for r in m["rows"]}
    assert rows["llama-cpp-python 0.3.36"]["abi"] == 7 and rows["llama-cpp-python 0.3.34"]["abi"] == 8
    for r in rows.values():  # the cells are the gate's modes (dryz.gate.modes), read the same way
        assert r["cells"]["certificate"]["verdict"] == "pass"
        assert r["cells"]["certificate"]["text"] == "CERTIFIED: 2,391,471 cases, 0 mismatches"
    new, old = rows["llama-cpp-python 0.3.36"]["cells"]["replay"], rows["llama-cpp-python 0.3.34"]["cells"]["replay"]
    from dryz.corpus import DEFAULT_DIR, entries
    n = len(entries(DEFAULT_DIR))
    assert new["verdict"] == "pass" and new["text"] == f"{n}/{n} as expected" and new["findings"] == []
    # On 0.3.34 exactly the project's crash witnesses change (agree on 0.3.36, the process dies on 0.3.34).
    assert old["verdict"] == "finding" and old["findings"] and old["counts"]["changed"] == len(old["findings"])
    assert all(Path(f["witness"]).name.startswith("agree-crash-") and f["klass"] == "crash" for f in old["findings"])
    assert rows["llama-cpp-python 0.3.36"]["dry_fingerprint"] != rows["llama-cpp-python 0.3.34"]["dry_fingerprint"]
    kinds = {(d["class"], d["case"]["penalty_last_n"], d["case"].get("n_ctx_train", 4096)) for d in m["differences"]}
    assert ("crash", -5, 4096) in kinds or any(k[0] == "crash" and k[1] < -1 for k in kinds)
    assert ("semantic-change", -1, 4096) in kinds
    assert all(d["shortest"] == "proven" for d in m["differences"])
    written = sorted((work / "corpus").glob("*.json"))
    assert len(written) == len(m["differences"])
    assert "| llama-cpp-python 0.3.34 | e3546c794 | 8 |" in (work / "m.md").read_text()


def test_project_witnesses_still_separate_their_subjects(two_subjects):
    """Every witness in the project corpus between 0.3.36 and 0.3.34 still shows its difference."""
    from dryz.corpus import PROJECT_DIR, entries, load_entry
    from dryz.differential import Judge
    _, _, new, old = two_subjects
    witnesses = [load_entry(p) for p in entries(PROJECT_DIR)]
    witnesses = [e for e in witnesses if "llama-cpp-python 0.3.34" in
                 {o["subject"] for o in e.data.get("separates", {}).get("others", [])}]
    assert witnesses, "the project corpus holds no witness of a difference with 0.3.34"
    a, b = Judge(f"libllama:{new}"), Judge(f"libllama:{old}")
    try:
        for e in witnesses:
            assert classify(a.run(e.case), b.run(e.case)) == e.data["separates"]["class"], e.path
    finally:
        a.close()
        b.close()
