"""Ctrl-C (SIGINT to the whole process group, as a terminal sends it) on real runs: exhaustive ends within a
second whatever the worker count, writes a partial result marked interrupted (never certified), exits 130, and
a resumed run reaches exactly the counts of an uninterrupted one."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest


def interrupt_after(seconds, *args, cwd):
    p = subprocess.Popen([sys.executable, "-m", "dryz", *args], start_new_session=True, cwd=cwd,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(seconds)
    assert p.poll() is None, "the run ended before it could be interrupted"
    t = time.monotonic()
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=30)
    return p.returncode, time.monotonic() - t, out, err


@pytest.mark.parametrize("workers", ["1", "2", "8"])
def test_exhaustive_sigint_ends_at_once_with_a_partial_result(tmp_path, workers):
    rc, took, out, err = interrupt_after(3, "exhaustive", "--all-alphabets", "-n", "13", "-j", workers,
                                         "--json", "p.json", "--no-progress", cwd=tmp_path)
    assert rc == 130 and took < 1.0, (rc, took, err)
    assert "Traceback" not in err and "INTERRUPTED" in err and "--resume" in err
    d = json.loads((tmp_path / "p.json").read_text())
    assert d["verdict"] == "interrupted" and "checks" not in d
    assert d["interrupted"]["total_tasks"] > len(d["interrupted"]["done_tasks"])


def test_resumed_run_equals_an_uninterrupted_one(tmp_path):
    args = ["exhaustive", "--all-alphabets", "-n", "12", "-c", "base", "--no-progress"]
    rc, _, _, err = interrupt_after(2.5, *args, "--json", "q.json", cwd=tmp_path)
    assert rc == 130, err
    part = json.loads((tmp_path / "q.json").read_text())
    assert part["verdict"] == "interrupted"
    r = subprocess.run([sys.executable, "-m", "dryz", *args, "--json", "q.json", "--resume", "q.json"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "CERTIFIED" in r.stdout, r.stderr
    f = subprocess.run([sys.executable, "-m", "dryz", *args, "--json", "full.json"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert f.returncode == 0
    a, b = (json.loads((tmp_path / n).read_text()) for n in ("q.json", "full.json"))
    strip = lambda c: {k: v for k, v in c.items() if k not in ("seconds", "examples")}  # noqa: E731
    assert [strip(c) for c in a["configs"]] == [strip(c) for c in b["configs"]]
    assert a["resumed"]["finished_before"] == len(part["interrupted"]["done_tasks"])
    # Resuming a finished certificate, or with another space, is refused in one line.
    bad = subprocess.run([sys.executable, "-m", "dryz", *args, "--json", "x.json", "--resume", "full.json"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "not an interrupted run" in bad.stderr and bad.stderr.count("\n") == 1


def test_fuzz_sigint_says_interrupted(tmp_path):
    rc, took, out, err = interrupt_after(8, "fuzz", "--time", "600", "--jobs", "1", "--workdir", "w",
                                         "--json", "f.json", cwd=tmp_path)
    assert rc == 130 and took < 15, (rc, took, err[-2000:])
    assert "INTERRUPTED" in err and "Traceback" not in err
    assert json.loads((tmp_path / "f.json").read_text())["interrupted"] is True


def test_progress_off_a_terminal_is_one_line_per_interval_with_an_eta():
    import io

    from dryz.output import Progress
    buf = io.StringIO()
    p = Progress(1000, "histories", stream=buf, interval=0.0)
    p.t0 -= 2.0  # as if the run had been going for 2 s
    p(250)
    line = buf.getvalue()
    assert line.startswith("histories: 250/1,000 (25.0%)") and "ETA" in line and line.endswith("\n")
    os.environ["DRYZ_QUIET"] = "1"
    try:
        q = Progress(1000, "histories", stream=io.StringIO(), interval=0.0)
        q.t0 -= 2.0
        q(250)
        assert q.stream.getvalue() == ""
    finally:
        del os.environ["DRYZ_QUIET"]
