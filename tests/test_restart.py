"""Step 1 as shipped vs as promised: the promised model, the promise check, the PREREG derivation against an
enumeration, the library sweep, and the fuzz decoder's multi-token breakers."""

import itertools
from pathlib import Path

import numpy as np

from dryz.case import Case
from dryz.judge import check
from dryz.check import restart_promise_class
from dryz.config import config_of
from dryz.oracle.promised import _promised_rep_limit_single
from dryz.oracle.shipped import _rep_limit_single, rep_limits, shipped_lengths
from dryz.oracle.promised import (promised_lengths, promised_rep_limits, restart_divergence, restart_occurrences, divergence_of)
from dryz.enumerate.restarts import (CONFIGS, admits_difference, admits_difference_seqs, case_of, model_differences, sweep)
from dryz.symbols import SYMBOLS, from_symbols

ROOT = Path(__file__).resolve().parent.parent


def case(h, breakers, **kw):
    return Case(history=tuple(from_symbols(h)), alphabet=kw.pop("alphabet", 3), penalty_last_n=kw.pop("last_n", 64),
                breakers=tuple(breakers), **kw)


def strictly_inside(b1: str, b2: str) -> bool:
    """b1 occurs in b2 starting at offset >= 1 and ending >= 1 before b2's end (written from the strings)."""
    return any(b2[d:d + len(b1)] == b1 for d in range(1, len(b2) - len(b1)))


# -- the promised model -----------------------------------------------------------------------------------

def test_promised_rep_limit_by_hand():
    seqs = config_of(1.0, 2.0, 1, 64, ("abc", "b")).seqs
    w = from_symbols("cabc")
    assert _rep_limit_single(w, seqs) == 1          # shipped: the head b (distance 1) stops the scan
    assert _promised_rep_limit_single(w, seqs) == 0  # promised: abc ends at the end
    d = restart_divergence(w, seqs)
    assert d[0][:2] == (1, 0) and d[1][:2] == (2, 2)
    assert restart_promise_class(w, seqs) == "contained-restart"
    seqs1 = config_of(1.0, 2.0, 1, 64, ("abc",)).seqs
    assert _rep_limit_single(w, seqs1) == _promised_rep_limit_single(w, seqs1) == 0


def test_promised_batch_equals_single_and_never_exceeds_shipped():
    rng = np.random.default_rng(3)
    for breakers in (("abc", "b"), ("aba", "b", "ca"), ("ab", "bc"), ("a",), ("abcb", "bc", "c")):
        seqs = config_of(1.0, 2.0, 1, 64, breakers).seqs
        W = rng.integers(0, 3, (300, 9))
        p, s = promised_rep_limits(W, seqs), rep_limits(W, seqs)
        assert p.tolist() == [_promised_rep_limit_single(w.tolist(), seqs) for w in W]
        assert (p <= s).all()
        for w, pv in zip(W[:50], p[:50]):
            occ = restart_occurrences(w.tolist(), seqs)
            assert pv == min((i - k for i, k, _ in occ), default=9)


def test_divergence_from_rightmost_occurrences_equals_every_occurrence():
    """restart_divergence reads each sequence's rightmost occurrence (bytes.rfind); it equals the selection
    over every occurrence on random windows and breaker sets, the documented pattern included."""
    rng = np.random.default_rng(5)
    sets = [("abc", "b"), ("aba", "b", "ca"), ("ab", "bc"), ("a",), ("abcb", "bc", "c"), ("aab", "aa", "a", "a")]
    for breakers in sets:
        seqs = config_of(1.0, 2.0, 1, 64, breakers).seqs
        for w in rng.integers(0, 3, (400, int(rng.integers(1, 40)))):
            assert restart_divergence(w, seqs) == divergence_of(restart_occurrences(w.tolist(), seqs)), breakers
    assert sum(restart_divergence(w, config_of(1.0, 2.0, 1, 64, ("abc", "b")).seqs) is not None
               for w in rng.integers(0, 3, (400, 12))) > 0


# -- the promise check -------------------------------------------------------------------------------------

