"""The fuzz campaign, end to end: the planted fault is found, minimized and stored; the real subject
yields nothing; with native coverage the instrumented libllama's counters are seen."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dryz.corpus import load_entry
from dryz.shrink import signature_in


from conftest import default_signals, dryz


def test_fault_injected_campaign_finds_minimizes_and_stores(tmp_path, monkeypatch, lib):
    p = dryz("fuzz", "--time", "25", "--workdir", str(tmp_path / "w"), "--fault", "off-by-one",
             "--json", str(tmp_path / "s.json"))
    assert p.returncode == 1, p.stdout + p.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["execs"] > 0 and summary["findings"], summary
    # progress lines give exec/s by dryz's clock (libFuzzer's fork mode prints 0 while its jobs crash)
    rates = [(int(m[1].replace(",", "")), int(m[2].replace(",", "")))
             for m in re.finditer(r"^\[ *\d+s\] execs ([\d,]+)  exec/s ([\d,]+)", p.stdout, re.M)]
    assert rates and all(r > 0 for (e, r), (e0, _) in zip(rates[1:], rates) if e > e0), rates
    # the ending: at most 10 finding lines, the classes, what was written, the next commands
    lines = p.stdout.splitlines()
    assert sum(ln.startswith("finding: ") for ln in lines) == min(10, len(summary["findings"]))
    classes = {}
    for f in summary["findings"]:
        classes[f["klass"]] = classes.get(f["klass"], 0) + 1
    [cl] = [ln for ln in lines if ln.startswith("classes   ")]
    assert cl == "classes   " + "  ".join(f"{k} {n:,}" for k, n in classes.items())
    assert f"written   {tmp_path / 'w' / 'summary.json'} (the summary)" in lines
    first = next(f for f in summary["findings"] if f["reproduces"])
    [nxt] = [ln for ln in lines if ln.startswith("next      ")]
    assert nxt.split("  #")[0].split() == ["next", "DRYZ_FAULT=off-by-one", "dryz", "minimize", first["file"],
                                           "--corpus", "findings"]
    crash = Path(summary["findings"][0]["file"])
    assert crash.name.startswith("crash-") and crash.exists()
    # minimize the crash file (decoded with the harness's decoder) into a scratch corpus
    m = dryz("minimize", str(crash), "--corpus", str(tmp_path / "corpus"), env={"DRYZ_FAULT": "off-by-one"})
    assert m.returncode == 0, m.stdout + m.stderr
    [path] = list((tmp_path / "corpus").glob("*.json"))
    entry = load_entry(path)
    monkeypatch.setenv("DRYZ_FAULT", "off-by-one")
    signature_in_process = signature_in(lib)
    target = signature_in_process(entry.case)
    assert target[0].startswith("mismatch")           # still fails the same way
    h = entry.case.history
    for i in range(len(h)):                           # 1-minimal
        assert signature_in_process(entry.case.with_history(h[:i] + h[i + 1:])) != target
    # proven shortest whenever the shorter-history search fits its budget ("when short enough")
    from dryz.shrink import PROOF_BUDGET, PROOF_MAX_LENGTH, count_histories
    c = entry.case
    symmetric = not c.breakers and c.candidates is None
    searchable = len(h) <= PROOF_MAX_LENGTH and \
        sum(count_histories(c.alphabet, m, symmetric) for m in range(len(h))) <= PROOF_BUDGET
    assert entry.data["shortest"] == ("proven" if searchable else "1-minimal"), entry.data


def test_real_campaign_finds_nothing(tmp_path):
    p = dryz("fuzz", "--time", "20", "--workdir", str(tmp_path / "w"), "--json", str(tmp_path / "s.json"))
    assert p.returncode == 0, p.stdout + p.stderr
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["execs"] > 500 and s["findings"] == [] and s["cov"] > 100


def test_relative_workdir(tmp_path):
    p = subprocess.run([sys.executable, "-m", "dryz", "fuzz", "--time", "8", "--jobs", "1", "--workdir", "rel",
                        "--json", "s.json"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads((tmp_path / "s.json").read_text())["execs"] > 0
    assert (tmp_path / "rel" / "corpus").is_dir() and (tmp_path / "rel" / "libfuzzer.log").exists()


def test_bad_fuzz_flags():
    p = dryz("fuzz", "--time", "0")
    assert p.returncode == 2 and "--time must be at least 1" in p.stderr
    p = dryz("fuzz", "stray")
    assert p.returncode == 2 and "libFuzzer flags start with '-'" in p.stderr
    p = dryz("fuzz", "--jobs", "0")
    assert p.returncode == 2 and "--jobs must be at least 1" in p.stderr
    p = dryz("fuzz", "--time", "3", "-dict=x")  # libFuzzer flags go after --
    assert p.returncode == 2 and "No such option" in p.stderr, p.stderr
    p = dryz("fuzz", "--time", "3", "--workdir", "/proc/nope")
    assert p.returncode == 2 and p.stderr.startswith("dryz: error:") and p.stderr.count("\n") == 1, p.stderr


NATIVE = shutil.which("clang") and shutil.which("clang++")


@pytest.mark.skipif(not NATIVE and not os.environ.get("DRYZ_REQUIRE_NATIVE"),
                    reason="clang not installed (CI installs it and sets DRYZ_REQUIRE_NATIVE=1)")
def test_native_campaign_sees_libllama_counters(tmp_path):
    p = dryz("fuzz", "--native", "--time", "20", "--jobs", "1", "--workdir", str(tmp_path / "w"),
             "--json", str(tmp_path / "s.json"), timeout=1800)
    assert p.returncode == 0, p.stdout + p.stderr
    s = json.loads((tmp_path / "s.json").read_text())
    log = Path(s["log"]).read_text()
    assert "Using preloaded libfuzzer" in log
    # libFuzzer reports the instrumented modules' inline 8-bit counters (libllama + ggml: ~120k)
    total = int(s["counters"].split()[0]) if s["counters"] else 0
    assert total > 50_000, s["counters"]
    assert s["findings"] == [] and s["cov"] > 100


def test_progress_parsing_of_both_libfuzzer_formats():
    from dryz.fuzz.campaign import Stats
    s = Stats()
    assert s.update("#582: cov: 2983 ft: 2983 corp: 14 exec/s 291 oom/timeout/crash: 0/0/0 time: 3s job: 1")
    assert (s.execs, s.cov, s.ft, s.corpus, s.exec_per_s) == (582, 2983, 2983, 14, 291)
    assert s.update("#4096\tpulse  cov: 12 ft: 14 corp: 3/30b lim: 4 exec/s: 2048 rss: 50Mb")
    assert (s.execs, s.cov, s.corpus, s.exec_per_s) == (4096, 2983, 3, 2048)  # coverage is a running maximum
    assert not s.update("INFO: Seed: 1")


ARRAY_COMPARISON_SCAN = r'''
import collections, sys
import atheris
import numpy as np
with atheris.instrument_imports(include=["dryz"]):   # all of dryz: a superset of what fuzz/dry_fuzz.py instruments
    from dryz.corpus import DEFAULT_DIR, entries, load_entry
    from dryz.fuzz.target import test_one_input, test_one_trace
    import dryz.decode.traces, dryz.oracle.trace_model, dryz.trace_check  # what the trace target imports on use
original = atheris._trace_cmp
found = collections.Counter()
def traced(*args):
    result = original(*args)
    if type(result) is not bool:
        frame = sys._getframe(1)
        found[f"{frame.f_code.co_filename}:{frame.f_lineno} -> {type(result).__name__}"] += 1
    return result
atheris._trace_cmp = traced
inputs = [e.case.dumps().encode() for e in map(load_entry, entries(DEFAULT_DIR)) if e.case is not None]
rng = np.random.default_rng(21)
inputs += [rng.integers(0, 256, int(rng.integers(0, 2500))).astype(np.uint8).tobytes() for _ in range(1500)]
for data in inputs:
    try:
        test_one_input(data)
    except Exception:
        pass  # a known finding class raising is fine here; only the comparisons matter
traces = [e.trace.dumps().encode() for e in map(load_entry, entries(DEFAULT_DIR)) if e.trace is not None]
traces += [rng.integers(0, 256, int(rng.integers(0, 800))).astype(np.uint8).tobytes() for _ in range(300)]
for data in traces:  # the trace target (dryz fuzz --traces)
    try:
        test_one_trace(data)
    except Exception:
        pass
for site, n in found.items():
    print(site, n)
'''


def test_instrumented_harness_compares_no_arrays():
    """atheris 3.0 replaces every comparison operator in code instrumented with data-flow tracing by
    _trace_cmp, which leaks the result when it is not a bool (a numpy array): a campaign grew ~7 KB of memory
    per input until killed. fuzz/dry_fuzz.py traces branches only, but the per-input code still compares
    arrays with ufuncs, so that any atheris instrumentation of dryz is safe: here all of dryz is instrumented
    with data-flow tracing, every comparison on the corpus and 1,500 random inputs (and the trace target on the
    trace entries and 300 random inputs) is watched, and none may yield a non-bool."""
    p = subprocess.run([sys.executable, "-c", ARRAY_COMPARISON_SCAN], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "", "comparisons yielding non-bools (leaked by atheris):\n" + p.stdout


def _children(pid: int) -> set[int]:
    out = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        out |= {int(x) for x in (task / "children").read_text().split()}
    return out


def test_fork_server_runs_every_harness_process_as_its_fork(tmp_path, lib, terminal_signals):
    """With the campaign's fork server the launcher's harness is a fork of the server (its descriptors, its
    directory, its argv): the same output and exit code as the launcher running the harness itself, a SIGTERM to
    the launcher reaches it, and stopping the server leaves no process behind."""
    import signal
    import time
    from dryz.fuzz.campaign import Campaign
    from dryz.fuzz.forkserver import ENV
    c = Campaign(seconds=1, jobs=1, workdir=tmp_path / "w", artifacts=tmp_path / "w" / "a", target="traces",
                 subject=lib)
    c.log = lambda m: None
    env = c.env()
    assert env["DRYZ_SUBJECT"] == lib.spec  # the server opens the campaign's subject from its spec
    server = c.start_forkserver(env)
    assert server is not None and env[ENV]
    pid = server[0].pid
    try:
        launcher = c.launcher()
        alone = {k: v for k, v in env.items() if k != ENV}
        for e in (env, alone):
            p = subprocess.run([str(launcher), "-runs=20", "-seed=1"], env=e, capture_output=True, text=True,
                               timeout=300, cwd=tmp_path)
            assert p.returncode == 0 and "Done 20 runs" in p.stderr, p.stderr[-1000:]
        ended = []
        for e in (env, alone):  # SIGTERM to the launcher, as the campaign stops libFuzzer
            q = subprocess.Popen([str(launcher), "-max_total_time=120"], env=e, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True, cwd=tmp_path, preexec_fn=default_signals)
            if e is env:
                deadline = time.monotonic() + 60
                while not _children(pid) and time.monotonic() < deadline:
                    time.sleep(0.1)
                (child,) = _children(pid)  # the harness runs as the server's fork, in the launcher's directory
                assert Path(f"/proc/{child}/cwd").resolve() == tmp_path.resolve()
            time.sleep(3)
            q.send_signal(signal.SIGTERM)
            _, err = q.communicate(timeout=60)
            ended.append((q.returncode, "libFuzzer: run interrupted; exiting" in err))
        assert ended[0] == ended[1] == (72, True)  # libFuzzer's interrupt exit, either way
        assert not _children(pid)
    finally:
        c.stop_forkserver(server)
    assert server[0].poll() is not None and not Path(env[ENV]).exists()


def test_a_harness_that_cannot_stop_is_killed_and_leaves_no_process(tmp_path, lib, terminal_signals):
    """A harness in the state one was found in (asleep in its own shutdown, deadlocked: here frozen with SIGSTOP,
    which acts on no signal but SIGKILL): SIGTERM to its launcher, as the campaign stops libFuzzer, is forwarded,
    and once its grace has passed the harness gets SIGKILL, said on stderr; the launcher ends as its harness did,
    and no process is left."""
    import signal
    import time
    from dryz.fuzz import forkserver
    from dryz.fuzz.campaign import Campaign
    c = Campaign(seconds=1, jobs=1, workdir=tmp_path / "w", artifacts=tmp_path / "w" / "a", target="traces",
                 subject=lib)
    c.log = lambda m: None
    env = c.env()
    server = c.start_forkserver(env)
    assert server is not None
    pid = server[0].pid
    try:
        q = subprocess.Popen([str(c.launcher()), "-max_total_time=120"], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        deadline = time.monotonic() + 120
        while not _children(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        (child,) = _children(pid)
        time.sleep(2)  # running inputs: libFuzzer's handlers and atheris's alarm are set
        os.kill(child, signal.SIGSTOP)
        q.send_signal(signal.SIGTERM)
        try:
            _, err = q.communicate(timeout=forkserver.STOP_GRACE + 60)
        except subprocess.TimeoutExpired:
            q.kill()
            pytest.fail("the launcher did not end")
        assert q.returncode == -signal.SIGKILL, (q.returncode, err[-1000:])  # as its harness ended
        assert f"the harness (pid {child}) did not end within {forkserver.STOP_GRACE} s of SIGTERM: killed " \
               "(SIGKILL)" in err
        assert not os.path.exists(f"/proc/{child}") and not _children(pid)
    finally:
        c.stop_forkserver(server)
    assert server[0].poll() is not None


def test_the_harness_stops_with_no_alarm_armed():
    """The harness's stop guard (dryz.fuzz.harness.StopGuard) in a process with a native SIGTERM handler (as
    libFuzzer installs its own: here libc's _exit, which ends the process with the signal's number) and a periodic
    SIGALRM armed (as atheris arms it): a SIGTERM first turns the timer off and ignores SIGALRM, then runs the
    native handler (exit 15)."""
    code = r"""
