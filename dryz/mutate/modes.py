"""The killer: a list of modes, each a dryz command line run on `--lib MUTANT` in its own process with a
timeout, and the baseline, llama.cpp's own tests/test-sampling.cpp (dryz/mutate/upstream.py).

A mode's status on a library: `survived` (exit 0), `killed` (exit 1: a finding), `crash` (the process died of a
signal), `memory` (it died with a sanitizer report), `timeout` (no answer within the mode's timeout: a hang) or
`error` (exit 2: bad input or the harness in doubt; not a kill). Killed, crash, memory and timeout kill the
mutant.

The modes have the shape of `dryz gate`'s plan (a named dryz command with a budget); when dryz.gate lands,
`modes_for()` below is the one place to switch: return the gate's plan for the same budget instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

KILLING = ("killed", "crash", "memory", "timeout")


@dataclass(frozen=True)
class Mode:
    name: str
    args: tuple[str, ...]      # the dryz command line after `dryz --lib LIB`; {work} is the mode's work folder
    timeout: float             # seconds, the whole process

    def argv(self, lib: str | Path, work: Path) -> list[str]:
        return [sys.executable, "-m", "dryz", "-q", "--lib", str(lib),
                *(a.replace("{work}", str(work)) for a in self.args)]


@dataclass
class ModeResult:
    mode: str
    status: str
    exit: int | None
    seconds: float
    detail: str = ""
    frames: list[str] = field(default_factory=list)

    @property
    def kills(self) -> bool:
        return self.status in KILLING

    def to_json(self) -> dict:
        d = {"mode": self.mode, "status": self.status, "exit": self.exit, "seconds": round(self.seconds, 2)}
        if self.detail:
            d["detail"] = self.detail
        if self.frames:
            d["frames"] = self.frames
        return d


def default_modes(fuzz_seconds: int = 10) -> list[Mode]:
    """README's main job and every other audit mode, each on a small budget. The fuzz campaigns stop at their
    first crash file (-ignore_crashes=0: one finding kills the mutant; its re-check in a clean process still
    decides the exit code)."""
    t = fuzz_seconds
    stop = ("--", "-ignore_crashes=0")
    fuzz_timeout = t + 120
    return [
        Mode("exhaustive", ("exhaustive", "--no-progress", "--json", "{work}/r.json"), 120),
        Mode("parameters", ("exhaustive", "--parameters", "--no-progress", "--json", "{work}/r.json"), 300),
        Mode("window-caps", ("exhaustive", "--window-caps", "--no-progress", "--json", "{work}/r.json"), 180),
        Mode("traces-7", ("exhaustive", "--traces", "7", "--no-progress", "--json", "{work}/r.json"), 300),
        Mode("restarts", ("restarts",), 120),
        Mode("replay", ("replay",), 180),
        Mode("fuzz", ("fuzz", "--time", str(t), "--jobs", "1", "--workdir", "{work}", *stop), fuzz_timeout),
        Mode("fuzz-traces", ("fuzz", "--traces", "--time", str(t), "--jobs", "1", "--workdir", "{work}", *stop),
             fuzz_timeout),
        Mode("fuzz-bpe-dict", ("fuzz", "--vocab", "llama-bpe", "--breakers", "dict", "--time", str(t), "--jobs",
                               "1", "--workdir", "{work}", *stop), fuzz_timeout),
        Mode("fuzz-bpe-random", ("fuzz", "--vocab", "llama-bpe", "--breakers", "random", "--time", str(t),
                                 "--jobs", "1", "--workdir", "{work}", *stop), fuzz_timeout),
    ]


def modes_for(fuzz_seconds: int = 10, only: list[str] | None = None) -> list[Mode]:
    """The plan mutate runs. When dryz.gate lands: `from ..gate import plan; modes = plan(time=...)` here."""
    modes = default_modes(fuzz_seconds)
    if only:
        unknown = sorted(set(only) - {m.name for m in modes})
        if unknown:
            raise ValueError(f"unknown mode(s) {', '.join(unknown)} (known: {', '.join(m.name for m in modes)})")
        modes = [m for m in modes if m.name in only]
    return modes


def _clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DRYZ_LIB", "LLAMA_CPP_LIB_PATH", "DRYZ_FAULT",
                                                            "LD_PRELOAD", "DRYZ_FUZZ_VOCAB",
                                                            "DRYZ_FUZZ_BREAKERS")}
    env["DRYZ_QUIET"] = "1"
    return env


def classify(rc: int | None, stderr: str, timed_out: bool) -> tuple[str, str, list[str]]:
    """(status, detail, sanitizer frames) of a finished mode process."""
    from ..subject.sanitizer import report
    rep = report(stderr)
    if timed_out:
        return "timeout", "no exit within the timeout", []
    if rep is not None:
        return "memory", rep["summary"], rep["frames"]
    if rc is not None and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return "crash", f"died of {name}", []
    if rc == 0:
        return "survived", "", []
    if rc == 1:
        return "killed", "", []
    last = (stderr.strip().splitlines() or [f"exit {rc}"])[-1]
    return "error", last[-300:], []


def run_mode(mode: Mode, lib: str | Path, work: Path) -> ModeResult:
    """Run one mode on one library in its own process group (a timeout takes its children with it)."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    t0 = time.monotonic()
    proc = subprocess.Popen(mode.argv(lib, work), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", env=_clean_env(), cwd=work, start_new_session=True)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=mode.timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        out, err = proc.communicate()
    except BaseException:  # Ctrl-C: the mode's process group goes too
        _kill_group(proc)
        raise
    seconds = time.monotonic() - t0
    (work / "stdout.txt").write_text(out)
    (work / "stderr.txt").write_text(err)
    status, detail, frames = classify(proc.returncode, err, timed_out)
    if timed_out and (work / "artifacts").is_dir():
        n = sum(1 for p in (work / "artifacts").iterdir() if p.name.startswith(("crash-", "timeout-")))
        detail += f"; {n} crash file(s) written" if n else "; no crash file written"
    if status == "killed":
        detail = next((ln.strip() for ln in err.splitlines() if ln.startswith("dryz: finding:")), "")[:300] \
            or _first_finding(out)  # the first: the library failed the load-time probe
    return ModeResult(mode.name, status, None if timed_out else proc.returncode, seconds, detail, frames)


def _kill_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()


def _first_finding(stdout: str) -> str:
    """A line saying what the mode found (the verdict line of a certificate, a CHANGED replay entry, ...)."""
    keys = ("MISMATCH", "CHANGED", "finding", "mismatch", "crash", "VOID", "memory")
    for line in stdout.splitlines():
        if any(k in line for k in keys):
            return line.strip()[:300]
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    return lines[0].strip()[:300] if lines else ""
