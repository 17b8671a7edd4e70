"""A fork server for a campaign's harness processes.

libFuzzer's fork mode (what `dryz fuzz` runs, so that a campaign survives a finding or a crash) runs argv[0] anew
for every job (jobs of 1, 2, 3, ... seconds) and again to merge each job's new inputs; each of those processes
starts Python, imports numpy and dryz, instruments the oracles for coverage (~0.4 s of atheris bytecode patching)
and loads the subject, and a real-vocabulary campaign's also initializes a sampler per configuration it meets
(init_dry processes the breakers over the whole vocabulary: ~60 ms each, up to 216 configurations). In a 60-s
campaign that was a third of the time (traces) or most of it (real vocabularies).

With the server, the campaign starts one process that does all of that once (`serve`: the harness's own
preparation, then every sampler the decoder can ask for), and each run of argv[0] (the launcher, `client`, which
imports nothing but the standard library and this module) asks it for a fork(): the child takes the launcher's
standard input, output and error and working directory and runs the harness's libFuzzer entry with the
launcher's argv, exactly what the launcher would have run itself; the launcher ends as the child ends (its exit
code, or the same signal). Without the server (DRYZ_FORKSERVER unset, or no answer) the launcher runs the harness
itself.

Protocol, on a Unix socket: the launcher sends one JSON line {"argv", "cwd"} with its descriptors 0, 1, 2
(SCM_RIGHTS); the server forks and answers "pid N", and "status S" (the wait status) when the child ends.

Signals, as a launcher running the harness itself would see them: the child gets the SIGINT disposition the
server started with (that of a process the campaign starts) and SIGTERM's default. A Ctrl-C reaches the child
through the process group (the server and its children are in the campaign's group), so the launcher leaves
SIGINT to it; a SIGTERM sent to the launcher (the campaign stopping libFuzzer) is forwarded to the child, and a
child that has not ended STOP_GRACE seconds later gets SIGKILL (whatever it is doing: one hung in its own
shutdown once, dryz.fuzz.harness), said on stderr. The
server ignores SIGINT (its children decide how a campaign ends) and on SIGTERM ends its children (SIGTERM, then
SIGKILL to any left after a few seconds) and exits.

Nothing outlives the campaign: the server ends itself as on SIGTERM when the process that started it (the
campaign) is gone, and each child gets SIGKILL if the server dies before it (PR_SET_PDEATHSIG). The server only
launches the harness's libFuzzer entry: it never judges anything itself (a subject in another process is
dryz.subject.isolation's).
"""

from __future__ import annotations

import array
import json
import os
import selectors
import signal
import socket
import sys

ENV = "DRYZ_FORKSERVER"  # the socket's path, set in the campaign's environment while the server runs
READY = "dryz-forkserver-ready"


# -- the launcher's side ---------------------------------------------------------------------------------------


def client(argv: list[str]) -> bool:
    """Run the harness as a fork of the server with argv, and end this process as the child ends. False when
    there is no server to ask (the caller then runs the harness itself)."""
    path = os.environ.get(ENV)
    if not path:
        return False
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        request = (json.dumps({"argv": list(argv), "cwd": os.getcwd()}) + "\n").encode()
        s.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
        f = s.makefile("r")
        first = f.readline().split()
    except OSError:
        s.close()
        return False
    if len(first) != 2 or first[0] != "pid":
        s.close()
        return False
    pid = int(first[1])
    signal.signal(signal.SIGTERM, _stopper(pid))
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the child through the process group
    line = f.readline().split()
    if len(line) != 2 or line[0] != "status":  # the server went away: wait for the child, then fail
        import time
        while _alive(pid):
            time.sleep(0.1)
        os._exit(70)
    status = int(line[1])
    sys.stdout.flush()
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # (their disposition cannot be set: always the default)
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if not os.WIFSIGNALED(status) else 128 + os.WTERMSIG(status))


STOP_GRACE = 10  # seconds a harness has to end once a SIGTERM is forwarded to it; then SIGKILL


def _stopper(pid: int):
    """The launcher's SIGTERM handler: forwarded to the harness, and SIGKILL to it if it has not ended
    STOP_GRACE seconds later (a harness can hang in its own shutdown: libFuzzer's SIGTERM path interrupted by
    atheris's alarm handler once deadlocked on malloc's lock), said on stderr. The launcher then ends as its
    harness did."""
    def kill(signum, frame):
        if _alive(pid):
            print(f"dryz-fuzz-harness: the harness (pid {pid}) did not end within {STOP_GRACE} s of SIGTERM: killed "
                  "(SIGKILL)", file=sys.stderr, flush=True)
            _forward(pid, signal.SIGKILL)

    def term(signum, frame):
        _forward(pid, signum)
        signal.signal(signal.SIGALRM, kill)
        signal.alarm(STOP_GRACE)
    return term


