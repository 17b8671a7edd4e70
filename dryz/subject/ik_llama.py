"""`--subject ik-llama:[PATH]` — the DRY of ik_llama.cpp (the llama.cpp fork), driven through dryz's own binding.

The fork keeps DRY outside llama.cpp's sampler chain. Its llama.h (and the exports of its libllama.so) has

  struct llama_sampler_dry * llama_sampler_init_dry(const struct llama_vocab *, float multiplier, float base,
                                                    int32_t allowed_length, int32_t penalty_last_n,
                                                    const char ** breakers, size_t n_breakers);
  void llama_sample_dry(struct llama_context * ctx, struct llama_sampler_dry *, llama_token_data_array *);
  void llama_sampler_dry_accept(struct llama_sampler_dry *, llama_token);
  void llama_sampler_dry_reset(struct llama_sampler_dry *);
  struct llama_sampler_dry * llama_sampler_dry_clone(struct llama_sampler_dry *);
  void llama_sampler_dry_free(struct llama_sampler_dry *);

and no llama_sampler_apply or chain; its Python package (ik-llama-cpp-python) binds none of them. This module binds
exactly these, plus what loading a vocabulary takes, and runs each case as the fork's own common/sampling.cpp
does: a sampler from llama_sampler_init_dry, every history token through llama_sampler_dry_accept, one
llama_sample_dry on the candidate array, llama_sampler_dry_free. `ctx` is NULL: the fork's llama_sample_dry
does not read it (src/llama.cpp, `[[maybe_unused]] struct llama_context * ctx`), and a context would need a model's
weights. Traces reach llama_sampler_dry_reset and llama_sampler_dry_clone through the protocol's per-event calls
(Subject.SAMPLER_CALLS, dryz.subject.trace_driver).

Loading: the library is opened RTLD_LOCAL | RTLD_DEEPBIND. It exports the same names as llama.cpp's libllama
(llama_backend_init, llama_vocab::n_tokens, ggml_* through its libggml), and the pinned libllama may be loaded in
the same process (the oracles' reference tokenizer): a local, deep-bound library resolves its own symbols first
and adds none to the process's global scope, so neither library runs the other's code. The fork's model loader
reads a model's hyperparameters even with vocab_only, which a vocab-only GGUF lacks: a vocabulary is loaded from
dryz's tiny zero-weight model over it (dryz.subject.tinymodel: the same tokenizer keys, copied unchanged).

ARG: empty (the libllama ik-llama-cpp-python installed, found without importing its Python package) or a PATH
(a libllama.so of the fork, or its folder).

Judged against llama.cpp's DRY as dryz pins it (the 7-argument init_dry): what the fork does otherwise is a
finding (docs/engines/ik_llama.md lists what its source does differently).
"""

from __future__ import annotations

import ctypes
import os
from functools import cached_property
from pathlib import Path

import numpy as np

from .answers import Capabilities, Output
from .binding import _SILENT, ARGS7, N_CTX_TRAIN_DEFAULT, OPTIONAL, PARAMS_BUFFER, REQUIRED, TOKEN_DATA, SubjectError, \
    _Params, bind, check_path_arg, llama_token_data, llama_token_data_array, load_library, resolve
from .cache import sha256_file
from .libllama import owning_distribution, package_library, symbol_vocabulary
from .protocol import Subject
from .tinymodel import ModelError, tiny_model
from .vendored_vocabs import load, vocab_of

EXTRA = "ik-llama"          # pip install 'dryz[ik-llama]'
DISTRIBUTION = "ik-llama-cpp-python"
VERSION = "0.1.5"            # the release dryz pins and cites
# The fork's commit a release's sdist vendors (vendor/ik_llama.cpp: its src/llama-sampling.cpp, src/llama.cpp,
# src/llama-impl.h, src/llama-vocab.cpp and include/llama.h are byte-identical to the fork's at this commit, and the
# wheel's installed include/llama.h to the sdist's). The wheel's binary does not record a commit.
VENDORED = {"0.1.5": "55d3c05bf7b377deaa5dc84d255d9740a345a206"}

