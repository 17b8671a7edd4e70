"""ik_llama.cpp (ik-llama-cpp-python 0.1.5, the fork at 55d3c05bf7b3) against llama.cpp's DRY: each difference
dryz found, with the fork's own library alone (no dryz).

    pip install ik-llama-cpp-python==0.1.5 gguf
    python repro.py

The fork's Python package binds none of DRY, so this script calls its libllama.so through ctypes, as the fork's
common/sampling.cpp does: llama_sampler_init_dry, llama_sampler_dry_accept per token, llama_sample_dry (its
llama_context is not read: NULL), llama_sampler_dry_free. The vocabulary is 64 one-character tokens a, b, c, ...
in a GGUF written here (the fork's loader wants a model's hyperparameters even with vocab_only); every logit starts
at 0, so what llama_sample_dry leaves is minus the penalty. Each crash runs in a child process.
"""

import ctypes
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SYMBOLS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#"  # 64 tokens
LIB = Path(importlib.util.find_spec("ik_llama_cpp").submodule_search_locations[0]) / "lib" / "libllama.so"
VOCAB_ONLY = 152  # offsetof(struct llama_model_params, vocab_only) in the fork's include/llama.h at 55d3c05bf7b3


def write_vocab(path):
    import gguf
    w = gguf.GGUFWriter(str(path), "llama")
    for add, value in (("context_length", 4096), ("embedding_length", 16), ("block_count", 1),
                       ("feed_forward_length", 32), ("head_count", 2), ("head_count_kv", 2),
                       ("rope_dimension_count", 8), ("layer_norm_rms_eps", 1e-5), ("vocab_size", len(SYMBOLS))):
        getattr(w, "add_" + add)(value)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(list(SYMBOLS))
    w.add_token_types([gguf.TokenType.NORMAL] * len(SYMBOLS))
    w.add_token_merges(["Ġ Ġ"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


class TokenData(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int32), ("logit", ctypes.c_float), ("p", ctypes.c_float)]


class TokenDataArray(ctypes.Structure):
    _fields_ = [("data", ctypes.POINTER(TokenData)), ("size", ctypes.c_size_t), ("selected", ctypes.c_int64),
                ("sorted", ctypes.c_bool)]


class Params(ctypes.Structure):
    _fields_ = [("raw", ctypes.c_uint8 * 512)]


def library(vocab_file):
    L = ctypes.CDLL(str(LIB))
    vp = ctypes.c_void_p
    log = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)(lambda *a: None)
    L.llama_log_set.argtypes = [type(log), vp]
    L.llama_log_set(log, None)
    L._log = log
    L.llama_backend_init()
    p = Params()
    L.llama_model_default_params.argtypes, L.llama_model_default_params.restype = [vp], vp
    L.llama_model_default_params(ctypes.addressof(p))
    p.raw[VOCAB_ONLY] = 1
    L.llama_model_load_from_file.argtypes, L.llama_model_load_from_file.restype = [ctypes.c_char_p, Params], vp
    L.llama_model_get_vocab.argtypes, L.llama_model_get_vocab.restype = [vp], vp
    model = L.llama_model_load_from_file(str(vocab_file).encode(), p)
    assert model, "the vocabulary did not load"
    L.vocab = L.llama_model_get_vocab(model)
    L.llama_sampler_init_dry.argtypes = [vp, ctypes.c_float, ctypes.c_float, ctypes.c_int32, ctypes.c_int32, vp,
                                         ctypes.c_size_t]
    L.llama_sampler_init_dry.restype = vp
    L.llama_sampler_dry_accept.argtypes = [vp, ctypes.c_int32]
    L.llama_sample_dry.argtypes = [vp, vp, vp]
    L.llama_sampler_dry_clone.argtypes, L.llama_sampler_dry_clone.restype = [vp], vp
    L.llama_sampler_dry_free.argtypes = [vp]
    return L


def penalties(L, text, window, allowed_length=1, multiplier=1.0, base=2.0, clone=False):
    """{token: penalty} after the fork's DRY saw `text` (one token per character)."""
    s = L.llama_sampler_init_dry(L.vocab, multiplier, base, allowed_length, window, None, 0)
    for ch in text:
        L.llama_sampler_dry_accept(s, SYMBOLS.index(ch))
    if clone:
        s = L.llama_sampler_dry_clone(s)
    n = len(set(text))
    data = (TokenData * n)(*[TokenData(SYMBOLS.index(c), 0.0, 0.0) for c in sorted(set(text))])
    L.llama_sample_dry(None, s, ctypes.byref(TokenDataArray(data, n, -1, False)))
    L.llama_sampler_dry_free(s)
    return {SYMBOLS[d.id]: -d.logit for d in data if d.logit != 0}


def show(what, llama_cpp, row, vocab):
    """Each row in a child process: two of them crash the fork."""
    p = subprocess.run([sys.executable, __file__, row, str(vocab)], capture_output=True, text=True)
    got = p.stdout.strip() if p.returncode == 0 else \
        f"the process dies (exit {p.returncode}{', ' + p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ''})"
    print(f"{what}\n    llama.cpp:    {llama_cpp}\n    ik_llama.cpp: {got}\n")


ROWS = {
    "1": ("1. penalty_last_n -1: 'aa' (llama.cpp's init_dry clamps a negative window to 0: DRY off)", {},
          dict(text="aa", window=-1)),
    "2": ("2. every window capped at the vocabulary's size (here 64): 'a' x 65, window 65, allowed_length 0",
          {"a": 2.0 ** 64}, dict(text="a" * 65, window=65, allowed_length=0)),
    "3": ("3. penalty_last_n below -1: 'a', window -2 (llama.cpp: DRY off)", {}, dict(text="a", window=-2)),
    "4": ("4. llama_sampler_dry_clone: 'abab', window 64, then a clone applied", {"a": 2.0},
          dict(text="abab", window=64, clone=True)),
}

if __name__ == "__main__":
    if len(sys.argv) == 3:  # a row, in its own process
        L = library(sys.argv[2])
        print(penalties(L, **ROWS[sys.argv[1]][2]))
    else:
        with tempfile.TemporaryDirectory() as d:
            vocab = Path(d) / "symbols.gguf"
            write_vocab(vocab)
            for key, (what, want, _) in ROWS.items():
                show(what, want, key, vocab)
