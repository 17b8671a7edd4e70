"""Cases over real vocabularies (Case.vocab): the JSON form, validation, check() on hand-made histories, the
library driven through a cloned prototype, the vocabulary fuzz decoder, the CLI's --vocab and the corpus's
real-vocabulary entries.

Skips when a vocabulary or the library cannot be had, unless DRYZ_REQUIRE_BUILDS=1 (then fails)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dryz.case import Case, CaseError

ROOT = Path(__file__).resolve().parent.parent
FINDINGS = ROOT / "corpus" / "findings"
SPM_SHA = "16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69"


from conftest import dryz as _dryz, vocab as _vocab


def _case(v, history, breakers=(), candidates=None, **kw):
    if candidates is None:
        candidates = tuple((t, 0.0) for t in sorted(set(history)))
    return Case(history=tuple(history), alphabet=v.n_tokens, penalty_last_n=kw.pop("penalty_last_n", 64),
                breakers=tuple(breakers), candidates=candidates, vocab=v.ref.name, vocab_sha256=v.ref.sha256, **kw)


# -- the Case: JSON and validation (no vocabulary needed) ------------------------------------------------


def test_json_round_trip_with_vocab():
    c = Case(history=(791, 8415, 128000), alphabet=128256, penalty_last_n=10, breakers=("\n", " the", "🙂"),
             candidates=((5, 0.0), (128000, -1.5)), vocab="llama-bpe", vocab_sha256="ab" * 32)
    d = c.to_json()
    assert "history_symbols" not in d and d["vocab"] == "llama-bpe" and d["vocab_sha256"] == "ab" * 32
    assert Case.loads(c.dumps()) == c and Case.loads(c.dumps()).dumps() == c.dumps()
    assert c != replace(c, vocab_sha256="cd" * 32)  # the vocabulary is part of what a case is
    no_sha = replace(c, vocab_sha256=None)
    assert "vocab_sha256" not in no_sha.to_json() and Case.loads(no_sha.dumps()) == no_sha


def test_symbol_entries_unchanged_byte_for_byte():
    from dryz.corpus import entries, load_entry
    n = 0
    for p in entries(ROOT / "corpus"):
        e = load_entry(p)
        if e.case is None or e.case.vocab is not None:  # trace entries and real-vocabulary entries
            continue
        assert json.dumps(e.case.to_json()) == json.dumps(e.data["case"]), p
        assert "vocab" not in e.case.to_json()
        n += 1
    assert n >= 25


@pytest.mark.parametrize("change, message", [
    (dict(history=(128256,)), "outside the vocabulary llama-bpe (ids 0..128255)"),
    (dict(candidates=((1, 0.0), (1, 0.0))), "appears twice"),
    (dict(breakers=("a\0b",)), "NUL"),
    (dict(breakers=("\ud800",)), "UTF-8"),
    (dict(vocab_sha256="xyz"), "64 lowercase hex"),
    (dict(alphabet=0), "alphabet"),
])
def test_vocab_case_validation(change, message):
    base = dict(history=(1, 2), alphabet=128256, penalty_last_n=8, vocab="llama-bpe")
    with pytest.raises(CaseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Case(**{**base, **change})


def test_symbol_case_refuses_a_sha_and_history_symbols_with_vocab(lib):
    with pytest.raises(CaseError, match="vocab_sha256 without a vocab"):
        Case(history=(0,), alphabet=2, penalty_last_n=4, vocab_sha256="ab" * 32)
    with pytest.raises(CaseError, match="history_symbols"):
        Case.from_json({"history": [0], "history_symbols": "a", "alphabet": 9, "penalty_last_n": 4,
                        "vocab": "llama-bpe"})


# -- check() on a real vocabulary --------------------------------------------------------------------------


def test_hand_made_history_bpe(bpe, lib):
    from dryz.judge import check
    toks = bpe.tokenize("The cat sat on the mat. The cat sat on the mat. The cat sat")
    assert toks == (791, 8415, 7731, 389, 279, 5634, 13, 578, 8415, 7731, 389, 279, 5634, 13, 578, 8415, 7731)
    v = check(_case(bpe, toks, ("\n", ":", "\"", "*")), lib)
    assert v.klass == "agree"
    # " on" (389) follows " cat sat" twice: the suffix " The cat sat" (578 8415 7731) ... 9 tokens repeat.
    assert dict(zip(v.candidates, v.library_L)) == dict(zip(v.candidates, v.oracle_L))
    assert dict(zip(v.candidates, v.oracle_L))[389] == 9 and sum(1 for x in v.oracle_L if x) == 1
    # "." (13) as a breaker: a single-token breaker; the repeat is cut after the last "."
    v = check(_case(bpe, toks, (".",)), lib)
    assert v.klass == "agree" and dict(zip(v.candidates, v.oracle_L))[389] == 3


def test_hand_made_history_spm_breaker_in_token(spm, lib):
    from dryz.judge import check
    toks = spm.tokenize(" the cat saw the dog and the cat saw the dog and the cat saw")
    v = check(_case(spm, toks, (" the",)), lib)
    # "\u2581the" prints " the" but init_dry reads detokenize({278}) = "the": not a single-token breaker
    assert v.klass == "promise-breaker-in-token" and v.status == "agree"
    assert v.broken_promises == ["breaker-in-token"]
    assert v.library_L == v.oracle_L and max(v.oracle_L) == 9


def test_sha_and_size_mismatch_are_errors(spm, lib):
    from dryz.judge import check
    from dryz.vocab_cases import VocabError
    c = _case(spm, (278, 278))
    with pytest.raises(VocabError, match="sha256"):
        check(replace(c, vocab_sha256="0" * 64), lib)
    with pytest.raises(VocabError, match="32000 tokens"):
        check(replace(c, alphabet=40000), lib)


def test_clone_reset_and_fresh_sampler_agree(bpe, lib):
    """run_vocab's clone of a prototype, the reset prototype, and a fresh init_dry per case leave the same
    logits (bit for bit) on decoded cases."""
    from dryz.decode.vocab import VocabDecoder
    d = VocabDecoder("llama-bpe", "default", lib)
    rng = np.random.default_rng(7)
    for _ in range(60):  # (configurations repeat: a clone after a reset-mode run of the same one is covered)
        c = d.decode(rng.integers(0, 256, int(rng.integers(0, 1500))).astype(np.uint8).tobytes())
        a = lib.run(c)
        lib.__dict__["reuse_samplers"] = True
        try:
            b = lib.run(c)
        finally:
            lib.__dict__["reuse_samplers"] = False
        s = lib.new_sampler(c.multiplier, c.base, c.allowed_length, c.penalty_last_n, c.breakers,
                            vocab=bpe.handle)
        try:
            for t in c.history:
                lib.accept(s, t)
            f = lib.apply_once(s, c.ids, c.logits, c.sorted)
        finally:
            lib.free(s)
        assert a.ids == b.ids == f.ids
        assert a.logits.tobytes() == b.logits.tobytes() == f.logits.tobytes() and a.sorted == b.sorted == f.sorted
    # A prototype used in reset mode has accepted tokens: clone mode never takes it over.
    c = _case(bpe, bpe.tokenize("a b c a b c a b"), ("\n",), penalty_last_n=256)
    lib.__dict__["reuse_samplers"] = True
    try:
        lib.run(replace(c, history=c.history * 3))
    finally:
        lib.__dict__["reuse_samplers"] = False
    assert lib.run(c).logits.tobytes() == lib.run(replace(c, history=c.history)).logits.tobytes()
    s = lib.new_sampler(1.0, 2.0, 1, 256, ("\n",), vocab=bpe.handle)
    try:
        for t in c.history:
            lib.accept(s, t)
        assert lib.run(c).logits.tobytes() == lib.apply_once(s, c.ids, c.logits, c.sorted).logits.tobytes()
    finally:
        lib.free(s)


def test_restart_seqs_step1_matches_independent_scans(bpe, lib):
    """RestartSeqs' Step 1 (by head position) = promise_text.shipped_scan over the model's map = the generic
    model over the sequences that can complete in the window."""
    from dryz.oracle.promise_text import shipped_scan
    from dryz.oracle.promised import promised_rep_limits
    from dryz.oracle.shipped import rep_limits
    from dryz.vocab_cases import restart_sequences, vocab_of
    for breakers in (("\n", ":", "\"", "*"), ("### Instruction:", "Instruction"), ("ab", "abc", "<|eot_id|>")):
        c = _case(bpe, (1,), breakers)
        seqs, text = restart_sequences(vocab_of(c, lib), c.breakers)
        for snippet in ("### Instruction:\nWrite: a *poem*.\n\n### Instruction:\nAgain", "abc ab abd xabcx ab.",
                        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>ab"):
            ids = list(bpe.tokenize(snippet, parse_special=True))
            for e in range(1, len(ids) + 1):
                W = np.array([ids[:e]], dtype=np.int64)
                small = seqs.restricted(set(ids[:e]))
                got = int(rep_limits(W, seqs)[0])
                assert got == shipped_scan(ids[:e], text.model.seqs)[0]
                assert got == int(rep_limits(np.repeat(W, 2, axis=0), list(small))[0])
                assert int(promised_rep_limits(W, seqs)[0]) == int(promised_rep_limits(np.repeat(W, 2, axis=0),
                                                                                     list(small))[0])


def test_oracle_A_over_ids_past_a_byte():
    """A's per-candidate slots (ids past a byte) give what its table over a byte's ids gives: short windows,
    long periodic ones (its second pass), candidates absent from the window, repeated, and tokens that are no
    candidate."""
    from dryz.oracle.lengths import _match_lengths_A_single
    rng = np.random.default_rng(5)
    for i in range(400):
        n = int(rng.integers(0, 200))
        w = rng.integers(0, 5, n) if i % 2 else np.resize(rng.integers(0, 5, int(rng.integers(1, 7))), n)
        c = rng.permutation(8)[:int(rng.integers(1, 9))]
        if i % 3 == 0:
            c = np.concatenate([c, c[:2]])
        small = _match_lengths_A_single(w.astype(np.uint8), c)
        assert (_match_lengths_A_single(w * 40000 + 7, c * 40000 + 7) == small).all()


def test_oracle_B_over_code_points():
    from dryz.oracle.lengths_b import _match_lengths_B_bytes, _match_lengths_B_str, match_lengths_B
    rng = np.random.default_rng(3)
    for _ in range(200):
        w = rng.integers(0, 6, int(rng.integers(0, 40)))
        c = np.arange(8)
        assert (_match_lengths_B_str(w, c) == _match_lengths_B_bytes(w.astype(np.uint8), c)).all()
        big = w * 40000 + 7  # the same equalities over ids past a byte
        assert (_match_lengths_B_str(big, c * 40000 + 7) == _match_lengths_B_bytes(w.astype(np.uint8), c)).all()
        if len(w):
            W = np.stack([big, big])
            assert (match_lengths_B(W, c * 40000 + 7)[0] == _match_lengths_B_str(big, c * 40000 + 7)).all()


# -- the fuzz decoder ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["default", "dict", "random"])
def test_vocab_decoder_output_validates(bpe, mode, lib):
    from dryz.decode.vocab import MAX_VOCAB_HISTORY, VocabDecoder
    d = VocabDecoder("llama-bpe", mode, lib)
    rng = np.random.default_rng(1)
    big = 0
    configurations = set(d.configurations())  # what the fork server warms: every configuration decode gives
    assert len(configurations) == {"default": 216, "dict": 15 * 8, "random": 9 * 8}[mode]
    for _ in range(300):
        c = d.decode(rng.integers(0, 256, int(rng.integers(0, 3000))).astype(np.uint8).tobytes())
        assert (c.multiplier, c.base, c.allowed_length, c.penalty_last_n, c.breakers) in configurations
        again = Case.from_json(c.to_json())  # validates (float32 parameters, ids below the size, breakers)
        assert again == c and again.dumps() == c.dumps()
        assert c.vocab == "llama-bpe" and c.vocab_sha256 == bpe.ref.sha256 and c.alphabet == 128256
        assert len(c.history) <= MAX_VOCAB_HISTORY and c.candidates and len(c.candidates) <= 64
        big += max(c.history, default=0) >= 100000
    assert big > 0  # ids over the full range occur
    seed = d.decode(c.dumps().encode())  # a Case JSON decodes to itself
    assert seed == c
    # a seed whose vocabulary name a mutation changed is read as bytes (a case on the decoder's vocabulary)
    other = d.decode(c.dumps().replace('"llama-bpe"', '"llama-ebp"').encode())
    assert other.vocab == "llama-bpe" and other.vocab_sha256 == bpe.ref.sha256


# The bytes -> Case mapping is pinned: crash files and campaign corpora are bytes, and a reproducer must decode
# to the case it was found as. Digests of 400 decoded inputs per mode, recorded with the numpy decoder of
# b14b11d (the plain-Python one that replaced it gives the same cases, 25,329 inputs compared).
PINNED_DECODES = {"default": "29e47b84c017be78", "dict": "85f075a679206ad4", "random": "672fb67423991862"}


@pytest.mark.parametrize("mode", sorted(PINNED_DECODES))
def test_vocab_decoder_mapping_is_pinned(bpe, mode, lib):
    import hashlib

    from dryz.decode.vocab import VocabDecoder
    d = VocabDecoder("llama-bpe", mode, lib)
    rng = np.random.default_rng(7)
    h = hashlib.sha256()
    for _ in range(400):
        n = int(rng.integers(0, 2500)) if rng.integers(0, 2) else int(rng.integers(0, 300))
        hi = 256 if rng.integers(0, 2) else 4  # random bytes, and low bytes (short draws, many mutations)
        h.update(d.decode(rng.integers(0, hi, n).astype(np.uint8).tobytes()).dumps().encode())
    assert h.hexdigest()[:16] == PINNED_DECODES[mode]


def test_vocab_decoder_cases_agree(bpe, lib):
    from dryz.judge import check
    from dryz.decode.vocab import VocabDecoder
    d = VocabDecoder("llama-bpe", "dict", lib)
    rng = np.random.default_rng(11)
    classes = {check(d.decode(rng.integers(0, 256, int(rng.integers(0, 2000))).astype(np.uint8).tobytes()), lib).klass
               for _ in range(60)}
    assert not {k for k in classes if k.startswith("mismatch") or k == "oracle-disagreement"}


# -- the command line and the corpus ------------------------------------------------------------------------


def test_bad_vocab_is_one_line_exit_2(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(Case(history=(0, 1), alphabet=2, penalty_last_n=4).dumps())
    r = _dryz("check", "--vocab", "no-such-vocab", str(p))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("dryz: error: --vocab: unknown vocabulary 'no-such-vocab'")
    r = _dryz("check", "--vocab", str(tmp_path / "missing.gguf"), str(p))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such file" in r.stderr


def test_cli_check_with_vocab(spm, tmp_path):
    p = tmp_path / "c.json"
    # the ids of the file are llama-spm's: --vocab reads them so (alphabet becomes the vocabulary's size)
    p.write_text(json.dumps({"history": [278, 29871, 278], "alphabet": 3, "penalty_last_n": 3, "breakers": [" "],
                             "allowed_length": 0, "candidates": [[29871, 0.0]]}))
    r = _dryz("check", "--vocab", "llama-spm", str(p))
    out = json.loads(r.stdout)
    assert r.returncode == 1 and out["verdict"]["class"] == "promise-breaker-in-token"
    assert out["case"]["vocab"] == "llama-spm" and out["case"]["vocab_sha256"] == SPM_SHA
    assert out["case"]["alphabet"] == 32000


VOCAB_ENTRIES = [("promise-breaker-across-tokens", "gpt-2"), ("promise-breaker-across-tokens", "llama-spm"),
                 ("promise-breaker-in-token", "llama-spm"), ("promise-breaker-phantom", "llama-spm")]


def test_corpus_vocab_entries_replay(spm, tmp_path):
    _vocab("gpt-2")
    from dryz.corpus import entries, load_entry
    found = []
    for p in entries(FINDINGS):
        e = load_entry(p)
        if e.case.vocab is not None:
            found.append((e.expect, e.case.vocab))
            assert e.case.vocab_sha256 and e.data["shortest"] == "1-minimal" and "history_text" in e.data
            shutil.copy(p, tmp_path / p.name)
    assert sorted(found) == VOCAB_ENTRIES
    r = _dryz("replay", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "replayed 4 entries: 4 as expected, 0 changed, 0 invalid" in r.stdout
    r = _dryz("replay", "--vocab", "gpt-2", str(tmp_path))
    assert r.returncode == 0 and "replayed 1 entries: 1 as expected" in r.stdout


def test_exhaustive_vocab(tmp_path):
    _vocab("gpt-2")
    out = tmp_path / "ex.json"
    r = _dryz("exhaustive", "--vocab", "gpt-2", "--token", "8582", "--token", "25081", "--token", "3797", "--breakers", "🙂", "-n", "5",
              "--json", str(out), "--no-progress")
    assert r.returncode == 1, r.stdout + r.stderr  # a broken promise is a finding
    d = json.loads(out.read_text())
    assert d["mode"] == "vocab" and d["verdict"] == "finding" and d["breakers"] == ["🙂"]
    base = d["configs"][0]
    assert base["histories"] == 3 + 9 + 27 + 81 + 243 and base["mismatches"] == 0
    assert base["oracle_disagreements"] == 0 and base["off_by_one_flagged"] > 0
    assert set(base["history_classes"]) == {"promise-breaker-across-tokens"}
    ex = Case.from_json(base["examples"][0]["case"])
    assert ex.vocab == "gpt-2" and ex.history == (25081, 8582, 25081)


def test_exhaustive_vocab_defaults_agree_and_bad_tokens(tmp_path, bpe):
    r = _dryz("exhaustive", "--vocab", "llama-bpe", "-n", "4", "--json", str(tmp_path / "e.json"), "--no-progress")
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads((tmp_path / "e.json").read_text())
    assert [t["id"] for t in d["tokens"]] == [198, 279, 8415, 25, 1820]
    assert d["breakers"] == ["\n", ":", "\"", "*"] and d["verdict"] == "agree"
    r = _dryz("exhaustive", "--vocab", "llama-bpe", "--token", "1", "--token", "999999", "-n", "2", "--json",
              str(tmp_path / "f.json"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "999999 is outside" in r.stderr


def test_fuzz_campaign_vocab_smoke(tmp_path):
    """`dryz fuzz --vocab` runs libFuzzer over the vocabulary decoder (a few seconds; no findings expected)."""
    _vocab("gpt-2")
    pytest.importorskip("atheris")
    out = tmp_path / "s.json"
    r = _dryz("-q", "fuzz", "--vocab", "gpt-2", "--breaker-sets", "dict", "--time", "4", "--jobs", "1",
              "--workdir", str(tmp_path / "w"), "--json", str(out))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    d = json.loads(out.read_text())
    assert d["execs"] > 0 and d["findings"] == [] and d["vocab"]["name"] == "gpt-2"
    assert d["vocab"]["breakers"] == "dict" and d["vocab"]["sampler"] == "clone"
    seeds = list((tmp_path / "w" / "seeds").iterdir())
    assert seeds and all(Case.loads(p.read_text()).vocab == "gpt-2" for p in seeds)


def test_cli_reads_a_vocab_campaign_crash_file(bpe, lib, tmp_path):
    """`dryz check --vocab NAME [--breakers MODE] crash-*` decodes the bytes as that campaign's harness decoded
    them (before, the symbol decoder's case was moved onto the vocabulary: another case, which agreed)."""
    from dryz.decode.vocab import VocabDecoder
    rng = np.random.default_rng(4)
    for mode in ("default", "dict"):
        data = rng.integers(0, 256, 900).astype(np.uint8).tobytes()
        p = tmp_path / f"crash-{mode[0] * 40}"
        p.write_bytes(data)
        r = _dryz("check", "--vocab", "llama-bpe", *(["--decode-breakers", mode] if mode != "default" else []), str(p))
        assert r.returncode in (0, 1), r.stderr
        assert Case.from_json(json.loads(r.stdout)["case"]) == VocabDecoder("llama-bpe", mode, lib).decode(data)
    r = _dryz("check", "--decode-breakers", "dict", str(p))  # fuzz bytes of which vocabulary?
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "give its --vocab too" in r.stderr
    j = tmp_path / "c.json"
    j.write_text(Case(history=(0, 1), alphabet=2, penalty_last_n=4).dumps())
    r = _dryz("check", "--vocab", "llama-bpe", "--decode-breakers", "dict", str(j))  # a case names its breakers
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "a case names its breakers" in r.stderr


def test_vocab_campaign_finding_reads_back(tmp_path):
    """A vocabulary campaign's finding (the off-by-one control's, on gpt-2): its decoded case is written beside the
    crash file, the summary says how to read the crash file, and `dryz check` read so gives that case."""
    _vocab("gpt-2")
    pytest.importorskip("atheris")
    r = _dryz("fuzz", "--vocab", "gpt-2", "--fault", "off-by-one", "--time", "4", "--jobs", "1", "--recheck", "1",
              "--workdir", str(tmp_path / "w"), "--json", str(tmp_path / "s.json"))
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    found = [f for f in json.loads((tmp_path / "s.json").read_text())["findings"] if f["reproduces"]]
    assert len(found) == 1 and found[0]["klass"] == "mismatch"
    assert "to read a crash file as this campaign did: DRYZ_FAULT=off-by-one dryz check|minimize" in r.stdout
    assert "check|minimize --vocab gpt-2 --decode-breakers default FILE" in r.stdout
    crash = found[0]["file"]
    beside = Case.from_json(json.loads(Path(crash + ".case.json").read_text()))
    r = _dryz("check", "--vocab", "gpt-2", "--decode-breakers", "default", crash, env={"DRYZ_FAULT": "off-by-one"})
    assert r.returncode == 1 and Case.from_json(json.loads(r.stdout)["case"]) == beside


def test_a_clone_that_a_second_clone_undoes_is_not_hidden(bpe, monkeypatch):
    """A real vocabulary's prototype is a clone of init_dry's sampler only where one more clone changes no probe's
    output (LibLlama._compact): a clone that swaps multiplier and base (undone by a second clone) keeps init_dry's
    sampler as the prototype, so each case is one clone of it and the swap shows as mismatches; the real clone
    keeps the compact prototype for every configuration where the swap could show."""
    import ctypes

    from dryz.judge import check
    from dryz.decode.vocab import VocabDecoder
    from dryz.subject import libllama, open_subject, selected_spec
    monkeypatch.setattr(libllama, "_DRIVE", None)  # every clone through lib.clone (the ctypes path)
    lib = open_subject(selected_spec())
    real_clone = lib.clone
    s = lib.new_sampler(1.25, 1.5, 3, 77, ())
    ctx = ctypes.c_void_p.from_address(s + 8 if isinstance(s, int) else ctypes.cast(s, ctypes.c_void_p).value + 8)
    fields = [ctypes.c_float.from_address(ctx.value + 4 * i).value for i in range(4)]
    off_m, off_b = 4 * fields.index(1.25), 4 * fields.index(1.5)  # llama_sampler_dry's first two fields
    lib.free(s)

    def swapping_clone(p):
        c = real_clone(p)
        cx = ctypes.c_void_p.from_address((c if isinstance(c, int) else ctypes.cast(c, ctypes.c_void_p).value) + 8)
        if cx.value:
            m, b = ctypes.c_float.from_address(cx.value + off_m), ctypes.c_float.from_address(cx.value + off_b)
            m.value, b.value = b.value, m.value
        return c

    d = VocabDecoder("llama-bpe", "default", lib)
    rng = np.random.default_rng(0)
    cases = [d.decode(rng.integers(0, 256, 600).astype(np.uint8).tobytes()) for _ in range(200)]
    # multiplier >= 1: swapped, it is a base init_dry takes for DRY on (a clone of a sampler whose base is below 1
    # gets init_dry's empty sampler and writes DRY state into it: the heap is corrupted, as a real swap would do)
    cases = [c for c in cases if c.penalty_last_n != 0 and c.multiplier >= 1.0 and c.multiplier != c.base][:60]
    lib.clone = swapping_clone
    found = sum(check(c, lib).klass == "mismatch" for c in cases)
    kept = lib.__dict__["prototype_kinds"]
    assert found >= 10
    assert all(v.startswith("init_dry") for k, v in kept.items() if k[5] != 3)  # window 3 also with allowed 3
    lib.__dict__.pop("_prototypes")
    lib.__dict__.pop("prototype_kinds")
    lib.clone = real_clone
    assert all(check(c, lib).klass == "agree" for c in cases)
    assert set(lib.__dict__["prototype_kinds"].values()) == {"clone"}
