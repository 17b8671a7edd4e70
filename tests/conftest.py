"""What the test modules share: the default subject, running the dryz command, building subjects, vocabularies.

Builds and vocabularies that cannot be had (no compiler, no PyPI) skip, unless DRYZ_REQUIRE_BUILDS=1 (CI sets
it), where they fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATCHES = Path(__file__).parent / "patches"
REQUIRE_BUILDS = os.environ.get("DRYZ_REQUIRE_BUILDS") == "1"
# A selection the test runner may have in its environment must not leak into the dryz processes a test starts.
# (Nor a sanitizer runtime a sanitized subject preloads: dryz sets it for the processes that need it.)
SELECTION = ("DRYZ_LIB", "DRYZ_SUBJECT", "LLAMA_CPP_LIB_PATH", "DRYZ_FAULT", "LD_PRELOAD", "ASAN_OPTIONS",
             "UBSAN_OPTIONS")


@pytest.fixture(scope="session")
def lib():
    """The default subject (the pip build's libllama), opened once for the whole session."""
    from dryz.subject import open_subject, selected_spec
    return open_subject(selected_spec())


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in SELECTION}
    env.update({k: str(v) for k, v in extra.items() if v is not None})
    return env


def dryz(*args, lib=None, cwd=None, env=None, stdin=None, timeout=600, module="dryz"):
    """Run `python -m dryz [--lib LIB] ARGS` in a clean environment (env: extra variables)."""
    pre = ["--lib", str(lib)] if lib is not None else []
    return subprocess.run([sys.executable, "-m", module, *pre, *args], capture_output=True, text=True, cwd=cwd,
                          input=stdin, timeout=timeout, env=clean_env(**(env or {})))


def build(version: str, patch: str | None = None, sanitize: tuple = ()) -> Path:
    """`dryz subject build` of a version, optionally with a patch from tests/patches and sanitizers (cached)."""
    import shutil

    from dryz.subject.build import BuildError, build as build_subject
    if sanitize and shutil.which("clang") is None:
        if REQUIRE_BUILDS:
            raise AssertionError("clang is required for the sanitized build")
        pytest.skip("no clang")
    try:
        return build_subject(version, PATCHES / patch if patch else None, log=lambda m: None, sanitize=sanitize)
    except (BuildError, OSError) as e:
        if REQUIRE_BUILDS:
            raise
        pytest.skip(f"cannot build libllama {version} {patch or ''}: {str(e).splitlines()[0]}")


def vocab(name: str, subject=None):
    """A vendored vocabulary loaded into the subject (default: the pip build's libllama)."""
    from dryz.subject import SubjectError, open_subject, selected_spec
    from dryz.subject.vendored_vocabs import VocabUnavailable
    try:
        return (subject or open_subject(selected_spec())).vocabulary(name)
    except (VocabUnavailable, SubjectError) as e:
        if REQUIRE_BUILDS:
            pytest.fail(f"vocabulary {name} required (DRYZ_REQUIRE_BUILDS=1): {e}")
        pytest.skip(f"vocabulary {name} cannot be had: {e}")


@pytest.fixture(scope="session")
def bpe(lib):
    return vocab("llama-bpe", lib)


@pytest.fixture(scope="session")
def spm(lib):
    return vocab("llama-spm", lib)


def default_sigint():
    """preexec_fn for a child that a test interrupts with SIGINT: SIGINT back to its default disposition before
    exec (a runner started as a background job ignores SIGINT, and an ignored disposition survives exec)."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def default_signals():
    """preexec_fn for a child that a test stops with SIGINT or SIGTERM: both back to their default dispositions
    before exec, whatever the runner inherited (an ignored disposition survives exec)."""
    import signal
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def session(sid: int) -> set[int]:
    """Every live process of a session (zombies are already gone as far as leftovers go): what a test that
    started a process in a session of its own finds left of it."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                fields = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                out.add(int(d))
    return out


@pytest.fixture
def terminal_signals():
    """For a test that sends signals to processes it starts without a preexec_fn (dryz's own Popen calls): this
    process takes SIGINT as an interactive one does (Python's handler; SIGTERM at its default) while the test
    runs, so the children start with SIGINT and SIGTERM at their defaults whatever the runner inherited (a runner
    started as a background job ignores SIGINT, and an ignored disposition survives fork and exec)."""
    import signal
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for s, h in old.items():
        signal.signal(s, h)


REQUIRE_ENGINES = os.environ.get("DRYZ_REQUIRE_ENGINES") == "1"


def engine(name: str) -> str:
    """The spec engine:NAME, its packages installed (else skip; with DRYZ_REQUIRE_ENGINES=1, as CI sets it, fail)."""
    from dryz.subject.engines import ENGINES
    why = ENGINES[name].missing()
    if why is not None:
        if REQUIRE_ENGINES:
            pytest.fail(f"engine {name} required (DRYZ_REQUIRE_ENGINES=1): {why}")
        pytest.skip(why)
    return f"engine:{name}"