def test_documented_witness_and_controls(lib):
    v = check(case("cabc", ("abc", "b")), lib)
    assert v.ok and v.klass == "documented-contained-restart" and v.broken_promises == ["contained-restart"]
    assert v.library_L == v.oracle_L == [1, 0, 0]
    assert check(case("cabc", ("abc",)), lib).klass == "agree"      # without the contained breaker
    assert check(case("cabc", ("b",)), lib).klass == "agree"        # without the containing one
    assert check(case("cab", ("abc", "b")), lib).klass == "agree"   # abc not completed
    # the same pattern seen only through the sorted flag: promised exits early, shipped reaches Step 4
    v = check(case("abc", ("abc", "b"), candidates=((0, 0.0), (1, 0.0)), sorted=True), lib)
    assert v.klass == "documented-contained-restart"


# -- the derivation (PREREG.md) against an enumeration -------------------------------------------------------

STRINGS3 = ["".join(p) for n in (1, 2, 3) for p in itertools.product("abc", repeat=n)]


def breaker_sets():
    sets = [(s,) for s in STRINGS3] + list(itertools.combinations(STRINGS3, 2))
    rng = np.random.default_rng(11)
    triples = list(itertools.combinations(STRINGS3, 3))
    sets += [triples[i] for i in rng.choice(len(triples), 300, replace=False)]
    return sets


def verify_set(breakers, k, max_len):
    seqs = config_of(1.0, 2.0, 1, 64, breakers).seqs
    d = model_differences(breakers, k, max_len)
    predicted = admits_difference(breakers)
    assert predicted == admits_difference_seqs(seqs), breakers
    if d.rep_differs:
        # the breaker-string form of the pattern: one breaker strictly inside another
        assert any(strictly_inside(b1, b2) for b1 in breakers for b2 in breakers), breakers
    for h in d.rep_differs:
        (i0, k0, s0), (i, k_, s) = restart_divergence(from_symbols(h), seqs)
        # the occurrence that completes closer to the end strictly contains the one the scan stops at
        assert i > i0 and i - k_ < i0 - k0, (breakers, h)
        assert restart_promise_class(from_symbols(h), seqs) == "contained-restart"
    assert set(d.output_differs) <= set(d.rep_differs)
    return bool(d.rep_differs), predicted


def test_derivation_matches_enumeration_3_symbols():
    """Every breaker set of one or two 1-3-char strings over a b c (plus 300 triples), every history up to 7:
    a set shows a difference iff the derivation predicts one, and every difference is the contained pattern."""
    seen = {True: 0, False: 0}
    for breakers in breaker_sets():
        found, predicted = verify_set(breakers, 3, 7)
        assert found == predicted, breakers
        seen[found] += 1
    assert seen[True] >= 30 and seen[False] > 500


def test_derivation_matches_enumeration_4_symbols():
    rng = np.random.default_rng(12)
    strings = ["".join(p) for n in (1, 2, 3) for p in itertools.product("abcd", repeat=n)]
    sets = [tuple(rng.choice(strings, int(rng.integers(2, 4)), replace=False)) for _ in range(150)]
    sets += [("abc", "b"), ("abcd", "bc"), ("abcd", "bc", "cd"), ("abca", "bc", "a"), ("dabc", "ab")]
    for breakers in sets:
        found, predicted = verify_set(tuple(str(b) for b in breakers), 4, 6)
        assert found == predicted, breakers
    assert admits_difference(("abcd", "bc")) and not admits_difference(("abcd", "bc", "cd"))


# -- through the library ---------------------------------------------------------------------------------------

def test_sweep_per_class(lib):
    results = {r.name: r for r in sweep(lib, 3, 7)}
    assert set(results) == {n for n, _ in CONFIGS}
    for r in results.values():
        assert r.histories == sum(3 ** n for n in range(1, 8))
        assert sum(r.counts.values()) == r.histories
        assert set(r.counts) <= {"agree", "documented-contained-restart"}, (r.name, r.counts)
        assert ("documented-contained-restart" in r.counts) == r.predicted, r.name
    assert results["contained-abc-b"].counts["documented-contained-restart"] == 83
    # the batch classes are check()'s classes
    for name in ("contained-abc-b", "contained-aba-b", "prefix-abc-ab"):
        r, breakers = results[name], dict(CONFIGS)[name]
        for klass, h in r.examples.items():
            assert check(case_of(h, breakers), lib).klass == klass, (name, h)


