"""`dryz subject build`: a libllama from a llama-cpp-python sdist's vendored llama.cpp, optionally patched.

One unpacked source tree and one CMake build directory are kept per sdist version, so a patch rebuilds only
what it touches (a change to src/llama-sampler.cpp: seconds); the patch is applied, the `llama` target built,
the libraries copied out into a folder keyed by version and patch sha256, and the patch reverted. The folder
holds libllama.so, the libggml*.so it needs (RUNPATH $ORIGIN) and dryz-subject.json (version, vendored
commit, patch, build time), which the subject's identity reports. Pass the folder (or its libllama.so) to
--lib.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from ..output import Progress
from .cache import BuildError, BuildKilled, cache_dir, locked, sha256_file
from .sanitizer import fuzzer_preload

PINNED_VERSION = "0.3.36"  # llama-cpp-python, the default subject's provider (pyproject.toml)
BUILD_INFO = "dryz-subject.json"  # written by `dryz subject build` beside the libraries it built

RECIPE = 1  # bump when the flags below change (not the fingerprint: dryz-subject.json is rewritten)
CMAKE_OPTIONS = {
    "CMAKE_BUILD_TYPE": "Release",
    "BUILD_SHARED_LIBS": "ON",
    "CMAKE_BUILD_WITH_INSTALL_RPATH": "ON",
    "CMAKE_INSTALL_RPATH": "$ORIGIN",
    "GGML_NATIVE": "OFF",
    "GGML_OPENMP": "OFF",
    "GGML_CCACHE": "OFF",
    "GGML_BACKEND_DL": "OFF",
    "LLAMA_BUILD_COMMON": "OFF",
    "LLAMA_BUILD_TESTS": "OFF",
    "LLAMA_BUILD_TOOLS": "OFF",
    "LLAMA_BUILD_EXAMPLES": "OFF",
    "LLAMA_BUILD_SERVER": "OFF",
    "LLAMA_BUILD_APP": "OFF",
    "LLAMA_OPENSSL": "OFF",
    "LLAMA_CURL": "OFF",
}
TAIL_LINES = 25

# `dryz subject build --server`: the llama-server target, in its own build directory (work/V/build-server) from
# the same unpacked source under the same per-version lock, into subjects/<key>-server/.
SERVER_RECIPE = 1  # bump when SERVER_CMAKE_OPTIONS change
SERVER_CMAKE_OPTIONS = {**CMAKE_OPTIONS,
                        "LLAMA_BUILD_COMMON": "ON", "LLAMA_BUILD_TOOLS": "ON", "LLAMA_BUILD_SERVER": "ON",
                        "LLAMA_USE_PREBUILT_UI": "OFF", "LLAMA_BUILD_UI": "OFF"}
SERVER_BINARY = "llama-server"

# --sanitize: the subject built with clang's sanitizers, as OSS-Fuzz builds its targets (every UBSan check
# unrecoverable, frame pointers kept, -O1); libstdc++'s vector annotations make an access between a vector's size
# and its capacity a container-overflow (OSS-Fuzz's libc++ has them on by default). A flavour of the libllama
# build: its own work tree (source and build directory) and cache key, so the plain build is never disturbed.
SANITIZERS = ("address", "undefined")
SANITIZER_RECIPE = 2  # bump when the flags below change (2: the runtime is not linked in, only preloaded)
SAN_OPT = "-O1 -g -fno-omit-frame-pointer -DNDEBUG -D_GLIBCXX_SANITIZE_VECTOR=1"
SAN_RUNTIME = "libclang_rt.asan-x86_64.so"
# What every process that loads a sanitized libllama runs with (runtime_env): a report aborts the process, so
# a crash-aware caller sees a signal and the report on stderr; leak checking is off (Python never frees all).
# symbolize=0: the runtime's symbolizer subprocess would inherit LD_PRELOAD and can hang holding the dying
# process's stderr open; dryz symbolizes the frames afterwards (subject.sanitizer.report).
ASAN_OPTIONS = ("detect_leaks=0:abort_on_error=1:halt_on_error=1:detect_container_overflow=1:"
                "allocator_may_return_null=1:symbolize=0")
UBSAN_OPTIONS = "print_stacktrace=1:halt_on_error=1:abort_on_error=1:symbolize=0"


class _Variant:
    """What differs between the builds of one version (one builder, one version pin, one sdist): the libllama
    build, the llama-server build (server), the sanitized libllama (sanitize: its own work tree and key) and a
    named work tree of its own (tree: dryz mutate builds its mutants in one, beside other builders of the
    version; keyed apart)."""

    def __init__(self, server: bool, sanitize: tuple = (), tree: str | None = None):
        if server and sanitize:
            raise BuildArgumentError("--server and --sanitize cannot be combined (the sanitized build is libllama's)")
        self.server, self.sanitize, self.tree = server, tuple(sanitize), tree
        self.recipe = SERVER_RECIPE if server else RECIPE
        self.options = SERVER_CMAKE_OPTIONS if server else CMAKE_OPTIONS
        self.toolchain = None
        if sanitize:
            self.toolchain = sanitizer_toolchain()
            self.options = _sanitize_options(self.sanitize, self.toolchain)
        self.target = SERVER_BINARY if server else "llama"
        self.build_dir = "build-server" if server else "build"
        self.product = SERVER_BINARY if server else "libllama.so"
        # the work tree (work/V<flavour>) and the key's suffix
        self.flavour = ("-san-" + "-".join(self.sanitize) if self.sanitize else "") + (f"-{tree}" if tree else "")
        self.suffix = ("-server" if server else "") + \
            (f"-san-{'-'.join(self.sanitize)}-s{SANITIZER_RECIPE}" if self.sanitize else "") + \
            (f"-{tree}" if tree else "")
        self.log_name = "build-server.log" if server else "build.log"

    def info(self) -> dict:
        """What dryz-subject.json says of the flavour (runtime_env reads it)."""
        if not self.sanitize:
            return {}
        return {"sanitize": list(self.sanitize), "sanitizer_recipe": SANITIZER_RECIPE,
                "sanitizer_runtime": self.toolchain["runtime"]}


class BuildArgumentError(BuildError):
    """What was asked for cannot be built (a version, a patch file, a combination of options): said as is."""


def subjects_dir() -> Path:
    return cache_dir() / "subjects"


def _sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").rstrip().splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-TAIL_LINES:])


# The compiler's step counter: ninja's `[n/m]`, make's `[ nn%]`.
STEP = re.compile(rb"^\[(\d+)/(\d+)\]|^\[\s*(\d+)%\]")


def _run(cmd, log_file: Path, what: str, cwd: Path | None = None, stdin: bytes | None = None, step=None) -> None:
    """Run a build step, its output appended to log_file; step(n, m): called on each line of the compiler's step
    counter (ninja's [n/m]; make's percentage as n of 100) as the output comes."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    with open(log_file, "ab") as fh:
        fh.write(("\n$ " + " ".join(map(str, cmd)) + "\n").encode())
        fh.flush()
        if step is None:
            proc = subprocess.run([str(c) for c in cmd], cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                  input=stdin)
        else:
            proc = subprocess.Popen([str(c) for c in cmd], cwd=cwd, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
            try:
                for line in proc.stdout:
                    fh.write(line)
                    m = STEP.match(line)
                    if m:
                        step(*((int(m[1]), int(m[2])) if m[1] else (int(m[3]), 100)))
            except BaseException:  # Ctrl-C (the compiler has it too) or the caller's error: no compiler left
                proc.terminate()
                raise
            finally:
                proc.wait()
    if proc.returncode == -signal.SIGINT:  # Ctrl-C reached the compiler (this process may ignore it: a background
        raise KeyboardInterrupt          # job's): the user's stop, never a failed build
    if proc.returncode < 0:
        raise BuildKilled(f"{what} was killed ({signal.Signals(-proc.returncode).name}); full log: {log_file}")
    if proc.returncode != 0:
        raise BuildError(f"{what} failed (exit {proc.returncode}); full log: {log_file}\n{_tail(log_file)}")


# sha256 of the PyPI sdists dryz pins or tests against (files on PyPI are immutable): a download or cached file
# of a listed version that differs is refused.
SDIST_SHA256 = {"0.3.36": "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"}


def sdist(version: str, log, log_file: Path) -> Path:
    """The llama-cpp-python sdist of `version`: from DRYZ_SDIST_DIR or the cache, else pip download; checked
    against SDIST_SHA256 where the version is listed there. The one sdist fetch of dryz (subject builds, the
    native fuzz build, the vendored vocabularies)."""
    name = f"llama_cpp_python-{version}.tar.gz"
    want = SDIST_SHA256.get(version)
    for d in filter(None, [os.environ.get("DRYZ_SDIST_DIR"), str(cache_dir() / "sdists")]):
        if (Path(d) / name).is_file() and (want is None or sha256_file(Path(d) / name) == want):
            return Path(d) / name
    dl = cache_dir() / "sdists"
    dl.mkdir(parents=True, exist_ok=True)
    log(f"downloading the llama-cpp-python=={version} sdist with pip")
    _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
          "--disable-pip-version-check", "-q", f"llama-cpp-python=={version}", "-d", dl], log_file,
         f"pip download llama-cpp-python=={version}")
    if not (dl / name).is_file():
        raise BuildError(f"pip download gave no {name} (see {log_file})")
    if want is not None and sha256_file(dl / name) != want:
        got = sha256_file(dl / name)
        (dl / name).unlink()
        raise BuildError(f"{name}: sha256 {got[:16]}..., PyPI's is {want[:16]}... (refused)")
    return dl / name


