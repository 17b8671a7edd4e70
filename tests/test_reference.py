"""The reference design model (text-generation-webui's DRY) and the shipped-vs-reference divergences."""

import json
import random

import numpy as np
import pytest

from dryz.case import Case, f32
from dryz.corpus import DEFAULT_DIR, entries
from dryz.oracle.reference import divergences, reference_output, shipped_output, without_trigger
from dryz.symbols import SYMBOLS, from_symbols


def case(symbols, **kw):
    h = tuple(from_symbols(symbols))
    kw.setdefault("penalty_last_n", 64)
    kw.setdefault("alphabet", max(h, default=0) + 1)
    return Case(history=h, **kw)


def L_of(c, out):
    return {SYMBOLS[t]: L for t, L in zip(c.candidate_ids(), out.L) if L}


def test_source_worked_example_reference_and_library(lib):
    # llama-sampler.cpp Step 3's example: a b c c b c y a b c -> c: 3, b: 1, y: 2 (both designs)
    c = case("abccbcyabc")
    ref = reference_output(c)
    assert L_of(c, ref) == {"c": 3, "b": 1, "y": 2}
    assert ref.logits[from_symbols("c")[0]] == -4.0 and ref.logits[from_symbols("y")[0]] == -2.0
    assert divergences(c, observed=lib.run(c).logits) == []


def test_breaker_stops_the_suffix_side_and_is_never_penalized():
    # match c at index 2, extended over b; 'a' (a breaker) ends it: L(x) = 2
    c = case("abcxabc", breakers=("a",))
    assert L_of(c, reference_output(c)) == {"x": 2}
    # the candidate after the match is a breaker: skipped
    c = case("babab", breakers=("a",))
    assert L_of(c, reference_output(c)) == {}
    # the last token is a breaker: nothing at all
    c = case("abab", breakers=("b",))
    assert L_of(c, reference_output(c)) == {}


def test_match_cap_is_50_and_penalty_arithmetic():
    c = case("a" * 60)
    ref = reference_output(c)
    assert ref.L == [50] and ref.logits[0] == -(2.0 ** 49)
    c = case("a" * 4, multiplier=0.75, base=1.75, allowed_length=2)  # L = 3: 0.75 * 1.75 ** 1
    assert reference_output(c).logits[0] == np.float32(-(0.75 * 1.75))


def test_range_and_gates():
    assert reference_output(case("aa", penalty_last_n=0)).L == [1]      # 0: the whole context
    assert reference_output(case("aa", penalty_last_n=-1)).L == [1]     # negative: the whole context
    assert reference_output(case("aab", penalty_last_n=2)).L == [0, 0]  # window 'ab'
    assert reference_output(case("aa", multiplier=-1.0)).penalized == [False]  # webui: multiplier > 0
    assert reference_output(case("aa", base=0.5)).logits[0] == -1.0            # base unchecked: 0.5 ** 0


def test_allowed_length_zero_only_penalizes_matches():
    assert reference_output(case("ab", allowed_length=0)).penalized == [False, False]
    assert reference_output(case("aa", allowed_length=0)).logits[0] == -2.0  # L = 1: 2 ** 1


def test_breaker_strings_become_one_token():
    # 'ba' -> encode('aba')[-1] = 'a'; '' -> encode('a')[-1] = 'a'
    for br in (("ba",), ("",)):
        assert reference_output(case("aa", breakers=br)).penalized == [False]


def test_overflow_raises_in_the_reference():
    c = case("a" * 11, base=f32(2.0 ** 127))
    assert reference_output(c).error == "OverflowError"
    assert reference_output(case("a" * 10, base=f32(2.0 ** 127))).error is None


def test_bridge_reproduces_the_library(lib):
    """R(all shipped features) equals the library bit for bit on random cases of every parameter."""
    rng = random.Random(7)
    for _ in range(400):
        k = rng.randint(1, 3)
        h = tuple(rng.randrange(k) for _ in range(rng.randint(0, 12)))
        c = Case(history=h, alphabet=k, penalty_last_n=rng.choice([-1, 0, 2, 5, 64]),
                 breakers=tuple(rng.choice(["", "a", "b", "ab", "ba", "abc"]) for _ in range(rng.randint(0, 2))),
                 multiplier=rng.choice([1.0, -1.0, 0.5]), base=rng.choice([2.0, 0.5, 1.0, 1e10]),
                 allowed_length=rng.choice([-1, 0, 1, 2]))
        got = lib.run(c).logits
        assert shipped_output(c).key() == ("logits", got.view(np.uint32).tobytes()), c.dumps()
        assert "ref-unexplained" not in divergences(c, observed=got)


def _witnesses():
    out = []
    for p in entries(DEFAULT_DIR):
        d = json.loads(p.read_text())
        if "reference_divergence" in d:
            out.append(pytest.param(d, id=f"{d['reference_divergence']}:{p.name}"))
    return out


@pytest.mark.parametrize("entry", _witnesses())
def test_corpus_witness_replays(entry, lib):
    from dryz.judge import check
    c = Case.from_json(entry["case"])
    klass = entry["reference_divergence"]
    v = check(c, lib)
    assert v.klass == entry["expect"]
    assert klass in divergences(c, v)
    control = without_trigger(c, klass)
    assert klass not in divergences(control, observed=lib.run(control).logits)


def test_every_class_has_a_witness():
    from dryz.oracle.reference import CLASSES
    have = {e.values[0]["reference_divergence"] for e in _witnesses()}
    expected = set(CLASSES) - {"ref-unexplained", "ref-window", "ref-structure"}
    assert expected <= have, sorted(expected - have)


def test_two_sufficient_features_are_both_named(lib):
    # penalty_last_n 0 and base 0.5 each disable the shipped sampler; the reference penalizes 'a'
    c = case("aa", penalty_last_n=0, base=0.5)
    assert divergences(c, observed=lib.run(c).logits) == ["ref-base-below-1", "ref-penalty-last-n-0"]


def test_minimize_divergence_proves_a_shortest_witness(lib):
    from dryz.shrink import minimize_divergence
    w, shortest, calls = minimize_divergence(case("cabcab", multiplier=-1.0), "ref-multiplier-negative", lib)
    assert (w.symbols, shortest) == ("aa", "proven")
    w, shortest, _ = minimize_divergence(case("a" * 58), "ref-match-cap-50", lib)
    assert (len(w.history), shortest) == (52, "proven")
