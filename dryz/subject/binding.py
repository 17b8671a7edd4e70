"""dryz's own ctypes binding to the few libllama symbols DRY needs.

Not llama-cpp-python's bindings: those bind every llama.h function at import, so a libllama of another
release (or another packaging, such as xllamacpp's extension module) fails to load when one of them is missing.
dryz binds only what it calls, finds which `llama_sampler_init_dry` ABI the loaded file has by running it, and
refuses, with one line, a file without the DRY sampler.

Version differences handled here, each checked against the library at load:

- `llama_sampler_init_dry` has 7 arguments since llama.cpp PR #26524 (llama-cpp-python >= 0.3.35) and 8 before
  it (`n_ctx_train` after the vocab). The file exports the same symbol either way, so `detect_abi` runs a probe
  call that is memory-safe under both and whose output differs between them.
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

N_CTX_TRAIN_DEFAULT = 4096  # what the 8-argument init_dry gets when a Case does not say
TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])  # llama_token_data
PARAMS_BUFFER = 512  # bytes; larger than any llama_model_params so far (0.3.36: 80)


class SubjectError(RuntimeError):
    """The library could not be loaded or did something the harness cannot interpret."""


class LibraryFinding(SubjectError):
    """The library did what DRY must not while being loaded or driven (not while judging a case): a finding
    (exit 1, `dryz: finding: ...`), never the harness's doubt."""


class ArrayChanged(LibraryFinding):
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


class Binding:
    """One libllama file, its symbols bound, the init_dry ABI known."""

    def __init__(self, path: Path):
        self.path = Path(path)
        # ggml's uncaught-exception handler otherwise attaches gdb to print a backtrace (about a second, on
        # stdout) before the abort: dryz reports a crash itself (class crash, the library's last line).
        os.environ.setdefault("GGML_NO_BACKTRACE", "1")
        self._ggml = _preload_ggml(self.path.parent)
        try:
            self.handle = ctypes.CDLL(str(self.path), mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            raise SubjectError(f"cannot load {self.path}: {e}") from None
        missing = [n for n in DRY_SYMBOLS if not hasattr(self.handle, n)]
        if missing:
            raise SubjectError(f"{self.path} does not export {', '.join(missing)}: not a libllama with the DRY "
                               "sampler")
        for name, (args, res) in REQUIRED.items():
            try:
                f = getattr(self.handle, name)
            except AttributeError:
                raise SubjectError(f"{self.path} does not export {name} (dryz needs it to load a vocabulary "
                                   "or drive the sampler)") from None
            if args is not None:
                f.argtypes = args
            f.restype = res
            setattr(self, name, f)
        for name, (args, res) in OPTIONAL.items():
            f = getattr(self.handle, name, None)
            if f is not None:
                f.argtypes, f.restype = args, res
            setattr(self, name, f)
        # Aliases that read like llama-cpp-python's module, for the struct types.
        self.llama_token, self.llama_token_data = llama_token, llama_token_data
        self.llama_token_data_p, self.llama_token_data_array = llama_token_data_p, llama_token_data_array
        self._log_cb = _LOG_CB(lambda level, text, user: None)  # kept alive: the library keeps the pointer
        if self.llama_log_set is not None:
            self.llama_log_set(self._log_cb, None)
        self.llama_backend_init()
        self.vocab_only_offset = self._vocab_only_offset()
        self.abi = None  # 7 or 8, set by detect_abi once a vocabulary is loaded

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
        """7 or 8 arguments, from what the library does with one probe call, then confirmed.

        The probe passes the 8-argument form (vocab, 64, 1.0, 2.0, 0, 64, NULL, 0). Under the 7-argument ABI
        the same registers read allowed_length 64, penalty_last_n 0 (DRY off: an empty sampler), seq_breakers
        64 (never read) and num_breakers 0. Under the 8-argument ABI: n_ctx_train 64 (which also caps the
        window), allowed_length 0, penalty_last_n 64, no breakers: DRY on. After accepting `0 0` an apply on candidate 0 leaves its
        logit at 0 (7) or lowers it by 1 * 2^(1 - 0) = 2 (8)."""
        f = self.llama_sampler_init_dry
        f.argtypes = ARGS8
        s = f(vocab, 64, 1.0, 2.0, 0, 64, None, 0)
        seen = self._probe(s)
        abi = {0.0: 7, -2.0: 8}.get(seen)
        if abi is None:
            raise SubjectError(f"{self.path}: llama_sampler_init_dry's ABI probe gave logit {seen!r} (0 for the "
                               "7-argument ABI, -2 for the 8-argument one): neither")
        self.set_abi(abi)
        # Confirmation under the detected ABI: allowed_length 1, window 64, history 0 0 -> 1 * 2^(1-1) = 1.
        s = self.init_dry(vocab, 1.0, 2.0, 1, 64, None, 0, n_ctx_train=4096)
        seen = self._probe(s)
        if seen != -1.0:  # the ABI is known: this is DRY itself failing `a a` (allowed_length 1, base 2)
            raise LibraryFinding(f"{self.path}: llama_sampler_init_dry with the {abi}-argument ABI gave logit "
                                 f"{seen!r} where DRY must give -1.0 (history `a a`, allowed_length 1)")
        return abi

    def _probe(self, s) -> float:
        if not s:
            raise SubjectError(f"{self.path}: llama_sampler_init_dry returned NULL")
        try:
            self.llama_sampler_accept(s, 0)
            self.llama_sampler_accept(s, 0)
            cand = llama_token_data(0, 0.0, 0.0)
            arr = llama_token_data_array(ctypes.pointer(cand), 1, -1, False)
            self.llama_sampler_apply(s, ctypes.addressof(arr))
            return float(cand.logit)
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