def unpack(tgz: Path, work: Path, version: str, log) -> Path:
    """The sdist unpacked once into work/src (kept for incremental rebuilds); returns vendor/llama.cpp."""
    top = work / "src" / f"llama_cpp_python-{version}"
    stamp = work / "src" / ".unpacked"
    if not stamp.exists() or stamp.read_text() != tgz.name:
        shutil.rmtree(work / "src", ignore_errors=True)
        (work / "src").mkdir(parents=True)
        log(f"unpacking {tgz.name}")
        with tarfile.open(tgz, "r:gz") as tf:
            tf.extractall(work / "src", filter="data")
        stamp.write_text(tgz.name)
    vendor = top / "vendor" / "llama.cpp"
    if not (vendor / "CMakeLists.txt").is_file():
        raise BuildError(f"{tgz} has no vendor/llama.cpp/CMakeLists.txt")
    return vendor


def vendored_commit(vendor: Path) -> str | None:
    """The commit the sdist vendored, from its git metadata (vendor/llama.cpp/.git points into the sdist's
    .git/modules)."""
    git = vendor / ".git"
    try:
        if git.is_file():
            target = git.read_text().strip().removeprefix("gitdir:").strip()
            git = (vendor / target).resolve()
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref:"):
            head = (git / head.split(None, 1)[1]).read_text().strip()
        return head
    except OSError:
        return None


