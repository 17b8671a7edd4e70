"""ik_llama.cpp's part of a reproduction script: the fork's own libllama through ctypes, as its common/sampling.cpp
calls DRY (llama_sampler_init_dry, llama_sampler_dry_accept per token, llama_sample_dry with a NULL context, and a
trace's reset, clone and free), over a vocabulary of the 64 one-character tokens written with the gguf package
(the fork's loader wants a model's hyperparameters even with vocab_only). The witness runs in a child process: a
crash of the library is the answer."""

NAME = "ik_llama.cpp"
INSTALL = ("pip install ik-llama-cpp-python==0.1.5 gguf",)
HOW = ("The fork's Python package binds none of DRY, so it calls the package's libllama.so through ctypes as the "
       "fork's common/sampling.cpp does: llama_sampler_init_dry, llama_sampler_dry_accept per token, "
       "llama_sample_dry (its llama_context is not read: NULL), llama_sampler_dry_reset/clone/free; the "
       "vocabulary is 64 one-character tokens in a GGUF written here. The witness runs in a child process, so "
       "a crash of the library is its answer.")
ISOLATE = True
IMPORTS = """
import ctypes
import importlib.util
import tempfile
from pathlib import Path
"""

BODY = '''
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
    w.add_token_merges(["\\u0120 \\u0120"])
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
    path = os.environ.get("IK_LLAMA_LIB") or \\
        Path(importlib.util.find_spec("ik_llama_cpp").submodule_search_locations[0]) / "lib" / "libllama.so"
    L = ctypes.CDLL(str(path))
    vp = ctypes.c_void_p
    log = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)(lambda *a: None)
    L.llama_log_set.argtypes = [type(log), vp]
    L.llama_log_set(log, None)
    L.quiet = log
    L.llama_backend_init()
    p = Params()
    L.llama_model_default_params.argtypes, L.llama_model_default_params.restype = [vp], vp
    L.llama_model_default_params(ctypes.addressof(p))
    p.raw[VOCAB_ONLY] = 1
    L.llama_model_load_from_file.argtypes, L.llama_model_load_from_file.restype = [ctypes.c_char_p, Params], vp
    L.llama_model_get_vocab.argtypes, L.llama_model_get_vocab.restype = [vp], vp
    model = L.llama_model_load_from_file(str(vocab_file).encode(), p)
    if not model:
        sys.exit("the fork's library did not load the vocabulary")
    L.vocab = L.llama_model_get_vocab(model)
    L.llama_sampler_init_dry.argtypes = [vp, ctypes.c_float, ctypes.c_float, ctypes.c_int32, ctypes.c_int32, vp,
                                         ctypes.c_size_t]
    L.llama_sampler_init_dry.restype = vp
    L.llama_sampler_dry_accept.argtypes = [vp, ctypes.c_int32]
    L.llama_sample_dry.argtypes = [vp, vp, vp]
    L.llama_sampler_dry_reset.argtypes = [vp]
    L.llama_sampler_dry_clone.argtypes, L.llama_sampler_dry_clone.restype = [vp], vp
    L.llama_sampler_dry_free.argtypes = [vp]
    return L


def apply(L, s):
    data = (TokenData * len(CANDIDATES))(*[TokenData(t, before, 0.0) for t, before in CANDIDATES])
    L.llama_sample_dry(None, s, ctypes.byref(TokenDataArray(data, len(CANDIDATES), -1, False)))
    return [d.logit for d in data]


def answer():
    with tempfile.TemporaryDirectory() as d:
        vocab = Path(d) / "symbols.gguf"
        write_vocab(vocab)
        L = library(vocab)
        names = (ctypes.c_char_p * max(1, len(BREAKERS)))(*[b.encode() for b in BREAKERS])
        s = L.llama_sampler_init_dry(L.vocab, MULTIPLIER, BASE, ALLOWED_LENGTH, PENALTY_LAST_N,
                                     names if BREAKERS else None, len(BREAKERS))
        events = EVENTS if EVENTS is not None else [["accept", HISTORY], ["apply", None]]  # a case: accept, apply
        on_sampler = {"reset": L.llama_sampler_dry_reset, "free": L.llama_sampler_dry_free}
        applies, kept = [], []
        for name, *arg in events:
            if name == "clone":  # the clone goes on; its source is kept (as common_sampler_clone's caller)
                kept.append(s)
                s = L.llama_sampler_dry_clone(s)
            elif name == "apply":
                applies.append(apply(L, s))
            elif name == "accept":  # one token at a time, as the fork's sampling loop accepts them
                list(map(lambda t: L.llama_sampler_dry_accept(s, t), arg[0]))
            else:
                on_sampler[name](s)
        return ("logits", applies[0]) if EVENTS is None else ("applies", applies)
'''


def refuses(w) -> str | None:
    if w.trace is not None and any(e[0] == "apply" and e[1] is not None for e in w.trace.events):
        return "a trace whose apply gives its own candidate array (the script applies every token at logit 0)"
    return None