# name: (argtypes, restype); every one must exist in the file. The signatures the fork shares with llama.cpp's
# are binding.py's: its init_dry is the 7-argument one; accept, reset, clone and free take and give what
# llama_sampler_* do (a sampler pointer, a token); llama_vocab_tokenize and llama_token_to_piece_vocab are the
# fork's vocabulary forms of llama_tokenize and llama_token_to_piece (its own take a model), and are bound under
# those names for dryz.subject.vendored_vocabs.
_SAME = {"llama_sampler_dry_accept": "llama_sampler_accept", "llama_sampler_dry_reset": "llama_sampler_reset",
         "llama_sampler_dry_clone": "llama_sampler_clone", "llama_sampler_dry_free": "llama_sampler_free",
         "llama_vocab_tokenize": "llama_tokenize", "llama_token_to_piece_vocab": "llama_token_to_piece",
         **{n: n for n in ("llama_backend_init", "llama_model_load_from_file", "llama_model_get_vocab",
                           "llama_vocab_n_tokens")}}
SYMBOLS = {"llama_sampler_init_dry": (ARGS7, ctypes.c_void_p),
           "llama_sample_dry": ([ctypes.c_void_p] * 3, None),  # (ctx, sampler, candidates)
           "llama_log_set": OPTIONAL["llama_log_set"],
           **{n: REQUIRED[theirs] for n, theirs in _SAME.items()}}
DRY_SYMBOLS = ("llama_sampler_init_dry", "llama_sample_dry", "llama_sampler_dry_accept")
# llama_model_params of the fork at VENDORED's commit (include/llama.h): a pointer, 22 int32/enum fields and one
# bool (104 bytes with padding), six pointers, then twelve bools kept together, vocab_only first. Checked at load
# against what llama_model_default_params writes there (vocab_only false, use_mmap true, eight false, flash_attn
# true), and by the load itself (the model has no weights to load: without vocab_only it fails).
VOCAB_ONLY_OFFSET = 152
DEFAULT_BOOLS = bytes([0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])


def _reuse_samplers() -> bool:
    """DRYZ_VOCAB_SAMPLER=reset (as LibLlama.reuse_samplers reads it); clone, the default, means a fresh sampler."""
    mode = os.environ.get("DRYZ_VOCAB_SAMPLER", "clone")
    if mode not in ("clone", "reset"):
        raise SubjectError(f"DRYZ_VOCAB_SAMPLER must be clone or reset, got {mode!r}")
    return mode == "reset"


def installed_library() -> Path | None:
    """The libllama ik-llama-cpp-python installed (ik_llama_cpp/lib/libllama.so, the one its own loader opens),
    found without importing the package."""
    return package_library("ik_llama_cpp")


def missing() -> str | None:
    """Why `ik-llama:` (the installed wheel) cannot be opened here, or None."""
    if installed_library() is None:
        return f"ik-llama: needs {DISTRIBUTION} ({DISTRIBUTION} {VERSION}): pip install 'dryz[{EXTRA}]'"
    return None


# The fork's code (at 55d3c05bf7b3) behind each deviation model dryz may fit: what its conformance row cites.
SOURCES = {
    "window-context:N": "src/llama.cpp:8956 (55d3c05bf7b3): llama_sampler_init_dry passes vocab->n_tokens() as the "
                        "context size; src/llama-sampling.cpp:819-820 (-1: the whole context; every window capped at "
                        "it), :1023, :1028, :1062 (below -1: DRY on with a ring buffer of capacity 0, which throws on "
                        "the first accept)",
}


