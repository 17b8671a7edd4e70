"""`--subject cmd:"..."`: an engine through a dryz.adapter/1 JSON-lines adapter. The shipped example adapter
(llama-cpp-python's binding) certifies; a planted bug in it is found, minimized and replayed; a declared
deviation is listed as its own class; faults of the adapter are one line and exit 2 (it cannot be driven) or a
crash finding (it failed on a case), never a traceback or a hang."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import ROOT, dryz

EXAMPLE = ROOT / "examples" / "adapters" / "llama_cpp_python_adapter.py"
FAULTY = Path(__file__).parent / "adapters" / "faulty.py"


def adapter(*args) -> str:
    return "cmd:" + " ".join([sys.executable, str(EXAMPLE), *args])


def faulty(*args) -> str:
    return "cmd:" + " ".join([sys.executable, str(FAULTY), *args])


def case_file(tmp_path, symbols="abcab", **kw) -> Path:
    from dryz.case import Case
    from dryz.symbols import from_symbols
    p = tmp_path / "case.json"
    p.write_text(Case(history=tuple(from_symbols(symbols)), alphabet=3, penalty_last_n=kw.pop("penalty_last_n", 64),
                      **kw).dumps())
    return p


def test_the_example_adapter_certifies_the_seed_space(tmp_path):
    p = dryz("--subject", adapter(), "exhaustive", "--no-progress", "-n", "7", "--json", str(tmp_path / "c.json"))
    assert p.returncode == 0 and "CERTIFIED" in p.stdout, p.stdout + p.stderr
    r = json.loads((tmp_path / "c.json").read_text())
    assert r["subject"]["kind"] == "cmd" and r["subject"]["engine"] == "llama-cpp-python"
    assert r["totals"]["cases"] == 3 * sum(3 ** n * 3 for n in range(1, 8))


def test_a_planted_bug_is_found_minimized_and_replayed(tmp_path):
    bad = adapter("--drop-breakers")
    p = dryz("--subject", bad, "exhaustive", "--no-progress", "-n", "5", "-c", "breaker",
             "--json", str(tmp_path / "c.json"))
    assert p.returncode == 1 and "MISMATCH" in p.stdout, p.stdout + p.stderr
    found = json.loads((tmp_path / "c.json").read_text())["configs"][0]["examples"][0]["case"]
    (tmp_path / "found.json").write_text(json.dumps(found))
    m = dryz("--subject", bad, "minimize", str(tmp_path / "found.json"), "--corpus", str(tmp_path / "corpus"))
    assert m.returncode == 0 and "shortest: proven" in m.stdout, m.stdout + m.stderr
    [entry] = (tmp_path / "corpus").glob("*.json")
    e = json.loads(entry.read_text())
    assert e["expect"] == "mismatch" and e["history_symbols"] == "aa" and e["case"]["breakers"] == ["a"]
    assert e["subject"]["kind"] == "cmd" and e["subject"]["spec"] == bad
    assert dryz("--subject", bad, "replay", str(tmp_path / "corpus")).returncode == 0
    fixed = dryz("--subject", adapter(), "replay", str(tmp_path / "corpus"))
    assert fixed.returncode == 1 and "now agree" in fixed.stdout


def test_a_declared_deviation_is_its_own_class(tmp_path):
    f = case_file(tmp_path, "abcab", breakers=("ab",))  # 'ab' is two tokens: a multi-token breaker
    undeclared = dryz("--subject", adapter("--single-token-breakers"), "check", str(f))
    assert undeclared.returncode == 1 and json.loads(undeclared.stdout)["verdict"]["class"] == "mismatch-multi-token"
    cited = "single-token-breakers=README.md:12 'breakers are token ids'"
    declared = dryz("--subject", adapter("--single-token-breakers", "--declare", cited), "check", str(f))
    v = json.loads(declared.stdout)["verdict"]
    assert declared.returncode == 0 and v["class"] == "declared-single-token-breakers", declared.stdout
    # a declared deviation does not excuse a difference it does not explain
    g = case_file(tmp_path, "cc", breakers=("c",))
    other = dryz("--subject", adapter("--drop-breakers", "--declare", cited), "check", str(g))
    assert other.returncode == 1 and json.loads(other.stdout)["verdict"]["class"] == "mismatch"
    unknown = dryz("--subject", adapter("--declare", "fast-mode=docs"), "check", str(g))
    assert unknown.returncode == 2 and "unknown deviation 'fast-mode'" in unknown.stderr
    # a declaration that does not cite the engine's own documentation is refused: one line, exit 2
    bare = dryz("--subject", adapter("--single-token-breakers", "--declare", "single-token-breakers"), "check", str(f))
    assert bare.returncode == 2 and bare.stderr.count("\n") == 1 and "without citing" in bare.stderr, bare.stderr


@pytest.mark.parametrize("spec,fragment", [
    (faulty("garbage-hello"), "handshake is not JSON"),
    (faulty("bad-schema-hello"), "does not name the schema"),
    (faulty("exit-hello"), "did not answer the handshake: it exited (exit 3) (its last words: cannot start my "
                           "engine)"),
    ("cmd:/nonexistent/engine --flag", "cannot start '/nonexistent/engine'"),
    ("cmd:", "needs the adapter's command"),
])
def test_an_adapter_that_cannot_be_driven_is_one_line(tmp_path, spec, fragment):
    p = dryz("--subject", spec, "check", str(case_file(tmp_path)), timeout=120)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and fragment in lines[0], p.stderr


@pytest.mark.parametrize("mode,fragment", [
    ("exit-after", "exited (exit 7)"), ("hang-after", "gave no answer within 2 s"), ("garbage-after", "not JSON"),
])
def test_an_adapter_that_fails_on_a_case_is_a_crash_finding(tmp_path, mode, fragment):
    p = dryz("--subject", faulty(mode, "0"), "check", str(case_file(tmp_path, "ab")), timeout=120,
             env={"DRYZ_ADAPTER_TIMEOUT": "2"})
    v = json.loads(p.stdout)["verdict"]
    assert p.returncode == 1 and v["class"] == "crash" and fragment in v["detail"], p.stdout + p.stderr


def test_a_crash_mid_walk_is_a_finding_and_the_walk_goes_on(tmp_path):
    """The adapter dies on its 11th case: that slice is a crash (exit 1), the adapter is started again and the
    other configurations are still judged."""
    p = dryz("--subject", faulty("exit-after", "10"), "exhaustive", "--no-progress", "-n", "3",
             "--json", str(tmp_path / "c.json"), timeout=300)
    assert p.returncode == 1 and "CRASH" in p.stdout and "crash     (" in p.stdout, p.stdout + p.stderr
    r = json.loads((tmp_path / "c.json").read_text())
    assert r["verdict"] == "crash" and sum(len(c.get("crashes", [])) for c in r["configs"]) >= 1


def test_a_fuzz_campaign_through_the_adapter_finds_the_planted_bug(tmp_path):
    """libFuzzer jobs open the adapter from the spec they are passed; every finding re-checked in a clean process
    reproduces (on a busy machine the re-checks' share of --time can end first: the rest are kept, labelled)."""
    p = dryz("--subject", adapter("--drop-breakers"), "fuzz", "--time", "20", "--jobs", "1", "--workdir",
             str(tmp_path / "w"), "--json", str(tmp_path / "s.json"), timeout=600)
    s = json.loads((tmp_path / "s.json").read_text())
    assert p.returncode == 1 and s["findings"], p.stdout[-2000:] + p.stderr[-2000:]
    checked = [f for f in s["findings"] if f["reproduces"] is not None]
    assert checked and all(f["reproduces"] and f["klass"].startswith("mismatch") for f in checked), s["findings"]
    assert all(f["klass"] == "not re-checked (--time spent)" for f in s["findings"] if f["reproduces"] is None)
    assert s["subject"]["kind"] == "cmd"