def dry_section(text: str) -> str | None:
    """The DRY section of the sampler source: from its `// DRY` heading to the end of
    llama_sampler_init_dry_testing, the section's last function in every release since DRY landed."""
    start = text.find("\n// DRY\n")
    if start < 0:
        return None
    test = text.find("llama_sampler_init_dry_testing(", start)
    end = text.find("\n}\n", test) if test >= 0 else -1
    return text[start + 1:end + 3] if end >= 0 else None


def dry_fingerprint(vendor: Path) -> str | None:
    """sha256 (16 hex digits) of the DRY section, so two releases with the same DRY code share a fingerprint
    whatever else changed."""
    for rel in ("src/llama-sampler.cpp", "src/llama-sampling.cpp"):
        p = vendor / rel
        if p.is_file():
            section = dry_section(p.read_text(errors="replace"))
            if section:
                return _sha256_bytes(section.encode())[:16]
    return None


FINGERPRINT = 2  # 1: the section was cut at its first top-level comment


def _refresh_fingerprint(out: Path, version: str, patch_sha: str | None) -> None:
    """A cached build made before the fingerprint's current definition gets it recomputed (pristine builds,
    from the kept source tree; a patched build's would need its patch applied, and keeps what it has)."""
    info_path = out / BUILD_INFO
    info = json.loads(info_path.read_text())
    if info.get("fingerprint_version") == FINGERPRINT or patch_sha:
        return
    vendor = cache_dir() / "work" / version / "src" / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
    if vendor.is_dir():
        info["dry_fingerprint"], info["fingerprint_version"] = dry_fingerprint(vendor), FINGERPRINT
        info_path.write_text(json.dumps(info, indent=2) + "\n")