class IkBinding:
    """The fork's libllama, its DRY and vocabulary symbols bound (under the names dryz.subject.vendored_vocabs
    reads: llama_tokenize and llama_token_to_piece are the fork's vocabulary forms)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        os.environ.setdefault("GGML_NO_BACKTRACE", "1")
        self.handle = load_library(self.path, os.RTLD_LOCAL | os.RTLD_DEEPBIND, DRY_SYMBOLS,
                                   "not an ik_llama.cpp libllama (its DRY API: llama_sampler_init_dry, "
                                   "llama_sample_dry, llama_sampler_dry_*)")
        bind(self, self.handle, self.path, SYMBOLS)
        self.llama_tokenize, self.llama_token_to_piece = self.llama_vocab_tokenize, self.llama_token_to_piece_vocab
        self.llama_log_set(_SILENT, None)
        self.llama_backend_init()
        self.default_params = self._default_params()

    def _default_params(self) -> bytes:
        f = self.handle["llama_model_default_params"]  # through the hidden return pointer (binding.Binding's way)
        f.argtypes, f.restype = [ctypes.c_void_p], ctypes.c_void_p
        p = _Params()
        ctypes.memset(ctypes.byref(p), 0xA5, PARAMS_BUFFER)
        f(ctypes.addressof(p))
        raw = bytes(p.raw)
        got = raw[VOCAB_ONLY_OFFSET:VOCAB_ONLY_OFFSET + len(DEFAULT_BOOLS)]
        if got != DEFAULT_BOOLS:
            raise SubjectError(f"{self.path}: llama_model_default_params does not have the fork's layout dryz knows "
                               f"(the booleans at byte {VOCAB_ONLY_OFFSET}: {got.hex()}, expected "
                               f"{DEFAULT_BOOLS.hex()})")
        return raw

    def load_vocab(self, gguf: Path):
        """(model, vocab) of the vocabulary in gguf, loaded vocab_only from dryz's tiny model over it."""
        try:
            model_file = tiny_model(gguf)
        except ModelError as e:
            raise SubjectError(str(e)) from None
        p = _Params()
        ctypes.memmove(ctypes.byref(p), self.default_params, PARAMS_BUFFER)
        p.raw[VOCAB_ONLY_OFFSET] = 1
        model = self.llama_model_load_from_file(str(model_file).encode(), p)
        if not model:
            raise SubjectError(f"{self.path} could not load the vocabulary {gguf} (as {model_file}, vocab_only)")
        vocab = self.llama_model_get_vocab(model)
        if not vocab:
            raise SubjectError(f"{self.path}: llama_model_get_vocab returned NULL")
        return model, vocab


