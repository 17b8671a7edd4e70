"""Subject kinds and selection: `--subject KIND:ARG` (and `--lib PATH`, which means `libllama:PATH`).

A new kind of subject is one module with one class implementing dryz.subject.protocol.Subject, plus one line in
KINDS: its name and where its class is. The class is constructed with ARG (the text after the colon, possibly
empty) and must set `spec` so that open_subject(spec) reopens the same subject in another process.
"""

from __future__ import annotations

import importlib
import os

from ..oracle.deviations import DeviationError, check_fixes
from .binding import SubjectError
from .binding import resolve
from .build import build
from .cache import BuildError

# kind -> "module:Class" (imported on first use: a kind's dependencies are loaded only when it is selected)
KINDS = {
    "libllama": "dryz.subject.libllama:LibLlama",
    "llama-cpp-python": "dryz.subject.llama_cpp_python:LlamaCppPython",
    "cmd": "dryz.subject.command:Command",
    "server": "dryz.subject.server:ServerSubject",
    "engine": "dryz.subject.command:EngineSubject",
    "ik-llama": "dryz.subject.ik_llama:IkLlama",
}

# What `--subject` defaults to: the libllama that llama-cpp-python installed (the pinned release).
DEFAULT_KIND = "libllama"


DECLARE = "+declare="


def split_declared(spec: str) -> tuple[str, tuple]:
    """(the spec without its declarations, the fixes it declares)."""
    head, sep, names = spec.rpartition(DECLARE)
    if not sep:
        return spec, ()
    return head, tuple(n for n in names.split(",") if n)


def with_declared(spec: str, names) -> str:
    """The spec declaring these fixes too (each once, in order)."""
    head, had = split_declared(spec)
    names = tuple(dict.fromkeys((*had, *names)))
    return f"{head}{DECLARE}{','.join(names)}" if names else head


def parse(spec: str) -> tuple[str, str]:
    """(kind, arg) of a KIND:ARG selection (without a `+declare=` suffix); a bare known KIND means KIND: (its
    default argument)."""
    if not isinstance(spec, str) or not spec.strip():
        raise SubjectError("--subject must be KIND:ARG (kinds: " + ", ".join(KINDS) + ")")
    kind, sep, arg = split_declared(spec)[0].partition(":")
    kind = kind.strip()
    if kind not in KINDS:
        from ..errors import unknown  # on use
        raise SubjectError(f"{spec!r}: " + unknown("kind", kind, KINDS))
    return kind, arg


def check_spec(spec: str) -> tuple[str, str]:
    """A subject spec checked against the registries before anything is opened or started: its kind, its
    argument (the kind's own check_arg: an engine's name, a file that exists), and the fixes its `+declare=`
    names (none empty, each one dryz models and this kind may declare). (kind, arg); SubjectError (one line)."""
    kind, arg = parse(spec)
    head, sep, raw = spec.rpartition(DECLARE)
    cls = subject_class(kind)
    if sep:
        names = raw.split(",")
        if not raw or not all(n.strip() for n in names):
            raise SubjectError(f"{spec!r}: {DECLARE} names an empty fix (give {DECLARE}FIX[,FIX])")
        check_declared(kind, cls, names)
    check = getattr(cls, "check_arg", None)
    if check is not None:
        check(arg)
    return kind, arg


def normal_spec(spec: str) -> str:
    """The spec as every process reads it alike: its kind's normal_arg (a patch's path made absolute), the
    `+declare=` suffix kept."""
    kind, arg = parse(spec)
    fn = getattr(subject_class(kind), "normal_arg", None)
    if fn is None:
        return spec
    head, sep, names = spec.rpartition(DECLARE)
    return f"{kind}:{fn(arg)}" + (f"{DECLARE}{names}" if sep else "")


def subject_class(kind: str):
    module, _, name = KINDS[kind].partition(":")
    return getattr(importlib.import_module(module), name)


def open_subject(spec: str):
    """The subject a spec names, opened (loaded, started), with the fixes it declares: a SubjectError (one line)
    when it cannot be had."""
    kind, arg = parse(spec)
    names = split_declared(spec)[1]
    cls = subject_class(kind)
    if names:
        check_declared(kind, cls, names)
    subject = cls(arg)
    if names:
        subject.declare(names)
        subject.spec = with_declared(subject.spec, names)
    return subject


def check_declared(kind: str, cls, names) -> None:
    """SubjectError (one line) unless a subject of this kind may declare these fixes (before it is opened)."""
    if not getattr(cls, "declares_fixes", False):
        raise SubjectError(f"--declare: {kind} subjects declare their deviations in their adapter, each citing "
                           "its engine's documentation (docs/adapters.md)")
    if any(not str(n).strip() for n in names):
        raise SubjectError("--declare: an empty fix (give --declare FIX)")
    try:
        check_fixes(names, getattr(cls, "REQUEST_LAYER", ""))
    except DeviationError as e:
        raise SubjectError(str(e)) from None


