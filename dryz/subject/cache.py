"""Where dryz keeps what it builds and fetches (DRYZ_CACHE, else $XDG_CACHE_HOME/dryz or ~/.cache/dryz), and
the sha256 that names every file it audits."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


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
