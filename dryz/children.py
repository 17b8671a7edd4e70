"""The one way dryz runs a dryz command in a child process (the gate's modes, the matrix's cells, the mutants'
kills, the identities and witnesses they read): `python -m dryz --subject SPEC -q COMMAND...`, in a session of
its own, with one environment, one timeout policy and one signal policy. What a child found is read from the
JSON it writes (its --json), never from what it prints for people.

- Environment: this process's, without what would select another subject or plant a fault (DRYZ_LIB,
  DRYZ_SUBJECT, LLAMA_CPP_LIB_PATH, DRYZ_FAULT; the child's --subject says which subject) and without
  DRYZ_QUIET (its -q says that); with what the subject needs in a process from its start
  (dryz.subject.registry.child_env: a sanitized libllama's runtime).
- Timeout: past its timeout a child's whole process group gets SIGTERM, and SIGKILL 10 s later; its outcome is
  `timeout`.
- Signals: `signal()` reaches the child's whole group (a campaign's fuzz jobs, a certificate's workers), so
  Ctrl-C in the parent stops every process the child started and none is left behind: a Ctrl-C while `wait`
  waits is passed on to the group (SIGINT, then SIGTERM and SIGKILL), then raised on.
- Outcome of an exit: 0 pass, 1 finding, 130 interrupted, a signal crash (the subject killed the dryz process),
  anything else error (bad input or the harness in doubt: the child's last line on stderr says which).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .subject.registry import child_env

STRIPPED = ("DRYZ_LIB", "DRYZ_SUBJECT", "LLAMA_CPP_LIB_PATH", "DRYZ_FAULT", "DRYZ_QUIET")
TERM_GRACE = 10.0  # seconds between SIGTERM and SIGKILL
INTERRUPT_GRACE = 30.0  # seconds a child interrupted with its parent has to write its partial state


def argv(spec: str, args) -> list[str]:
    """The command line of a dryz child on the subject `spec`."""
    return [sys.executable, "-m", "dryz", "--subject", spec, "-q", *[str(a) for a in args]]


def environment(spec: str) -> dict:
    """The environment of a dryz child on the subject `spec` (see the module docstring)."""
    env = {k: v for k, v in os.environ.items() if k not in STRIPPED}
    env = child_env(spec, env)
    env.pop("DRYZ_SUBJECT", None)  # the child's --subject selects it
    return env


def outcome(exit: int | None, timed_out: bool = False) -> str:
    """pass | finding | interrupted | crash | timeout | error, from how a child ended."""
    if timed_out:
        return "timeout"
    if exit is None:
        return "error"
    if exit < 0:
        return "crash"
    return {0: "pass", 1: "finding", 130: "interrupted"}.get(exit, "error")


def signal_name(exit: int) -> str:
    try:
        return signal.Signals(-exit).name
    except ValueError:
        return f"signal {-exit}"


@dataclass
class Finished:
    """How a child ended: its exit code (None when it was killed at its timeout), what it printed (when captured),
    and its wall seconds."""
    exit: int | None
    timed_out: bool
    seconds: float
    stdout: str = ""
    stderr: str = ""

    @property
    def outcome(self) -> str:
        return outcome(self.exit, self.timed_out)

    def last_error(self) -> str:
        """The child's own one-line error: its last line on stderr that dryz wrote (`dryz: error: ...`, `dryz
        CMD: ...`). A line the subject wrote (a library's abort message, a sanitizer's report) is never given as
        a reason: without a line of dryz's, how the process ended."""
        lines = [ln.strip() for ln in self.stderr.splitlines() if ln.strip().startswith("dryz")]
        if lines:
            return lines[-1][:200]
        if self.exit is not None and self.exit < 0:
            return f"the dryz process died of {signal_name(self.exit)}"
        return "no result" if self.timed_out else f"exit {self.exit}, without a message from dryz"

    def failure(self, timeout: float) -> str:
        """Why the child could not run at all, in a table's cell (hang, crash, error), or "" when it exited 0 or 1."""
        if self.timed_out:
            return f"hang (no result within {timeout:.0f} s)"
        if self.exit is not None and self.exit < 0:
            return f"crash ({signal_name(self.exit)})"
        if self.exit not in (0, 1):
            return f"error (exit {self.exit}: {self.last_error()[:120]})"
        return ""

    def why(self, timeout: float | None = None) -> str:
        """One line on a child that did not conclude (crash, timeout, error), for a report."""
        if self.timed_out:
            return f"no result within {timeout:.0f} s" if timeout else "no result within its timeout"
        if self.exit is not None and self.exit < 0:
            return f"the dryz process died of {signal_name(self.exit)}"
        return f"exit {self.exit}: {self.last_error()}"


class Child:
    """One dryz child: started at once in a session of its own; `wait` ends it at its timeout; `signal` reaches
    its whole process group. stdout/stderr: files to write to (paths), or None to capture them."""

    def __init__(self, spec: str, args, cwd, stdout: Path | None = None, stderr: Path | None = None):
        self.argv = argv(spec, args)
        self._out = open(stdout, "w") if stdout is not None else subprocess.PIPE
        self._err = open(stderr, "w") if stderr is not None else subprocess.PIPE
        self._files = (stdout, stderr)
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=self._out, stderr=self._err, env=environment(spec),
                                     cwd=cwd, start_new_session=True, text=True, errors="replace")

    def signal(self, sig=signal.SIGTERM) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except OSError:
            pass

    def _stop(self) -> None:
        """SIGTERM to the group, SIGKILL after TERM_GRACE seconds."""
        for sig, grace in ((signal.SIGTERM, TERM_GRACE), (signal.SIGKILL, 30.0)):
            self.signal(sig)
            try:
                self.proc.wait(timeout=grace)
                return
            except subprocess.TimeoutExpired:
                continue

    def wait(self, timeout: float | None = None) -> Finished:
        """The child run to its end or its timeout. A Ctrl-C here (KeyboardInterrupt) reaches the child's whole
        group as SIGINT (it writes its partial state), then SIGTERM and SIGKILL after INTERRUPT_GRACE seconds;
        the KeyboardInterrupt goes on up, and no process of the child's is left behind."""
        timed_out = False
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            self._stop()
            out, err = self.proc.communicate()
        except KeyboardInterrupt:
            self.signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=INTERRUPT_GRACE)
            except (subprocess.TimeoutExpired, KeyboardInterrupt):
                self._stop()
            self.signal(signal.SIGKILL)  # what the child started and left behind in its group
            raise
        finally:
            for f in (self._out, self._err):
                if f is not subprocess.PIPE:
                    f.close()
        if self._files[1] is not None:
            err = Path(self._files[1]).read_text(errors="replace")
        return Finished(None if timed_out else self.proc.returncode, timed_out,
                        round(time.monotonic() - self.started, 1), out or "", err or "")


def run(spec: str, args, timeout: float, cwd) -> Finished:
    """A dryz child on the subject `spec`, run to its end or its timeout, its output captured."""
    return Child(spec, args, cwd).wait(timeout)
