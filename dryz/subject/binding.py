"""dryz's own ctypes binding to the few libllama symbols DRY needs.

Not llama-cpp-python's bindings: those bind every llama.h function at import, so a libllama of another
release (or another packaging, such as xllamacpp's extension module) fails to load when one of them is missing.
dryz binds only what it calls, finds which `llama_sampler_init_dry` ABI the loaded file has by running it, and
refuses, with one line, a file without the DRY sampler.

Version differences handled here, each checked against the library at load:

- `llama_sampler_init_dry` has 7 arguments since llama.cpp PR #26524 (llama-cpp-python >= 0.3.35) and 8 before
  it (`n_ctx_train` after the vocab). The file exports the same symbol either way, so `detect_abi` makes probe
  calls that are memory-safe under both and reads the ABI off the kind of sampler init_dry returns (see
  ABI_PROBES), never off the penalties DRY computes: a DRY bug is a finding, not a library that cannot load.
- `struct llama_model_params` changes from release to release; dryz only needs `vocab_only`. Its offset is the
  start of the struct's last 8-byte chunk (the booleans are kept together at its end, after the pointers, in
  every release since the sampler API), found by asking `llama_model_default_params` to fill two differently
  pre-filled buffers. Loading the vocabulary then proves it (a vocab-only GGUF has no tensors: without
  `vocab_only` the load fails).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np
from ..errors import DryzError
from ..environment import choice, read

N_CTX_TRAIN_DEFAULT = 4096  # what the 8-argument init_dry gets when a Case does not say
TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])  # llama_token_data
PARAMS_BUFFER = 512  # bytes; larger than any llama_model_params so far (0.3.36: 80)


class SubjectError(RuntimeError, DryzError):
    """The library could not be loaded or did something the harness cannot interpret."""


class ArrayChanged(SubjectError):
    """The sampler changed the candidate array's ids, size or data pointer during a walk: the library's doing
    (DRY only changes logits), so a finding (exit 1), not a harness error."""


class llama_token_data(ctypes.Structure):  # llama.h, unchanged since the sampler API (2024)
    _fields_ = [("id", ctypes.c_int32), ("logit", ctypes.c_float), ("p", ctypes.c_float)]


llama_token_data_p = ctypes.POINTER(llama_token_data)


class llama_token_data_array(ctypes.Structure):
    _fields_ = [("data", llama_token_data_p), ("size", ctypes.c_size_t), ("selected", ctypes.c_int64),
                ("sorted", ctypes.c_bool)]


class _Params(ctypes.Structure):
    """llama_model_params as an opaque block: passed by value it is copied onto the stack (x86-64 SysV: a struct
    of more than 16 bytes is passed in memory), where the callee reads its own size of it."""
    _fields_ = [("raw", ctypes.c_uint8 * PARAMS_BUFFER)]


llama_token = ctypes.c_int32
_vp = ctypes.c_void_p
_LOG_CB = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
# The log callback every Binding installs (llama_log_set keeps a process-wide pointer: a callback object that
# died with its Binding would be called later, and crash the process).
_SILENT = _LOG_CB(lambda level, text, user: None)

# name: (argtypes, restype); every one must exist in the file.
REQUIRED = {
    "llama_sampler_init_dry": (None, _vp),  # argtypes set per ABI
    "llama_sampler_accept": ([_vp, llama_token], None),
    "llama_sampler_apply": ([_vp, _vp], None),
    "llama_sampler_reset": ([_vp], None),
    "llama_sampler_clone": ([_vp], _vp),
    "llama_sampler_free": ([_vp], None),
    "llama_sampler_name": ([_vp], ctypes.c_char_p),
    "llama_model_default_params": ([], _Params),
    "llama_model_load_from_file": ([ctypes.c_char_p, _Params], _vp),
    "llama_model_get_vocab": ([_vp], _vp),
    "llama_vocab_n_tokens": ([_vp], ctypes.c_int32),
    "llama_tokenize": ([_vp, ctypes.c_char_p, ctypes.c_int32, ctypes.POINTER(llama_token), ctypes.c_int32,
                        ctypes.c_bool, ctypes.c_bool], ctypes.c_int32),
    "llama_token_to_piece": ([_vp, llama_token, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_bool],
                             ctypes.c_int32),
    "llama_backend_init": ([], None),
}
OPTIONAL = {"llama_log_set": ([_LOG_CB, _vp], None), "ggml_commit": ([], ctypes.c_char_p),
            "llama_model_free": ([_vp], None)}
# What marks a file as a libllama at all, for the one-line refusal.
DRY_SYMBOLS = ("llama_sampler_init_dry", "llama_sampler_accept", "llama_sampler_apply")

ARGS7 = [_vp, ctypes.c_float, ctypes.c_float, ctypes.c_int32, ctypes.c_int32, _vp, ctypes.c_size_t]
ARGS8 = [_vp, ctypes.c_int32, ctypes.c_float, ctypes.c_float, ctypes.c_int32, ctypes.c_int32, _vp, ctypes.c_size_t]


# -- which init_dry ABI the file has ------------------------------------------------------------------------
#
# Every probe calls init_dry through the 8-argument declaration, (vocab, A, 1.0, 2.0, B, C, NULL, 0). On x86-64
# SysV the two floats go in xmm0/xmm1 and the six integers in rdi, rsi, rdx, rcx, r8, r9, whichever ABI the
# callee has, so the same call reads as
#   7 arguments: allowed_length A, penalty_last_n B, seq_breakers C (a pointer), num_breakers 0 (the NULL in r8)
#   8 arguments: n_ctx_train A, allowed_length B, penalty_last_n C, seq_breakers NULL, num_breakers 0
# Neither reads a breaker, so every probe is memory-safe under both. Window 0 is DRY off and window 64 DRY on in
# every release dryz supports: init_dry's `dry_enabled` is multiplier != 0, base >= 1, window != 0 in 0.3.16,
# 0.3.34, 0.3.35 and 0.3.36 (the 7-argument one clamps a negative window to 0 first); 0.3.34 to 0.3.36 return
# llama_sampler_init_empty("?dry") for DRY off, 0.3.16 a "dry" sampler whose accept and apply return at once.
# The first two probes have window 0 under one reading and 64 under the other, in opposite patterns; the last two
# have the same window under both readings: a calibration of what the library's own init_dry does with window 64
# and with window 0, so an enabling condition that is inverted or blind to the window cannot pass for the other
# ABI (it decides from the window alone in every release; the probes' allowed_length and n_ctx_train vary).
ABI_PROBES = (  # (name, A, B, C)
    ("off7_on8", 64, 0, 64),  # 7: allowed 64, window 0 (off)  | 8: n_ctx 64, allowed 0, window 64 (on)
    ("on7_off8", 1, 64, 0),   # 7: allowed 1, window 64 (on)   | 8: n_ctx 1, allowed 64, window 0 (off)
    ("on_both", 64, 64, 64),  # 7: allowed 64, window 64       | 8: n_ctx 64, allowed 64, window 64
    ("off_both", 1, 0, 0),    # 7: allowed 1, window 0         | 8: n_ctx 1, allowed 0, window 0
)
# (multiplier, base) of the probes, tried in turn until one decides: a library whose init_dry mistakes one
# strength for DRY off (a mutant reading `multiplier != 1.0f`) is still read off the next, and driven. The last
# two turn DRY off by the multiplier (0) and by the base (below 1): a library whose enabling condition is
# inverted on that term (`dry_multiplier == 0.0f` enabling DRY) names its samplers by the window there, so its
# ABI is read off the names and it is driven; its DRY, never on where it must be, is then a finding of every
# case, not a library that cannot load.
ABI_STRENGTHS = ((1.0, 2.0), (2.0, 1.5), (0.5, 3.0), (0.0, 2.0), (1.0, 0.5))
# The fallback, for libraries whose init_dry makes a "dry" sampler even when DRY is off (llama.cpp before the
# empty sampler, e.g. llama-cpp-python 0.3.16): accept these tokens, apply once to these candidates.
ABI_APPLY_HISTORY = (0, 0, 1, 0, 0)
ABI_APPLY_IDS = (0, 1, 2)


def abi_from_names(names: dict) -> tuple[int | None, str]:
    """(7, 8 or None, why) from llama_sampler_name of the four ABI_PROBES samplers.

    The calibration probes give the name the library's init_dry gives a window-64 sampler and a window-0 one
    under either reading. Where they differ ("dry" and "?dry", init_dry's empty sampler for DRY off, in
    llama-cpp-python 0.3.34 to 0.3.36; or the other way round, were the enabling condition inverted), each of the
    two opposite probes says which window the library read, so which ABI it has; they must agree. Only
    init_dry's enabling condition is looked at, never what apply computes. None when the names do not decide
    (a library without the empty sampler, such as 0.3.16, or an enabling condition blind to the window)."""
    seen = ", ".join(f"{k} {v!r}" for k, v in names.items())
    on, off = names["on_both"], names["off_both"]
    if on == off:
        return None, f"init_dry's samplers are named alike for DRY on and off ({seen})"
    by_window = {on: 64, off: 0}
    if names["off7_on8"] not in by_window or names["on7_off8"] not in by_window:
        return None, f"the opposite probes' samplers are named like neither calibration sampler ({seen})"
    # off7_on8 has window 0 under the 7-argument reading, 64 under the 8-argument one; on7_off8 the reverse
    first = 7 if by_window[names["off7_on8"]] == 0 else 8
    second = 7 if by_window[names["on7_off8"]] == 64 else 8
    if first != second:
        return None, f"the two opposite probes name different ABIs ({seen})"
    return first, f"sampler names {seen}"


def abi_from_changes(changed: dict) -> tuple[int | None, str]:
    """(7, 8 or None, why) from whether an apply changed a logit on the two opposite probes' samplers: under the
    reading that makes DRY off nothing may change (accept and apply return at once, or the sampler is the empty
    one); under the other some candidate must (allowed_length 0 or 1, the window holding ABI_APPLY_HISTORY).
    Only a library that penalizes under both readings or under neither leaves it undecided."""
    pair = (changed["off7_on8"], changed["on7_off8"])
    if pair == (False, True):
        return 7, "apply changed logits only where the 7-argument reading enables DRY"
    if pair == (True, False):
        return 8, "apply changed logits only where the 8-argument reading enables DRY"
    return None, (f"apply changed logits {'under both readings' if pair[0] else 'under neither reading'} of the "
                  "two opposite probes (DRY's window-0 exit or its penalties are broken where the ABI would be "
                  "read off them)")


def resolve(path: str | os.PathLike) -> Path:
    """The shared object a --lib value names: a file, or a folder holding libllama.so."""
    p = Path(path).expanduser()
    if p.is_dir():
        cand = p / "libllama.so"
        if not cand.exists():
            raise SubjectError(f"--lib {path}: the folder has no libllama.so")
        p = cand
    if not p.exists():
        raise SubjectError(f"--lib {path}: no such file")
    return p.resolve()


def check_path_arg(kind: str, arg: str) -> None:
    """A KIND:PATH spec's argument (a libllama.so or its folder), checked before anything is loaded; empty: the
    kind's default."""
    if arg:
        try:
            resolve(arg)
        except SubjectError as e:
            raise SubjectError(str(e).replace(f"--lib {arg}", f"{kind}:{arg}", 1)) from None


