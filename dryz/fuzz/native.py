#!/usr/bin/env python3
"""Build the native pieces needed for coverage-guided fuzzing of llama.cpp's DRY sampler.

Builds, once and cached:

1. An instrumented ``libllama.so`` (plus the ``libggml*.so`` it needs) from the
   llama-cpp-python sdist's vendored llama.cpp, compiled with clang and
   ``-fsanitize=fuzzer-no-link`` so libFuzzer sees its inline 8-bit counters.
2. ``libfuzzer_preload.so``: clang's ``libclang_rt.fuzzer_no_main`` archive
   linked whole into a shared object, meant for ``LD_PRELOAD`` so that atheris
   uses it ("Using preloaded libfuzzer") instead of its bundled copy.

At run time (the variables must be set before the Python process starts)::

    LD_PRELOAD=<libfuzzer_preload> LLAMA_CPP_LIB_PATH=<lib_dir> python harness.py

Usage::

    python3 -m dryz.fuzz.native [--cache-dir DIR] [--force] [--print-env]

or from Python::

    from dryz.fuzz.native import build_native
    nb = build_native()          # -> NativeBuild(libllama, libfuzzer_preload, lib_dir)
    env = {**os.environ, **nb.env()}

Prerequisites (Debian 12): ``clang libclang-rt-14-dev cmake``. The sdist is subject/build.py's (one fetch,
one version pin).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

# The one version pin and sdist fetch are dryz subject build's (subject/build.py): the instrumented library is
# the pinned release's, checked against its PyPI sha256.
from ..errors import DryzError
from ..subject.build import (CMAKE_OPTIONS as BASE, PINNED_VERSION as LLAMA_CPP_PYTHON_VERSION,
                             SDIST_SHA256 as _SDIST_SHA256, BuildError, locked, sdist, unpack)

# Bump when the recipe below changes in a way that should force a rebuild.
RECIPE_VERSION = 1

SDIST_SHA256 = _SDIST_SHA256[LLAMA_CPP_PYTHON_VERSION]

APT_HINT = "apt-get install -y clang libclang-rt-14-dev cmake"

# -O1 keeps the code close to what was written while staying fast; NDEBUG matches
# the release wheel (asserts compiled out, GGML_ASSERT still active).
OPT_FLAGS = "-O1 -g -fno-omit-frame-pointer -DNDEBUG"
SAN_FLAGS = "-fsanitize=fuzzer-no-link"

def _cmake_options() -> dict:
    """dryz subject build's options (the llama target alone, shared libraries finding each other through
    $ORIGIN), with clang's instrumentation and a debuggable optimisation level."""
    return {**BASE, "CMAKE_BUILD_TYPE": "RelWithDebInfo", "CMAKE_C_FLAGS_RELWITHDEBINFO": OPT_FLAGS,
            "CMAKE_CXX_FLAGS_RELWITHDEBINFO": OPT_FLAGS, "CMAKE_C_FLAGS": SAN_FLAGS, "CMAKE_CXX_FLAGS": SAN_FLAGS}


CMAKE_OPTIONS = _cmake_options()

Log = Callable[[str], None]


def _print(msg: str) -> None:
    print(msg, flush=True)


class NativeBuildError(DryzError):
    """A build step failed.  ``exit_code`` is what the CLI exits with."""

    exit_code = 1
    prefix = "native build: "


class MissingPrerequisite(NativeBuildError):
    """A required tool (clang, compiler-rt, cmake, pip) is not installed."""

    exit_code = 2


@dataclasses.dataclass(frozen=True)
class NativeBuild:
    libllama: Path  # instrumented libllama.so (inside lib_dir)
    libfuzzer_preload: Path  # libFuzzer-only shared object for LD_PRELOAD
    lib_dir: Path  # value for LLAMA_CPP_LIB_PATH (libllama.so + libggml*.so)

    def env(self) -> Dict[str, str]:
        """Environment variables a fuzzing process must be *started* with."""
        return {
            "LD_PRELOAD": str(self.libfuzzer_preload),
            "LLAMA_CPP_LIB_PATH": str(self.lib_dir),
        }


# --------------------------------------------------------------------------- helpers


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dryz" / "native"