def lib_spec(path) -> str:
    """`--lib PATH` as a subject spec (the path resolved now: a child in another folder means the same file)."""
    return f"libllama:{resolve(path)}"


def selected_spec(subject: str | None = None, lib: str | None = None) -> str:
    """The spec the user selected: --subject, else --lib, else DRYZ_SUBJECT / DRYZ_LIB (how a parent passes its
    selection to the processes it starts), else the default libllama."""
    if subject and lib:
        raise SubjectError("give --subject or --lib, not both (--lib PATH means --subject libllama:PATH)")
    if subject:
        return normal_spec(subject)
    if lib:
        return lib_spec(lib)
    env = os.environ.get("DRYZ_SUBJECT")
    if env:
        return normal_spec(env)
    if os.environ.get("DRYZ_LIB"):
        return lib_spec(os.environ["DRYZ_LIB"])
    return f"{DEFAULT_KIND}:"


def child_env(spec: str, base: dict | None = None) -> dict:
    """The environment a process dryz starts gets: the subject spec passed explicitly (DRYZ_SUBJECT), and
    nothing of another selection left over."""
    env = dict(os.environ if base is None else base)
    for k in ("DRYZ_LIB", "LLAMA_CPP_LIB_PATH", "LD_PRELOAD"):
        env.pop(k, None)
    env["DRYZ_SUBJECT"] = spec
    env.update(runtime_env(spec))
    return env


def runtime_env(spec: str, fuzzer: bool = False) -> dict:
    """What a process needs in its environment before it starts to run this subject (e.g. a sanitizer runtime
    to preload: a libllama built with --sanitize); empty for most. fuzzer: for a libFuzzer job (a sanitized
    libllama's runtime combined with libFuzzer, so atheris uses it and coverage counts)."""
    kind, _ = parse(spec)
    fn = getattr(subject_class(kind), "runtime_env", None)
    if fn is None:
        return {}
    spec = split_declared(spec)[0]
    return fn(spec, fuzzer=True) if fuzzer else fn(spec)


_OPENED: dict = {}


def opened(spec: str):
    """open_subject(spec), once per process: for entry points that receive a spec from their parent (a Dask task,
    a fuzz job, an isolated worker). Commands open their subject once and pass it down."""
    if spec not in _OPENED:
        _OPENED[spec] = open_subject(spec)
    return _OPENED[spec]


def opened_here(spec: str):
    """opened(spec), the subject running in this process where its kind can (an engine dryz ships whose adapter runs
    in process: dryz.subject.command.InProcessEngine, the same adapter code without the pipe): for a fuzz job, whose
    every input is one request. Anything else: opened(spec)."""
    kind, arg = parse(spec)
    if kind == "engine" and not split_declared(spec)[1]:
        from .engines import ENGINES  # on use: an engine selected
        engine = ENGINES.get(arg.strip().partition("+patch=")[0].strip())  # (a patched one too: its make() patches)
        if engine is not None and engine.in_process and engine.missing() is None:
            key = f"{spec} (in process)"
            if key not in _OPENED:  # (its class found as KINDS' are: loaded with the kind, on use)
                _OPENED[key] = getattr(importlib.import_module("dryz.subject.command"), "InProcessEngine")(arg)
            return _OPENED[key]
    return opened(spec)


def as_spec(subject) -> str:
    """A subject spec from a spec (KIND:ARG) or a libllama path."""
    s = str(subject)
    return s if s.split(":", 1)[0] in KINDS and ":" in s else f"libllama:{s}"


def resolve_base(base: str, log) -> str:
    """A base to compare a subject with (dryz gate --base, dryz compare --base): a llama-cpp-python release VERSION
    (built by dryz subject build into the cache, cached after its first build), a subject spec KIND:ARG, or a
    libllama PATH; its subject spec. SubjectError (one line) when it cannot be had."""
    import re
    import time
    if re.fullmatch(r"\d+\.\d+\.\d+", base):
        t = time.monotonic()
        try:
            out = build(base, None, log=log)
        except BuildError as e:
            raise SubjectError(f"--base {base}: {str(e).splitlines()[0]}") from None
        log(f"base {base}: {out} (prepared in {time.monotonic() - t:.1f} s, outside the budget)")
        return as_spec(out)
    if base.split(":", 1)[0] in KINDS and ":" in base:
        return base
    try:
        return as_spec(resolve(base))
    except SubjectError as e:
        raise SubjectError(f"--base: {e}") from None

