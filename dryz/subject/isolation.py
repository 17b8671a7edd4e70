"""The one way dryz runs a subject in another process: a worker process that holds the subject and runs calls on
it, one at a time, and answers a crash as an answer.

Every mode that must survive its subject (check and explain, the minimizer's evaluations, the fuzz campaign's
re-checks, replay, the matrix and the gate's comparisons, exhaustive's parallel slices) sends its work here as a
call: a module-level function and its arguments, pickled by reference; the worker runs fn(subject, *args) and
sends back the result. When the worker dies during a call (a signal, an abort, an exit) or does not answer
within the call's timeout, that call's answer is a Crash (answers.Crash: the signal and the worker's last
lines of output) and the next call starts a new worker: nothing already answered is lost.

How a worker starts:
- fork: from a process that already holds the subject (opened in this process): a copy of it, in milliseconds.
- spawn: `python -m dryz.subject.isolation` with the subject's spec in its environment (DRYZ_SUBJECT): a clean
  process, for a subject this process does not hold (another library than its own: two libllamas in one
  process would share symbols) or must not touch. A spawned worker that holds an in-process subject itself
  forks an inner worker per crash, so a crash there costs a fork, not a new interpreter.

Workers ignore SIGINT (the parent handles Ctrl-C and ends them), die with their parent (PR_SET_PDEATHSIG), and
write whatever the subject prints to a pipe the parent keeps the tail of (the crash's last words).

A call may say how far it got: mark(n) in the worker (an 8-byte word the worker shares with its parent, for a
worker forked from the parent); after a Crash the parent reads it as Worker.last_mark (None when the call marked
nothing, or the worker was spawned). A call that walks many items (dryz exhaustive --trace-events) names the item
the subject died on with it, and continues after it in the next worker.

Frames: 4-byte little-endian length + pickle. Requests: (fn, args). Answers: ("ok", result), ("raise",
exception) for an exception fn raised (re-raised in the parent: a harness or input error is never a crash).
"""

from __future__ import annotations

import ctypes
import faulthandler
import mmap
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time

from ..environment import duration, fds as _fds, read
from .answers import Crash
from .registry import child_env, opened
from .sanitizer import report

CALL_TIMEOUT = 60.0   # seconds one call may take before the subject counts as hung (a case: milliseconds)
TAIL = 16384          # bytes of the worker's output kept for a crash's last words (a sanitizer report: a few KB)
_LEN = struct.Struct("<I")
_PARENT_FDS: set[int] = set()  # this process's ends of its workers' pipes (a forked worker closes them)
_MARK = struct.Struct("<q")
_mark_word = None  # in a forked worker: the word its parent reads after a crash (mark)


def mark(n: int) -> None:
    """In a call a worker runs: record how far it got (n >= 0), which the parent reads as Worker.last_mark when
    the worker dies during the call. Outside a forked worker: nothing."""
    if _mark_word is not None:
        _MARK.pack_into(_mark_word, 0, n)


def signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _read_exact(fd: int, n: int) -> bytes | None:
    out = bytearray()
    while len(out) < n:
        b = os.read(fd, n - len(out))
        if not b:
            return None
        out += b
    return bytes(out)