def _clean_env() -> Dict[str, str]:
    # Never let a preloaded libFuzzer leak into compilers or pip.
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    return env


def _run(cmd: Sequence[str], log_file: Path, what: str, cwd: Optional[Path] = None) -> None:
    with open(log_file, "ab") as fh:
        fh.write(("\n$ " + " ".join(cmd) + "\n").encode())
        fh.flush()
        proc = subprocess.run(
            list(cmd), cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, env=_clean_env()
        )
    if proc.returncode != 0:
        tail = ""
        try:
            lines = log_file.read_text(errors="replace").strip().splitlines()
            tail = lines[-1].strip() if lines else ""
        except OSError:
            pass
        raise NativeBuildError(
            f"{what} failed (exit {proc.returncode}); see {log_file}"
            + (f" -- last line: {tail[:200]}" if tail else "")
        )


def _capture(cmd: Sequence[str]) -> str:
    try:
        return subprocess.run(
            list(cmd), capture_output=True, text=True, check=True, env=_clean_env()
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def _find_tool(names: Sequence[str]) -> Optional[str]:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def find_toolchain() -> Dict[str, str]:
    """Locate clang, clang++, the libFuzzer (no main) archive and cmake."""
    versions = [str(v) for v in range(20, 13, -1)]
    cc = os.environ.get("DRYZ_CLANG") or _find_tool(["clang"] + [f"clang-{v}" for v in versions])
    if not cc:
        raise MissingPrerequisite(f"clang not found on PATH; install it with: {APT_HINT}")
    cxx = os.environ.get("DRYZ_CLANGXX") or _find_tool(
        [os.path.join(os.path.dirname(cc), os.path.basename(cc).replace("clang", "clang++", 1)),
         "clang++"])
    if not cxx:
        raise MissingPrerequisite(f"clang++ not found on PATH; install it with: {APT_HINT}")

    arch = platform.machine() or "x86_64"
    candidates: List[Path] = []
    for name in (f"libclang_rt.fuzzer_no_main-{arch}.a", "libclang_rt.fuzzer_no_main.a"):
        p = _capture([cc, f"--print-file-name={name}"])
        if p and os.path.isabs(p):
            candidates.append(Path(p))
    res = _capture([cc, "-print-resource-dir"])
    if res:
        candidates.append(Path(res) / "lib" / "linux" / f"libclang_rt.fuzzer_no_main-{arch}.a")
        candidates += sorted((Path(res) / "lib").glob("*/libclang_rt.fuzzer_no_main*.a"))
    archive = next((c for c in candidates if c.is_file()), None)
    if archive is None:
        raise MissingPrerequisite(
            f"libFuzzer archive libclang_rt.fuzzer_no_main-{arch}.a not found for {cc} "
            f"(resource dir {res or '?'}); install it with: {APT_HINT}"
        )

    cmake = _find_tool(["cmake"])
    if not cmake:
        raise MissingPrerequisite(f"cmake not found on PATH; install it with: {APT_HINT}")
    version = _capture([cc, "--version"]).splitlines()
    return {
        "cc": cc,
        "cxx": cxx,
        "fuzzer_archive": str(archive),
        "cmake": cmake,
        "ninja": _find_tool(["ninja"]) or "",
        "clang_version": version[0] if version else "?",
    }


def _stamp_inputs(tc: Dict[str, str]) -> Dict[str, object]:
    archive = Path(tc["fuzzer_archive"])
    st = archive.stat()
    return {
        "recipe": RECIPE_VERSION,
        "llama_cpp_python": LLAMA_CPP_PYTHON_VERSION,
        "sdist_sha256": SDIST_SHA256,
        "cc": tc["cc"],
        "cxx": tc["cxx"],
        "clang_version": tc["clang_version"],
        "fuzzer_archive": str(archive),
        "fuzzer_archive_size_mtime": [st.st_size, int(st.st_mtime)],
        "cmake_options": CMAKE_OPTIONS,
        "machine": platform.machine(),
    }


# --------------------------------------------------------------------------- steps


def _fetch_sdist(work: Path, log: Log, log_file: Path) -> Path:
    """The pinned sdist (subject/build.py's fetch: the cache, or pip download, sha256 checked)."""
    try:
        return sdist(LLAMA_CPP_PYTHON_VERSION, log, log_file)
    except BuildError as e:
        raise NativeBuildError(str(e)) from None


def _unpack(tgz: Path, work: Path, log: Log) -> Path:
    try:
        return unpack(tgz, work, LLAMA_CPP_PYTHON_VERSION, log)
    except BuildError as e:
        raise NativeBuildError(str(e)) from None


def _build_libllama(vendor: Path, work: Path, tc: Dict[str, str], jobs: int, log: Log,
                    log_file: Path) -> Path:
    bdir = work / "build"
    if bdir.exists():
        shutil.rmtree(bdir)
    cmd = [tc["cmake"], "-S", str(vendor), "-B", str(bdir)]
    if tc["ninja"]:
        cmd += ["-G", "Ninja"]
    cmd += [f"-DCMAKE_C_COMPILER={tc['cc']}", f"-DCMAKE_CXX_COMPILER={tc['cxx']}"]
    cmd += [f"-D{k}={v}" for k, v in CMAKE_OPTIONS.items()]
    log("[build_native] cmake configure (clang, -fsanitize=fuzzer-no-link, shared libs)")
    _run(cmd, log_file, "cmake configure")
    log(f"[build_native] cmake --build --target llama -j{jobs} (a few minutes on 2 cores)")
    _run([tc["cmake"], "--build", str(bdir), "--target", "llama", f"-j{jobs}"],
         log_file, "cmake build of target llama")
    return bdir / "bin"


def _collect_libs(bin_dir: Path, lib_dir: Path, log: Log) -> Path:
    libs = sorted(p for p in bin_dir.glob("lib*.so*"))
    if not any(p.name == "libllama.so" for p in libs):
        raise NativeBuildError(f"build produced no libllama.so in {bin_dir}")
    if lib_dir.exists():
        shutil.rmtree(lib_dir)
    lib_dir.mkdir(parents=True)
    for p in libs:
        dst = lib_dir / p.name
        if p.is_symlink():
            os.symlink(os.readlink(p), dst)
        else:
            shutil.copy2(p, dst)
    names = sorted(p.name for p in lib_dir.iterdir() if not p.is_symlink())
    log(f"[build_native] collected into {lib_dir}: {', '.join(names)}")
    return lib_dir / "libllama.so"


def _build_preload(tc: Dict[str, str], out: Path, log: Log, log_file: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".so.tmp")
    log(f"[build_native] linking {out.name} from {tc['fuzzer_archive']}")
    _run(
        [tc["cxx"], "-shared", "-fPIC", "-o", str(tmp),
         "-Wl,--whole-archive", tc["fuzzer_archive"], "-Wl,--no-whole-archive",
         "-lstdc++", "-lpthread", "-lm", "-ldl"],
        log_file, "linking libfuzzer_preload.so",
    )
    os.replace(tmp, out)
    return out


def _check_outputs(libllama: Path, preload: Path, tc: Dict[str, str]) -> None:
    # Catch a silently uninstrumented build or a broken rpath early.
    nm = shutil.which("nm")
    if nm:
        syms = _capture([nm, "-D", "--undefined-only", str(libllama)])
        if "__sanitizer_cov_8bit_counters_init" not in syms:
            raise NativeBuildError(f"{libllama} is not instrumented (no __sanitizer_cov_* refs)")
        defined = _capture([nm, "-D", "--defined-only", str(preload)])
        if "LLVMFuzzerRunDriver" not in defined:
            raise NativeBuildError(f"{preload} does not export LLVMFuzzerRunDriver")
    readelf = shutil.which("readelf")
    if readelf:
        dyn = _capture([readelf, "-d", str(libllama)])
        if "$ORIGIN" not in dyn:
            raise NativeBuildError(f"{libllama} has no $ORIGIN runpath; ggml libs would not be found")


# --------------------------------------------------------------------------- entry


def build_native(cache_dir: Optional[os.PathLike] = None, log: Log = _print, *,
                 force: bool = False, jobs: Optional[int] = None) -> NativeBuild:
    """Build (or reuse from cache) the instrumented libllama and the libFuzzer preload.

    Raises MissingPrerequisite (clang/compiler-rt/cmake/pip missing) or
    NativeBuildError (a build step failed).
    """
    work = Path(cache_dir).expanduser().resolve() if cache_dir else default_cache_dir()
    lib_dir = work / "lib"
    preload = work / "preload" / "libfuzzer_preload.so"
    libllama = lib_dir / "libllama.so"
    stamp = work / "stamp.json"
    result = NativeBuild(libllama=libllama, libfuzzer_preload=preload, lib_dir=lib_dir)

    tc = find_toolchain()
    inputs = _stamp_inputs(tc)
    work.mkdir(parents=True, exist_ok=True)
    with locked(work / ".lock", log):
        return _build_locked(work, result, stamp, tc, inputs, log, force, jobs)


def _build_locked(work: Path, result: NativeBuild, stamp: Path, tc: Dict[str, str],
                  inputs: Dict[str, object], log: Log, force: bool,
                  jobs: Optional[int]) -> NativeBuild:
    lib_dir, preload, libllama = result.lib_dir, result.libfuzzer_preload, result.libllama
    if not force and stamp.is_file() and libllama.is_file() and preload.is_file():
        try:
            old = json.loads(stamp.read_text())
        except (OSError, ValueError):
            old = {}
        if old.get("inputs") == json.loads(json.dumps(inputs)):
            log(f"[build_native] up to date (cached in {work})")
            return result

    if stamp.exists():
        stamp.unlink()
    log_file = work / "build.log"
    log_file.write_text("")
    log(f"[build_native] building into {work} with {tc['clang_version']} (log: {log_file})")
    jobs = jobs or os.cpu_count() or 2
    timings: Dict[str, float] = {}
    t_all = time.monotonic()

    t = time.monotonic()
    tgz = _fetch_sdist(work, log, log_file)
    vendor = _unpack(tgz, work, log)
    timings["fetch_unpack_s"] = round(time.monotonic() - t, 1)

    t = time.monotonic()
    bin_dir = _build_libllama(vendor, work, tc, jobs, log, log_file)
    _collect_libs(bin_dir, lib_dir, log)
    timings["libllama_s"] = round(time.monotonic() - t, 1)

    t = time.monotonic()
    _build_preload(tc, preload, log, log_file)
    timings["preload_s"] = round(time.monotonic() - t, 1)

    _check_outputs(libllama, preload, tc)
    timings["total_s"] = round(time.monotonic() - t_all, 1)

    # Sources and objects are no longer needed; the downloaded sdist is kept.
    for d in (work / "build", work / "src"):
        shutil.rmtree(d, ignore_errors=True)

    stamp.write_text(json.dumps({"inputs": inputs, "timings": timings,
                                 "built_at": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=2))
    log(f"[build_native] done in {timings['total_s']}s "
        f"(fetch+unpack {timings['fetch_unpack_s']}s, libllama {timings['libllama_s']}s, "
        f"preload {timings['preload_s']}s)")
    return result


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", default=None,
                    help=f"where to build and cache (default: {default_cache_dir()})")
    ap.add_argument("--force", action="store_true", help="rebuild even if the stamp matches")
    ap.add_argument("-j", "--jobs", type=int, default=None, help="parallel build jobs")
    ap.add_argument("--print-env", action="store_true",
                    help="print only the run-time env assignments (shell syntax) on stdout")
    args = ap.parse_args(argv)
    log: Log = (lambda m: print(m, file=sys.stderr, flush=True)) if args.print_env else _print
    try:
        nb = build_native(args.cache_dir, log=log, force=args.force, jobs=args.jobs)
    except NativeBuildError as e:
        print(f"build_native: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("build_native: interrupted", file=sys.stderr)
        return 130
    if args.print_env:
        for k, v in nb.env().items():
            print(f"export {k}={shlex.quote(v)}")
    else:
        print(f"libllama          = {nb.libllama}")
        print(f"libfuzzer_preload = {nb.libfuzzer_preload}")
        print(f"lib_dir           = {nb.lib_dir}")
        print("run with: " + " ".join(f"{k}={v}" for k, v in nb.env().items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
