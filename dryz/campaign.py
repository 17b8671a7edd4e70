"""`dryz fuzz`: a libFuzzer campaign over fuzz/dry_fuzz.py, with progress, a summary, and artifacts kept.

Fork mode (-fork=JOBS -ignore_crashes=1) runs the target in child processes, so a campaign survives a
subject crash or abort and keeps every crash file. With --native the children load an instrumented libllama
(LD_PRELOAD'ed libFuzzer, LLAMA_CPP_LIB_PATH); every finding is then re-checked on the shipped library.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HARNESS = REPO / "fuzz" / "dry_fuzz.py"
BUILD_NATIVE = REPO / "fuzz" / "build_native.py"

_STAT = re.compile(r"(cov|ft|corp|exec/s|rss):? ?(\d+)")
_EXECS = re.compile(r"^#(\d+)")


class CampaignError(RuntimeError):
    pass


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
    log=print

    def env(self) -> dict:
        env = dict(os.environ)
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        env.pop("DRYZ_FAULT", None)
        if self.fault:
            env["DRYZ_FAULT"] = self.fault
        if self.native:
            nb = load_build_native().build_native(log=lambda m: self.log(f"native: {m}"))
            env.update(nb.env())
        return env

    def seed(self) -> Path:
        """Write every corpus entry's Case JSON as a seed input (the decoder reads '{...}' as that Case)."""
        from .corpus import DEFAULT_DIR, CorpusError, entries, load_entry
        seeds = self.workdir / "seeds"
        seeds.mkdir(parents=True, exist_ok=True)
        n = 0
        for p in entries(self.seed_dir or DEFAULT_DIR):
            try:
                e = load_entry(p)
            except CorpusError:
                continue
            text = e.case.dumps().encode()
            (seeds / hashlib.sha1(text).hexdigest()).write_bytes(text)
            n += 1
        self.log(f"seeded {n} inputs from {self.seed_dir or DEFAULT_DIR}")
        return seeds

    def command(self, seeds: Path) -> list[str]:
        if not HARNESS.exists():
            raise CampaignError(f"fuzz harness {HARNESS} not found (run dryz from a checkout: pip install -e .)")
        work = self.workdir / "corpus"
        work.mkdir(parents=True, exist_ok=True)
        self.artifacts.mkdir(parents=True, exist_ok=True)
        # Fork mode re-runs argv[0] for every job: the harness is executable (#!/usr/bin/env python3) and
        # env() puts this interpreter's directory first on PATH.
        cmd = [str(HARNESS), f"-max_total_time={self.seconds}",
               f"-artifact_prefix={self.artifacts}/", "-print_final_stats=1", "-max_len=4096",
               f"-fork={self.jobs}", "-ignore_crashes=1", "-ignore_timeouts=1", "-ignore_ooms=1",
               "-timeout=30"]
        return cmd + list(self.extra) + [str(work), str(seeds)]

    def run(self) -> dict:
        before = set(self.artifacts.glob("*")) if self.artifacts.exists() else set()
        seeds = self.seed()
        env = self.env()
        cmd = self.command(seeds)
        log_path = self.workdir / "libfuzzer.log"
        stats = Stats()
        t0 = time.monotonic()
        last = 0.0
        self.log(f"libFuzzer: {' '.join(cmd)}")
        self.log(f"coverage: {'python + native (instrumented libllama)' if self.native else 'python only'}"
                 f"{'; FAULT INJECTED: ' + self.fault if self.fault else ''}")
        if self.native:
            stats.counters = self.probe_counters(env)
            self.log(f"native coverage: {stats.counters or 'NO inline counters reported'}")
        with open(log_path, "w") as logf:
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    errors="replace", cwd=self.workdir)
            try:
                for line in proc.stdout:
                    logf.write(line)
                    if stats.update(line):
                        now = time.monotonic()
                        if now - last >= 5:
                            last = now
                            self.log(f"[{now - t0:6.0f}s] execs {stats.execs:,}  exec/s {stats.exec_per_s:,}  "
                                     f"cov {stats.cov}  ft {stats.ft}  corpus {stats.corpus}")
                rc = proc.wait()
            except KeyboardInterrupt:
                proc.terminate()
                rc = proc.wait()
        if stats.execs == 0 and rc != 0:
            tail = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
            raise CampaignError(f"libFuzzer did not run (exit {rc}): {tail[-1] if tail else 'no output'} "
                                f"(log: {log_path})")
        new = sorted(p for p in set(self.artifacts.glob("*")) - before if p.is_file())
        findings = [self.recheck(p) for p in new]
        return {"seconds": round(time.monotonic() - t0, 1), "execs": stats.execs, "cov": stats.cov,
                "ft": stats.ft, "corpus": stats.corpus, "exec_per_s": stats.exec_per_s,
                "counters": stats.counters, "libfuzzer_exit": rc, "log": str(log_path),
                "native": self.native, "fault": self.fault, "findings": findings}

    def probe_counters(self, env) -> str:
        """Fork mode's parent does not print the modules it loaded: ask a one-off, non-fork process."""
        p = subprocess.run([str(HARNESS), "-runs=1"], env=env, capture_output=True, text=True, timeout=300,
                           cwd=self.workdir)
        for ln in (p.stdout + p.stderr).splitlines():
            m = re.search(r"Loaded (\d+) modules\s+\((\d+) inline 8-bit counters\)", ln)
            if m:
                return f"{m.group(2)} inline 8-bit counters in {m.group(1)} native modules"
        return ""

    def recheck(self, artifact: Path) -> dict:
        """Re-judge a crash file in a clean process on the shipped (pip) library."""
        env = dict(os.environ)
        for k in ("LD_PRELOAD", "LLAMA_CPP_LIB_PATH", "DRYZ_FAULT"):
            env.pop(k, None)
        if self.fault:
            env["DRYZ_FAULT"] = self.fault
        try:
            p = subprocess.run([sys.executable, "-m", "dryz", "check", str(artifact)], env=env,
                               capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return {"file": str(artifact), "shipped_class": "crash", "reproduces": True}
        if p.returncode not in (0, 1):
            return {"file": str(artifact), "shipped_class": "crash" if p.returncode < 0 else "error",
                    "reproduces": p.returncode < 0, "stderr": p.stderr.strip()[-300:]}
        klass = json.loads(p.stdout)["verdict"]["class"]
        return {"file": str(artifact), "shipped_class": klass, "reproduces": klass != "agree"}


def load_build_native():
    if not BUILD_NATIVE.exists():
        raise CampaignError(f"{BUILD_NATIVE} not found")
    spec = importlib.util.spec_from_file_location("dryz_build_native", BUILD_NATIVE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod
