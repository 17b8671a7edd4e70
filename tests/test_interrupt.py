"""Ctrl-C (SIGINT to the whole process group, as a terminal sends it) on real runs: exhaustive ends whatever the
worker count, writes a partial result marked interrupted (never certified), exits 130, and a resumed run reaches
exactly the counts of an uninterrupted one.

The runs are started with SIGINT and SIGTERM at their defaults, whatever the test runner inherited: a runner started
from a non-interactive shell's background job (`bash .ci/run &`) has SIGINT ignored, and a child would inherit
that and never see the Ctrl-C. Each run is interrupted once it has loaded the library (its work has begun), and
no bound is put on how fast it ends beyond a generous timeout: the latency is a figure for bench/, not a test."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import default_signals, session as _session

ENDS_WITHIN = 120  # seconds; a run that has not ended by then after SIGINT is a failure (and is killed)


class Run:
    """A dryz command in its own process group, SIGINT at its default disposition, its output read as it comes."""

    def __init__(self, *args, cwd, sigint=default_signals):
        self.p = subprocess.Popen([sys.executable, "-m", "dryz", *args], start_new_session=True, cwd=cwd,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  preexec_fn=sigint)
        self.pid = self.p.pid
        self.out: list[str] = []
        self.err: list[str] = []
        self.readers = [threading.Thread(target=lambda f=f, b=b: b.extend(f), daemon=True)
                        for f, b in ((self.p.stdout, self.out), (self.p.stderr, self.err))]
        for t in self.readers:
            t.start()

    def poll(self):
        return self.p.poll()

    def wait(self, timeout) -> tuple[int, str, str]:
        rc = self.p.wait(timeout=timeout)
        for t in self.readers:
            t.join(timeout=60)
        return rc, "".join(self.out), "".join(self.err)


def sigint_disposition(pid: int) -> str:
    """'ignored', 'caught' or 'default', from /proc/PID/status (SigIgn and SigCgt are masks, bit N-1 for signal N)."""
    fields = dict(ln.split(":\t", 1) for ln in open(f"/proc/{pid}/status").read().splitlines() if ":\t" in ln)
    bit = 1 << (signal.SIGINT - 1)
    if int(fields["SigIgn"], 16) & bit:
        return "ignored"
    return "caught" if int(fields["SigCgt"], 16) & bit else "default"


def has_mapped(pid: int, fragment: str) -> bool:
    try:
        return fragment in open(f"/proc/{pid}/maps").read()
    except OSError:
        return False


def interrupt_when(run: Run, ready, then: float = 1.0, limit: float = 300.0, disposition: str = "caught",
                   group: bool = True):
    """Wait until ready() (the run's work has begun), `then` seconds more, send SIGINT to the run's process group
    (group=False: to the dryz process alone); (exit code, stdout, stderr). A run that ends before it is
    interrupted, or does not end within ENDS_WITHIN seconds of the SIGINT, fails the test (and is killed)."""
    t0 = time.monotonic()
    while not ready():
        if run.poll() is not None:
            pytest.fail(f"the run ended before it could be interrupted: {run.wait(60)[2][-2000:]}")
        if time.monotonic() - t0 > limit:
            os.killpg(run.pid, signal.SIGKILL)
            pytest.fail(f"the run did not start its work within {limit:.0f} s")
        time.sleep(0.05)
    time.sleep(then)
    assert run.poll() is None, "the run ended before it could be interrupted"
    assert sigint_disposition(run.pid) == disposition  # caught: Python's handler, the run will see the Ctrl-C
    (os.killpg if group else os.kill)(run.pid, signal.SIGINT)
    try:
        return run.wait(timeout=ENDS_WITHIN)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        pytest.fail(f"the run did not end within {ENDS_WITHIN} s of SIGINT: {run.wait(60)[2][-2000:]}")


def interrupt_exhaustive(*args, cwd, then: float = 1.0):
    run = Run(*args, cwd=cwd)
    return interrupt_when(run, lambda: has_mapped(run.pid, "libllama"), then)


def test_children_get_sigint_at_its_default_even_when_the_runner_ignores_it(tmp_path):
    """The disposition the runs above get does not depend on the runner's: with SIGINT ignored here (as in a
    background job), a child started plainly inherits 'ignored', one started as Run starts them installs Python's
    handler."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code = "import sys; print('up', flush=True); sys.stdin.read()"
        kids = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True, **kw) for kw in ({}, {"preexec_fn": default_signals})]
        try:
            for q in kids:
                assert q.stdout.readline() == "up\n"  # running user code: start-up has set its handlers
            assert [sigint_disposition(q.pid) for q in kids] == ["ignored", "caught"]
        finally:
            for q in kids:
                q.communicate("", timeout=60)
    finally:
        signal.signal(signal.SIGINT, old)


