"""Results JSON, the environment a result records, a stderr progress bar, --quiet, and a stdout that survives a
closed pipe: what every layer may use to write (what each command prints is dryz.render)."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

from . import __version__


def quiet() -> bool:
    """--quiet (DRYZ_QUIET=1): no progress output, for scripts."""
    return os.environ.get("DRYZ_QUIET") == "1"


class Progress:
    """Progress on stderr once a run has taken more than a second: a bar with rate and ETA on a terminal, one
    plain line every 10 s otherwise (a log file, CI), nothing with --quiet."""

    def __init__(self, total: int, label: str = "", stream=None, enabled: bool = True, interval: float | None = None):
        self.total, self.label, self.done = max(total, 1), label, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled and not quiet()
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.interval = interval if interval is not None else (0.1 if self.tty else 10.0)
        self.t0 = time.perf_counter()
        self.last = 0.0
        self.shown = False

    def __call__(self, n: int):
        self.done += n
        now = time.perf_counter()
        if not self.enabled or now - self.t0 < 1.0 or now - self.last < self.interval:
            return
        self.last = now
        frac = min(self.done / self.total, 1.0)
        rate = self.done / (now - self.t0)
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        if self.tty:
            bar = "#" * int(frac * 30)
            self.stream.write(f"\r{self.label} [{bar:<30}] {frac:6.1%} {self.done:,}/{self.total:,} "
                              f"({rate:,.0f}/s, ETA {fmt_seconds(eta)})")
            self.shown = True
        else:
            self.stream.write(f"{self.label}: {self.done:,}/{self.total:,} ({frac:.1%}), {rate:,.0f}/s, "
                              f"ETA {fmt_seconds(eta)}\n")
        self.stream.flush()

    def close(self):
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def fmt_seconds(s: float) -> str:
    if s != s or s == float("inf"):
        return "?"
    s = int(round(s))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def environment() -> dict:
    return {"python": platform.python_version(), "platform": platform.platform(), "dryz": __version__,
            "cpu_count": os.cpu_count()}


def write_json(path: str | Path, data: dict) -> None:
    """Atomic write: a result is never half-written."""
    write_text(path, json.dumps(data, indent=2) + "\n")


def write_text(path: str | Path, text: str | bytes) -> None:
    """An output file (--json, --markdown, --html, --output) written whole or not at all, its folders made: the
    one way a command writes what its options name (each proven writable before the work: dryz.files.writable)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        if isinstance(text, bytes):
            tmp.write_bytes(text)
        else:
            tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


write_bytes = write_text  # (bytes: the same whole-or-nothing write)


class ClosedPipeSafe:
    """stdout that drops what it cannot write once the reader has gone (dryz check ... | head): the command's
    own exit code stands (click would otherwise turn the EPIPE into exit 1, the findings code)."""

    def __init__(self, stream):
        self._s, self.closed_pipe = stream, False

    def write(self, text):
        if self.closed_pipe:
            return len(text)
        try:
            return self._s.write(text)
        except BrokenPipeError:
            self.closed_pipe = True
            return len(text)

    def flush(self):
        if not self.closed_pipe:
            try:
                self._s.flush()
            except BrokenPipeError:
                self.closed_pipe = True

    def __getattr__(self, name):
        return getattr(self._s, name)


def table_out(result: dict, table: str, json_path, md_path, echo) -> None:
    """A table-making command's output (matrix, conformance): the table printed, the result and the table written
    where asked."""
    echo(table)
    if json_path:
        write_json(json_path, result)
    if md_path:
        write_text(md_path, table)
