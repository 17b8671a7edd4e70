"""`--subject llama-cpp-python:` — DRY as a Python program reaches it through llama-cpp-python's own binding.

Not dryz's binding (binding.py): `import llama_cpp` binds every llama.h function over the libllama it installed,
and this subject makes each sampler the way its own `_internals.LlamaSampler.add_dry` does — a sampler chain, the
breakers marshalled into its `char **` (`(ctypes.c_char_p * n)()`, each encoded UTF-8), `llama_sampler_init_dry`
through its ctypes declaration, added to the chain — then accepts, applies, resets, clones and frees through
`llama_cpp.llama_sampler_*`, with its `llama_token_data_array`. So a fault in the binding (a wrong argument
type, order or count, the breaker marshalling) shows as a disagreement with the oracles, and `dryz matrix`
compares it output for output with dryz's own binding on the same library.

The vocabulary is loaded with llama-cpp-python's `LlamaModel` (vocab_only). Which libllama llama-cpp-python
loads is its own choice (its package's lib/, or LLAMA_CPP_LIB_PATH); the identity names that file.
ARG: empty (the installed llama-cpp-python).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from functools import cached_property

import numpy as np

from .binding import N_CTX_TRAIN_DEFAULT, SubjectError
from .cache import sha256_file
from .answers import Capabilities, Output
from .protocol import Subject
from .symbol_vocab import symbol_vocab_path
from ..symbols import MAX_ALPHABET
from .libllama import _loaded_path


class LlamaCppPython(Subject):
    kind = "llama-cpp-python"
    caps = Capabilities(batch=1, in_process=True)
    declares_fixes = True

    @staticmethod
    def check_arg(arg: str) -> None:
        """The spec's argument, checked before anything is loaded (registry.check_spec): none."""
        if arg:
            raise SubjectError("llama-cpp-python: takes no argument (the installed llama-cpp-python; select its "
                               "libllama with LLAMA_CPP_LIB_PATH)")

    def __init__(self, arg: str = ""):
        if arg:
            raise SubjectError("llama-cpp-python: takes no argument (the installed llama-cpp-python; select its "
                               "libllama with LLAMA_CPP_LIB_PATH)")
        self.spec = "llama-cpp-python:"
        try:
            import llama_cpp
            from llama_cpp import _internals
        except Exception as e:  # noqa: BLE001 (ImportError, or its libllama failing to load: one line)
            raise SubjectError(f"llama-cpp-python cannot be imported: {type(e).__name__}: {e}") from None
        self.lc, self.internals = llama_cpp, _internals
        self._quiet()
        llama_cpp.llama_backend_init()
        self.vocab_path = symbol_vocab_path()
        self.model = self._load(self.vocab_path)
        if llama_cpp.llama_vocab_n_tokens(self.model.vocab) != MAX_ALPHABET:
            raise SubjectError(f"llama-cpp-python: the symbol vocabulary has "
                               f"{llama_cpp.llama_vocab_n_tokens(self.model.vocab)} tokens, expected {MAX_ALPHABET}")
        # Its declaration of init_dry is the 7-argument one (llama-cpp-python >= 0.3.35): the semantics judged. A
        # libllama of the 8-argument ABI under it would be the binding's own mismatch, found like any other.
        self.abi = 7
        self._vocabs: dict = {}

    # -- plumbing ----------------------------------------------------------------------------------------
    _LOG = None

    def _quiet(self) -> None:
        lc = self.lc
        if LlamaCppPython._LOG is None:
            LlamaCppPython._LOG = lc.llama_log_callback(lambda level, text, user: None)  # kept for the process
        lc.llama_log_set(LlamaCppPython._LOG, ctypes.c_void_p(0))

    def _load(self, path):
        params = self.lc.llama_model_default_params()
        params.vocab_only = True
        try:
            return self.internals.LlamaModel(path_model=str(path), params=params, verbose=False)
        except ValueError as e:
            raise SubjectError(f"llama-cpp-python: {e}") from None

    def _vocab(self, spec):
        if spec is None:
            return self.model.vocab
        if spec not in self._vocabs:
            v = self.vocabulary(spec)
            self._vocabs[spec] = self._load(v.ref.path)
        return self._vocabs[spec].vocab

    # -- identity -----------------------------------------------------------------------------------------
    @cached_property
    def identity(self) -> dict:
        lib = _loaded_path("libllama") or "?"
        ident = {"kind": self.kind, "spec": self.spec, "llama_cpp_python": self.lc.__version__,
                 "binding": os.path.dirname(self.lc.__file__), "libllama_path": lib,
                 "libllama_sha256": sha256_file(lib) if os.path.exists(lib) else None, "init_dry_abi": self.abi,
                 "vocab_path": str(self.vocab_path), "vocab_sha256": sha256_file(self.vocab_path),
                 **({"declares": list(self.declared)} if self.declared else {})}
        ident["label"] = (f"llama-cpp-python {self.lc.__version__}'s own binding "
                          f"(llama_cpp.llama_sampler_init_dry, add_dry's breaker marshalling)")
        return ident

    # -- the sampler through llama-cpp-python ------------------------------------------------------------------
    def new_sampler(self, multiplier, base, allowed_length, penalty_last_n, breakers=(), vocab=None,
                    n_ctx_train=N_CTX_TRAIN_DEFAULT):
        """A chain holding one DRY sampler, made as LlamaSampler.add_dry makes it."""
        chain = self.internals.LlamaSampler()
        model = _VocabOnly(self._vocab(vocab))
        chain.add_dry(model, multiplier, base, allowed_length, penalty_last_n, list(breakers))
        return chain

    def accept(self, s, token: int) -> None:
        self.lc.llama_sampler_accept(s.sampler, token)

    def reset(self, s) -> None:
        self.lc.llama_sampler_reset(s.sampler)

    def clone(self, s):
        c = self.internals.LlamaSampler.__new__(self.internals.LlamaSampler)
        c.sampler = self.lc.llama_sampler_clone(s.sampler)
        c.custom_samplers = []
        c._exit_stack = contextlib.ExitStack()  # as LlamaSampler.__init__ makes it: close() frees the clone once

        def free_clone(lc=self.lc, c=c):
            if c.sampler is not None:
                lc.llama_sampler_free(c.sampler)
                c.sampler = None
        c._exit_stack.callback(free_clone)
        return c

    def free(self, s) -> None:
        s.close()

    def apply_once(self, s, ids, logits, sorted_flag) -> Output:
        lc = self.lc
        n = len(ids)
        data = (lc.llama_token_data * n)()
        for i, (t, lg) in enumerate(zip(ids, logits)):
            data[i].id, data[i].logit, data[i].p = int(t), float(lg), 0.0
        arr = lc.llama_token_data_array(data=data, size=n, selected=-1, sorted=bool(sorted_flag))
        lc.llama_sampler_apply(s.sampler, ctypes.byref(arr))
        size = int(arr.size)
        view = (lc.llama_token_data * size).from_address(ctypes.addressof(arr.data.contents))
        return Output(tuple(d.id for d in view), np.array([d.logit for d in view], dtype=np.float32),
                      bool(arr.sorted), size)

    # -- the protocol ------------------------------------------------------------------------------------------
    def run_batch(self, cases) -> list[Output]:
        return [self.run(c) for c in cases]

    def run(self, case) -> Output:
        s = self.new_sampler(case.multiplier, case.base, case.allowed_length, case.penalty_last_n, case.breakers,
                             vocab=case.vocab)
        try:
            for t in case.history:
                self.accept(s, t)
            return self.apply_once(s, case.ids, case.logits, case.sorted)
        finally:
            self.free(s)


class _VocabOnly:
    """What LlamaSampler.add_dry reads of its model argument: .vocab."""

    def __init__(self, vocab):
        self.vocab = vocab
