"""Reading what a user hands dryz: a file's bytes (once per process: an input may be a pipe), JSON with a
one-line reason where it is not JSON (the line and column, a byte-order mark, UTF-16 or UTF-32 text), and which
files are libFuzzer's crash files. Bad input is an InputError: one line, exit 2 (the command line prints it)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import DryzError


class InputError(DryzError):
    """Bad input: the message is the one line the command line prints (exit 2)."""


def fail(msg: str):
    raise InputError(msg)


def read(path: str) -> bytes:
    """A file's bytes, read once per process (the trace and the case reader both look at a command's input,
    which may be a pipe such as /dev/stdin)."""
    if path not in _READ:
        try:
            _READ[path] = open(path, "rb").read()
        except OSError as e:
            fail(f"cannot read {path}: {e.strerror}")
    return _READ[path]


_READ: dict[str, bytes] = {}


# libFuzzer's artifact names (-artifact_prefix + kind + '-' + the input's sha1): the files `auto` reads as fuzz bytes.
FUZZ_ARTIFACT = re.compile(r"(crash|timeout|oom|leak|slow-unit)-[0-9a-f]{8,}")


def is_fuzz_artifact(path: str) -> bool:
    """The file is named as libFuzzer names a crash file (crash-SHA1, timeout-..., oom-..., leak-...,
    slow-unit-...): in `auto` mode the only files read as fuzz bytes. Anything else is JSON, whatever its name or
    first bytes (fuzz bytes otherwise only with --as bytes)."""
    return FUZZ_ARTIFACT.fullmatch(os.path.basename(path)) is not None


def wide_text(raw: bytes) -> str | None:
    """The encoding of a file that is UTF-16 or UTF-32 text (a byte-order mark, or JSON's ASCII beside NUL
    bytes), else None."""
    for bom, name in ((b"\x00\x00\xfe\xff", "UTF-32 (big-endian"), (b"\xff\xfe\x00\x00", "UTF-32 (little-endian"),
                      (b"\xfe\xff", "UTF-16 (big-endian"), (b"\xff\xfe", "UTF-16 (little-endian")):
        if raw.startswith(bom):
            return name + ", with a byte-order mark)"
    head = raw[:4]
    if len(head) == 4 and head[0] and not any(head[1:]):
        return "UTF-32 (little-endian)"
    if len(head) == 4 and head[3] and not any(head[:3]):
        return "UTF-32 (big-endian)"
    if len(head) >= 2 and head[0] and not head[1] and 32 <= head[0] < 127:
        return "UTF-16 (little-endian)"
    if len(head) >= 2 and not head[0] and head[1] and 32 <= head[1] < 127:
        return "UTF-16 (big-endian)"
    return None


def parse_json_file(path: str, raw: bytes):
    """JSON from a file's bytes, or one line saying where it is not JSON (line and column)."""
    import json
    if not raw.strip():
        fail(f"{path}: empty file (a Case JSON object was expected; use --as bytes for a fuzz input)")
    if raw.startswith(b"\xef\xbb\xbf"):
        fail(f"{path}: starts with a UTF-8 byte-order mark; save it without one")
    wide = wide_text(raw)
    if wide is not None:
        fail(f"{path}: {wide} text, not UTF-8; JSON is UTF-8 text: save it as UTF-8 (a fuzz input: --as bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(f"{path}: not UTF-8 (byte {e.start}); JSON is UTF-8 text (a fuzz input: --as bytes)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        fail(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}")
    except RecursionError:
        fail(f"{path}: JSON nested too deeply")
    except ValueError as e:  # e.g. an integer of more than 4,300 digits
        fail(f"{path}: not usable JSON: {e}")


def writable(path) -> None:
    """Refuse an output path before the work, not after it (a run's result must not be lost)."""
    if path is None:
        return
    parent = Path(path).resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fail(f"cannot write {path}: {e.strerror}")
    if not os.access(parent, os.W_OK) or Path(path).is_dir():
        fail(f"cannot write {path}")
