"""`dryz export --as issue` (dryz.issue): another engine's difference as its maintainers' bug report, and a
reproduction script that runs it with the engine alone. The reports checked in under docs/engines/*/issues/ are
generated, each with its script inside it (the script files `--reports` also writes beside them
are not checked in: they repeat one frame); every report's script whose engine is installed here is run with the
engine alone (no dryz on its imports) and must show the difference it reports (DRYZ_REQUIRE_ENGINES=1, as in CI: an
engine that is missing fails)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env
from dryz.issue import report, scripts
from dryz.issue.witness import IssueError, from_entry

ENGINES = ROOT / "docs" / "engines"
REQUIRE = os.environ.get("DRYZ_REQUIRE_ENGINES") == "1"
IK = ROOT / "corpus" / "engines" / "ik_llama"
# a script's folder -> the package its engine needs here
NEEDS = {"exllamav2": "exllamav2", "aphrodite": "torch", "mistralrs": "mistralrs", "ik_llama": "ik_llama_cpp"}


def dryz(*args, cwd=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "dryz", *args], capture_output=True, text=True, env=clean_env(),
                          cwd=cwd, timeout=timeout)


def _imports(text: str) -> set:
    names = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add((node.module or "").split(".")[0])
    return names


def test_an_entry_s_report_names_the_behaviour_the_numbers_and_the_cause():
    """The ik_llama.cpp witness `aa`, penalty_last_n -1 (recorded before entries kept the cause: fitted alone)."""
    w = from_entry(str(IK / "mismatch-79eb64be83.json"))
    assert (w.cause, w.kind, w.fitted_alone) == ("window-negative:unlimited", "observed", True)
    text = scripts.script(w, report.title(w))
    assert "dryz" not in _imports(text) and {"ctypes", "gguf"} <= _imports(text)
    assert "LLAMA_CPP = ('logits', [0.0])" in text and "REPORTED = ('logits', [-2.0])" in text
    md = report.markdown(w, text, "x.py")
    assert md.startswith("# ik_llama.cpp 55d3c05bf7b3: a negative penalty_last_n is the whole history\n")
    assert "| `a` | 0 | 0 | -2 |" in md and "(fitted on this one witness)" in md
    assert "```python\n" + text.split("\n")[0] in md


def test_a_request_sequence_witness_reads_its_differing_request_after_the_earlier_ones():
    """mistral.rs's prefix cache: `a | aa` on one instance; request 2 is read back (llama.cpp -1, the cached
    Runner 0), and the script asks a fresh Runner with prefix_cache_n 16 that answered `a` first."""
    w = from_entry(str(ROOT / "docs/results/conformance/engine_mistralrs-cached/witnesses/mismatch-requests-9332aa771b.json"))
    assert (w.cause, w.kind, w.index, [e.symbols for e in w.earlier], w.case.symbols) == \
        ("prefix-cache:suffix", "observed", 1, ["a"], "aa")
    assert scripts.llama_cpp(w) == ("logits", [-1.0]) and scripts.recorded(w) == ("logits", [0.0])
    text = scripts.script(w, report.title(w))
    assert "PREFIX_CACHE_N = 16" in text and "EARLIER = [dict(history=[0], " in text
    assert scripts.input_line(w).startswith("after 'a' on the same instance: history 'aa', ")
    assert "Requests sent in turn to one fresh instance of mistral.rs-cached: `a | aa`. Request 2 is the one " \
        "read back" in report.markdown(w, text, "x.py")
    w.identity = dict(w.identity, engine="exllamav2")
    with pytest.raises(IssueError, match="requests in turn to one instance: the exllamav2 script sends one"):
        scripts.script(w, "t")


def test_a_trace_witness_is_a_class_cause_with_its_calls():
    w = from_entry(str(IK / "crash-trace-0b15f57963.json"))
    assert (w.cause, w.kind) == ("crash", "class")
    text = scripts.script(w, report.title(w))
    assert "EVENTS = [['clone'], ['apply', None]]" in text and "REPORTED = ('died', 'SIGSEGV')" in text
    assert report.title(w) == "ik_llama.cpp 55d3c05bf7b3: the process dies on trace C A"


def test_a_llama_cpp_entry_is_refused_with_the_forms_that_take_it():
    entry = sorted((ROOT / "corpus" / "findings").glob("*.json"))[0]
    with pytest.raises(IssueError, match="an issue report is for another engine's DRY"):
        from_entry(str(entry))
    p = dryz("export", str(entry), "--as", "issue")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--as test-sampling, pytest or c" in p.stderr


@pytest.mark.parametrize("args,msg", [
    (["export", "--as", "pytest"], "--as pytest: give the ENTRY to export"),
    (["export", str(IK / "crash-5c6638fe24.json"), "--as", "c", "--reports", "r"], "--reports: only with --as issue"),
    (["export", "--as", "issue"], "give --reports DIR"),
    (["export", "--as", "issue", "--reports", "r"], "the selected subject is libllama:"),
    (["export", str(IK / "crash-5c6638fe24.json"), "--as", "issue", "--workdir", "w"], "--workdir: only without ENTRY"),
])
def test_bad_combinations_are_one_line(args, msg, tmp_path):
    p = dryz(*args, cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.startswith("dryz: error: ") and p.stderr.count("\n") == 1 and msg in p.stderr, p.stderr
    assert not any(tmp_path.iterdir())


def test_a_properties_result_gives_one_report_per_cause(tmp_path):
    """--result: a dryz properties result's causes, one report each (a cause several cells name, once)."""
    probe = {"history": [0, 0], "alphabet": 1, "penalty_last_n": -1, "allowed_length": 0}
    cause = {"name": "window-negative:unlimited", "kind": "observed", "probes": 3,
             "meaning": "a negative penalty_last_n is the whole history",
             "witness": {"class": "mismatch", "probe": probe, "subject": {"logits": [-2.0]}}}
    ident = {"kind": "ik-llama", "spec": "ik-llama:", "engine": "ik_llama.cpp", "engine_version": "55d3c05bf7b3 (x)",
             "init_dry_abi": 7, "sources": {"window-negative:unlimited": "src/llama-sampling.cpp:819 (x): -1"}}
    result = {"tool": "dryz properties", "subject": ident, "fit": {"models": ["window-negative:unlimited"]},
              "cells": {"window-negative": {"title": "window -1", "causes": [cause]},
                        "window-cap": {"title": "window cap", "causes": [dict(cause, probes=2)]}}}
    f = tmp_path / "props.json"
    f.write_text(json.dumps(result))
    p = dryz("--subject", "ik-llama:", "export", "--as", "issue", "--result", str(f), "--reports", "out",
             cwd=tmp_path, timeout=600)
    if "ik-llama: needs" in p.stderr:
        pytest.skip("ik-llama-cpp-python is not installed")
    assert p.returncode == 0, p.stderr
    assert sorted(x.name for x in (tmp_path / "out").iterdir()) == [
        "ik_llama.cpp-window-negative-unlimited.case.json", "ik_llama.cpp-window-negative-unlimited.md",
        "ik_llama.cpp-window-negative-unlimited.py"]
    md = (tmp_path / "out" / "ik_llama.cpp-window-negative-unlimited.md").read_text()
    assert "(5 of its probes need `window-negative:unlimited`)" in md and "`src/llama-sampling.cpp:819 (x): -1`" in md
    assert "Its output, run by `dryz export`" in md and "DIFFERS: ik_llama.cpp differs from llama.cpp, as reported" in md