def _write_frame(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_LEN.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_frame(fd: int):
    head = _read_exact(fd, _LEN.size)
    if head is None:
        return None
    body = _read_exact(fd, _LEN.unpack(head)[0])
    return None if body is None else pickle.loads(body)


class _Unreadable:
    """A request the worker could not unpickle (its function's module is not importable there)."""

    def __init__(self, why: str):
        self.why = why


def _read_request(fd: int):
    try:
        return _read_frame(fd)
    except Exception as e:  # noqa: BLE001 (answered as an error, never a crash)
        return _Unreadable(f"the worker cannot read the request ({type(e).__name__}: {e})")


def _answer(subject, request):
    fn, args = request
    try:
        return ("ok", fn(subject, *args))
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 (sent back and re-raised in the parent)
        try:
            pickle.dumps(e)
            return ("raise", e)
        except Exception:  # noqa: BLE001
            return ("raise", RuntimeError(f"{type(e).__name__}: {e}"))


def _loop(subject, rfd: int, wfd: int, inner=None) -> None:
    """Answer requests until the parent closes the pipe. inner: a Worker to relay each request to (a spawned
    worker holding an in-process subject), its Crash answered as the answer."""
    while True:
        req = _read_request(rfd)
        if req is None:
            return
        if isinstance(req, _Unreadable):
            _write_frame(wfd, ("raise", RuntimeError(req.why)))
            continue
        if inner is not None:
            fn, args = req
            try:
                res = inner.call(fn, *args)
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # noqa: BLE001 (what fn raised in the inner worker)
                _write_frame(wfd, ("raise", e if _picklable(e) else RuntimeError(f"{type(e).__name__}: {e}")))
                continue
            _write_frame(wfd, ("crash", res) if inner.crashed_last else ("ok", res))
        else:
            _write_frame(wfd, _answer(subject, req))


class Worker:
    """One worker process for one subject; call() runs fn(subject, *args) there. Given a subject this process
    holds whose code does not run in this process (a server, an adapter: caps.in_process false), calls run
    here: that subject answers its own crashes (answers.Crash), so no process stands between."""

    def __init__(self, spec: str, subject=None, timeout: float | None = CALL_TIMEOUT, env: dict | None = None):
        self.spec, self.subject, self.timeout, self.env = spec, subject, timeout, env
        self.direct = subject is not None and not subject.caps.in_process
        self.pid = None
        self.proc = None
        self.calls = 0
        self.restarts = 0
        self.crashed_last = False
        self.last_mark = None  # after a Crash: what the call last marked (mark), else None
        self._word = None      # the word a forked worker marks in (shared memory, made at the first fork)
        self._tail = b""

    # -- lifecycle ---------------------------------------------------------------------------------------
    def _start(self) -> None:
        global _mark_word
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        err_r, err_w = os.pipe()
        if self.subject is not None:
            if self._word is None:
                self._word = mmap.mmap(-1, _MARK.size)  # shared with every worker forked from here
            pid = os.fork()
            if pid == 0:  # the worker
                try:
                    _mark_word = self._word
                    signal.signal(signal.SIGINT, signal.SIG_IGN)
                    faulthandler.disable()  # its dump would bury the subject's last words (and may go elsewhere)
                    _die_with_parent()
                    for fd in (req_w, ans_r, err_r, *_PARENT_FDS):  # other workers' pipes stay theirs
                        try:
                            os.close(fd)
                        except OSError:
                            pass
                    os.dup2(err_w, 1)
                    os.dup2(err_w, 2)
                    _loop(self.subject, req_r, ans_w)
                finally:
                    os._exit(0)
            self.pid = pid
        else:
            env = child_env(self.spec, self.env)
            env["DRYZ_ISOLATION_FDS"] = f"{req_r},{ans_w}"
            if self.timeout is not None:
                env["DRYZ_ISOLATION_TIMEOUT"] = str(self.timeout)
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dryz.subject.isolation"], stdin=subprocess.DEVNULL, stdout=err_w,
                stderr=err_w, pass_fds=(req_r, ans_w), env=env, start_new_session=True,
                preexec_fn=_die_with_parent)
            self.pid = self.proc.pid
        for fd in (req_r, ans_w, err_w):
            os.close(fd)
        self.req, self.ans, self.err = req_w, ans_r, err_r
        _PARENT_FDS.update((req_w, ans_r, err_r))
        os.set_blocking(self.err, False)
        self._tail = b""

    def _close_fds(self) -> None:
        for fd in (self.req, self.ans, self.err):
            _PARENT_FDS.discard(fd)
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.req = self.ans = self.err = -1

    def alive(self) -> bool:
        return self.pid is not None

    def fileno(self) -> int:
        """What a Pool selects on: the answer pipe (a direct worker is always ready)."""
        return self.ans

    def _drain(self) -> None:
        try:
            while True:
                b = os.read(self.err, 1 << 16)
                if not b:
                    return
                self._tail = (self._tail + b)[-TAIL:]
        except (BlockingIOError, OSError):
            pass

    def _reap(self, kill: bool) -> None:
        """End the worker (killed first when kill) and record how it ended in self._status."""
        if self.pid is None:
            return
        if kill:
            try:
                if self.proc is not None:
                    os.killpg(self.pid, signal.SIGKILL)
                else:
                    os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            if self.proc is not None:
                rc = self.proc.wait()
                self._status = ("signal", -rc) if rc < 0 else ("exit", rc)
            else:
                _, st = os.waitpid(self.pid, 0)
                self._status = ("signal", os.WTERMSIG(st)) if os.WIFSIGNALED(st) else ("exit", os.WEXITSTATUS(st))
        except ChildProcessError:
            self._status = ("exit", -1)
        self._drain()
        self._close_fds()
        self.pid = self.proc = None

    def close(self) -> None:
        """Stop the worker: it ends when its request pipe closes (killed if it does not within a few seconds)."""
        if self.pid is None:
            return
        try:
            os.close(self.req)
        except OSError:
            pass
        _PARENT_FDS.discard(self.req)
        self.req = -1
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pid = self.pid
            if pid:
                if self.proc is not None:
                    self.proc.returncode = 0
                self.pid, self.proc = None, None
                self._close_fds()
                return
            time.sleep(0.01)
        self._reap(kill=True)

    # -- calls -----------------------------------------------------------------------------------------------
    def send(self, fn, *args) -> None:
        if self.direct:
            self._pending = (fn, args)
            self.calls += 1
            return
        if self.pid is None:
            if self.calls:
                self.restarts += 1
            self._start()
        self.calls += 1
        if self._word is not None:
            _MARK.pack_into(self._word, 0, -1)
        try:
            _write_frame(self.req, (fn, args))
        except (BrokenPipeError, OSError):
            pass  # the worker is gone: receive() answers a Crash

    def receive(self, timeout: float | None = None):
        """The answer to the request sent: the result, or a Crash (re-raises what fn raised)."""
        if self.direct:
            fn, args = self._pending
            self._pending = None
            self.crashed_last = False
            return fn(self.subject, *args)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.ans, self.err], [], [], left)
            if self.err in ready:
                self._drain()
            if self.ans in ready:
                break
            if not ready:  # the timeout passed with no answer: hung
                self._reap(kill=True)
                self.crashed_last = True
                self.last_mark = self._marked()
                return Crash(f"no answer within {timeout:.0f} s (killed)", "hang", self._last_words())
        try:
            msg = _read_frame(self.ans)
        except (OSError, EOFError, pickle.UnpicklingError):
            msg = None
        if msg is None:  # the worker died during the call
            self._reap(kill=True)
            self.crashed_last = True
            self.last_mark = self._marked()
            how, n = self._status
            sig = signame(n) if how == "signal" else f"exit {n}"
            return Crash(f"the process running the subject died ({sig})", sig, self._last_words(),
                         self._sanitizer_report() if how == "signal" else None)
        self.crashed_last = False
        kind, value = msg
        if kind == "ok":
            return value
        if kind == "crash":  # a spawned worker's inner worker died
            self.crashed_last = True
            return value
        raise value

    def call(self, fn, *args, timeout: float | None = None):
        self.send(fn, *args)
        return self.receive(self.timeout if timeout is None else timeout)

    def _marked(self):
        """What the call that died last marked (mark), or None."""
        n = _MARK.unpack_from(self._word, 0)[0] if self._word is not None else -1
        return n if n >= 0 else None

    def _last_words(self) -> str:
        return self._tail.decode(errors="replace").strip()[-500:]

    def _sanitizer_report(self) -> dict | None:
        """The sanitizer report the dead worker printed, if any (a subject built with --sanitize aborts at its
        first error after printing it): the Crash carries it, and check.crash_verdict judges it memory."""
        return report(self._tail.decode(errors="replace"))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Pool:
    """n workers on one subject, running calls in parallel; map() yields the answers in order (a Crash for a
    call whose worker died). Ctrl-C kills every worker at once."""

    def __init__(self, spec: str, subject=None, n: int = 1, timeout: float | None = None):
        direct = subject is not None and not subject.caps.in_process  # one: the subject runs its own parallelism
        self.workers = [Worker(spec, subject, timeout) for _ in range(1 if direct else max(1, n))]
        self.timeout = timeout

    def map(self, fn, arglist):
        arglist = list(arglist)
        if self.workers[0].direct:
            for args in arglist:
                yield self.workers[0].call(fn, *args)
            return
        results: dict[int, object] = {}
        busy: dict[int, int] = {}  # worker index -> call index
        nxt = 0
        done = 0
        try:
            while done < len(arglist):
                for wi, w in enumerate(self.workers):
                    if wi not in busy and nxt < len(arglist):
                        w.send(fn, *arglist[nxt])
                        busy[wi] = nxt
                        nxt += 1
                fds = {self.workers[wi].ans: wi for wi in busy}
                ready, _, _ = select.select(list(fds), [], [])
                for fd in ready:
                    wi = fds[fd]
                    results[busy.pop(wi)] = self.workers[wi].receive(self.timeout)
                while done in results:
                    yield results.pop(done)
                    done += 1
        except BaseException:
            self.terminate()
            raise

    def terminate(self) -> None:
        for w in self.workers:
            if w.alive():
                w._reap(kill=True)

    def close(self) -> None:
        for w in self.workers:
            w.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.close()
        else:
            self.terminate()


def main() -> None:
    """A spawned worker: open the subject named by DRYZ_SUBJECT and answer requests on the inherited pipes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    faulthandler.disable()
    rfd, wfd = (int(x) for x in read("DRYZ_ISOLATION_FDS", _fds).split(","))
    spec = os.environ["DRYZ_SUBJECT"]
    timeout = read("DRYZ_ISOLATION_TIMEOUT", duration(0.001, 86400))
    try:
        subject = opened(spec)
    except Exception as e:  # noqa: BLE001 (the first request's answer says why the subject cannot be had)
        err = e
        while _read_frame(rfd) is not None:
            _write_frame(wfd, ("raise", err if _picklable(err) else RuntimeError(str(err))))
        return
    inner = Worker(spec, subject, timeout) if subject.caps.in_process else None
    try:
        _loop(subject, rfd, wfd, inner)
    finally:
        if inner is not None:
            inner.close()
        subject.close()


def _picklable(e) -> bool:
    try:
        pickle.dumps(e)
        return True
    except Exception:  # noqa: BLE001
        return False


if __name__ == "__main__":
    main()
