"""`dryz fuzz`: a libFuzzer campaign over dryz.fuzz.harness, with progress, a summary, and artifacts kept.

Fork mode (-fork=JOBS -ignore_crashes=1) runs the target in child processes, so a campaign survives a
subject crash or abort and keeps every crash file. The jobs audit the selected subject (DRYZ_LIB, which
--lib sets); with --native they load an instrumented libllama built from the pinned sdist instead
(LD_PRELOAD'ed libFuzzer). Every finding is then re-checked in a clean process on the selected subject.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DryzError
from ..case import Case, CaseError
from ..corpus import CorpusError, DEFAULT_DIR, entries, load_entry
from ..decode.traces import decode_trace
from ..decode.vocab import decoder, MAX_VOCAB_HISTORY
from ..enumerate.controls import abi_confirmation_case, abi_confirmation_control
from ..errors import EXIT_ERROR, EXIT_FINDING, EXIT_OK
from ..judge import check, check_in
from ..subject.answers import Crash, Unsupported
from ..subject.isolation import Worker
from ..subject.registry import child_env, runtime_env
from ..trace import trace_of_case
from ..trace_check import check_trace
from ..verdict import CLASSES, crash_fields, crash_verdict
from ..vocab_cases import load_vocab
from .forkserver import ENV, READY, tree as _tree
from .native import build_native
from .target import input_decoder, is_new_finding

# libFuzzer's fork mode re-executes argv[0]: a launcher script, written into the work directory, runs the
# harness with this interpreter (works from an installed dryz, no checkout needed): as a fork of the campaign's
# fork server when there is one (dryz/fuzz/forkserver.py), else itself.
LAUNCHER = """#!{python}
import sys
from dryz.fuzz.forkserver import client
if not client(sys.argv):
    from dryz.fuzz.harness import main
    main()
"""
LIBFUZZER_INTERRUPTED = 72  # libFuzzer's exit code after SIGINT or SIGTERM (-interrupted_exitcode)
FORKSERVER_WAIT = 600  # seconds the server may take to get ready (a real vocabulary's samplers: ~15 s here)
SLOW_UNIT_SECONDS = 10  # libFuzzer's default -report_slow_units: a run this long leaves a slow-unit file

_STAT = re.compile(r"(cov|ft|corp|exec/s|rss):? ?(\d+)")
_EXECS = re.compile(r"^#(\d+)")

RECHECK_SHARE = 0.25  # of --time: what the re-checks of a campaign's crash files may take after it
RECHECK_MIN = 60.0  # seconds, at the least
BY_CAUSE_SAMPLE = 2000  # explained inputs counted per cause (spread evenly over the kept files, each job's first
# dryz.fuzz.target.EXPLAINED_KEEP): every one counts in all


class CampaignError(RuntimeError, DryzError):
    pass


STOP_GRACE = 10.0  # seconds what a stop was sent to has to end, before SIGKILL


def _signal_tree(pid: int, sig) -> None:
    for p in _tree(pid):
        try:
            os.kill(p, sig)
        except OSError:
            pass


def _stop_tree(pid: int) -> None:
    """SIGTERM to a process and every descendant (libFuzzer's fork-mode jobs), SIGKILL to what is left after
    5 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        procs = _tree(pid)
        for p in procs:
            try:
                os.kill(p, sig)
            except OSError:
                pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") and
                                                  "zombie" not in _state(p) for p in procs):
            time.sleep(0.1)


def _logged(logf):
    """Each line written to the log as it is read."""
    def write(line):
        try:
            logf.write(line)
        except (OSError, ValueError):  # the log closed under it: the stats still count
            pass
        return line
    return write


class _Terminated(Exception):
    """SIGTERM reached the campaign's process (see _sigterm_raises)."""