class IkLlama(Subject):
    """ik_llama.cpp's DRY in one loaded libllama of the fork, over dryz's symbol vocabulary (or a real one)."""

    kind = "ik-llama"
    # Every sampler call; any vocabulary; candidate arrays as given; native code in this process (modes isolate it).
    caps = Capabilities(batch=1, in_process=True)

    @staticmethod
    def check_arg(arg: str) -> None:
        """The spec's argument, checked before anything is loaded (registry.check_spec): a file or folder."""
        check_path_arg("ik-llama", arg)

    def __init__(self, arg: str = ""):
        if arg:
            self.check_arg(arg)
            self.path = resolve(arg)
        else:
            p = installed_library()
            if p is None:
                raise SubjectError(missing())
            self.path = p
        self.spec = f"ik-llama:{self.path}" if arg else "ik-llama:"  # resolved: a child elsewhere opens the same file
        self.L = L = IkBinding(self.path)
        self.vocab_path, self.model, self.vocab = symbol_vocabulary(L)
        self._init, self._apply = L.llama_sampler_init_dry, L.llama_sample_dry
        self.accept, self.reset, self.free = L.llama_sampler_dry_accept, L.llama_sampler_dry_reset, \
            L.llama_sampler_dry_free
        self._clone = L.llama_sampler_dry_clone
        self._buffers: dict = {}

    # -- identity -------------------------------------------------------------------------------------------
    @cached_property
    def identity(self) -> dict:
        ident = {"kind": self.kind, "spec": self.spec, "libllama_path": str(self.path),
                 "libllama_sha256": sha256_file(self.path), "init_dry_abi": self.abi,
                 "vocab_path": str(self.vocab_path), "vocab_sha256": sha256_file(self.vocab_path)}
        owner = owning_distribution(self.path)
        version = None
        if owner is not None:
            name, version = owner
            ident["distribution"] = f"{name} {version}"
        commit = VENDORED.get(version) if owner and owner[0].lower().replace("_", "-") == DISTRIBUTION else None
        if commit:
            ident["ik_llama_commit"] = commit
        who = ident.get("distribution") or "a libllama of the fork"
        ident["engine"] = "ik_llama.cpp"  # a conformance row's name (conformance.matrix.label)
        ident["engine_version"] = f"{commit[:12] if commit else '?'} ({who})"
        ident["label"] = (f"ik_llama.cpp {commit[:12] if commit else '(commit unknown)'} ({who}: "
                          "llama_sampler_init_dry, llama_sample_dry, llama_sampler_dry_*)")
        ident["shown"] = {"libllama": str(self.path), "sha256": ident["libllama_sha256"]}
        ident["sources"] = SOURCES  # the fork's code behind each deviation model dryz may fit (dryz.causes)
        return ident

    # -- the per-event sampler calls (Subject.SAMPLER_CALLS) --------------------------------------------------
    def new_sampler(self, multiplier, base, allowed_length, penalty_last_n, breakers=(), vocab=None,
                    n_ctx_train=N_CTX_TRAIN_DEFAULT):
        """llama_sampler_init_dry on the symbol vocabulary (or another loaded vocabulary's handle). The fork's
        init_dry has no n_ctx_train: its window for penalty_last_n -1 is the vocabulary's size (src/llama.cpp)."""
        arr = (ctypes.c_char_p * len(breakers))(*[b.encode() for b in breakers]) if breakers else None
        s = self._init(self.vocab if vocab is None else vocab, multiplier, base, allowed_length, penalty_last_n,
                       arr, len(breakers))
        if not s:
            raise SubjectError("llama_sampler_init_dry returned NULL")
        return s

    def clone(self, s):
        return self._clone(s)

    def apply_once(self, s, ids, logits, sorted_flag) -> Output:
        """llama_sample_dry(NULL, s, array) on a candidate array filled from ids and logits; what it left."""
        n = len(ids)
        buf = self._buffers.get(n)
        if buf is None:
            data = (llama_token_data * n)()
            arr = llama_token_data_array(data, n, -1, False)
            buf = self._buffers[n] = (data, arr, np.frombuffer(data, dtype=TOKEN_DATA), ctypes.addressof(arr),
                                      ctypes.addressof(data))
        data, arr, view, arr_addr, data_addr = buf
        view["id"], view["logit"], view["p"] = ids, logits, 0.0
        if ctypes.cast(arr.data, ctypes.c_void_p).value != data_addr:
            arr.data = ctypes.cast(data_addr, type(arr.data))
        arr.size, arr.selected, arr.sorted = n, -1, bool(sorted_flag)
        self._apply(None, s, arr_addr)
        size = int(arr.size)
        if ctypes.cast(arr.data, ctypes.c_void_p).value != data_addr or size != n:
            # DRY never should: read what the array points to now
            view = np.frombuffer((llama_token_data * size).from_address(ctypes.cast(arr.data, ctypes.c_void_p)
                                                                        .value), dtype=TOKEN_DATA)
        return Output(tuple(view["id"].tolist()), view["logit"].copy(), bool(arr.sorted), size)

    # -- the protocol ------------------------------------------------------------------------------------------
    def run_batch(self, cases) -> list[Output]:
        return [self.run(c) for c in cases]

    def run(self, case) -> Output:
        """A fresh sampler of the case's configuration (init_dry on its vocabulary), its history accepted, one
        llama_sample_dry, the sampler freed. A real-vocabulary case under DRYZ_VOCAB_SAMPLER=reset (`dryz fuzz
        --vocab NAME --sampler reset`) runs instead on its configuration's sampler after llama_sampler_dry_reset
        (init_dry reads the whole vocabulary for the breakers: ~80 ms on llama-bpe); there is no clone mode here,
        the fork's clone crashes (docs/engines/ik_llama.md)."""
        reuse = case.vocab is not None and _reuse_samplers()
        s = self._prototype(case) if reuse else self.new_sampler(
            case.multiplier, case.base, case.allowed_length, case.penalty_last_n, case.breakers,
            vocab=None if case.vocab is None else self._vocab_handle(case))
        try:
            if reuse:
                self.reset(s)
            accept = self.accept
            for t in case.history:
                accept(s, t)
            return self.apply_once(s, case.ids, case.logits, case.sorted)
        finally:
            if not reuse:
                self.free(s)

    PROTOTYPES = 64  # configurations' samplers kept in reset mode (least recently used freed)

    def _prototype(self, case):
        protos = self.__dict__.setdefault("_protos", {})
        key = (case.vocab, case.vocab_sha256, case.multiplier, case.base, case.allowed_length, case.penalty_last_n,
               tuple(case.breakers))
        s = protos.pop(key, None)
        if s is None:
            s = self.new_sampler(case.multiplier, case.base, case.allowed_length, case.penalty_last_n, case.breakers,
                                 vocab=self._vocab_handle(case))
            while len(protos) >= self.PROTOTYPES:
                self.free(protos.pop(next(iter(protos))))
        protos[key] = s  # most recently used last
        return s

    def _vocab_handle(self, case):
        return vocab_of(case, self).handle

    def vocabulary(self, spec):
        """A real vocabulary (a vendored NAME or a GGUF PATH) loaded into the fork's library, once: the oracles
        then read its token texts and tokenizations as the fork's own tokenizer gives them."""
        return load(spec, self)
