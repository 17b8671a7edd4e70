"""A tiny llama model GGUF over a given vocabulary whose every logit is exactly 0, for llama-server.

The tokenizer keys (`tokenizer.*`) are copied unchanged from a vocab-only GGUF (dryz's symbol vocabulary, a
vendored `ggml-vocab-*.gguf`, any GGUF), so the server's vocabulary is the one the case names, token for token.
The model is one llama block with every weight 0 (norm weights 1) and a zero `output.weight`: the token
embeddings are 0, so every hidden state is 0, the final RMS norm maps 0 to 0, and each logit is a dot product
of zeros, +0.0 exactly, whatever the prompt. What a request's sampler chain leaves is then a function of the
initial logits the request sets (`logit_bias`) and the samplers alone.

Written once into `~/.cache/dryz/models/`, keyed by the vocabulary's sha256 and WRITER_VERSION, through a
temporary name and a rename (concurrent writers never leave half a file).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .cache import cache_dir, sha256_file
from ..errors import DryzError

WRITER_VERSION = 1  # bump when the model written below changes
N_EMBD, N_HEAD, N_FF, N_CTX_TRAIN = 16, 2, 32, 1 << 20


class ModelError(DryzError):
    """The vocabulary cannot be turned into a model (one-line message)."""


def models_dir() -> Path:
    return cache_dir() / "models"


def model_path_for(vocab_path, vocab_sha256: str | None = None) -> Path:
    sha = vocab_sha256 or sha256_file(vocab_path)
    return models_dir() / f"tiny-{sha[:16]}-w{WRITER_VERSION}.gguf"


def _tokenizer_fields(reader):
    """(key, value, GGUFValueType, sub-type for arrays) of every tokenizer.* key of the source GGUF."""
    import gguf
    out = []
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            out.append((key, field.contents(), vtype, field.types[-1]))
        else:
            out.append((key, field.contents(), vtype, None))
    return out


def write_model(vocab_path, dest: Path, dims: tuple = (N_EMBD, N_HEAD, N_FF)) -> Path:
    """The tiny model over vocab_path's tokenizer, written to dest (atomically); dims: (embedding length, heads,
    feed-forward length), every logit 0 whatever they are."""
    n_embd, n_head, n_ff = dims
    import gguf

    try:
        reader = gguf.GGUFReader(str(vocab_path))
    except Exception as e:  # the gguf package raises ValueError, struct.error, ... on a bad file
        raise ModelError(f"{vocab_path}: not a readable GGUF ({type(e).__name__}: {e})") from None
    fields = _tokenizer_fields(reader)
    tokens = [v for k, v, _, _ in fields if k == "tokenizer.ggml.tokens"]
    if not tokens or not tokens[0]:
        raise ModelError(f"{vocab_path}: no tokenizer.ggml.tokens")
    n_vocab = len(tokens[0])
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp{os.getpid()}")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name("dryz-zero-logits")
    w.add_context_length(N_CTX_TRAIN)
    w.add_embedding_length(n_embd)
    w.add_block_count(1)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    for key, value, vtype, sub in fields:
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, value, vtype, sub_type=sub)
        else:
            w.add_key_value(key, value, vtype)
    f32 = np.float32
    zeros = lambda *shape: np.zeros(shape, dtype=f32)  # noqa: E731
    ones = lambda n: np.ones((n,), dtype=f32)  # noqa: E731
    # numpy shapes are (rows, cols) = GGUF's (ne1, ne0) reversed: a weight mapping n_in -> n_out is (n_out, n_in)
    w.add_tensor("token_embd.weight", zeros(n_vocab, n_embd))
    w.add_tensor("blk.0.attn_norm.weight", ones(n_embd))
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        w.add_tensor(f"blk.0.{name}.weight", zeros(n_embd, n_embd))
    w.add_tensor("blk.0.ffn_norm.weight", ones(n_embd))
    w.add_tensor("blk.0.ffn_gate.weight", zeros(n_ff, n_embd))
    w.add_tensor("blk.0.ffn_up.weight", zeros(n_ff, n_embd))
    w.add_tensor("blk.0.ffn_down.weight", zeros(n_embd, n_ff))
    w.add_tensor("output_norm.weight", ones(n_embd))
    w.add_tensor("output.weight", zeros(n_vocab, n_embd))
    try:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            tmp.unlink()
    return dest


def tiny_model(vocab_path, vocab_sha256: str | None = None) -> Path:
    """The cached tiny model over this vocabulary (written on first use)."""
    dest = model_path_for(vocab_path, vocab_sha256)
    if not dest.exists():
        write_model(vocab_path, dest)
    return dest
