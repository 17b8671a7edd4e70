"""The baseline: llama.cpp's own unit tests of the samplers (tests/test-sampling.cpp of the same sdist, five
`test_dry` cases among them), compiled once against the pristine libllama and run against each mutant's
(LD_LIBRARY_PATH: the executable links libllama.so.0 and libggml-base.so.0 by soname, no runpath).
`llama_sampler_init_dry_testing` is exported by libllama for it. Any failure (a GGML_ASSERT abort, a non-zero
exit, a hang) kills the mutant.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

from ..subject.build import BuildError, cache_dir, locked, sdist
from .modes import ModeResult
from ..subject.sanitizer import report

TIMEOUT = 120.0
FLAGS = ["-std=c++17", "-O2", "-g0"]


def _members(version: str) -> list[str]:
    top = f"llama_cpp_python-{version}/vendor/llama.cpp/"
    return [top + "tests/test-sampling.cpp", top + "include/", top + "ggml/include/"]


def with_calls(source: str, calls: str) -> str:
    """test-sampling.cpp's source with `calls` (test_dry(...) calls, as `dryz export --as test-sampling` writes
    them) in main() right after its own last test_dry call."""
    lines = source.splitlines(keepends=True)
    last = max((i for i, ln in enumerate(lines) if ln.lstrip().startswith("test_dry(")), default=None)
    if last is None:
        raise BuildError("test-sampling.cpp has no test_dry call to add the exported ones after")
    return "".join(lines[:last + 1]) + calls.rstrip("\n") + "\n" + "".join(lines[last + 1:])


def build_test_sampling(version: str, pristine: Path, log=lambda m: None, calls: str = "") -> Path:
    """tests/test-sampling.cpp of `version` compiled against the pristine libllama in `pristine`, with `calls`
    added to its main() (with_calls) when given; cached by the version, the source's sha256 and the compiler
    flags."""
    root = cache_dir() / "upstream" / version
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / ".lock", log):
        work = cache_dir() / "work"
        work.mkdir(parents=True, exist_ok=True)
        tgz = sdist(version, log, work / f"upstream-{version}.log")
        src = root / "src"
        if not (src / ".unpacked").exists():
            shutil.rmtree(src, ignore_errors=True)
            src.mkdir()
            with tarfile.open(tgz, "r:gz") as tf:
                wanted = _members(version)
                members = [m for m in tf.getmembers() if any(m.name == w or (w.endswith("/") and
                                                                              m.name.startswith(w))
                                                            for w in wanted)]
                tf.extractall(src, members=members, filter="data")
            (src / ".unpacked").write_text(tgz.name)
        vendor = src / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
        test = vendor / "tests" / "test-sampling.cpp"
        cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
        if cxx is None:
            raise BuildError("no C++ compiler to build llama.cpp's test-sampling")
        source = test.read_bytes() if not calls else with_calls(test.read_text(), calls).encode()
        key = hashlib.sha256(source + " ".join([cxx, *FLAGS]).encode()).hexdigest()[:16]
        exe = root / f"test-sampling-{key}"
        if exe.exists():
            return exe
        if calls:  # the source with the calls, beside the pristine one (its includes are the same)
            test = test.with_name(f"test-sampling-{key}.cpp")
            test.write_bytes(source)
        cmd = [cxx, *FLAGS, "-I", str(vendor / "include"), "-I", str(vendor / "ggml" / "include"), str(test),
               "-L", str(pristine), "-lllama", "-lggml-base", "-o", str(exe) + ".tmp"]
        log(f"compiling llama.cpp's tests/test-sampling.cpp ({version})")
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise BuildError(f"test-sampling did not compile: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
        os.replace(str(exe) + ".tmp", exe)
        return exe


def run_test_sampling(exe: Path, lib_dir: Path, runtime_env: dict | None = None,
                      timeout: float = TIMEOUT) -> ModeResult:
    """test-sampling on the libllama in lib_dir: survived (exit 0) or killed (an assertion, a signal, a hang)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    env["LD_LIBRARY_PATH"] = str(lib_dir)
    env.update(runtime_env or {})
    t0 = time.monotonic()
    try:
        p = subprocess.run([str(exe)], capture_output=True, text=True, errors="replace", env=env,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return ModeResult("upstream", "timeout", None, time.monotonic() - t0, "no exit within the timeout")
    seconds = time.monotonic() - t0
    if p.returncode == 0:
        return ModeResult("upstream", "survived", 0, seconds)
    rep = report(p.stderr)
    if rep is not None:
        return ModeResult("upstream", "memory", p.returncode, seconds, rep["summary"], rep["frames"])
    lines = [ln for ln in (p.stderr + p.stdout).splitlines() if "GGML_ASSERT" in ln or "error" in ln.lower()]
    detail = (lines[0] if lines else (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1])[:300]
    return ModeResult("upstream", "crash" if p.returncode < 0 else "killed", p.returncode, seconds, detail)
