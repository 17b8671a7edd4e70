"""Two subjects, the same Case: does the library's output differ, or does one of them crash?

Each subject runs in its own process (`dryz --lib L serve`: one libllama per process, so two builds never share
symbols), fed Case JSON lines; a subject that crashes, aborts or hangs costs that case (its signature says
which), and its server is started again for the next one. Every evaluation is the one verdict, `check()`, on
that subject: the output (logit bits, sorted flag) and its class.

A difference is classed by what the two sides show:
- `crash`: one side's process died (or hung) on the case, the other did not;
- `promise-broken-in-one`: the outputs differ and one side's verdict is not agree (a mismatch against the
  model of its own ABI, or a broken promise) while the other's is;
- `semantic-change`: the outputs differ and each side agrees with the model of its own ABI (the release changed
  what DRY does, e.g. what penalty_last_n = -1 means).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..case import Case

CASE_TIMEOUT = 30.0  # seconds one evaluation may take before the subject counts as hung


@dataclass(frozen=True)
class Result:
    kind: str          # "ok", "crash", "hang", "error"
    klass: str = ""    # check()'s class when ok
    bits: tuple = ()   # float32 logit bits
    sorted: bool = False
    detail: str = ""

    def output(self) -> tuple:
        """What the library did, for comparing two subjects."""
        return (self.kind, self.bits, self.sorted) if self.kind == "ok" else (self.kind,)


class Server:
    """One subject's process, judging Case JSON lines with check()."""

    def __init__(self, lib: str | Path):
        self.lib = str(lib)
        self.proc = None
        self.evaluations = 0
        self.restarts = 0

    def _start(self):
        from .build import runtime_env
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "LLAMA_CPP_LIB_PATH")}
        env["DRYZ_LIB"] = self.lib
        env.update(runtime_env(self.lib))  # a sanitized subject: its runtime preloaded
        self.proc = subprocess.Popen([sys.executable, "-m", "dryz", "serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True,
                                     bufsize=1, start_new_session=True)  # its own group: a kill takes its worker

    def run(self, case: Case) -> Result:
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self.restarts += 1
            self._start()
        self.evaluations += 1
        try:
            self.proc.stdin.write(case.dumps() + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self._died()
        ready, _, _ = select.select([self.proc.stdout], [], [], CASE_TIMEOUT + 30)
        if not ready:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
            self.proc.wait()
            self.proc = None
            return Result("hang", detail=f"no answer within {CASE_TIMEOUT:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            return self._died()
        d = json.loads(line)
        if "error" in d:
            return Result("error", detail=d["error"])
        if "crash" in d:
            return Result("hang" if d["crash"] == "hang" else "crash", detail=f"{d['crash']}: {d['detail']}")
        return Result("ok", d["class"], tuple(d["bits"]), d["sorted"])

    def _died(self) -> Result:
        rc = self.proc.wait()
        self.proc = None
        name = _signame(-rc) if rc < 0 else f"exit {rc}"
        return Result("crash", detail=f"the server itself died ({name})")

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def classify(a: Result, b: Result) -> str | None:
    """None when the two subjects did the same; else the class of the difference ("error" when dryz could
    not judge the case on one side: no difference between the libraries is claimed)."""
    if a.kind == "error" or b.kind == "error":
        return "error"
    if a.output() == b.output():
        return None
    if a.kind != "ok" or b.kind != "ok":
        return "crash"
    if (a.klass == "agree") != (b.klass == "agree"):
        return "promise-broken-in-one"
    return "semantic-change"


def serve() -> None:
    """The `dryz serve` loop: a Case JSON per line on stdin, one JSON answer per line on stdout. Cases run in a
    forked worker that lives on from case to case; when a case kills the library, the worker's death is that
    case's answer (the signal and the library's last line) and a fresh worker is forked for the next one, so
    a crash costs a fork (milliseconds), not a new interpreter."""
    from . import current
    lib = current()
    lib.identity  # noqa: B018 (computed once, before forking)
    worker = None
    for line in sys.stdin:
        if worker is None:
            worker = _Worker(lib)
        answer = worker.ask(line)
        if answer is None:  # the worker died on this case (or hung and was killed)
            answer = worker.death()
            worker = None
        print(answer, flush=True)
    if worker is not None:
        worker.stop()


class _Worker:
    """A forked child judging cases from a pipe; its stdout and stderr go to a pipe the parent drains."""

    def __init__(self, lib):
        self.to_r, self.to_w = os.pipe()
        self.from_r, self.from_w = os.pipe()
        self.err_r, self.err_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.to_w)
            os.close(self.from_r)
            os.close(self.err_r)
            os.dup2(self.err_w, 2)
            os.dup2(self.err_w, 1)  # whatever the library prints stays out of the answers
            try:
                _worker_loop(lib, self.to_r, self.from_w)
            finally:
                os._exit(0)
        for fd in (self.to_r, self.from_w, self.err_w):
            os.close(fd)
        os.set_blocking(self.err_r, False)
        self.inbox = os.fdopen(self.from_r, "r")
        self.err = b""
        self.hung = False

    def _drain(self):
        try:
            while True:
                b = os.read(self.err_r, 1 << 16)
                if not b:
                    break
                self.err = (self.err + b)[-16384:]  # a sanitizer report is a few KB
        except BlockingIOError:
            pass

    def ask(self, line: str) -> str | None:
        try:
            os.write(self.to_w, line.encode() if line.endswith("\n") else (line + "\n").encode())
        except BrokenPipeError:
            return None
        ready, _, _ = select.select([self.inbox], [], [], CASE_TIMEOUT)
        self._drain()
        if not ready:
            self.hung = True
            os.kill(self.pid, signal.SIGKILL)
            return None
        answer = self.inbox.readline()
        return answer.strip() or None

    def death(self) -> str:
        _, status = os.waitpid(self.pid, 0)
        self._drain()
        self._close()
        if self.hung:
            return json.dumps({"crash": "hang", "detail": f"no answer within {CASE_TIMEOUT:.0f} s"})
        sig = _signame(os.WTERMSIG(status)) if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
        text = self.err.decode(errors="replace")
        from .sanitizer import report
        rep = report(text)
        if rep is not None:
            return json.dumps({"crash": "memory", "detail": rep["summary"]})
        last = text.strip().splitlines()
        return json.dumps({"crash": sig, "detail": last[-1].strip() if last else ""})

    def _close(self):
        for f in (self.inbox,):
            f.close()
        for fd in (self.to_w, self.err_r):
            try:
                os.close(fd)
            except OSError:
                pass

    def stop(self):
        self._close()
        os.waitpid(self.pid, 0)


def _worker_loop(lib, rfd: int, wfd: int) -> None:
    import numpy as np

    from ..case import CaseError
    from ..check import check
    with os.fdopen(rfd, "r") as inbox, os.fdopen(wfd, "w") as out:
        for line in inbox:
            try:
                v = check(Case.loads(line), lib)
                bits = np.asarray(v.observed_array, dtype=np.float32).view(np.uint32).tolist()
                msg = {"class": v.klass, "bits": bits, "sorted": bool(v.observed_sorted)}
            except CaseError as e:
                msg = {"error": str(e)}
            except Exception as e:  # noqa: BLE001 (dryz's own failure: an error answer, never a crash)
                msg = {"error": f"{type(e).__name__}: {e}"}
            out.write(json.dumps(msg) + "\n")
            out.flush()


def edge_cases() -> list[Case]:
    """Small histories across the parameters' edges, where releases are most likely to differ: windows around
    0 and -1, n_ctx_train small and zero, allowed_length around 0, multipliers and bases around their
    enabling thresholds, breakers single and multi-token (2,268 cases)."""
    out = []
    for h in ((0, 0), (0, 1, 0, 1, 0), (0, 1, 2, 0, 1)):
        for last_n in (-5, -2, -1, 0, 1, 3, 64):
            for n_ctx in (0, 3, 4096):
                for allowed in (-1, 0, 1):
                    for mult, base in ((1.0, 2.0), (0.0, 2.0), (-1.0, 2.0), (1.0, 0.5)):
                        for brk in ((), ("b",), ("ab",)):
                            out.append(Case(history=h, alphabet=3, penalty_last_n=last_n, n_ctx_train=n_ctx,
                                            allowed_length=allowed, multiplier=mult, base=base, breakers=brk))
    return out


def random_cases(n: int, seed: int = 0) -> list[Case]:
    """Cases the fuzz decoder makes from random bytes (long histories, random windows and parameters)."""
    import numpy as np

    from ..fuzz.decode import decode
    rng = np.random.default_rng(seed)
    return [decode(rng.integers(0, 256, int(rng.integers(0, 3000))).astype(np.uint8).tobytes())
            for _ in range(n)]


def compare(servers: dict[str, Server], cases, reference: str, log=None, budget_s: float | None = None):
    """Every case on every subject; yields (case, other, class, results) for each difference from the
    reference subject."""
    t0 = time.monotonic()
    for i, case in enumerate(cases):
        if budget_s is not None and time.monotonic() - t0 > budget_s:
            if log:
                log(f"differential: time budget reached after {i} cases")
            return
        res = {name: s.run(case) for name, s in servers.items()}
        for name, r in res.items():
            if name == reference:
                continue
            k = classify(res[reference], r)
            if k is not None:
                yield case, name, k, res
