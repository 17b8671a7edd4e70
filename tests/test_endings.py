"""Every command ends the same way: its counts by class, what it wrote where (or that it wrote nothing), and the
next command to run, each with what it is for; and no reason it gives is a line the subject wrote."""

from __future__ import annotations

import json

from conftest import dryz

from dryz.children import Finished
from dryz.gate.result import Finding, GateResult, ModeResult
from dryz.gate.summary import markdown
from dryz.render import dryz_on, ending


def test_ending_lines():
    assert ending({"agree": 1200, "mismatch": 3, "crash": 0}, ["w/summary.json (the summary)", "w/corpus/ (9)"],
                  [("dryz minimize w/a/crash-1 --corpus findings", "shrink it"), ("dryz report w", "one page")],
                  unit="40 histories").splitlines() == [
        "classes   40 histories: agree 1,200  mismatch 3",
        "written   w/summary.json (the summary)",
        "          w/corpus/ (9)",
        "next      dryz minimize w/a/crash-1 --corpus findings  # shrink it",
        "          dryz report w                                # one page"]
    assert ending(None, [], []) == "written   nothing"
    long = "dryz " + "x" * 80
    assert ending(None, [], [(long, "why")]).splitlines()[1:] == [f"next      {long}", "           # why"]


def test_the_next_command_names_the_selected_subject():
    assert dryz_on("libllama:") == "dryz"
    assert dryz_on("libllama:/b/libllama.so", "off-by-one") == "DRYZ_FAULT=off-by-one dryz --lib /b/libllama.so"
    assert dryz_on("cmd:python my adapter.py") == "dryz --subject 'cmd:python my adapter.py'"


def test_exhaustive_ends_with_its_classes_what_it_wrote_and_the_next_command(tmp_path):
    p = dryz("exhaustive", "-n", "3", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-4:] == [
        "classes   117 histories in 3 configurations: agree 117",
        "written   nothing",
        "next      dryz fuzz --time 600                           # beyond the space: long histories, random "
        "windows, parameters and arrays",
        "          dryz exhaustive -n 3 --json results/main.json  # the same run, its certificate kept as JSON "
        "(dryz report makes its page)"]
    assert not (tmp_path / "results").exists()
    p = dryz("exhaustive", "-n", "3", "--json", "results/main.json", cwd=tmp_path)
    assert p.stdout.splitlines()[-3:] == [
        "written   results/main.json (the certificate)",
        "next      dryz fuzz --time 600                                   # beyond the space: long histories, "
        "random windows, parameters and arrays",
        "          dryz report results/main.json --html certificate.html  # the certificate on one page"]
    assert json.loads((tmp_path / "results" / "main.json").read_text())["verdict"] == "certified"


def test_restarts_ends_with_its_classes(tmp_path):
    p = dryz("restarts", "-n", "4", cwd=tmp_path)
    assert p.returncode == 0, p.stderr  # documented-contained-restart: documented, not a finding
    assert p.stdout.splitlines()[-4] == ("classes   1,560 histories in 13 configurations: agree 1,558  "
                                         "documented-contained-restart 2")


def test_a_childs_reason_is_never_the_subjects_stderr():
    """A child that died of the library's glibc abort: the reason is how the dryz process ended, not glibc's
    message; a dryz line among the subject's is the reason."""
    glibc = "histories: 10%\ncorrupted size vs. prev_size while consolidating\n"
    assert Finished(-6, False, 1.0, stderr=glibc).last_error() == "the dryz process died of SIGABRT"
    assert Finished(3, False, 1.0, stderr=glibc).last_error() == "exit 3, without a message from dryz"
    mixed = "dryz: error: subject: no such file\n==1== ERROR: AddressSanitizer: heap-buffer-overflow\n"
    assert Finished(2, False, 1.0, stderr=mixed).last_error() == "dryz: error: subject: no such file"


def _mode(name, klass, witness):
    return ModeResult(name, "finding", 1, 1.0, None, klass, [], findings=[Finding(name, klass, "d", witness,
                                                                                  minimized=witness)])


def test_the_gate_says_same_witness_only_for_the_same_class():
    res = GateResult("fail", 1, 60, 2, 60.0, [_mode("parameters", "mismatch", "w/m.json"),
                                              _mode("restarts", "mismatch-multi-token", "w/m.json"),
                                              _mode("window-caps", "mismatch", "w/m.json")])
    text = markdown(res)
    assert "- **window-caps** `mismatch`: the same witness as **parameters**" in text
    assert "- **restarts** `mismatch-multi-token`: d (shortest: ?; `m.json`)" in text
    assert "the same witness as **parameters**" not in text.split("**restarts**")[1].split("\n")[0]
