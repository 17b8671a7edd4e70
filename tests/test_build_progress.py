"""Long work announces itself: a build says what it builds and how long it is expected to take here, shows the
compiler's step counter as it goes, keeps its time for the next estimate; a command that needs a build it lacks
says so before it starts, and --no-build refuses instead (one line, exit 2, nothing built)."""

from __future__ import annotations

import json
import os
import sys

from conftest import ROOT, dryz

from dryz.subject import build as b


def test_the_compilers_step_counter_is_read_as_it_comes(tmp_path):
    log = tmp_path / "build.log"
    steps = []
    script = "printf '[1/3] Building a\\n[2/3] Building b\\nwarning: x\\n[3/3] Linking\\n[ 50%%] make\\n'"
    b._run(["sh", "-c", script], log, "the build", step=lambda n, m: steps.append((n, m)))
    assert steps == [(1, 3), (2, 3), (3, 3), (50, 100)]
    assert "warning: x" in log.read_text() and "[3/3] Linking" in log.read_text()


def test_a_failing_build_step_is_still_an_error_with_its_log(tmp_path):
    log = tmp_path / "build.log"
    try:
        b._run(["sh", "-c", "echo '[1/2] cc'; echo 'error: boom'; exit 3"], log, "the build", step=lambda n, m: None)
    except b.BuildError as e:
        assert "the build failed (exit 3)" in str(e) and "error: boom" in str(e)
    else:
        raise AssertionError("no BuildError")


def test_the_expected_time_is_this_machines_last_build_else_the_record(tmp_path, monkeypatch):
    monkeypatch.setenv("DRYZ_CACHE", str(tmp_path))
    rec = json.loads((ROOT / "bench" / "records" / "builds.json").read_text())["figures"]
    assert b.FRESH_CORE_SECONDS == {"libllama": rec["libllama: fresh build core s"],
                                    "llama-server": rec["llama-server: fresh build core s"]}
    assert b.expected("libllama", True, 2) == (rec["libllama: fresh build core s"] / 2,
                                               "the project's fresh build, bench/records/builds.json")
    secs, why = b.expected("libllama", False, 2)
    assert secs is None and "only what changed" in why
    assert b.expected("sanitized libllama", True, 2)[0] is None
    b._remember({"kind": "libllama", "fresh": True, "steps": 78, "jobs": 4, "seconds": 100.0})
    assert b.expected("libllama", True, 2) == (200.0, "this machine's last fresh libllama build took 2 min with 4 "
                                                      "jobs")
    assert json.loads((tmp_path / b.HISTORY).read_text())[-1]["seconds"] == 100.0


def test_a_missing_build_is_described_before_it_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("DRYZ_CACHE", str(tmp_path))
    line = b.describe("0.3.34", jobs=2)
    assert line.startswith("libllama of llama-cpp-python 0.3.34, not in the cache: expected about ")
    assert line.endswith(f"with 2 jobs on {os.cpu_count()} cores (the project's fresh build, "
                         "bench/records/builds.json)")
    said = []
    b.refuse_or_announce([line, None], said.append)
    assert said == [f"this run builds {line}"]


def test_no_build_refuses_a_build_the_cache_lacks(tmp_path):
    """--no-build (or DRYZ_NO_BUILD=1): one line naming what is missing and how long it would take, exit 2, nothing
    fetched or built; the same for a command that needs one (conformance's llama-server row) before any work."""
    cache = tmp_path / "cache"
    cache.mkdir()
    p = dryz("--no-build", "subject", "build", "--release", "0.3.34", env={"DRYZ_CACHE": str(cache)})
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("dryz: error: subject build: --no-build: this needs libllama of llama-cpp-python "
                               "0.3.34, not in the cache: expected about ")
    assert not (cache / "work").exists() and not (cache / "sdists").exists()
    p = dryz("conformance", "--row", "server", "--workdir", str(tmp_path / "w"), cwd=tmp_path,
             env={"DRYZ_CACHE": str(cache), "DRYZ_NO_BUILD": "1"})
    assert p.returncode == 2 and "--no-build: this needs llama-server of llama-cpp-python 0.3.36" in p.stderr, \
        p.stderr
    assert not (tmp_path / "w").exists()


def test_a_build_announces_itself_and_shows_its_steps(tmp_path, monkeypatch):
    """A build (here its steps stand in for cmake's, from a fake cmake on PATH): the line saying what is built,
    with how many jobs on how many cores and the expected time, then the step counter as progress."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "cmake").write_text("#!/bin/sh\nfor i in 1 2 3 4; do echo \"[$i/4] step $i\"; sleep 0.4; done\n")
    (fake / "cmake").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{sys.exec_prefix}/bin:/usr/bin:/bin")
    shown = []
    monkeypatch.setattr(b, "Progress", lambda total, label: _Recorder(total, label, shown))
    bar = b._StepBar("building llama")
    b._run(["cmake", "--build", "x"], tmp_path / "log", "the build", step=bar)
    bar.close()
    assert shown == [("building llama: steps", 4, [1, 1, 1, 1], True)]


class _Recorder:
    def __init__(self, total, label, shown):
        self.total, self.label, self.steps, self.shown = total, label, [], shown
        shown.append(None)
        self.i = len(shown) - 1

    def __call__(self, n):
        self.steps.append(n)

    def close(self):
        self.shown[self.i] = (self.label, self.total, self.steps, True)
