"""The restart-sequence model on real vocabularies (dryz.oracle.restarts_vocab), its comparison with the library
(dryz.enumerate.vocab_probes) and the text-level promise oracle (dryz.oracle.promise_text).

Facts checked here were read off the library's own vocabulary files (ggml-vocab-*.gguf of the pinned sdist).
Skips when a vocabulary or the library cannot be had, unless DRYZ_REQUIRE_BUILDS=1 (then fails)."""

from __future__ import annotations


import pytest

from dryz.enumerate.vocab_probes import BREAKER_SUITE, _digits, compare_set, compare_vocab, Summary
from dryz.oracle import restarts_vocab as rv
from dryz.enumerate.promise_sweep import Witness, promise_sweep, reclassify
from dryz.oracle.restarts_vocab import TextIndex, prepare_breakers, restart_model


from conftest import vocab as _vocab


@pytest.fixture(scope="module")
def bpe():
    v = _vocab("llama-bpe")
    return v, TextIndex(v.texts())


@pytest.fixture(scope="module")
def spm():
    v = _vocab("llama-spm")
    return v, TextIndex(v.texts())


@pytest.fixture(scope="module")
def gpt2():
    v = _vocab("gpt-2")
    return v, TextIndex(v.texts())


# -- the model: exact facts -----------------------------------------------------------------------------------


def test_newline_heads_llama_bpe(bpe):
    v, idx = bpe
    m = restart_model(["\n"], idx, v.tokenize)
    assert len(m.seqs) == 2255
    assert all(ts == {()} for ts in m.seqs.values())  # one character: containment only, no tails
    for tok, text in [(198, b"\n"), (271, b"\n\n"), (280, b";\n"), (317, b");\n"), (319, b"\r\n")]:
        assert v.texts()[tok] == text and m.seqs[tok] == {()}
    assert 220 not in m.seqs  # " "


def test_prefix_head_and_tail_llama_bpe(bpe):
    v, idx = bpe
    m = restart_model(["<|im_end|>"], idx, v.tokenize)
    assert v.texts()[27] == b"<"
    assert m.seqs[27] == {(91, 318, 6345, 91, 29)}  # "<" then tokenize("|im_end|>")


def test_tail_cap_and_byte_cut(bpe):
    v, idx = bpe
    assert len(v.tokenize(_digits(12))) == 23
    m = restart_model([_digits(12)], idx, v.tokenize)
    assert max(len(t) for ts in m.seqs.values() for t in ts) == rv.MAX_SEQ_LEN
    assert m.full_tail_lengths[_digits(12)[1:].encode()] == 22
    assert prepare_breakers(["—" * 14]) == ["—".encode() * 13 + b"\xe2"]  # 40 bytes, not 40 characters
    assert prepare_breakers(["=" * 41, "", "x"]) == [b"=" * 40, b"x"]


def test_spm_tail_gets_the_space_prefix(spm):
    v, idx = spm
    m = restart_model(["\n\n"], idx, v.tokenize)
    assert m.seqs[13] == {(29871, 13)}  # "\n" then tokenize("\n") = "\u2581" "\n": SPM prefixes a space
    assert v.texts()[278] == b"the" and v.pieces()[278] == b" the"


def _port(breakers, texts, tokenize):
    """The symbol vocabulary's construction (dryz/oracle/restarts.py: get_overlapping_token_sequences read
    string by string, in str) over the same vocabulary, its bytes read as Latin-1 (one char per byte, so its
    40-character cut is the library's 40 bytes), as a multiset."""
    from collections import Counter

    from dryz.oracle.restarts import restart_sequences
    chars = [w.decode("latin-1") for w in texts]
    return Counter(restart_sequences([b.encode().decode("latin-1") for b in breakers], chars,
                                     lambda s: tokenize(s.encode("latin-1"))))