SCRIPT = re.compile(r"^## Reproduce with .*?^```python\n(.*?)^```$", re.M | re.S)


def _reports():
    return sorted(ENGINES.glob("*/issues/*.md"))


def test_every_engine_has_its_reports_checked_in():
    assert {md.parent.parent.name for md in _reports()} == set(NEEDS)
    for md in _reports():
        assert SCRIPT.search(md.read_text()), md
        assert md.with_name(md.stem + ".case.json").is_file(), md


@pytest.mark.parametrize("md", _reports(), ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
def test_each_report_s_script_shows_its_difference_with_the_engine_alone(md, tmp_path):
    """The report's script imports no dryz; run with its engine alone (the environment the engine needs here:
    Aphrodite's wheel from dryz's cache), it prints the difference it reports and exits 1."""
    engine = md.parent.parent.name
    text = SCRIPT.search(md.read_text())[1]
    needs = [NEEDS[engine]] + (["nvidia"] if "COMPILED = True" in text else [])  # the op's CUDA runtime library
    missing = [n for n in needs if importlib.util.find_spec(n) is None]
    if missing:
        if REQUIRE:
            pytest.fail(f"{', '.join(missing)} not installed (DRYZ_REQUIRE_ENGINES=1)")
        pytest.skip(f"{', '.join(missing)} not installed")
    assert "dryz" not in _imports(text)
    script = tmp_path / md.with_suffix(".py").name
    script.write_text(text)
    env = clean_env()
    if engine == "aphrodite":  # the wheel (and for the compiled op, its library and runtime) as dryz has them
        from dryz.issue.scripts import aphrodite
        from dryz.issue.witness import Witness
        env.update(aphrodite.environment(Witness("x", "observed", {"engine": "aphrodite" if
                                                                    "COMPILED = True" in text else "x"})))
    p = subprocess.run([sys.executable, "-I", script.name], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=600)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "DIFFERS: " in p.stdout and ", as reported" in p.stdout, p.stdout + p.stderr