class _sigterm_raises:
    """While a campaign runs in the main thread: SIGTERM raises _Terminated, so the campaign stops libFuzzer,
    its jobs and the fork server before this process ends (SIGTERM's default would leave them running)."""

    def __enter__(self):
        self.old = None
        if threading.current_thread() is threading.main_thread():
            self.old = signal.signal(signal.SIGTERM, self._raise)
        return self

    @staticmethod
    def _raise(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the cleanup runs to its end
        raise _Terminated()

    def __exit__(self, kind, value, tb):
        if self.old is not None and kind is not _Terminated:  # terminated: SIGTERM stays ignored (cleanup)
            signal.signal(signal.SIGTERM, self.old)
        return False


def _state(pid: int) -> str:
    try:
        return "zombie" if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z" else "alive"
    except OSError:
        return "zombie"


@dataclass
class Stats:
    execs: int = 0
    cov: int = 0
    ft: int = 0
    corpus: int = 0
    exec_per_s: int = 0
    lines: int = 0
    counters: str = ""  # libFuzzer's INFO line about loaded coverage counters

    def update(self, line: str) -> bool:
        m = _EXECS.match(line)
        if not m:
            if line.startswith("stat::number_of_executed_units:"):
                self.execs = max(self.execs, int(line.split(":")[-1]))
            return False
        self.execs = max(self.execs, int(m.group(1)))
        for key, val in _STAT.findall(line):
            v = int(val)
            if key == "cov":
                self.cov = max(self.cov, v)
            elif key == "ft":
                self.ft = max(self.ft, v)
            elif key == "corp":
                self.corpus = v
            elif key == "exec/s":
                self.exec_per_s = v
        return True


@dataclass
class Campaign:
    seconds: int
    jobs: int
    workdir: Path
    artifacts: Path
    native: bool = False
    fault: str | None = None
    extra: list[str] = field(default_factory=list)
    seed_dir: Path | None = None
    vocab: str | None = None      # --vocab: inputs decode to cases over this real vocabulary
    breakers: str = "default"     # --breaker-sets default|dict|random (with --vocab)
    target: str = "cases"  # "cases": bytes -> Case -> check(); "traces": bytes -> Trace -> check_trace()
    subject: object = None  # the audited subject (opened by the command): its spec goes to every job
    recheck_limit: int | None = None  # re-check at most this many crash files (the smallest); None: all
    causes: tuple = ()  # the subject's fitted causes (dryz.causes): a difference they explain is counted, not found
    log=print

    def complete(self, summary: dict, confirmation: dict | None, sampler: str) -> None:
        """What the summary says besides libFuzzer's figures: the subject, the confirmation control, and the
        vocabulary a --vocab campaign ran on."""
        summary["subject"] = self.subject.identity
        if confirmation is not None:
            summary["controls"] = {"abi_confirmation": confirmation}
        if self.vocab is not None:
            ref = load_vocab(self.vocab, self.subject).ref
            summary["vocab"] = {"name": ref.name, "path": str(ref.path), "sha256": ref.sha256,
                                "breakers": self.breakers, "sampler": sampler, "spec": str(self.vocab)}

    def subject_env(self) -> dict:
        """The environment that selects the audited subject for the jobs: its spec (DRYZ_SUBJECT), the
        campaign's decoder and fault."""
        env = child_env(self.subject.spec)
        env.pop("DRYZ_FAULT", None)
        for k in ("DRYZ_FUZZ_VOCAB", "DRYZ_FUZZ_BREAKERS"):
            env.pop(k, None)
        if self.vocab:
            env["DRYZ_FUZZ_VOCAB"], env["DRYZ_FUZZ_BREAKERS"] = self.vocab, self.breakers
        if self.fault:
            env["DRYZ_FAULT"] = self.fault
        env["DRYZ_FUZZ_TARGET"] = self.target  # which test_one_input the harness runs (dryz.fuzz.target)
        env["DRYZ_FUZZ_RECORD"] = str(self.artifacts)  # findings written in process (dryz.fuzz.target.found)
        for k in ("DRYZ_CAUSES", "DRYZ_FUZZ_EXPLAINED"):
            env.pop(k, None)
        if self.causes:
            env["DRYZ_CAUSES"], env["DRYZ_FUZZ_EXPLAINED"] = ",".join(self.causes), str(self.explained_dir)
        return env

    @property
    def explained_dir(self) -> Path:
        return self.workdir / "explained"

    def explained(self) -> dict:
        """The inputs the fitted causes explained (each job keeps its first ones as files and counts the rest),
        counted: in all and per cause (the causes each needs: explained with them, not without it) on at most
        BY_CAUSE_SAMPLE of the kept ones (each a prediction per cause: tens of thousands took longer than the
        campaign)."""
        from ..causes import answer_of, explains  # on use: a campaign with fitted causes
        files = sorted(self.explained_dir.glob("*.json")) if self.causes else []
        by: dict = {m: 0 for m in self.causes}
        sorted_flag, abi = bool(self.subject.caps.sorted_flag), self.subject.abi
        sample = files[::-(-len(files) // BY_CAUSE_SAMPLE)] if files else []
        for f in sample:
            d = json.loads(f.read_text())
            case = Case.from_json(d["case"])
            answer = answer_of(case, d["answer"])
            for m in self.causes:
                if not explains(case, answer, tuple(x for x in self.causes if x != m), sorted_flag, abi):
                    by[m] += 1
        over = sum(int(f.read_text() or 0) for f in self.explained_dir.glob("overflow-*.count")) if self.causes else 0
        return {"inputs": len(files) + over, "by_cause": {m: n for m, n in by.items() if n},
                "causes": list(self.causes), **({"counted_only": over} if over else {}),
                **({"by_cause_of": len(sample)} if len(sample) < len(files) + over else {})}

    def env(self) -> dict:
        env = self.subject_env()
        env.update(runtime_env(self.subject.spec, fuzzer=True))  # sanitized: its runtime with libFuzzer
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        if self.native:
            nb = build_native(log=lambda m: self.log(f"native: {m}"))
            env.update(nb.env())
            env.pop("LLAMA_CPP_LIB_PATH", None)
            env["DRYZ_SUBJECT"] = f"libllama:{nb.libllama}"
        return env

    def launcher(self) -> Path:
        path = self.workdir / "dryz-fuzz-harness"
        path.write_text(LAUNCHER.format(python=sys.executable))
        path.chmod(0o755)
        return path

    def seed(self) -> Path:
        """Write every corpus entry's Case JSON as a seed input (the decoder reads '{...}' as that Case)."""
        seeds = self.workdir / "seeds"
        seeds.mkdir(parents=True, exist_ok=True)
        n = 0
        sha = None
        if self.vocab:
            n += self.vocab_seeds(seeds)
            sha = decoder(self.vocab, self.breakers, self.subject).sha
        for p in entries(self.seed_dir or DEFAULT_DIR):
            try:
                e = load_entry(p)
            except CorpusError:
                continue
            if self.target == "traces":  # a case entry seeds the trace target as its one-apply trace
                if e.case is not None and e.case.vocab is not None or e.case is None and e.trace is None:
                    continue  # traces are over the symbol vocabulary (a request sequence seeds nothing)
                text = (e.trace if e.trace is not None else trace_of_case(e.case)).dumps().encode()
            elif e.case is None:
                continue  # a trace entry: no Case to seed the case target with
            elif (e.case.vocab is None) != (self.vocab is None) or (sha and e.case.vocab_sha256 != sha):
                continue  # only entries on the campaign's vocabulary (or the symbol one) seed it
            else:
                text = e.case.dumps().encode()
            (seeds / hashlib.sha1(text).hexdigest()).write_bytes(text)
            n += 1
        extra = ", and the ABI confirmation case" if self.confirmation_seed(seeds) else ""
        self.log(f"seeded {n} inputs from {self.seed_dir or DEFAULT_DIR}{extra}")
        return seeds

    def confirmation_seed(self, seeds: Path) -> bool:
        """The ABI confirmation case (dryz.enumerate.controls) always seeds a symbol-vocabulary campaign (as its
        one-apply trace for the trace target): a library that fails it gets a crash file from the first inputs.
        False for a vocabulary campaign (its seeds are over that vocabulary)."""
        if self.vocab:
            return False
        case = abi_confirmation_case()
        if self.target == "traces":
            text = trace_of_case(case).dumps().encode()
        else:
            text = case.dumps().encode()
        (seeds / hashlib.sha1(text).hexdigest()).write_bytes(text)
        return True

    def vocab_seeds(self, seeds: Path) -> int:
        """Seeds of a vocabulary campaign: each snippet (dryz.decode.vocab.SNIPPETS) tokenized, cut to
        its first 256 tokens, as a Case JSON under each breaker set of the mode, default parameters."""
        d = decoder(self.vocab, self.breakers, self.subject)
        n = 0
        for snip in d.snippets:
            for breakers in d.sets:
                h = tuple(snip[:MAX_VOCAB_HISTORY].tolist())
                cands = tuple((t, 0.0) for t in sorted(set(h))[:64])
                c = Case(history=h, alphabet=d.n, penalty_last_n=256, breakers=breakers, candidates=cands,
                         vocab=d.name, vocab_sha256=d.sha)
                text = c.dumps().encode()
                (seeds / hashlib.sha1(text).hexdigest()).write_bytes(text)
                n += 1
        return n

    def command(self, seeds: Path) -> list[str]:
        work = self.workdir / "corpus"
        work.mkdir(parents=True, exist_ok=True)
        self.artifacts.mkdir(parents=True, exist_ok=True)
        if self.causes:
            self.explained_dir.mkdir(parents=True, exist_ok=True)
        # Fork mode re-runs argv[0] for every job: the harness is executable (#!/usr/bin/env python3) and
        # env() puts this interpreter's directory first on PATH.
        cmd = [str(self.launcher()), f"-max_total_time={self.seconds}",
               f"-artifact_prefix={self.artifacts}/", "-print_final_stats=1", "-max_len=4096",
               f"-fork={self.jobs}", "-ignore_crashes=1", "-ignore_timeouts=1", "-ignore_ooms=1",
               "-timeout=30", f"-report_slow_units={SLOW_UNIT_SECONDS}"]
        return cmd + list(self.extra) + [str(work), str(seeds)]

    def run(self) -> dict:
        before = set(self.artifacts.glob("*")) if self.artifacts.exists() else set()
        seeds = self.seed()
        env = self.env()
        cmd = self.command(seeds)
        log_path = self.workdir / "libfuzzer.log"
        stats = Stats()
        t0 = time.monotonic()
        last, shown = 0.0, 0  # when the last progress line was printed, and the execs it showed
        self.log(f"libFuzzer: {' '.join(cmd)}")
        self.log(f"coverage: {'python + native (instrumented libllama)' if self.native else 'python only'}"
                 f"{'; FAULT INJECTED: ' + self.fault if self.fault else ''}")
        if self.native:
            stats.counters = self.probe_counters(env)
            self.log(f"native coverage: {stats.counters or 'NO inline counters reported'}")
        interrupted = False
        limited = threading.Event()
        server, proc, rc = None, None, 130
        t_fuzz, fuzz_seconds = None, 0.0
        try:
            with _sigterm_raises():
                server = self.start_forkserver(env)  # (its start-up counts in the campaign's seconds)
                t_fuzz = time.monotonic()
                with open(log_path, "w") as logf:
                    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                            text=True, errors="replace", cwd=self.workdir)
                    # libFuzzer's fork mode first runs the seeds in a child it restarts after every crash
                    # (reloading the subject, and a vocabulary): on a broken subject that alone can outlast
                    # -max_total_time. At the hard limit the campaign stops, as time running out stops it, and
                    # its crash files count.
                    watchdog = threading.Timer(self.hard_limit(), lambda: (limited.set(), _stop_tree(proc.pid)))
                    watchdog.daemon = True
                    watchdog.start()
                    try:
                        for line in proc.stdout:
                            logf.write(line)
                            if stats.update(line):
                                now = time.monotonic()
                                if now - last >= 5:
                                    # exec/s by dryz's own clock since the line before (libFuzzer's fork mode
                                    # prints 0 while its jobs crash)
                                    rate = (stats.execs - shown) / max(now - (last or t_fuzz), 1e-3)
                                    last, shown = now, stats.execs
                                    self.log(f"[{now - t0:6.0f}s] execs {stats.execs:,}  exec/s {rate:,.0f}  "
                                             f"cov {stats.cov}  ft {stats.ft}  corpus {stats.corpus}")
                        rc = proc.wait()
                    except KeyboardInterrupt:
                        interrupted = True
                        rc = self.interrupt(proc, server, logf, stats)
                    finally:
                        watchdog.cancel()
                        fuzz_seconds = time.monotonic() - t_fuzz
        except KeyboardInterrupt:  # Ctrl-C (libFuzzer's whole group has it), or while the fork server got ready
            interrupted = True
            if proc is not None:
                proc.terminate()
                try:
                    rc = proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    rc = proc.wait()
        except _Terminated:  # SIGTERM to this process only: libFuzzer and its jobs stopped, then the server
            if proc is not None:
                _stop_tree(proc.pid)
            self.stop_forkserver(server)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # then end as SIGTERM ends a process
            os.kill(os.getpid(), signal.SIGTERM)
            raise
        finally:
            self.stop_forkserver(server)
        if rc == LIBFUZZER_INTERRUPTED and not limited.is_set():
            interrupted = True  # libFuzzer took a SIGINT this process ignores (a background job's): still a stop
        if stats.execs == 0 and rc != 0 and not interrupted and not limited.is_set():
            tail = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
            raise CampaignError(f"libFuzzer did not run (exit {rc}): {tail[-1] if tail else 'no output'} "
                                f"(log: {log_path})")
        new = sorted(p for p in set(self.artifacts.glob("*")) - before if p.is_file() and not p.name.endswith(".count"))
        not_kept = sum(int(p.read_text() or 0) for p in self.artifacts.glob("overflow-*.count"))
        if interrupted:  # Ctrl-C: keep every crash file, re-check none (the user asked to stop)
            findings = [self.kept(p, "interrupted") for p in new]
        else:
            order = sorted(new, key=lambda p: (p.stat().st_size, p.name))
            limit = len(order) if self.recheck_limit is None else self.recheck_limit
            # The re-checks share --time's grace: the smallest files first, each in a clean process, until
            # RECHECK_SHARE of --time (at least RECHECK_MIN seconds) is spent; the rest kept, said so (a slow
            # subject with hundreds of crash files took many times its --time).
            budget, t_re = max(RECHECK_MIN, RECHECK_SHARE * self.seconds), time.monotonic()
            findings = []
            try:
                for p in order[:limit]:
                    if findings and time.monotonic() - t_re > budget:
                        findings.append(self.kept(p, "--time spent"))
                    else:
                        findings.append(self.recheck(p))
                findings += [self.kept(p, "--recheck limit") for p in order[limit:]]
            except KeyboardInterrupt:  # a Ctrl-C during the re-checks: the rest kept, and the summary says so
                interrupted = True
                findings += [self.kept(p, "interrupted") for p in order[len(findings):]]
        findings, slow = split_slow(findings)
        rechecked = [f for f in findings if f.get("explained_by")]  # crash files the fitted causes explain
        findings = [f for f in findings if not f.get("explained_by")]
        # exec/s over the time libFuzzer ran (its --time, and any job it waits for after it); what came before
        # it once per campaign (the fork server's preparation: a real vocabulary's samplers; with --native the
        # counter probe) is the set-up, reported apart
        return {"seconds": round(time.monotonic() - t0, 1), "execs": stats.execs, "cov": stats.cov,
                "fuzz_seconds": round(fuzz_seconds, 1),
                "exec_per_s_fuzz": round(stats.execs / fuzz_seconds) if fuzz_seconds else 0,
                "setup_seconds": round((t_fuzz or time.monotonic()) - t0, 1),
                "ft": stats.ft, "corpus": stats.corpus, "exec_per_s": stats.exec_per_s,
                "counters": stats.counters, "libfuzzer_exit": rc, "log": str(log_path),
                "native": self.native, "fault": self.fault, "findings": findings, "slow": slow,
                "slow_unit_seconds": self.slow_unit_seconds(),
                "interrupted": interrupted,
                "target": self.target, "stopped_at_hard_limit": limited.is_set(),
                **({"explained": dict(self.explained(), **({"rechecked": len(rechecked)} if rechecked else {}))}
                   if self.causes else {}),
                **({"findings_not_kept": not_kept} if not_kept else {}),
                **({"void": "libFuzzer executed no input (no unit ran to its end)"} if stats.execs == 0 and
                   not interrupted else {})}

    def slow_unit_seconds(self) -> int:
        """libFuzzer's -report_slow_units as this campaign runs it: the default, or the user's own flag."""
        given = [f.split("=", 1)[1] for f in self.extra if f.startswith("-report_slow_units=")]
        m = re.match(r"\d+", given[-1]) if given else None  # libFuzzer reads the flag's leading digits (atoi)
        return int(m.group()) if m else SLOW_UNIT_SECONDS

    def hard_limit(self) -> float:
        """Seconds after which dryz stops libFuzzer itself: --time plus a quarter, at least 30 s more."""
        return self.seconds + max(30.0, 0.25 * self.seconds)

    def start_forkserver(self, env: dict):
        """Start the fork server (dryz/fuzz/forkserver.py) with the campaign's environment and put its socket in
        env, so that every harness process libFuzzer starts is a fork of it. None when DRYZ_FUZZ_FORKSERVER=0 or
        the server does not get ready (the harness processes then start on their own, as without it)."""
        env.pop(ENV, None)
        if os.environ.get("DRYZ_FUZZ_FORKSERVER", "1") == "0":
            return None
        folder = Path(tempfile.mkdtemp(prefix="dryz-fs-"))  # a short path: a Unix socket's is at most 107 bytes
        sock = folder / "s"
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = self.workdir / "forkserver.log"  # the server's own messages (the jobs write to libFuzzer's logs)
        t = time.monotonic()
        with open(log, "w") as errf:
            proc = subprocess.Popen([sys.executable, "-m", "dryz.fuzz.forkserver", str(sock)], env=env,
                                    stdout=subprocess.PIPE, stderr=errf, stdin=subprocess.DEVNULL, text=True,
                                    cwd=self.workdir)
        server = (proc, folder)
        ready = False
        try:  # the server prints READY once it listens (nothing else); a server that dies or hangs is no server
            deadline = time.monotonic() + min(FORKSERVER_WAIT, self.hard_limit())
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                while not ready and time.monotonic() < deadline:
                    if not sel.select(timeout=min(1.0, max(0.0, deadline - time.monotonic()))):
                        continue
                    line = proc.stdout.readline()
                    if not line:
                        break
                    ready = line.strip() == READY
        except BaseException:  # a Ctrl-C (or SIGTERM) while it gets ready
            self.stop_forkserver(server)
            raise
        if not ready:
            self.stop_forkserver(server)
            self.log(f"fork server: not ready (see {log}); every harness process starts on its own")
            return None
        env[ENV] = str(sock)
        self.log(f"fork server: ready in {time.monotonic() - t:.1f} s (the harness prepared once; every job and "
                 "merge a fork of it)")
        return server

    def interrupt(self, proc, server, logf, stats) -> int:
        """A Ctrl-C reached this process (KeyboardInterrupt): libFuzzer, its jobs and the fork server's harness
        processes get SIGINT as a terminal's Ctrl-C gives it to the whole process group, whether it came so or
        to this process alone (the same stop, the same summary and --json); libFuzzer's last lines are read (its
        final stats). What has not ended STOP_GRACE seconds later is stopped (SIGTERM, then SIGKILL), reaped and
        said so. libFuzzer's exit code."""
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C does not cut the stop short
        try:
            for root in [proc.pid] + ([server[0].pid] if server is not None else []):
                _signal_tree(root, signal.SIGINT)  # (the fork server itself ignores it: its harnesses do not)
            reader = threading.Thread(target=lambda: [stats.update(ln) for ln in map(_logged(logf), proc.stdout)],
                                      daemon=True)
            reader.start()
            try:
                rc = proc.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                self.log(f"libFuzzer did not end within {STOP_GRACE:.0f} s of the Ctrl-C: stopped (SIGTERM, then "
                         "SIGKILL to what was left)")
                _stop_tree(proc.pid)
                rc = proc.wait()
            reader.join(timeout=STOP_GRACE)
            return rc
        finally:
            signal.signal(signal.SIGINT, old)

    def stop_forkserver(self, server) -> None:
        """The fork server stopped (SIGTERM: it ends its harness processes, SIGKILL to any left after a few
        seconds, and exits), SIGKILL to it too past STOP_GRACE seconds; reaped, its socket's folder removed."""
        if server is None:
            return
        proc, folder = server
        if proc.poll() is None:
            proc.terminate()  # it ends its children and exits
            try:
                proc.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                getattr(self, "log", print)(f"fork server: did not end within {STOP_GRACE:.0f} s of SIGTERM: "
                                            "killed (SIGKILL), with what it had started")
                _signal_tree(proc.pid, signal.SIGKILL)
                proc.wait()
        if proc.stdout:
            proc.stdout.close()
        shutil.rmtree(folder, ignore_errors=True)

    def probe_counters(self, env) -> str:
        """Fork mode's parent does not print the modules it loaded: ask a one-off, non-fork process."""
        p = subprocess.run([str(self.launcher()), "-runs=1"], env=env, capture_output=True, text=True, timeout=300,
                           cwd=self.workdir)
        for ln in (p.stdout + p.stderr).splitlines():
            m = re.search(r"Loaded (\d+) modules\s+\((\d+) inline 8-bit counters\)", ln)
            if m:
                return f"{m.group(2)} inline 8-bit counters in {m.group(1)} native modules"
        return ""

    def explained_crash(self, artifact: Path, answer: Crash, row: dict) -> dict:
        """A crash file whose re-check killed the subject's process, judged with the fitted causes as a job judges
        an engine's raise in process (dryz.causes.explains: the composed model raises there; a process that dies
        ends its job before the job can judge it): where they explain it, its case and answer are kept among the
        explained inputs (one file, as a job keeps them) and the row says so (explained_by): not a finding."""
        if not self.causes or self.target != "cases" or self.vocab:
            return row
        from ..causes import answer_json, explains  # on use: a campaign with fitted causes
        try:
            case = input_decoder(self.subject)(artifact.read_bytes())
        except (CaseError, ValueError):
            return row
        if not explains(case, answer, tuple(self.causes), bool(self.subject.caps.sorted_flag), self.subject.abi):
            return row
        self.explained_dir.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha1(artifact.read_bytes()).hexdigest()  # (as a job names an explained input)
        (self.explained_dir / f"{name}.json").write_text(json.dumps({"case": case.to_json(),
                                                                     "answer": answer_json(answer)}))
        return dict(row, explained_by=list(self.causes))

    def kept(self, artifact: Path, why: str) -> dict:
        """A crash file kept without a re-check (why: interrupted, --time spent, --recheck limit); like every
        finding row it names the subject it was found on."""
        return {"file": str(artifact), "subject": self.subject.spec, "klass": f"not re-checked ({why})",
                "reproduces": None}

    def recheck(self, artifact: Path) -> dict:
        """Re-judge a crash file in a clean process on the audited subject (an isolation worker spawned from its
        spec: with --native, the uninstrumented library the user selected, not the instrumented copy); a case
        that kills it there is class crash (memory, with the report, when it dies with a sanitizer report:
        check.crash_verdict), and it reproduces."""
        base = {"file": str(artifact), "subject": self.subject.spec}
        env = {k: v for k, v in os.environ.items() if k != "DRYZ_FAULT"}
        if self.fault:
            env["DRYZ_FAULT"] = self.fault
        with Worker(self.subject.spec, timeout=120, env=env) as w:
            t = time.monotonic()
            out = w.call(recheck_op, artifact.read_bytes(), self.target, self.vocab, self.breakers)
            base["recheck_seconds"] = round(time.monotonic() - t, 3)
        if isinstance(out, Crash):
            if out.signal == "hang":
                return dict(base, klass="hang", reproduces=True, signal=out.signal)
            return self.explained_crash(artifact, out, dict(
                base, klass=crash_verdict(None, out).klass, reproduces=True, signal=out.signal, **crash_fields(out)))
        if isinstance(out, str):  # the bytes decode to nothing this subject runs
            return dict(base, klass="error", reproduces=False, stderr=out)
        klass, case_json = out
        if self.vocab and case_json is not None:  # the decoded case beside the crash file: `dryz check` reads it
            Path(str(artifact) + ".case.json").write_text(json.dumps(case_json) + "\n")
        return dict(base, klass=klass, reproduces=is_new_finding(klass))


def recheck_op(subject, data: bytes, target: str, vocab, breakers):
    """A crash file judged on the subject as the campaign's target judged it: (class, case JSON or None), or a
    one-line reason it cannot be judged (runs in an isolation worker)."""
    try:
        if target == "traces":
            return check_trace(decode_trace(data), subject).klass, None
        case = input_decoder(subject, vocab, breakers)(data)
        return check(case, subject).klass, case.to_json()
    except (CaseError, Unsupported, ValueError) as e:
        return f"{type(e).__name__}: {e}"


def split_slow(findings: list[dict]) -> tuple[list[dict], list[dict]]:
    """(findings, slow inputs). A slow-unit file is libFuzzer's note that one run took -report_slow_units seconds
    or more (a busy machine pauses a run as easily as a slow subject makes one): a slow input when its re-check
    judged it and found no new finding (agree, or a class the corpus documents); one that crashes, hangs or
    disagrees is a finding, and one the re-check could not judge (error) or did not run stays among the files."""
    judged = set(CLASSES)  # a class of the verdict: not "error" or "not re-checked ..."
    slow = [f for f in findings if Path(f["file"]).name.startswith("slow-unit-") and f["reproduces"] is False
            and f["klass"] in judged]
    return [f for f in findings if f not in slow], slow


def exit_code(summary: dict, confirmation: dict | None, seconds: int) -> tuple[int, str | None]:
    """The campaign's exit code and, where there is one, its one-line reason for stderr: 130 interrupted (the
    summary covers only that part), 1 a finding that reproduces or a missed ABI confirmation case, 2 crash files
    that do not reproduce on the subject (the harness in doubt) or a campaign that executed nothing (void), else
    0."""
    if summary["interrupted"]:
        return 130, (f"dryz fuzz: INTERRUPTED after {summary['seconds']} s of {seconds}: this summary covers only "
                     f"that part; {len(summary['findings'])} crash file(s) kept, not re-checked")
    control_missed = confirmation is not None and not confirmation["passed"] and not confirmation.get("explained_by")
    if any(f["reproduces"] for f in summary["findings"]) or control_missed:
        return EXIT_FINDING, None
    if summary["findings"]:
        return EXIT_ERROR, (f"dryz: error: {len(summary['findings'])} crash file(s) that do not reproduce on the subject: "
                   "the harness is in doubt")
    if summary.get("void"):  # nothing was judged: the campaign claims nothing
        return EXIT_ERROR, f"dryz fuzz: VOID: {summary['void']}; nothing was judged"
    return EXIT_OK, None


def confirmation_control(subject) -> dict:
    """The ABI confirmation case judged in an isolation worker (as `dryz check` runs it) before a
    symbol-vocabulary campaign: the summary records it, and a library that misses it makes the campaign a
    finding whatever libFuzzer finds."""
    with Worker(subject.spec, subject) as w:
        return abi_confirmation_control(lambda case: check_in(w, case).to_json())