def parse_sanitize(text: str | None) -> tuple[str, ...]:
    """--sanitize address,undefined -> ("address", "undefined") (ValueError on anything else)."""
    if not text:
        return ()
    names = tuple(sorted({n.strip() for n in text.split(",") if n.strip()}, key=lambda n: (n not in SANITIZERS, n)))
    bad = [n for n in names if n not in SANITIZERS]
    if bad or not names:
        raise ValueError(f"--sanitize takes {','.join(SANITIZERS)} (one or both), got {text!r}")
    return names


def sanitizer_toolchain() -> dict:
    """clang, clang++ and the shared ASan runtime a sanitized subject is preloaded with (BuildError without)."""
    cc, cxx = shutil.which("clang"), shutil.which("clang++")
    if not cc or not cxx:
        raise BuildError("--sanitize needs clang (apt-get install -y clang libclang-rt-14-dev)")
    p = subprocess.run([cc, f"-print-file-name={SAN_RUNTIME}"], capture_output=True, text=True)
    runtime = p.stdout.strip()
    if not os.path.isabs(runtime) or not os.path.isfile(runtime):
        raise BuildError(f"--sanitize: clang has no {SAN_RUNTIME} (apt-get install -y libclang-rt-14-dev)")
    return {"cc": cc, "cxx": cxx, "runtime": runtime}


def _sanitize_options(sanitize: tuple[str, ...], tc: dict) -> dict:
    flags = "-fsanitize=" + ",".join(sanitize) + (" -fno-sanitize-recover=undefined" if "undefined" in sanitize
                                                  else "")
    # The runtime is not linked into the libraries (their __asan_*/__ubsan_* symbols stay undefined): whichever
    # runtime the process preloads provides them, the plain one or the one combined with libFuzzer for fuzz jobs.
    link = flags.split(" ")[0]
    return {**CMAKE_OPTIONS, "CMAKE_C_COMPILER": tc["cc"], "CMAKE_CXX_COMPILER": tc["cxx"],
            "CMAKE_BUILD_TYPE": "RelWithDebInfo", "CMAKE_C_FLAGS_RELWITHDEBINFO": SAN_OPT,
            "CMAKE_CXX_FLAGS_RELWITHDEBINFO": SAN_OPT, "CMAKE_C_FLAGS": flags, "CMAKE_CXX_FLAGS": flags,
            "CMAKE_SHARED_LINKER_FLAGS": link}


def runtime_env(lib_path, fuzzer: bool = False) -> dict:
    """The environment a process loading this libllama must be *started* with: for a sanitized build (its
    dryz-subject.json names the sanitizers), the sanitizer runtime preloaded and its options; else nothing.
    The libllama subject's runtime_env hook (subject.registry.runtime_env, child_env) answers with it, so every
    process dryz starts on the subject gets it, and dryz's own entry re-executes itself with it. fuzzer: for a
    libFuzzer job, the runtime combined with libFuzzer (subject.sanitizer.fuzzer_preload), which atheris then
    uses, so coverage is counted."""
    if not lib_path:
        return {}
    p = Path(lib_path)
    info_path = (p if p.is_dir() else p.parent) / BUILD_INFO
    try:
        info = json.loads(info_path.read_text())
    except (OSError, ValueError):
        return {}
    if not info.get("sanitize"):
        return {}
    preload = info["sanitizer_runtime"]
    if fuzzer:
        preload = str(fuzzer_preload(preload))
    return {"LD_PRELOAD": preload, "ASAN_OPTIONS": ASAN_OPTIONS, "UBSAN_OPTIONS": UBSAN_OPTIONS}