def _preload_ggml(folder: Path) -> list:
    """The ggml libraries beside libllama, loaded first from the same folder (by their sonames the loader then
    reuses them for libllama's own dependencies, whatever its RUNPATH says)."""
    order = ["libggml-base", "libggml-cpu", "libggml-blas", "libggml"]
    found = sorted(folder.glob("libggml*.so*"), key=lambda q: (
        next((i for i, o in enumerate(order) if q.name.startswith(o + ".") or q.name.startswith(o + "-")
              or q.name == o + ".so"), len(order)), q.name))
    handles, seen = [], set()
    for q in found:
        real = q.resolve()
        if real in seen:
            continue
        seen.add(real)
        try:
            handles.append(ctypes.CDLL(str(q), mode=ctypes.RTLD_GLOBAL))
        except OSError as e:
            raise SubjectError(f"cannot load {q}: {e}") from None
    return handles


def load_library(path: Path, mode: int, marks, refusal: str):
    """ctypes.CDLL(path, mode), refused with one line (`refusal` saying what it is not) unless it exports every
    symbol in marks."""
    try:
        handle = ctypes.CDLL(str(path), mode=mode)
    except OSError as e:
        raise SubjectError(f"cannot load {path}: {e}") from None
    missing = [n for n in marks if not hasattr(handle, n)]
    if missing:
        raise SubjectError(f"{path} does not export {', '.join(missing)}: {refusal}")
    return handle