@pytest.mark.parametrize("workers", ["1", "2", "8"])
def test_exhaustive_sigint_ends_with_a_partial_result(tmp_path, workers):
    rc, out, err = interrupt_exhaustive("exhaustive", "--all-alphabets", "-n", "13", "-j", workers,
                                        "--json", "p.json", "--no-progress", cwd=tmp_path)
    assert rc == 130, (rc, err[-2000:])
    assert "Traceback" not in err and "INTERRUPTED" in err and "--resume" in err
    d = json.loads((tmp_path / "p.json").read_text())
    assert d["verdict"] == "interrupted" and "checks" not in d
    assert d["interrupted"]["total_tasks"] > len(d["interrupted"]["done_tasks"])


def test_resumed_run_equals_an_uninterrupted_one(tmp_path):
    args = ["exhaustive", "--all-alphabets", "-n", "12", "-c", "base", "--no-progress"]
    rc, _, err = interrupt_exhaustive(*args, "--json", "q.json", cwd=tmp_path, then=1.5)
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
    # A partial result whose recorded example is not a case: one line that names the --resume file.
    part["configs"][0]["examples"] = [{"kind": "mismatch", "case": {"history": "zz"}}]
    (tmp_path / "broken.json").write_text(json.dumps(part))
    bad = subprocess.run([sys.executable, "-m", "dryz", *args, "--json", "x.json", "--resume", "broken.json"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith(
        "dryz: error: --resume: broken.json: not a dryz exhaustive result: field "
        "'configs[0].examples[0].case.history'") \
        and bad.stderr.count("\n") == 1, bad.stderr


@pytest.mark.parametrize("to", ["the group", "dryz alone"])
def test_fuzz_sigint_says_interrupted(tmp_path, to):
    """Ctrl-C in a terminal (SIGINT to the process group) and SIGINT to the dryz process alone (kill PID) stop the
    campaign alike: libFuzzer ends as on a Ctrl-C (its interrupt exit), the summary and --json say interrupted,
    exit 130, no process of the campaign left."""
    run = Run("fuzz", "--time", "600", "--jobs", "1", "--workdir", "w", "--json", "f.json", cwd=tmp_path)
    # interrupted once libFuzzer is running inputs (the campaign has printed a progress line: "[  6s] execs ...")
    rc, out, err = interrupt_when(run, lambda: any(ln.startswith("[") and "] execs" in ln for ln in run.out),
                                  group=(to == "the group"))
    assert rc == 130, (rc, err[-2000:])
    assert "INTERRUPTED" in err and "Traceback" not in err
    s = json.loads((tmp_path / "f.json").read_text())
    assert s["interrupted"] is True and s["libfuzzer_exit"] == 72 and s["execs"] > 0, s
    assert json.loads((tmp_path / "w" / "summary.json").read_text()) == s
    assert _gone(run.pid), _left(run.pid)


def test_fuzz_that_ignores_sigint_still_says_libfuzzer_was_interrupted(tmp_path):
    """dryz started as a background job (SIGINT ignored): a SIGINT to its group still stops libFuzzer, which
    installs its own handler; the campaign says so (INTERRUPTED, exit 130), never a clean short run."""
    run = Run("fuzz", "--time", "600", "--jobs", "1", "--workdir", "w", "--json", "f.json", cwd=tmp_path,
              sigint=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    rc, out, err = interrupt_when(run, lambda: any(ln.startswith("[") and "] execs" in ln for ln in run.out),
                                  disposition="ignored")
    assert rc == 130, (rc, err[-2000:])
    assert "INTERRUPTED" in err and json.loads((tmp_path / "f.json").read_text())["interrupted"] is True


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


def _forkserver_job_running(sid: int) -> bool:
    """The campaign's fork server (dryz.fuzz.forkserver) has forked a harness job."""
    for pid in _session(sid):
        try:
            if b"dryz.fuzz.forkserver" not in open(f"/proc/{pid}/cmdline", "rb").read():
                continue
            kids = set()
            for task in os.listdir(f"/proc/{pid}/task"):
                kids |= set(open(f"/proc/{pid}/task/{task}/children").read().split())
            if kids:
                return True
        except OSError:
            continue
    return False


@pytest.mark.parametrize("sig", ["SIGINT to the group", "SIGTERM to dryz"])
def test_fuzz_with_its_fork_server_leaves_no_process(tmp_path, sig):
    """A trace campaign whose jobs run as forks of the fork server, stopped once a job runs: by Ctrl-C (SIGINT
    to the process group) or by SIGTERM to the dryz process alone. dryz ends and no process of its session (libFuzzer,
    launchers, the server, its forked jobs) is left."""
    run = Run("fuzz", "--traces", "--time", "600", "--jobs", "1", "--workdir", "w", cwd=tmp_path)
    t0 = time.monotonic()
    while not _forkserver_job_running(run.pid):
        if run.poll() is not None:
            pytest.fail(f"the campaign ended before a job ran: {run.wait(60)[2][-2000:]}")
        if time.monotonic() - t0 > 300:
            os.killpg(run.pid, signal.SIGKILL)
            pytest.fail("no fork-server job within 300 s")
        time.sleep(0.1)
    time.sleep(1.0)
    if sig.startswith("SIGINT"):
        os.killpg(run.pid, signal.SIGINT)
    else:
        os.kill(run.pid, signal.SIGTERM)
    try:
        rc, _, err = run.wait(timeout=ENDS_WITHIN)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        pytest.fail(f"the campaign did not end within {ENDS_WITHIN} s of {sig}")
    assert rc == (130 if sig.startswith("SIGINT") else -signal.SIGTERM), (rc, err[-2000:])  # SIGTERM's own end
    deadline = time.monotonic() + ENDS_WITHIN
    while _session(run.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _session(run.pid)
    if left:
        os.killpg(run.pid, signal.SIGKILL)
    assert not left, [open(f"/proc/{p}/cmdline", "rb").read() for p in left if os.path.exists(f"/proc/{p}")]


def _gone(sid: int, within: float = ENDS_WITHIN) -> bool:
    """No live process of the session is left (waiting up to `within` seconds for the last to be reaped)."""
    deadline = time.monotonic() + within
    while _session(sid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _session(sid)


def _left(sid: int) -> list:
    left = [open(f"/proc/{p}/cmdline", "rb").read()[:120] for p in _session(sid) if os.path.exists(f"/proc/{p}")]
    if left:
        os.killpg(sid, signal.SIGKILL)
    return left


def _server_forks(sid: int) -> list[int]:
    """The fork server's children (the harness processes, each a fork of it) and what they started."""
    out = []
    for pid in _session(sid):
        try:
            if b"dryz.fuzz.forkserver" in open(f"/proc/{pid}/cmdline", "rb").read():
                for task in os.listdir(f"/proc/{pid}/task"):
                    out += [int(x) for x in open(f"/proc/{pid}/task/{task}/children").read().split()]
        except OSError:
            continue
    return out


@pytest.mark.parametrize("how", ["SIGINT to dryz alone", "SIGTERM to dryz"])
def test_a_campaign_whose_harnesses_cannot_stop_leaves_no_process(tmp_path, how):
    """Every harness process frozen (SIGSTOP: like the one found deadlocked in its own shutdown, it acts on no
    signal but SIGKILL), then the campaign stopped: what does not end within its grace is killed and reaped, dryz
    ends (a Ctrl-C with its summary and --json, saying what it killed), and no process of its session is left."""
    run = Run("fuzz", "--traces", "--time", "600", "--jobs", "1", "--workdir", "w", "--json", "f.json",
              cwd=tmp_path)
    t0 = time.monotonic()
    while not any(ln.startswith("[") and "] execs" in ln for ln in run.out):
        if run.poll() is not None or time.monotonic() - t0 > 300:
            os.killpg(run.pid, signal.SIGKILL)
            pytest.fail(f"no campaign running: {''.join(run.err)[-2000:]}")
        time.sleep(0.1)
    frozen = _server_forks(run.pid)
    assert frozen
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    os.kill(run.pid, signal.SIGINT if how.startswith("SIGINT") else signal.SIGTERM)
    try:
        rc, out, err = run.wait(timeout=ENDS_WITHIN)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        pytest.fail(f"the campaign did not end within {ENDS_WITHIN} s of {how}")
    assert _gone(run.pid), _left(run.pid)
    if how.startswith("SIGINT"):
        assert rc == 130 and json.loads((tmp_path / "f.json").read_text())["interrupted"] is True, err[-2000:]
        assert "SIGKILL" in out, out[-2000:]
    else:
        assert rc == -signal.SIGTERM, (rc, err[-2000:])


def _under(folder) -> set[int]:
    """Every live process whose working directory lies in `folder` (dryz children run in their work folders, each
    in a session of its own)."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.readlink(f"/proc/{d}/cwd").startswith(str(folder)) and int(d) != os.getpid():
                    out.add(int(d))
            except OSError:
                continue
    return out


def test_conformance_sigint_writes_the_rows_so_far_and_leaves_no_process(tmp_path):
    """Ctrl-C while a row's fuzz campaign runs (a dryz child in a session of its own): the campaign and what it
    started are stopped, the result is written with the row's finished campaigns and says interrupted, exit 130."""
    run = Run("conformance", "--row", "libllama:", "--row", "llama-cpp-python:", "--time-per-subject", "300",
              "--workdir", "w", "--json", "r.json", cwd=tmp_path)
    rc, out, err = interrupt_when(run, lambda: (tmp_path / "w" / "libllama" / "fuzz.out").exists(), then=3.0)
    assert rc == 130, (rc, err[-2000:])
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["interrupted"] is True
    first, second = r["rows"]
    assert first["interrupted"] and list(first["campaigns"]) == ["certificate", "restarts"]
    assert first["campaigns"]["certificate"]["verdict"] == "pass"
    assert first["error"] == "interrupted (Ctrl-C) after certificate, restarts"
    assert second["error"] == "not run (interrupted)"
    assert "interrupted (Ctrl-C) after certificate, restarts" in out
    deadline = time.monotonic() + 30
    while _under(tmp_path / "w") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _under(tmp_path / "w")