# -- how long a build takes, said before it starts; --no-build ---------------------------------------------------

NO_BUILD = "DRYZ_NO_BUILD"   # `1` (dryz --no-build): a build a command needs is refused, never made
HISTORY = "build-times.json"  # in the cache: every build's kind, steps, seconds and jobs on this machine

# A fresh build's compiler time (wall seconds x jobs) on this project's 2-core machine, per kind: what a machine
# with no build of its own yet is told to expect. From bench/records/builds.json (python bench/builds.py);
# tests/test_build_progress.py holds these to the record.
FRESH_CORE_SECONDS = {"libllama": 770.0, "llama-server": 1303.0}


class BuildRefused(BuildError):
    """--no-build: the command needs a build that is not in the cache (one line, exit 2)."""


def kind_of(v: "_Variant") -> str:
    return "llama-server" if v.server else "sanitized libllama" if v.sanitize else "libllama"


def _history() -> list:
    try:
        data = json.loads((cache_dir() / HISTORY).read_text())
        return data if isinstance(data, list) else []
    except (OSError, ValueError):
        return []


def _remember(row: dict) -> None:
    """Add a finished build to the cache's history (the last 50 kept); a history that cannot be written is
    skipped (it only improves the next estimate)."""
    rows = (_history() + [row])[-50:]
    try:
        tmp = cache_dir() / f".{HISTORY}.tmp{os.getpid()}"
        tmp.write_text(json.dumps(rows, indent=1) + "\n")
        os.replace(tmp, cache_dir() / HISTORY)
    except OSError:
        pass


def expected(kind: str, fresh: bool, jobs: int) -> tuple[float | None, str]:
    """(seconds, where the figure comes from) a build of this kind is expected to take with `jobs` compiler jobs:
    this machine's last such build (scaled by its jobs), else the project's measured fresh build; (None, why) when
    neither is known. An incremental build (the version built before, a patch applied) recompiles what changed."""
    mine = [r for r in _history() if r.get("kind") == kind and r.get("fresh") == fresh and r.get("seconds")]
    if mine:
        r = mine[-1]
        return r["seconds"] * r.get("jobs", jobs) / jobs, f"this machine's last {'fresh ' if fresh else ''}{kind} " \
                                                            f"build took {_fmt(r['seconds'])} with {r.get('jobs')} jobs"
    if not fresh:
        return None, "only what changed since this version's last build recompiles: seconds to minutes"
    core = FRESH_CORE_SECONDS.get(kind)
    if core:
        return core / jobs, "the project's fresh build, bench/records/builds.json"
    base = FRESH_CORE_SECONDS.get("libllama")
    if base:
        return None, f"not measured; longer than a fresh libllama build (about {_fmt(base / jobs)} here)"
    return None, "not measured"