def test_fuzz_decoder_breakers_classified(lib):
    """Fuzz-shaped cases with 1-3-char breakers over small alphabets: check()'s class is documented exactly
    where the promised model's output differs, and never restart-order."""
    from dryz.oracle.shipped import output_logits
    rng = np.random.default_rng(21)
    documented = 0
    for _ in range(400):
        k = int(rng.integers(2, 4))
        breakers = tuple("".join(SYMBOLS[int(x)] for x in rng.integers(0, k, int(rng.integers(1, 4))))
                         for _ in range(int(rng.integers(1, 4))))
        h = tuple(int(x) for x in rng.integers(0, k, int(rng.integers(1, 12))))
        c = Case(history=h, alphabet=k, penalty_last_n=int(rng.integers(1, 14)), breakers=breakers,
                 allowed_length=int(rng.integers(0, 3)))
        v = check(c, lib)
        assert v.klass in ("agree", "documented-contained-restart"), (v.klass, c.dumps())
        cfg = config_of(c.multiplier, c.base, c.allowed_length, c.penalty_last_n, c.breakers)
        H, cands = np.array([h]), np.arange(k)
        ps = shipped_lengths(H, cands, cfg)
        pp = promised_lengths(H, cands, cfg)
        init = np.zeros(k, dtype=np.float32)
        differs = not np.array_equal(output_logits(init, ps, cfg), output_logits(init, pp, cfg))
        assert (v.klass == "documented-contained-restart") == differs, c.dumps()
        documented += differs
    assert documented > 0


# -- the corpus witnesses ----------------------------------------------------------------------------------------

def test_contained_restart_witnesses_replay_and_are_shortest(lib):
    from dataclasses import replace

    from dryz.corpus import load_entry
    from dryz.shrink import Reducer, same_failure, signature_in
    signature_in_process = signature_in(lib)
    paths = sorted((ROOT / "corpus" / "findings").glob("documented-contained-restart-*.json"))
    assert paths, "no contained-restart witness in corpus/findings"
    lengths = []
    for p in paths:
        e = load_entry(p)
        assert e.expect == e.data["class"] == "documented-contained-restart" and e.data["shortest"] == "proven"
        v = check(e.case, lib)
        assert v.klass == e.expect and v.ok, p.name
        # proven: no shorter history under the same configuration fails the same way
        assert Reducer(same_failure(signature_in_process(e.case), signature_in_process)).shorter(e.case) is None, p.name
        # the trigger: without the contained breaker (the shorter string) the promise holds
        longest = max(e.case.breakers, key=len)
        assert check(replace(e.case, breakers=(longest,)), lib).klass == "agree", p.name
        lengths.append(len(e.case.history))
    assert min(lengths) == 3  # a strict container needs >= 3 tokens: the absolute minimum


# -- the richer vocabulary: the head->tails model against the real sampler ------------------------------------

def test_merges_vocab_restart_map_matches_the_sampler(lib):
    """Tokens a b c ab bc abc with merges a+b, b+c, ab+c: overlap heads and merged tails occur, the modelled map
    reproduces the library bit for bit on every history up to 5 tokens, and each entry is needed (dropping it,
    or tokenizing its tail character by character, disagrees with the library on some history)."""
    from dryz.enumerate.restarts import MERGES_BREAKERS, merges_compare, merges_restart_sequences
    from dryz.enumerate.restarts import merges_vocab
    v = lib.vocabulary(merges_vocab())
    assert v.texts() == [b"a", b"b", b"c", b"ab", b"bc", b"abc"]
    assert v.tokenize("bcab") == (4, 3) and v.tokenize("abc") == (5,)
    a, b, c, ab, bc, abc = range(6)
    assert set(merges_restart_sequences(lib, ("abc",))) == {(a, (bc,)), (ab, (c,)), (abc, ())}
    assert set(merges_restart_sequences(lib, ("abc", "abcab"))) >= {(ab, (c,)), (ab, (c, ab)), (abc, ()),
                                                                  (abc, (ab,))}
    for breakers in MERGES_BREAKERS:
        seqs = merges_restart_sequences(lib, breakers)
        # char-by-char tails: every merged tail token split into single characters
        split = {ab: (a, b), bc: (b, c), abc: (a, b, c)}
        char_tails = tuple((h, tuple(x for t in tail for x in split.get(t, (t,)))) for h, tail in seqs)
        variants = {"char-tails": char_tails} if char_tails != seqs else {}
        r = merges_compare(lib, breakers, 5, variants)
        assert r.histories == sum(6 ** n for n in range(1, 6))
        assert r.mismatches == 0, (breakers, r.examples)
        shadowed = {e for e, n in r.distinguished.items() if not n}
        if breakers == ("cab", "a"):
            # c+ab, bc+ab, abc+ab end in the token ab, itself a head ('a' inside): shadowed, never decisive
            assert shadowed - {"char-tails"} == {(c, (ab,)), (bc, (ab,)), (abc, (ab,))}
        else:
            assert not shadowed, (breakers, shadowed)


