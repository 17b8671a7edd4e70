"""Where dryz keeps what it builds and fetches (DRYZ_CACHE, else $XDG_CACHE_HOME/dryz or ~/.cache/dryz), and
the sha256 that names every file it audits; builders sharing a cache folder take its lock (`locked`), and a
step that fails building or fetching into it is a BuildError."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from pathlib import Path

from ..errors import DryzError


def cache_dir() -> Path:
    base = os.environ.get("DRYZ_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "dryz")
    return Path(base)


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class BuildError(DryzError):
    """A step failed; the message carries the last lines of its output and where the whole log is."""


class BuildKilled(BuildError):
    """A step's process was killed by a signal (not SIGINT, which is the user's stop: KeyboardInterrupt): the
    machine's doing (the OOM killer, a timeout), not the source's; a mutant built so is not stillborn."""


@contextlib.contextmanager
def locked(path: Path, log):
    """Serialise builders sharing one cache folder (an exclusive flock on `path`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another build holding {path}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