def _fmt(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def describe(version: str, patch=None, server: bool = False, sanitize: tuple = (), tree: str | None = None,
             jobs: int | None = None) -> str | None:
    """None when this build is in the cache; else one line: what would be built and how long it is expected to
    take on this machine (said before a command starts one; refused with --no-build)."""
    v = _Variant(server, sanitize, tree)
    out, _ = _key(version, patch, v)
    if (out / v.product).exists() and (out / BUILD_INFO).exists():
        return None
    jobs = jobs or os.cpu_count() or 2
    bdir = cache_dir() / "work" / (version + v.flavour) / v.build_dir
    fresh = not (bdir / "build.ninja").exists() and not (bdir / "Makefile").exists()
    secs, why = expected(kind_of(v), fresh, jobs)
    what = f"{kind_of(v)} of llama-cpp-python {version}" + (f" + patch {Path(patch).name}" if patch else "") + \
        (f" ({', '.join(sanitize)} sanitizers)" if sanitize else "")
    when = f"expected about {_fmt(secs)} with {jobs} jobs on {os.cpu_count()} cores ({why})" if secs else \
        f"{why}" if not fresh else f"a fresh build, {why}"
    return f"{what}, not in the cache: {when}"


def refuse_or_announce(needs: list, log) -> None:
    """Before a command starts: each build it needs and lacks (describe()'s lines) said, or with --no-build
    (DRYZ_NO_BUILD=1) refused in one line."""
    needs = [n for n in needs if n]
    if needs and os.environ.get(NO_BUILD) == "1":
        raise BuildRefused(f"--no-build: this needs {needs[0]}; build it first with `dryz subject build` (see "
                           "--help) or drop --no-build")
    for n in needs:
        log(f"this run builds {n}")


def _key(version: str, patch, v: "_Variant") -> tuple[Path, str | None]:
    patch_sha = _sha256_bytes(Path(patch).read_bytes()) if patch else None
    key = f"{version}-{patch_sha[:16] if patch_sha else 'pristine'}-r{v.recipe}{v.suffix}"
    return subjects_dir() / key, patch_sha


def build(version: str = PINNED_VERSION, patch: Path | None = None, jobs: int | None = None, log=print,
          force: bool = False, server: bool = False, sanitize: tuple[str, ...] = (),
          tree: str | None = None) -> Path:
    """Build (or reuse) libllama for `version` with an optional patch; returns the folder holding it.
    server=True: the llama-server executable instead (its folder holds llama-server and the shared libraries it
    loads through RUNPATH $ORIGIN). sanitize: ("address", "undefined") or a part of it: clang with those
    sanitizers, in a work tree of its own. tree: a named work tree of its own (dryz mutate's)."""
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise BuildArgumentError(f"--version must look like 0.3.36, got {version!r}")
    if patch is not None and not Path(patch).is_file():
        raise BuildArgumentError(f"--patch {patch}: no such file")
    v = _Variant(server, sanitize, tree)
    patch_bytes = Path(patch).read_bytes() if patch else b""
    out, patch_sha = _key(version, patch, v)
    if not force and (out / v.product).exists() and (out / BUILD_INFO).exists():
        if not server and not v.flavour:
            _refresh_fingerprint(out, version, patch_sha)
        log(f"cached: {out}")
        return out
    if os.environ.get(NO_BUILD) == "1":
        refuse_or_announce([describe(version, patch, server, sanitize, tree, jobs) or f"{kind_of(v)} {version}"],
                           log)
    work = cache_dir() / "work" / (version + v.flavour)
    with locked(cache_dir() / "work" / f"{version}{v.flavour}.lock", log):
        if not force and (out / v.product).exists() and (out / BUILD_INFO).exists():
            return out
        work.mkdir(parents=True, exist_ok=True)
        log_file = work / v.log_name
        log_file.write_text("")
        t0 = time.monotonic()
        tgz = sdist(version, log, log_file)
        vendor = unpack(tgz, work, version, log)
        applied = False
        try:
            if patch:
                for args, what in ((["--dry-run"], "the patch does not apply to vendor/llama.cpp"), ([], "patch")):
                    _run(["patch", "-p1", "--forward", "--batch", *args], log_file, what, cwd=vendor,
                         stdin=patch_bytes)
                applied = True
            fingerprint = dry_fingerprint(vendor)
            bdir = work / v.build_dir
            configured = bdir / "dryz-cmake-options.json"
            wanted = json.dumps(v.options, sort_keys=True)
            fresh = not (bdir / "build.ninja").exists() and not (bdir / "Makefile").exists()
            if not fresh and not configured.exists():
                configured.write_text(wanted)  # configured before options were recorded: with these
            if fresh or configured.read_text() != wanted:  # a changed recipe: cmake again (rebuilds what changed)
                cmd = ["cmake", "-S", vendor, "-B", bdir]
                if shutil.which("ninja"):
                    cmd += ["-G", "Ninja"]
                cmd += [f"-D{k}={val}" for k, val in v.options.items()]
                log(f"cmake configure (log: {log_file})")
                _run(cmd, log_file, "cmake configure")
                configured.write_text(wanted)
            jobs = jobs or os.cpu_count() or 2
            secs, why = expected(kind_of(v), fresh, jobs)
            log(f"building the {v.target} target ({kind_of(v)} of {version}{' + patch ' + Path(patch).name if patch else ''}"
                f"{', fresh' if fresh else ''}) with {jobs} jobs on {os.cpu_count()} cores: "
                + (f"expected about {_fmt(secs)} ({why})" if secs else why) + f"; log: {log_file}")
            bar = _StepBar(f"building {v.target}")
            t_build = time.monotonic()
            try:
                _run(["cmake", "--build", bdir, "--target", v.target, f"-j{jobs}"], log_file, "the build",
                     step=bar)
            finally:
                bar.close()
            _remember({"kind": kind_of(v), "fresh": fresh, "version": version, "steps": bar.total, "jobs": jobs,
                       "seconds": round(time.monotonic() - t_build, 1), "cores": os.cpu_count(),
                       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
            tmp = out.with_name(out.name + f".tmp{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            libs = sorted((bdir / "bin").glob("lib*.so*"))
            if not any(p.name == "libllama.so" for p in libs):
                raise BuildError(f"the build produced no libllama.so in {bdir / 'bin'}")
            if server:
                if not (bdir / "bin" / SERVER_BINARY).is_file():
                    raise BuildError(f"the build produced no {SERVER_BINARY} in {bdir / 'bin'}")
                shutil.copy2(bdir / "bin" / SERVER_BINARY, tmp / SERVER_BINARY)
            for p in libs:
                if p.is_symlink():
                    os.symlink(os.readlink(p), tmp / p.name)
                else:
                    shutil.copy2(p, tmp / p.name)
            info = {"llama_cpp_python": version, "vendored_commit": vendored_commit(vendor),
                    "dry_fingerprint": fingerprint, "fingerprint_version": FINGERPRINT,
                    "patch": Path(patch).name if patch else None,
                    "patch_sha256": patch_sha, "build_seconds": round(time.monotonic() - t0, 1),
                    "recipe": v.recipe, "cmake_options": v.options,
                    **({"product": SERVER_BINARY} if server else {}),
                    **v.info(),
                    "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            (tmp / BUILD_INFO).write_text(json.dumps(info, indent=2) + "\n")
            if patch:
                (tmp / "patch.diff").write_bytes(patch_bytes)
            shutil.rmtree(out, ignore_errors=True)
            os.replace(tmp, out)
        finally:
            if applied:
                try:
                    _run(["patch", "-p1", "-R", "--batch"], log_file, "reverting the patch", cwd=vendor,
                         stdin=patch_bytes)
                except BuildError:
                    shutil.rmtree(work / "src", ignore_errors=True)  # unpacked afresh next time
        log(f"built in {time.monotonic() - t0:.1f} s")
    return out


class _StepBar:
    """The compiler's step counter as a progress bar on stderr (dryz.output.Progress: a bar on a terminal, a line
    every 10 s otherwise, nothing with --quiet)."""

    def __init__(self, label: str):
        self.label, self.bar, self.done, self.total = label, None, 0, 0

    def __call__(self, n: int, m: int) -> None:
        if self.bar is None or m != self.total:  # the first step (ninja's m: the steps this build has)
            if self.bar is not None:
                self.bar.close()
            self.bar, self.done, self.total = Progress(m, f"{self.label}: steps"), 0, m
        if n > self.done:
            self.bar(n - self.done)
            self.done = n

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def command(version: str, patch, jobs, force: bool, server: bool, sanitize, log) -> Path:
    """`dryz subject build` past its options: the folder (or llama-server) built; a step that failed is said as
    "subject build: ..." (what was asked for and cannot be built, as is)."""
    try:
        out = build(version, patch, jobs=jobs, log=log, force=force, server=server, sanitize=sanitize)
    except BuildArgumentError:
        raise
    except BuildError as e:
        raise BuildError(f"subject build: {e}") from None
    return out / "llama-server" if server else out