def bind(obj, handle, path: Path, table: dict) -> None:
    """Every function of table ({name: (argtypes or None, restype)}) declared and set on obj; one line naming the
    first the file does not export."""
    for name, (args, res) in table.items():
        try:
            f = getattr(handle, name)
        except AttributeError:
            raise SubjectError(f"{path} does not export {name} (dryz needs it to load a vocabulary or drive the "
                               "sampler)") from None
        if args is not None:
            f.argtypes = args
        f.restype = res
        setattr(obj, name, f)


class Binding:
    """One libllama file, its symbols bound, the init_dry ABI known."""

    def __init__(self, path: Path):
        self.path = Path(path)
        # ggml's uncaught-exception handler otherwise attaches gdb to print a backtrace (about a second, on
        # stdout) before the abort: dryz reports a crash itself (class crash, the library's last line).
        os.environ.setdefault("GGML_NO_BACKTRACE", "1")
        self._ggml = _preload_ggml(self.path.parent)
        self.handle = load_library(self.path, ctypes.RTLD_GLOBAL, DRY_SYMBOLS, "not a libllama with the DRY sampler")
        bind(self, self.handle, self.path, REQUIRED)
        for name, (args, res) in OPTIONAL.items():
            f = getattr(self.handle, name, None)
            if f is not None:
                f.argtypes, f.restype = args, res
            setattr(self, name, f)
        # Aliases that read like llama-cpp-python's module, for the struct types.
        self.llama_token, self.llama_token_data = llama_token, llama_token_data
        self.llama_token_data_p, self.llama_token_data_array = llama_token_data_p, llama_token_data_array
        if self.llama_log_set is not None:  # the library keeps the pointer: one callback, alive for the process
            self.llama_log_set(_SILENT, None)
        self.llama_backend_init()
        self.vocab_only_offset = self._vocab_only_offset()
        self.abi = None  # 7 or 8, set by detect_abi once a vocabulary is loaded
        self.abi_evidence = None  # what decided it (detect_abi)

    # -- model params ------------------------------------------------------------------------------
    def _vocab_only_offset(self) -> int:
        # The struct is returned through a hidden pointer (x86-64 SysV: in rdi, for a struct of more than 16
        # bytes); passing that pointer explicitly lets dryz pre-fill the block and see which bytes were written.
        f = self.handle["llama_model_default_params"]
        f.argtypes, f.restype = [ctypes.c_void_p], ctypes.c_void_p
        fills = []
        for pattern in (0xA5, 0x5A):
            p = _Params()
            ctypes.memset(ctypes.byref(p), pattern, PARAMS_BUFFER)
            f(ctypes.addressof(p))
            fills.append(bytes(p.raw))
        a, b = fills
        written = [i for i in range(PARAMS_BUFFER) if a[i] == b[i]]
        if not written:
            raise SubjectError("llama_model_default_params wrote nothing dryz can read")
        self.default_params = a
        return (written[-1] // 8) * 8

    def load_vocab(self, gguf: Path):
        """llama_model_load_from_file(gguf) with vocab_only; returns (model, vocab) pointers."""
        p = _Params()
        ctypes.memmove(ctypes.byref(p), self.default_params, PARAMS_BUFFER)
        p.raw[self.vocab_only_offset] = 1
        model = self.llama_model_load_from_file(str(gguf).encode(), p)
        if not model:
            raise SubjectError(f"{self.path} could not load the vocabulary {gguf} (vocab_only at byte "
                               f"{self.vocab_only_offset} of llama_model_params)")
        vocab = self.llama_model_get_vocab(model)
        if not vocab:
            raise SubjectError(f"{self.path}: llama_model_get_vocab returned NULL")
        return model, vocab

    # -- init_dry ABI ------------------------------------------------------------------------------
    def detect_abi(self, vocab) -> int:
        """7 or 8 arguments, decided by what kind of sampler init_dry makes (abi_from_names), else by whether an
        apply changes anything where one reading has DRY off (abi_from_changes); never by the penalties DRY
        computes. A library whose DRY penalizes wrongly is loaded and driven: its bug is a finding of the cases
        that show it (the ABI confirmation control among them), not a library that cannot load.

        Where the probes cannot tell (a library whose init_dry and apply behave alike under both readings), the
        user may say: DRYZ_INIT_DRY_ABI=7 or 8 (recorded as declared); without it, SubjectError (exit 2) says
        what the probes saw. A declared ABI the probes contradict is refused too."""
        declared = read("DRYZ_INIT_DRY_ABI", choice("7", "8"))
        abi, why, why2 = None, [], []
        for strength in ABI_STRENGTHS:
            names = {p[0]: self._probe_name(vocab, *p[1:], strength=strength) for p in ABI_PROBES}
            abi, w = abi_from_names(names)
            evidence = {"decided_by": "llama_sampler_name", "names": names}
            if abi is None:
                changed = {p[0]: self._probe_apply(vocab, *p[1:], strength=strength) for p in ABI_PROBES[:2]}
                abi, w2 = abi_from_changes(changed)
                evidence = {"decided_by": "apply (window 0 against window 64)", "names": names, "changed": changed}
                why2.append(f"{w2} (multiplier {strength[0]:g}, base {strength[1]:g})")
            why.append(f"{w} (multiplier {strength[0]:g}, base {strength[1]:g})")
            if abi is not None:
                if strength != ABI_STRENGTHS[0]:
                    evidence["strength"] = {"multiplier": strength[0], "base": strength[1],
                                            "undecided_before": len(why) - 1}
                break
        why, why2 = "; ".join(why), "; ".join(why2)
        if abi is None:
            if declared is None:
                raise SubjectError(f"{self.path}: cannot tell llama_sampler_init_dry's ABI (7 or 8 arguments) "
                                   f"without relying on DRY's penalties: {why}; {why2}. If you know it, set "
                                   "DRYZ_INIT_DRY_ABI=7 or 8")
            abi = int(declared)
            evidence = dict(evidence, decided_by="declared (DRYZ_INIT_DRY_ABI); the probes could not tell")
        if declared is not None and int(declared) != abi:
            raise SubjectError(f"{self.path}: DRYZ_INIT_DRY_ABI={declared}, but llama_sampler_init_dry has the "
                               f"{abi}-argument ABI ({evidence['decided_by']})")
        self.abi_evidence = dict(evidence, abi=abi)
        self.set_abi(abi)
        return abi

    def _probe_call(self, vocab, a: int, b: int, c: int, strength=ABI_STRENGTHS[0]):
        """init_dry(vocab, a, multiplier, base, b, c, NULL, 0) through the 8-argument declaration (see ABI_PROBES;
        strength: (multiplier, base), in the float registers under either reading), on a function object of its
        own: the one the sampler is driven through keeps the detected ABI's declaration."""
        f = self.handle["llama_sampler_init_dry"]  # [] makes a new function object (attribute access caches one)
        f.argtypes, f.restype = ARGS8, _vp
        s = f(vocab, a, strength[0], strength[1], b, c, None, 0)
        if not s:
            raise SubjectError(f"{self.path}: llama_sampler_init_dry returned NULL")
        return s

    def _probe_name(self, vocab, a: int, b: int, c: int, strength=ABI_STRENGTHS[0]) -> str:
        s = self._probe_call(vocab, a, b, c, strength)
        try:
            name = self.llama_sampler_name(s)
            return name.decode(errors="replace") if name is not None else "(NULL)"
        finally:
            self.llama_sampler_free(s)

    def _probe_apply(self, vocab, a: int, b: int, c: int, strength=ABI_STRENGTHS[0]) -> bool:
        """Whether one apply after accepting ABI_APPLY_HISTORY changes any of the candidates ABI_APPLY_IDS
        (logit 0 each)."""
        s = self._probe_call(vocab, a, b, c, strength)
        try:
            for t in ABI_APPLY_HISTORY:
                self.llama_sampler_accept(s, t)
            cand = (llama_token_data * len(ABI_APPLY_IDS))(*[llama_token_data(t, 0.0, 0.0) for t in ABI_APPLY_IDS])
            arr = llama_token_data_array(cand, len(ABI_APPLY_IDS), -1, False)
            self.llama_sampler_apply(s, ctypes.addressof(arr))
            return any(cand[i].logit != 0.0 for i in range(len(ABI_APPLY_IDS))) or arr.size != len(ABI_APPLY_IDS)
        finally:
            self.llama_sampler_free(s)

    def set_abi(self, abi: int) -> None:
        self.abi = abi
        self.llama_sampler_init_dry.argtypes = ARGS8 if abi == 8 else ARGS7

    def init_dry(self, vocab, multiplier, base, allowed_length, penalty_last_n, breakers_ptr, n_breakers,
                 n_ctx_train: int = 4096):
        if self.abi == 8:
            return self.llama_sampler_init_dry(vocab, n_ctx_train, multiplier, base, allowed_length,
                                               penalty_last_n, breakers_ptr, n_breakers)
        return self.llama_sampler_init_dry(vocab, multiplier, base, allowed_length, penalty_last_n, breakers_ptr,
                                           n_breakers)

    def address(self, name: str) -> int:
        return ctypes.cast(getattr(self.handle, name), ctypes.c_void_p).value

    def commit(self) -> str | None:
        """What ggml_commit() reports: from this file (a statically linked packaging) or the libggml-base
        loaded beside it."""
        fn = self.ggml_commit
        if fn is None:
            for h in self._ggml:
                fn = getattr(h, "ggml_commit", None)
                if fn is not None:
                    fn.argtypes, fn.restype = [], ctypes.c_char_p
                    break
        if fn is None:
            return None
        out = fn()
        return out.decode(errors="replace") if out else None