def test_vectorised_equals_port(spm):
    v, idx = spm
    bs = ["\n", ":", "ab", "abc", "<|im_end|>", "—", "=" * 41, " the"]
    m = restart_model(bs, idx, v.tokenize)
    assert m.counts == _port(bs, idx.texts, v.tokenize)


# -- against the library --------------------------------------------------------------------------------------


# CI compares two vocabularies in full (an SPM and a byte-level BPE one); bench/vocab_breakers.py runs all 19.
@pytest.mark.parametrize("name", ["llama-spm", "gpt-2"])
def test_construction_agrees(name, lib):
    _vocab(name)
    s = compare_vocab(name, lib)
    assert s.probes > 10_000
    assert s.disagreements == []


def test_probes_catch_a_wrong_tail_cap(bpe, monkeypatch, lib):
    """The control: a model with MAX_SEQ_LEN 19 must disagree with the library."""
    v, idx = bpe
    monkeypatch.setattr(rv, "MAX_SEQ_LEN", 19)
    s = Summary("llama-bpe", v.ref.sha256, v.n_tokens)
    compare_set(lib, v, idx, "tail-length", dict(BREAKER_SUITE)["tail-length"], s)
    assert s.disagreements and all(d.kind == "head" for d in s.disagreements)


def test_probes_catch_piece_texts(spm, lib):
    """The control: token_to_piece texts (no leading-space strip) in place of detokenize must disagree."""
    v, _ = spm
    s = Summary("llama-spm", v.ref.sha256, v.n_tokens)
    compare_set(lib, v, TextIndex(v.pieces()), "whole-token", dict(BREAKER_SUITE)["whole-token"], s)
    assert len(s.disagreements) > 0


# -- the promise ---------------------------------------------------------------------------------------------


def _w(breakers, window):
    return Witness("?", "test", "test", list(breakers), tuple(window), {})


def test_witness_in_token(spm, lib):
    v, _ = spm
    assert reclassify(lib, v, _w([" the"], [278])) == "promise-breaker-in-token"


def test_witness_across_tokens(gpt2, lib):
    v, _ = gpt2
    assert v.tokenize("🙂") == (8582, 25081)  # the emoji is two byte-level tokens, cut inside the character
    assert reclassify(lib, v, _w(["🙂"], v.tokenize("🙂"))) == "promise-breaker-across-tokens"


def test_witness_phantom(spm, lib):
    v, _ = spm
    window = v.tokenize("a b")  # "\u2581a" "\u2581b": the restart ("a", tokenize("b") = "\u2581b") spells "a b"
    assert window == (263, 289)
    assert reclassify(lib, v, _w(["ab"], window)) == "promise-breaker-phantom"


def test_witness_tail_cap(bpe, lib):
    v, _ = bpe
    assert reclassify(lib, v, _w([_digits(12)], v.tokenize(_digits(12)))) == "documented-tail-cap"


def test_witness_truncated(bpe, lib):
    v, _ = bpe
    window = v.tokenize("=" * 40)  # the 40-byte cut of a 41-character breaker matches 40 characters
    assert reclassify(lib, v, _w(["=" * 41], window)) == "documented-breaker-truncated"


def test_witness_contained_restart(bpe, lib):
    v, _ = bpe
    window = v.tokenize("### Instruction:")
    assert window == (14711, 30151, 25)
    w = _w(["### Instruction:", "Instruction"], window)
    assert reclassify(lib, v, w) == "documented-contained-restart"


def test_sweep_witnesses_reproduce(spm, lib):
    v, _ = spm
    r = promise_sweep("llama-spm", lib)
    assert r.counts.get("construction-mismatch", 0) == 0 and r.vocab_counts.get("construction-mismatch", 0) == 0
    assert {"promise-breaker-in-token", "promise-breaker-across-tokens", "promise-breaker-phantom"} <= set(r.witnesses)
    for cls, w in r.witnesses.items():
        assert reclassify(lib, v, w) == cls
