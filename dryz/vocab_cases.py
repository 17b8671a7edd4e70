"""Cases over a real vocabulary (Case.vocab): the vocabulary a case names, loaded once per process and
checked against the case (its sha256 when the case records one, its size = Case.alphabet), and what the
oracles need from it (restart sequences from restart_model, cached per (vocabulary, breakers), and the token
pieces of the text-level promise).

A vocabulary that cannot be had, a sha256 that differs, or a size that differs is a VocabError (a CaseError:
one line, exit 2 at the command line).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from functools import lru_cache

from .case import Case
from .oracle.restarts_vocab import TextIndex, continuation_tokenizer, restart_model
from .oracle.seqindex import RestartSeqs
# The vocabulary a case names is loaded and checked on the subject's side (dryz/subject/vendored_vocabs.py).
from .subject.vendored_vocabs import VocabError, load_vocab, reference_vocabulary, vocab_of  # noqa: F401

# The four sequence breakers llama.cpp's common/ defaults to (common.h: dry_sequence_breakers).
DEFAULT_BREAKERS = ("\n", ":", "\"", "*")
BREAKER_PRESETS = {"default": DEFAULT_BREAKERS, "none": ()}


def with_vocab(case: Case, spec, lib) -> Case:
    """The case on vocabulary spec (a NAME or PATH): vocab, vocab_sha256 and alphabet (its size) filled. A case
    that already names a vocabulary must name this one (same sha256)."""
    v = load_vocab(spec, lib)
    if case.vocab is not None:
        mine = vocab_of(case, lib)
        if mine.ref.sha256 != v.ref.sha256:
            raise VocabError(f"the case is on vocabulary {case.vocab} (sha256 {mine.ref.sha256[:16]}...), not "
                             f"{spec} ({v.ref.sha256[:16]}...)")
        return replace(case, vocab_sha256=mine.ref.sha256)
    return replace(case, vocab=v.ref.name if "/" not in str(spec) and not str(spec).endswith(".gguf")
                   else str(v.ref.path), vocab_sha256=v.ref.sha256, alphabet=v.n_tokens)


def resolved(case: Case, lib) -> Case:
    """A vocab case with its vocab_sha256 filled (unchanged when it has one, or for the symbol vocabulary)."""
    if case.vocab is None or case.vocab_sha256 is not None:
        return case
    return replace(case, vocab_sha256=vocab_of(case, lib).ref.sha256)


@dataclass(frozen=True, eq=False)
class VocabText:
    """What the text-level promise needs of a configuration over a real vocabulary."""
    name: str
    pieces: list      # bytes per token: llama_token_to_piece(lstrip 0, special true), as a client prints it
    texts: list       # bytes per token: detokenize({id}, true), as init_dry reads it
    breakers: tuple
    model: object     # restart_model's RestartModel
    tokenize: object  # bytes -> ids (add_special false, parse_special false)
    piece_lengths: object = None  # np.int64 per token: len(pieces[t])
    breakers_bytes: tuple = ()    # the breakers as UTF-8 (whole, as the user wrote them), empty ones left out


_INDEX: dict = {}
_LOCK = threading.Lock()


def _index(v, printed: bool = False):
    """The vocabulary's TextIndex, once per process: of its texts as init_dry reads them (detokenize({id})), or
    of its pieces as printed (the printed-text fix's construction)."""
    key = (v.ref.sha256, printed)
    with _LOCK:
        if key not in _INDEX:
            _INDEX[key] = TextIndex(v.pieces() if printed else v.texts())
        return _INDEX[key]


@lru_cache(maxsize=256)
def _restarts(v, breakers: tuple):
    index = _index(v)
    model = restart_model(list(breakers), index, v.tokenize)
    seqs = RestartSeqs(model.pairs(), v.n_tokens)
    text = VocabText(v.ref.name, v.pieces(), index.texts, breakers, model, v.tokenize, _piece_lengths(v),
                     tuple(b.encode() for b in breakers if b))
    return seqs, text


@lru_cache(maxsize=64)
def _piece_lengths(v):
    import numpy as np
    return np.fromiter(map(len, v.pieces()), dtype=np.int64, count=v.n_tokens)


def restart_sequences(vocabulary, breakers):
    """(RestartSeqs, VocabText) for a loaded vocabulary (vocab_of) and breakers (cached per pair)."""
    return _restarts(vocabulary, tuple(breakers))


# -- the construction of restart sequences a subject declares ------------------------------------------------------
PRINTED = "breaker-text:printed"  # the fix (dryz.oracle.deviations): token texts as printed, tails as continued


def construction(v, deviations=()) -> tuple:
    """(TextIndex, tokenize) restart_model builds a subject's restart sequences from: init_dry's as shipped (each
    token's detokenize({id}) text, a tail tokenized as the start of a text), or, where the subject declares the
    printed-text fix, each token's piece as printed and a tail tokenized as a continuation."""
    if PRINTED not in deviations:
        return _index(v), v.tokenize
    return _index(v, True), continuation_tokenizer(v.tokenize, v.pieces().__getitem__, space_prefix(v))


def printed_sequences(v, breakers) -> RestartSeqs:
    """The restart sequences of the printed-text fix for a loaded vocabulary and breakers (cached per pair)."""
    return _printed_restarts(v, tuple(breakers))


@lru_cache(maxsize=256)
def _printed_restarts(v, breakers: tuple) -> RestartSeqs:
    index, tokenize = construction(v, (PRINTED,))
    return RestartSeqs(restart_model(list(breakers), index, tokenize).pairs(), v.n_tokens)



@lru_cache(maxsize=64)
def space_prefix(v) -> bool:
    """llama_vocab::get_add_space_prefix() for a vocabulary, from its GGUF file: tokenizer.ggml.add_space_prefix
    when the file has it, else true for a SentencePiece vocabulary (tokenizer.ggml.model "llama") and false for
    every other (llama-vocab.cpp's load)."""
    import gguf  # on use: only the printed-text fix needs it

    r = gguf.GGUFReader(str(v.ref.path))

    def value(key):
        f = r.fields.get(key)
        return None if f is None else f.contents()
    flag = value("tokenizer.ggml.add_space_prefix")
    return bool(flag) if flag is not None else value("tokenizer.ggml.model") == "llama"


def reference_vocab_of(case: Case):
    """A vocab case's vocabulary as the reference tokenizer (vendored_vocabs.reference_vocabulary) gives it,
    whatever the subject: checked against the case like any vocabulary it names. What the oracles take when no
    subject is run (dryz export) and what a case prints for people."""
    key = ("reference", case.vocab, case.vocab_sha256, case.alphabet)
    return vocab_of(case, None, _loader=lambda spec: reference_vocabulary(spec), key=key)


def pieces_for_people(case: Case) -> list[bytes]:
    """The pieces of a vocab case's tokens, to print a case for people (explain, corpus entries)."""
    return reference_vocab_of(case).pieces()


def history_text(case: Case) -> str:
    """The history as a client prints it (the tokens' pieces), for humans; the symbols for the symbol vocabulary."""
    if case.vocab is None:
        return case.symbols
    pieces = pieces_for_people(case)
    return b"".join(pieces[t] for t in case.history).decode("utf-8", errors="replace")
