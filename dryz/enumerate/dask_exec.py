"""The optional dask.distributed executor (`pip install 'dryz[dask]'`, `dryz exhaustive --scheduler ADDRESS`).

It runs exactly the slice list the local workers run (enumerate.run.config_slices, or a shard's part of it), one
Dask task per slice, and hands the results back in slice order, so run_configs merges them as it merges the
local ones: the results are identical to a single-process run. Each task is enumerate.run._dask_task, which
reopens the subject from its spec in the worker's own process (once per process: the libllama handle and its
buffers are per process); tasks in one worker process run one at a time (the subject's buffers are not shared between threads), so a worker
with several threads still gives correct results but no extra speed. Start workers with one thread each,
without a nanny and with the sampling profiler off:
    DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False dask worker ADDRESS --no-nanny --nthreads 1   (one per core)
(the profiler samples every 10 ms, and a nanny starts its worker with MALLOC_TRIM_THRESHOLD_=65536, which makes
every large numpy temporary an mmap/munmap: 18 % slower at length 11 by itself; measured here with a nanny and
the profiler on, a length-14 shard took 1.7x the local time). Results do not depend on any of it, only speed.
Every worker must have dryz and the same subject:
before any slice runs, every worker's subject identity (for a libllama: its sha256) must equal the submitting
process's (the certificate names one subject), or the run is refused.
"""

from __future__ import annotations

import os
import threading
from ..errors import DryzError
from ..environment import duration, read
from ..subject.identity import same_subject
from ..subject.registry import opened

_LOCK = threading.Lock()
CONNECT_TIMEOUT = 20.0  # seconds; DRYZ_DASK_TIMEOUT overrides it (a duration as --time takes it, e.g. "2s")


def connect_timeout() -> float:
    return read("DRYZ_DASK_TIMEOUT", duration(0.001, 86400), CONNECT_TIMEOUT)


class SchedulerError(RuntimeError, DryzError):
    """No usable Dask scheduler (one-line reason)."""


def connect(address):
    """A distributed.Client for `address` (or `address` itself when it already is a Client)."""
    try:
        import distributed
    except ImportError:
        raise SchedulerError("--scheduler needs dask.distributed: pip install 'dryz[dask]'") from None
    if isinstance(address, distributed.Client):
        return address
    _reachable(address)
    try:
        return distributed.Client(address, timeout=connect_timeout(),
                                  set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise SchedulerError(f"cannot reach the Dask scheduler at {address!r}: {e}") from None


def parse_address(address: str) -> tuple[str, int]:
    """(host, port) of a scheduler address ([tcp://|tls://]HOST:PORT); SchedulerError (one line) for another
    form (the command line asks it while parsing)."""
    rest = address.split("://", 1)[1] if "://" in address else address
    scheme = address.split("://", 1)[0] if "://" in address else "tcp"
    if scheme not in ("tcp", "tls"):
        raise SchedulerError(f"--scheduler {address!r}: only tcp:// and tls:// addresses are supported")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SchedulerError(f"--scheduler {address!r}: expected HOST:PORT (e.g. tcp://127.0.0.1:8786)")
    return host, int(port)


def _reachable(address: str) -> None:
    """Refuse an address that is not host:port or that nothing listens on, before a Client exists (a Client
    that failed to connect hangs in __del__ for 40 s and prints a traceback at exit)."""
    import socket
    host, port = parse_address(address)
    timeout = connect_timeout()
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise SchedulerError(f"cannot reach the Dask scheduler at {address!r}: {e.strerror or e}") from None


def worker_threads(client) -> int:
    """The cluster's worker threads (the slice list is cut for that many workers)."""
    return max(1, sum(client.nthreads().values()))


def worker_subjects(client, spec: str) -> dict:
    """Per worker, the identity of the subject `spec` opened there (or the one-line reason it cannot be)."""
    return client.run(_subject_identity, spec)


def require_subject(client, spec: str, identity: dict) -> None:
    """SchedulerError unless the cluster has workers and every one opens the same subject (same identity: for
    a libllama, the same file by sha256)."""
    subjects = worker_subjects(client, spec)
    if not subjects:
        raise SchedulerError("the Dask scheduler has no workers")
    for w, other in subjects.items():
        if isinstance(other, str):
            raise SchedulerError(f"Dask worker {w} cannot open the subject {spec}: {other}")
        if not same_subject(other, identity):
            sha = other.get("libllama_sha256")
            raise SchedulerError(f"Dask worker {w} loads a different subject"
                                 + (f" (libllama_sha256 {sha}, here {identity.get('libllama_sha256')})" if sha
                                    else f" ({other}, here {identity})"))


def _subject_identity(spec: str):
    try:
        return opened(spec).identity
    except Exception as e:  # noqa: BLE001 (reported to the submitting process in one line)
        return f"{type(e).__name__}: {e}"


def _serially(fn, args):
    with _LOCK:
        return fn(args)


def map_in_order(client, fn, tasks):
    """Submit fn(task) for every task at once, one at a time per worker process; yield the results in task
    order (a worker's exception is re-raised here)."""
    futures = client.map(_serially, [fn] * len(tasks), tasks, pure=False)
    try:
        for f in futures:
            yield f.result()
    finally:
        client.cancel(futures)
