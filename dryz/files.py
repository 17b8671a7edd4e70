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


# File systems that hold no files a user writes (the kernel's views of itself, devices): an output path on one is
# refused before anything else is tried (as root, the probe below could succeed there, or write a device).
PSEUDO_FILE_SYSTEMS = frozenset({"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs",
                                 "securityfs", "configfs", "bpf", "pstore", "efivarfs", "fusectl", "mqueue",
                                 "binfmt_misc", "autofs", "rpc_pipefs", "nsfs", "hugetlbfs"})


def file_system(path: Path) -> tuple[str, str]:
    """(mount point, file system type) of the mount holding `path` (an existing, resolved path), from
    /proc/self/mountinfo; ("", "") where that cannot be read."""
    best = ("", "")
    try:
        lines = open("/proc/self/mountinfo").read().splitlines()
    except OSError:
        return best
    for ln in lines:
        head, sep, tail = ln.partition(" - ")
        fields = head.split()
        if not sep or len(fields) < 5 or not tail.split():
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        inside = str(path) == point or str(path).startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0]):
            best = (point, tail.split()[0])
    return best


def writable(path, folder: bool = False) -> Path:
    """Refuse an output path (folder: a folder dryz makes or fills) before any work, not after it: a run's result
    must not be lost, and a refused command writes nothing. Proven by creating and removing a file beside it (in
    the folder itself, or in its nearest existing ancestor: nothing is created on the way), since os.access says
    yes to root whatever the file system. The path, resolved; InputError (one line) naming why not."""
    import errno
    import secrets
    p = Path(os.path.abspath(Path(path).expanduser()))
    what = "folder" if folder else "file"
    if not str(path).strip():
        fail(f"an empty {what} name")
    anc = p
    while not os.path.lexists(anc):
        anc = anc.parent
    real = Path(os.path.realpath(anc))
    # where the name lives and what it points to (/dev/stdout: a link in /dev to a descriptor in /proc)
    for where in (Path(os.path.realpath(p.parent)) if anc == p else real, real):
        point, kind = file_system(where)
        if kind in PSEUDO_FILE_SYSTEMS:
            fail(f"cannot write {path}: {point} is the kernel's {kind} file system, where no {what} can be written")
    if anc == p:  # the path itself exists
        if folder and not real.is_dir():
            fail(f"cannot write {path}: it is a file, not a folder")
        if not folder and real.is_dir():
            fail(f"cannot write {path}: it is a folder")
        if not folder and not real.is_file():
            fail(f"cannot write {path}: not a regular file (dryz replaces a result file whole)")
        probe_in = real if folder else real.parent
    else:
        if not real.is_dir():
            fail(f"cannot write {path}: {anc} is not a folder")
        probe_in = real
    probe = probe_in / f".dryz-probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        times = os.stat(probe_in)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
            os.unlink(probe)
            os.utime(probe_in, ns=(times.st_atime_ns, times.st_mtime_ns))  # the folder's times as they were
        if not folder and anc == p:
            os.close(os.open(real, os.O_WRONLY | os.O_APPEND))  # the file itself: opened, not changed
    except OSError as e:
        why = e.strerror or errno.errorcode.get(e.errno, str(e))
        fail(f"cannot write {path}: {why}" + (f" (in {probe_in})" if probe_in not in (p, p.parent) else ""))
    return p


def readable(path, folder: bool | None = False) -> Path:
    """Refuse an input path before any work: it exists, is a file (folder=True: a folder; None: either) and can
    be read (a file is opened, not read: it may be a pipe such as /dev/stdin). InputError (one line) naming why
    not."""
    p = Path(str(path)).expanduser()
    if not str(path).strip():
        fail("an empty path")
    try:
        st = os.stat(p)
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    import stat
    is_dir = stat.S_ISDIR(st.st_mode)
    if folder is True and not is_dir:
        fail(f"{path}: a file, not a folder")
    if folder is False and is_dir:
        fail(f"{path}: a folder, not a file")
    try:
        if is_dir:
            os.listdir(p)
        else:
            os.close(os.open(p, os.O_RDONLY | os.O_NONBLOCK))
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    return p
