"""Sanitizer reports (AddressSanitizer, UndefinedBehaviorSanitizer) in a dead process's stderr: the `memory`
class. A libllama built by `dryz subject build --sanitize address,undefined` aborts (abort_on_error=1, every
UBSan check unrecoverable) at its first error after printing the report; `report()` reads it back.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from .cache import BuildError, cache_dir, locked

_ASAN = re.compile(r"ERROR: AddressSanitizer: ([\w-]+)")
_UBSAN = re.compile(r"^(\S+?):(\d+):(\d+): runtime error: (.*)$", re.M)
# A stack frame, symbolized ("#0 0x.. in func file:line") or, as the runtime prints it with symbolize=0,
# raw ("#0 0x..  (/path/module+0xoffset)").
_FRAME = re.compile(r"^\s*#(\d+) 0x[0-9a-f]+(?: in (.+?)(?: (\S+:\d+(?::\d+)?))?| +\((\S+?)\+0x([0-9a-f]+)\))"
                    r"(?: \(BuildId: [0-9a-f]+\))?\s*$", re.M)
_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+)", re.M)
FRAMES = 5


def died(stderr: str) -> dict:
    """The verdict fields of a process that died: class memory with the report's summary and first frames when
    its stderr holds a sanitizer report, else class crash."""
    rep = report(stderr)
    if rep is None:
        return {"class": "crash"}
    return {"class": "memory", "sanitizer": rep["sanitizer"], "kind": rep["kind"], "summary": rep["summary"],
            "frames": rep["frames"]}


def _short(where: str | None) -> str:
    return where.rsplit("/", 1)[-1] if where else ""


def symbolize(module: str, offset: int) -> list[str]:
    """"function file:line" for the code at `offset` in `module`, innermost inlined frame first (llvm-symbolizer,
    else addr2line; the raw "module+0xoffset" without either). The processes on a sanitized subject run with
    symbolize=0: the runtime's own symbolizer inherits the preloaded runtime and can hang holding the dying
    process's stderr open, so reports are symbolized here, after the process is gone."""
    import shutil
    import subprocess
    raw = [f"({_short(module)}+{offset:#x})"]
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
    tool = shutil.which("llvm-symbolizer") or shutil.which("llvm-symbolizer-14")
    try:
        if tool:
            p = subprocess.run([tool, "--demangle", "--inlines", f"--obj={module}", f"{offset:#x}"],
                               capture_output=True, text=True, timeout=30, env=env)
            lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
        elif shutil.which("addr2line"):
            p = subprocess.run(["addr2line", "-f", "-C", "-i", "-e", module, f"{offset:#x}"], capture_output=True,
                               text=True, timeout=30, env=env)
            lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
        else:
            return raw
    except (OSError, subprocess.TimeoutExpired):
        return raw
    out = []
    for fn, where in zip(lines[0::2], lines[1::2]):
        if fn.startswith("??"):
            return raw
        where = ":".join(where.split(":")[:2]) if where.count(":") > 1 else where
        out.append(f"{fn} {_short(where)}")
    return out or raw


def report(stderr: str) -> dict | None:
    """The first sanitizer report in `stderr` as {"sanitizer", "kind", "summary", "frames", "function"}, or None.

    frames: the first FRAMES frames of the report's stack, each "function file:line" (the file's base name);
    function: the innermost frame's function without its argument list (the signature of the failure: the
    minimizer keeps "the same kind of error in the same function")."""
    m = _ASAN.search(stderr)
    u = _UBSAN.search(stderr)
    if m is None and u is None:
        return None
    if m is not None and (u is None or m.start() < u.start()):
        sanitizer, kind = "AddressSanitizer", m.group(1)
        rest = stderr[m.start():]
        access = _ACCESS.search(rest)
        what = f"{access.group(1)} of size {access.group(2)}" if access else ""
    else:
        sanitizer, kind = "UndefinedBehaviorSanitizer", u.group(4).split(":")[0].strip()
        rest = stderr[u.start():]
        what = u.group(4).strip()
    frames: list[str] = []
    for f in _FRAME.finditer(rest):
        if f.group(1) == "0" and frames:
            break  # the next stack (e.g. where the memory was allocated)
        if f.group(2):
            frames.append(f"{f.group(2)} {_short(f.group(3))}".strip())
        else:
            frames.extend(symbolize(f.group(4), int(f.group(5), 16)))
        if len(frames) >= FRAMES:
            break
    frames = frames[:FRAMES]
    if not frames and u is not None and sanitizer.startswith("Undefined"):
        frames = [f"{_short(u.group(1))}:{u.group(2)}"]
    function = frames[0].split("(")[0].split(" ")[0] if frames else ""
    summary = f"{sanitizer}: {kind}" + (f" ({what})" if what and what != kind else "") + \
        (f" in {frames[0]}" if frames else "")
    return {"sanitizer": sanitizer, "kind": kind, "summary": summary[:400], "frames": frames,
            "function": function}


def fuzzer_preload(runtime: str, log=lambda m: None) -> Path:
    """The sanitizer runtime and libFuzzer in one shared object, for LD_PRELOAD in fuzz jobs on a sanitized
    subject: atheris then uses this libFuzzer ("Using preloaded libfuzzer") and the coverage counters reach it
    (with the plain runtime preloaded they land in the runtime's weak stubs and coverage reads 0). Made once from
    the archives beside `runtime` (the ASan runtime without its preinit object, which a shared object may not
    hold, its C++ part, which has UBSan's C++ handlers, and libclang_rt.fuzzer_no_main), cached by their sizes
    and times."""
    import hashlib
    import shutil
    import subprocess
    import tempfile

    rt = Path(runtime).parent
    arch = "x86_64"
    parts = [rt / f"libclang_rt.asan-{arch}.a", rt / f"libclang_rt.asan_cxx-{arch}.a",
             rt / f"libclang_rt.fuzzer_no_main-{arch}.a"]
    missing = [p.name for p in parts if not p.is_file()]
    cxx = shutil.which("clang++")
    if missing or cxx is None:
        raise BuildError(f"cannot make the sanitizer+libFuzzer preload: missing {', '.join(missing) or 'clang++'} "
                         "(apt-get install -y clang libclang-rt-14-dev)")
    key = hashlib.sha256(repr([(str(p), p.stat().st_size, int(p.stat().st_mtime)) for p in parts]).encode())
    out = cache_dir() / "sanitizer" / f"asan-libfuzzer-{key.hexdigest()[:16]}.so"
    if out.exists():
        return out
    with locked(out.with_suffix(".lock"), log):
        if out.exists():
            return out
        with tempfile.TemporaryDirectory() as tmp:
            env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
            subprocess.run(["ar", "x", str(parts[0])], cwd=tmp, check=True, env=env)
            objs = sorted(str(p) for p in Path(tmp).glob("*.o") if "preinit" not in p.name)
            p = subprocess.run([cxx, "-shared", "-fPIC", "-o", str(out) + ".tmp", *objs, "-Wl,--whole-archive",
                                str(parts[1]), str(parts[2]), "-Wl,--no-whole-archive", "-lstdc++", "-lpthread",
                                "-lm", "-ldl", "-lrt"], capture_output=True, text=True, env=env)
            if p.returncode != 0:
                raise BuildError(f"linking the sanitizer+libFuzzer preload failed: "
                                 f"{(p.stderr.strip().splitlines() or ['?'])[-1]}")
        os.replace(str(out) + ".tmp", out)
    return out
