"""A deterministic vocab-only GGUF in which token id i is the single character SYMBOLS[i]."""

from __future__ import annotations

import os
from pathlib import Path

from .cache import cache_dir
from ..symbols import SYMBOLS

# v2: pre-tokenizer "gpt-2" instead of "default". Both split a symbol string into one token per character (no
# merge applies), but "default" runs std::regex on every llama_tokenize call (~45 us), which made
# llama_sampler_init_dry cost ~85 us per multi-character breaker; gpt-2's splitter is hand-written (~1 us).
VOCAB_NAME = "dryz-symbols-v2.gguf"


def write_vocab(path: Path, tokens: list[str], merges: list[str], pre: str = "default") -> None:
    """Write a vocab-only GGUF (no tensors, no hparams): enough for llama_model_load_from_file(vocab_only)."""
    import gguf  # imported here: only needed when the cache is cold

    tmp = path.with_suffix(f".tmp{os.getpid()}")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.NORMAL] * len(tokens))
    # llama.cpp refuses an empty merges list; this merge joins two characters outside the alphabet,
    # so it never fires on a symbol string.
    w.add_token_merges(merges)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)


def symbol_vocab_path() -> Path:
    """The symbol vocabulary, written once into the cache directory."""
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / VOCAB_NAME
    if not path.exists():
        write_vocab(path, list(SYMBOLS), ["Ġ Ġ"], pre="gpt-2")
    return path


# A second, richer vocabulary: multi-character tokens with real merges, so get_overlapping_token_sequences makes
# overlap heads (a token ending with a prefix of a breaker) and tails tokenized by merges (e.g. "bc" -> [bc]).
MERGES_VOCAB_NAME = "dryz-merges-v1.gguf"
MERGES_TOKENS = ["a", "b", "c", "ab", "bc", "abc"]
MERGES_MERGES = ["a b", "b c", "ab c"]


def merges_vocab_path() -> Path:
    """The merges vocabulary (tokens a b c ab bc abc; merges a+b, b+c, ab+c), written once into the cache."""
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / MERGES_VOCAB_NAME
    if not path.exists():
        write_vocab(path, list(MERGES_TOKENS), list(MERGES_MERGES))
    return path