def _forward(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


# -- the server's side -----------------------------------------------------------------------------------------


def serve(path: str, prepare, run) -> None:
    """prepare(): everything a harness process does before libFuzzer starts (and any warming); run(argv): the
    harness's libFuzzer entry (never returns). Listens on `path` until SIGTERM."""
    parent = os.getppid()  # the campaign: when it is gone, so is the server
    sigint = signal.getsignal(signal.SIGINT)  # what a process the campaign starts gets, restored in children
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    prepare()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    children: dict[int, socket.socket] = {}

    def stop(signum, frame):
        try:
            os.unlink(path)
        except OSError:
            pass
        _end_children(children)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    print(READY, flush=True)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    while True:
        if os.getppid() != parent:  # the campaign is gone: end as on SIGTERM
            stop(signal.SIGTERM, None)
        for _ in sel.select(timeout=0.05):
            conn, _ = listener.accept()
            pid = _fork_one(conn, listener, children, sigint, run, path)
            if pid:
                children[pid] = conn
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if not pid:
                break
            conn = children.pop(pid, None)
            if conn is not None:
                try:
                    conn.sendall(f"status {status}\n".encode())
                except OSError:
                    pass
                conn.close()


def tree(root: int) -> list[int]:
    """A process and every descendant (Linux: from /proc)."""
    kids: dict[int, list] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
                kids.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def _end_children(children, grace: float = 5.0) -> None:
    """SIGTERM to every child, SIGKILL to those still running after `grace` seconds and to everything they
    started (a fork-mode libFuzzer's job launchers, which would otherwise outlive it), said in the server's log;
    every child reaped."""
    import time
    for pid in children:
        _forward(pid, signal.SIGTERM)
    left, deadline = set(children), time.monotonic() + grace
    while left:
        for pid in list(left):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                left.discard(pid)
        if not left:
            break
        if time.monotonic() > deadline:
            for pid in left:
                try:
                    print(f"stop {pid}: not ended within {grace:g} s of SIGTERM: killed (SIGKILL)", file=sys.stderr,
                          flush=True)
                except OSError:
                    pass
                for p in tree(pid):
                    _forward(p, signal.SIGKILL)
            deadline = float("inf")
        time.sleep(0.02)


def _flags(argv) -> str:
    """A harness process's argv for the server's log: its flags, a long list of seed files counted."""
    out = []
    for a in argv[1:]:
        if a.startswith("-seed_inputs="):
            a = f"-seed_inputs=<{a.count(',') + 1} files>"
        out.append(a if len(a) <= 80 else a[:77] + "...")
    return " ".join(out)


def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG: SIGKILL when the server (this process's parent) dies."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _fork_one(conn, listener, children, sigint, run, path) -> int | None:
    try:
        msg, anc, _, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(3 * array.array("i").itemsize))
        fds = array.array("i")
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
        request = json.loads(msg.decode())
        if len(fds) != 3:
            raise ValueError("expected 3 descriptors")
        if not isinstance(request, dict) or not isinstance(request.get("cwd"), str) or \
                not isinstance(request.get("argv"), list) or not all(isinstance(a, str) for a in request["argv"]):
            raise ValueError("expected {argv: [str], cwd: str}")
        line = _flags(request["argv"])
    except (OSError, ValueError):
        conn.close()
        return None
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        try:
            conn.sendall(f"pid {pid}\n".encode())
        except OSError:
            pass
        try:
            print(f"fork {pid}: {line}", file=sys.stderr, flush=True)  # the server's log
        except OSError:
            pass
        return pid
    # the child: the launcher's descriptors, directory, argv and signal dispositions, then the harness. The
    # server's socket in its environment: libFuzzer's fork mode runs argv[0] for every job and merge from this
    # process, and each of those launchers must find the server too (the campaign puts the socket in the
    # launchers' environment only once the server is ready, so the server's own environment does not name it).
    code = 1
    try:
        _die_with_parent()
        listener.close()
        conn.close()
        for c in children.values():
            c.close()
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ[ENV] = path
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, sigint)
        sys.argv = list(request["argv"])
        run(sys.argv)
        code = 0
    except SystemExit as e:  # as the interpreter ends on it: None is 0, a message is printed and is 1
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        _exit_as_a_process(code)


def _exit_as_a_process(code: int) -> None:
    """End a child as a launcher running the harness itself ends: through C's exit(), so that the atexit handlers
    run. libFuzzer's writes the crash file when the target ends the process inside an input (atheris exits on an
    uncaught Python exception: "fuzz target exited", exit 77); with os._exit a finding left no file. Python's
    finalization is skipped: the server's objects are not the child's to finalize. Nothing here can raise into
    the server's loop (a flush to a reader that is gone, a Ctrl-C)."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except BaseException:
                pass
        import ctypes
        ctypes.PyDLL(None).exit(int(code))  # (PyDLL: the interpreter's lock held, as libFuzzer's own exit holds it)
    finally:
        os._exit(code)


def main() -> None:
    from .harness import prepare, run, warm  # on use: the launcher imports only the standard library and this module
    serve(sys.argv[1], lambda: (prepare(), warm()), run)


if __name__ == "__main__":
    main()