def test_decoded_fuzz_inputs_never_restart_order(lib):
    """The fuzz decoder's own cases (1-3-char breakers, any alphabet, long histories): check() gives the
    documented class exactly where the promised Step 1 changes the output, never restart-order."""
    from dryz.decode.cases import decode
    from dryz.oracle.shipped import output_logits
    rng = np.random.default_rng(22)
    seen_multi = 0
    for _ in range(250):
        c = decode(rng.integers(0, 256, int(rng.integers(20, 600))).astype(np.uint8).tobytes())
        v = check(c, lib)
        assert v.klass != "promise-restart-order", c.dumps()
        if v.status != "agree":
            continue
        cfg = config_of(c.multiplier, c.base, c.allowed_length, c.penalty_last_n, c.breakers)
        seen_multi += any(t for _, t in cfg.seqs)
        H, cands = np.array([c.history], dtype=np.int64).reshape(1, -1), np.array(c.candidate_ids())
        init = np.array(c.initial_logits(), dtype=np.float32)
        ps = shipped_lengths(H, cands, cfg)
        pp = promised_lengths(H, cands, cfg)
        differs = (not np.array_equal(output_logits(init, ps, cfg).view(np.uint32),
                                      output_logits(init, pp, cfg).view(np.uint32))
                   or (ps.ran[0] != pp.ran[0] and c.sorted))
        assert ("contained-restart" in v.broken_promises) == differs, c.dumps()
    assert seen_multi > 20


def test_merges_vocab_differences_are_the_derived_pattern(lib):
    """On the merges vocabulary (multi-character heads, merged tails), every rep_limit difference up to 4 tokens
    is contained-restart, needs a breaker strictly inside another, and the prediction is exact."""
    from dryz.enumerate.restarts import merges_promise_sweep
    strings = ["".join(p) for n in (1, 2, 3) for p in itertools.product("abc", repeat=n)]
    sets = [(s,) for s in strings] + list(itertools.combinations(strings, 2))
    rows = merges_promise_sweep(lib, sets, 4)
    differing = [r for r in rows if r["rep_differs"]]
    assert differing
    for r in rows:
        assert bool(r["rep_differs"]) == r["predicted"], r
        assert set(r["classes"]) <= {"contained-restart"}, r
        if r["rep_differs"]:
            bs = r["breakers"]
            assert any(strictly_inside(b1, b2) for b1 in bs for b2 in bs), r


def test_restarts_command_reports_classes(tmp_path):
    import json
    import subprocess
    import sys
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "-m", "dryz", "restarts", "-n", "6", "--json", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in json.loads(out.read_text())["configs"]}
    assert rows["contained-abc-b"]["counts"].get("documented-contained-restart", 0) > 0
    assert rows["overlap-ab-bc"]["counts"] == {"agree": 3 ** 1 + 3 ** 2 + 3 ** 3 + 3 ** 4 + 3 ** 5 + 3 ** 6}


def test_one_window_step1_equals_the_scan():
    """The one-window Step 1 (rightmost occurrences by bytes.rfind) equals the position-by-position batch
    scan, shipped and promised, for random restart-sequence sets (shared heads, prefixes, duplicates)."""
    rng = np.random.default_rng(21)
    for _ in range(400):
        k = int(rng.integers(1, 65))
        seqs = [(int(rng.integers(0, k)), tuple(int(t) for t in rng.integers(0, k, int(rng.integers(0, 4)))))
                for _ in range(int(rng.integers(1, 7)))]
        seqs += seqs[:int(rng.integers(0, 2))]
        w = int(rng.integers(0, 40))
        W = rng.integers(0, min(k, int(rng.integers(1, 5))), (30, w))  # few symbols: many occurrences
        shipped, promised = rep_limits(W, seqs), promised_rep_limits(W, seqs)
        assert shipped.tolist() == [_rep_limit_single(r, seqs) for r in W], seqs
        assert promised.tolist() == [_promised_rep_limit_single(r, seqs) for r in W], seqs
    assert _rep_limit_single([300, 1], [(300, ())]) is None  # ids past a byte: the callers scan instead