import ctypes, os, signal, time
from dryz.fuzz import harness
libc = ctypes.CDLL(None, use_errno=True)
act = ctypes.create_string_buffer(harness.SIGACTION_BYTES)
ctypes.c_void_p.from_buffer(act).value = ctypes.cast(libc._exit, ctypes.c_void_p).value
assert libc.sigaction(int(signal.SIGTERM), act, None) == 0
signal.signal(signal.SIGALRM, lambda *a: None)
signal.setitimer(signal.ITIMER_REAL, 5, 5)
guard = harness.StopGuard()
guard.install()
assert signal.getsignal(signal.SIGTERM) == guard.stop
disarm = harness.disarm_alarm
def said():
    disarm()
    print("timer", signal.getitimer(signal.ITIMER_REAL), "alarm", signal.getsignal(signal.SIGALRM).name, flush=True)
harness.disarm_alarm = said
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(30)
print("not ended", flush=True)
"""
    import sys
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 15 and p.stdout == "timer (0.0, 0.0) alarm SIG_IGN\n", (p.returncode, p.stdout,
                                                                                   p.stderr[-1000:])


def test_every_job_and_merge_of_a_campaign_is_a_fork_of_the_server(tmp_path):
    """libFuzzer's fork mode runs argv[0] for every job and every merge from its own process (itself a fork of
    the server): each of those launchers finds the server too, so no harness process prepares the subject (and
    a vocabulary's samplers) again. The server's log has one line per fork; the summary says exec/s over
    libFuzzer's time and the set-up apart."""
    w = tmp_path / "w"
    p = dryz("fuzz", "--traces", "--time", "8", "--jobs", "1", "--workdir", str(w), "--json", str(tmp_path / "s.json"))
    assert p.returncode == 0, p.stdout + p.stderr
    import re
    jobs = max(int(n) for n in re.findall(r"job: (\d+)", (w / "libfuzzer.log").read_text()))
    forks = [ln for ln in (w / "forkserver.log").read_text().splitlines() if ln.startswith("fork ")]
    assert jobs >= 2
    assert len([f for f in forks if "-reload=0" in f]) >= jobs  # every job (the last may be cut by time)
    assert len([f for f in forks if "-merge" in f]) >= jobs      # the seeds' merge and one per job
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["fuzz_seconds"] > 0 and abs(s["exec_per_s_fuzz"] - s["execs"] / s["fuzz_seconds"]) <= \
        0.01 * s["execs"] / s["fuzz_seconds"] + 1  # (the seconds are rounded to 0.1 s)
    assert f"{s['exec_per_s_fuzz']:,} exec/s over libFuzzer's {s['fuzz_seconds']} s" in p.stdout


def test_a_fork_server_that_cannot_start_is_no_server(tmp_path, lib):
    """A server that dies while it prepares (here: a subject spec it cannot open) is not waited for: the campaign
    falls back to launchers that run the harness themselves (no socket in their environment), and nothing is
    left behind."""
    from dryz.fuzz.campaign import Campaign
    from dryz.fuzz.forkserver import ENV
    c = Campaign(seconds=1, jobs=1, workdir=tmp_path / "w", artifacts=tmp_path / "w" / "a", target="traces",
                 subject=lib)
    said = []
    c.log = said.append
    env = dict(c.env(), DRYZ_SUBJECT="libllama:" + str(tmp_path / "no-such-libllama.so"))
    assert c.start_forkserver(env) is None
    assert ENV not in env and any("not ready" in m for m in said)


def test_a_slow_run_is_a_note_not_a_finding_nor_a_doubt(tmp_path):
    """A run that takes over -report_slow_units seconds leaves a slow-unit file (a busy machine pauses a run as
    easily as a slow subject makes one). Re-checked and agreeing, it is reported as a slow input and the campaign
    stays clean (exit 0), not 'crash files that do not reproduce' (exit 2). DRYZ_FAULT=slow pauses each process
    once, 1.5 s, on its first input with a length >= 3."""
    p = dryz("fuzz", "--time", "10", "--jobs", "1", "--workdir", str(tmp_path / "w"), "--fault", "slow",
             "--json", str(tmp_path / "s.json"), "--", "-report_slow_units=1")
    assert p.returncode == 0, p.stdout + p.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["findings"] == [] and summary["slow"], summary
    # (the paused input may have a class the corpus documents, e.g. promise-finite-penalty: not a new finding,
    # as the harness judges it)
    from dryz.fuzz.target import KNOWN
    assert all(Path(f["file"]).name.startswith("slow-unit-") and f["klass"] in KNOWN | {"agree"}
               for f in summary["slow"]), summary["slow"]
    assert summary["slow_unit_seconds"] == 1
    assert "slow input (not a finding)" in p.stdout and "1 s or more" in p.stdout


def test_only_a_slow_unit_that_is_no_new_finding_is_a_slow_input():
    """split_slow: a slow-unit file whose re-check agrees or gives a class the corpus documents is a slow input;
    one that disagrees, crashes or hangs stays a finding, one the re-check could not judge (error) or did not run
    stays among the files; a crash file is never a slow input."""
    from dryz.fuzz.campaign import split_slow
    from dryz.fuzz.target import KNOWN
    documented = sorted(KNOWN - {"agree"})[0]
    f = lambda name, klass, rep: {"file": f"/w/artifacts/{name}", "klass": klass, "reproduces": rep}  # noqa: E731
    rows = [f("slow-unit-aa", "agree", False), f("slow-unit-bb", documented, False),
            f("slow-unit-cc", "mismatch", True), f("slow-unit-dd", "crash", True), f("slow-unit-ee", "hang", True),
            f("slow-unit-ff", "error", False), f("slow-unit-00", "not re-checked (interrupted)", None),
            f("crash-11", "agree", False)]
    findings, slow = split_slow(rows)
    assert [x["file"][-2:] for x in slow] == ["aa", "bb"]
    assert [x["file"][-2:] for x in findings] == ["cc", "dd", "ee", "ff", "00", "11"]


def test_rechecks_stop_when_their_share_of_time_is_spent(tmp_path, lib, monkeypatch):
    """A campaign with many crash files (the off-by-one fault: a mismatch at once in every job) re-checks the
    smallest first, each in a clean process, until its share of --time is spent; the rest are kept and listed
    as not re-checked (--time spent), never silently dropped."""
    from dryz.fuzz import campaign
    monkeypatch.setattr(campaign, "RECHECK_MIN", 0.0)
    monkeypatch.setattr(campaign, "RECHECK_SHARE", 0.0)
    c = campaign.Campaign(seconds=6, jobs=1, workdir=tmp_path / "w", artifacts=tmp_path / "w" / "a",
                          fault="off-by-one", subject=lib, extra=["-fork=1", "-ignore_crashes=1"])
    c.log = lambda m: None
    s = c.run()
    files = sorted(p.name for p in (tmp_path / "w" / "a").glob("crash-*"))
    assert len(files) >= 2, files
    first, *rest = s["findings"]
    assert first["reproduces"] is True and first["klass"] in ("mismatch", "mismatch-multi-token")
    assert rest and all(f["klass"] == "not re-checked (--time spent)" and f["reproduces"] is None for f in rest)
    assert sorted(Path(f["file"]).name for f in s["findings"]) == files
    assert {f["subject"] for f in s["findings"]} == {c.subject.spec}  # every row names the subject
