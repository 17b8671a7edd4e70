"""The composed model (dryz.oracle.composed) with no rule is llama.cpp's DRY: it equals the shipped model bit for bit
on every history of a bounded space and every conformance probe, and each rule the shipped model also has equals its
vectorised form; each scan rule does what its registry line says, on a witness worked by hand."""

import itertools
import re

import numpy as np
import pytest

from dryz.case import Case
from dryz.check import _bits, case_arrays, check_batch
from dryz.config import case_config
from dryz.conformance.properties import PROPERTIES
from dryz.oracle import composed
from dryz.oracle.deviations import BY_PATTERN, DeviationError, REGISTRY, apply, compose, instances, parse, pattern

# the deviations the vectorised shipped model has too (configuration fields it reads)
SHIPPED_TOO = (None, "window-zero:unlimited", "window-negative:unlimited", "base-below-one:applied",
               "breakers-not-exempt", "no-clamp", "finite-penalty:saturate", "match-cap:3", "single-token-breakers",
               "breaker-form:last-token")


def _shipped(case: Case, cfg):
    cands, H = case_arrays(case)
    b = check_batch(cfg, H, cands, np.zeros((1, len(cands)), np.float32), np.array(case.logits, np.float32),
                    case.sorted)
    return b.expected[0], b.row_sorted(0)


def _composed(case: Case, cfg):
    return composed.predict(cfg, case.history, case_arrays(case)[0], case.logits, case.sorted)


def _space():
    for n in range(1, 7):
        for h in itertools.product(range(3), repeat=n):
            for kw in ({}, {"penalty_last_n": 4}, {"breakers": ("c",)}, {"allowed_length": 0},
                       {"allowed_length": 2, "breakers": ("ab",)}, {"penalty_last_n": 0}, {"penalty_last_n": -1},
                       {"base": 0.5}, {"multiplier": -1.0, "allowed_length": 0}):
                yield Case(history=h, alphabet=3, **{"penalty_last_n": 64, **kw})
    for p in PROPERTIES:
        yield from (c for c in p.probes() if isinstance(c, Case))


def test_with_no_rule_it_is_the_shipped_model_and_so_is_every_rule_the_shipped_model_has():
    compared = 0
    for case in _space():
        base = case_config(case)
        for d in SHIPPED_TOO:
            from dryz.config import symbol_tokenize
            cfg = base if d is None else apply(base, d, case.breakers, symbol_tokenize)
            want, want_sorted = _shipped(case, cfg)
            got, got_sorted = _composed(case, cfg)
            assert np.array_equal(_bits(want), _bits(got)) and want_sorted == got_sorted, (d, case.dumps())
            compared += 1
    assert compared > 100_000


def _run(history: str, *models, **kw):
    from dryz.symbols import from_symbols
    case = Case(history=tuple(from_symbols(history)), alphabet=kw.pop("alphabet", 3),
                **{"penalty_last_n": 256, **kw})
    cfg = compose(case_config(case), models, case.breakers)
    out = _composed(case, cfg)
    return out if isinstance(out, composed.Raises) else [float(x) for x in out[0]]


def test_each_scan_rule_on_a_witness_worked_by_hand():
    # llama.cpp: `aa`, a follows a 1-token repeat: penalty 1 * 2^(1-1); an empty history reads nothing, whatever
    # allowed_length (the shipped model's answer)
    assert _run("aa") == [-1.0, 0.0, 0.0]
    assert _run("", allowed_length=-1) == [0.0, 0.0, 0.0]
    assert _run("aa", "repeat-min:2") == [0.0, 0.0, 0.0]            # Aphrodite: a one-token repeat never counts
    assert _run("aa", "last-follower:unseen") == [0.0, 0.0, 0.0]    # exllamav2: `a a` ends at the last token
    # `ab`, allowed_length 0: b follows a (L 0), penalized 1 in llama.cpp; not when every repeat needs a token
    assert _run("ab", allowed_length=0) == [0.0, -1.0, 0.0]
    assert _run("ab", "repeat-min:1", allowed_length=0) == [0.0, 0.0, 0.0]
    # `cac`, breaker c: the last token is a breaker, nothing; Step 1 blind to it: a (L 1) penalized
    assert _run("cac", breakers=("c",)) == [0.0, 0.0, 0.0]
    assert _run("cac", "last-breaker:unchecked", breakers=("c",)) == [-1.0, 0.0, 0.0]
    # `abcqrsab`, allowed_length 3: c follows a 2-token repeat (L 2 < 3): nothing; no threshold: 2^(2-3)
    case = dict(alphabet=20, allowed_length=3)
    assert _run("abcqrsab", "threshold:none", **case)[2] == -0.5 and _run("abcqrsab", **case)[2] == 0.0
    # `abcdabceab`: c follows `ab` twice (L 2): 2; times the count: 4 (exllamav2's node.value)
    assert _run("abcdabceab", alphabet=5)[2] == -2.0
    assert _run("abcdabceab", "suffix:longest-only", "penalty:times-count", alphabet=5)[2] == -4.0
    # the longest suffix only: `abcxqbcyabc`: x follows `abc` (L 3), y follows `bc` (L 2); llama.cpp penalizes
    # both (4, 2), the longest suffix's followers alone: x
    x, y = _run("abcxqbcyabc", alphabet=25), _run("abcxqbcyabc", "suffix:longest-only", alphabet=25)
    assert (x[23], x[24]) == (-4.0, -2.0) and (y[23], y[24]) == (-4.0, 0.0)
    # a repeat of N tokens or more penalizes nothing (exllamav2's trie depth): `ab` x 4, L 6
    assert _run("abababab")[0] == -32.0 and _run("abababab", "suffix-cap:6")[0] == 0.0
    assert _run("abababab", "suffix-cap:7")[0] == -32.0
    # float32 arithmetic: 0.8 * 1.3^7 two roundings against one
    d = _run("aaaaaaaaa", multiplier=0.8, base=1.3, alphabet=1)[0]
    f = _run("aaaaaaaaa", "arithmetic:float32", multiplier=0.8, base=1.3, alphabet=1)[0]
    assert (d, f) == (-5.019880294799805, -5.0198798179626465)
    # raises: a window of at most N tokens, a history of at most N tokens with a window
    assert _run("aa", "raises-window:20", penalty_last_n=4) == composed.Raises("", "window-at-most 20")
    assert _run("aa", "raises-window:20", penalty_last_n=21) == [-1.0, 0.0, 0.0]
    assert _run("a", "raises-history:1", penalty_last_n=64) == composed.Raises("", "short-history 1")
    # a negative multiplier off; the window one token wider: `baab`, window 3: `aab` cannot see the first b
    assert _run("abab", "multiplier-negative:off", multiplier=-1.0, allowed_length=0) == [0.0, 0.0, 0.0]
    assert _run("bab", "window:one-wider", penalty_last_n=2)[0] == -1.0 and _run("bab", penalty_last_n=2)[0] == 0.0
    # base < 1 applied, a base of 0 or below too (exllamav2 and mistral.rs check no base): `ababa`, allowed_length
    # 0: b follows `aba` (L 3), penalty base^3: -8 with base -2 raises b's logit by 8; with base 0 it is 0; llama.cpp
    # (base < 1: DRY off) leaves every logit
    assert _run("ababa", "base-below-one:applied", base=-2.0, allowed_length=0)[1] == 8.0
    assert _run("ababa", "base-below-one:applied", base=0.5, allowed_length=0)[1] == -0.125
    assert _run("ababa", "base-below-one:applied", base=0.0, allowed_length=0) == [-1.0, 0.0, 0.0]
    assert _run("ababa", base=-2.0, allowed_length=0) == [0.0, 0.0, 0.0]


def test_the_registry_names_parse_and_compose():
    for m in REGISTRY:
        for name in instances(m.name):
            assert parse(name)[0] == m.name.removesuffix(":N") and pattern(name) == m.name
    assert BY_PATTERN["match-cap:N"].numbers == tuple(range(1, 65))
    with pytest.raises(DeviationError):
        parse("match-cap:0")
    with pytest.raises(DeviationError):
        parse("no-such-thing")
    # two caps compose to the smaller, two minima to the larger
    cfg = compose(case_config(Case(history=(0,), alphabet=1, penalty_last_n=64)), ("match-cap:12", "match-cap:13", "repeat-min:2",
                                                               "repeat-min:1"))
    assert (cfg.match_cap, cfg.repeat_min) == (12, 2)
    # a numbered model's meaning names its number, in the singular for one
    from dryz.oracle.deviations import meaning
    assert meaning("match-cap:12") == "a repeat counts at most 12 tokens"
    assert meaning("repeat-min:1") == "a repeat shorter than 1 token is never penalized, whatever allowed_length"
    assert meaning("raises-window:1") == "a window of 1 token raises instead of answering"
    assert meaning("raises-window:20") == "a window of 1..20 tokens raises instead of answering"
    assert meaning("occurrence-cap:1") == "only the latest occurrence of the last token is extended"
    for m in REGISTRY:  # no plural after a numbered model's number one
        for name in instances(m.name)[:1] if m.name.endswith(":N") else ():
            assert not re.search(r"\b1 (tokens|occurrences)\b", meaning(name)), meaning(name)


def test_every_property_s_probes_tell_every_model_registered_for_it_from_llama_cpp():
    """Probe adequacy: for every property and every model (every number of a numbered one) it claims, some probe
    of that property has another answer under llama.cpp's DRY with the model than without it; and every model of
    the registry is claimed by exactly one property (those acting only on a real vocabulary's breakers by none)."""
    from dryz.causes import items, prediction, same_prediction
    claimed = [m for p in PROPERTIES for m in p.explains]
    assert sorted(claimed) == sorted(m.name for m in REGISTRY if m.kind not in ("vocab", "layer"))
    blind = []
    for p in PROPERTIES:
        probes = [c for probe in p.probes() for c in items(probe)]
        plain = [prediction(c, ()) for c in probes]
        for pat in p.explains:
            for m in instances(pat):
                if all(same_prediction(prediction(c, (m,)), x) for c, x in zip(probes, plain)):
                    blind.append((p.name, m))
    assert blind == []


def test_compose_is_apply_in_turn_and_a_variant_that_changes_nothing_is_not_tried():
    """compose() (one new Config for a fitted set) equals apply() of each model in turn, field for field; and
    deviations.variants tries a declared variant only where its normal form (Config.normal) differs from the
    configuration's and the earlier variants': two configurations with one normal form predict the same."""
    from dataclasses import fields

    from dryz.causes import candidates
    from dryz.config import symbol_tokenize
    from dryz.oracle.deviations import variants
    rng = np.random.default_rng(7)
    pool = candidates() + ["window-context:64", "finite-penalty:saturate"]
    for _ in range(3000):
        case = Case(history=(), alphabet=3, multiplier=float(rng.choice([0.8, -1.0, 0.0])),
                    base=float(rng.choice([1.75, 0.5, 1.0, -2.0])), allowed_length=int(rng.choice([-1, 0, 2])),
                    penalty_last_n=int(rng.choice([-3, -1, 0, 5, 64])),
                    breakers=tuple(rng.choice(["a", "bc", "abc", ""], size=int(rng.integers(0, 3)))))
        cfg = case_config(case, int(rng.choice([7, 8])))
        names = [str(n) for n in rng.choice(pool, size=int(rng.integers(1, 8)), replace=False)]
        one = cfg
        for name in names:
            one = apply(one, name, case.breakers, symbol_tokenize)
        folded = compose(cfg, names, case.breakers, symbol_tokenize)
        assert [getattr(one, f.name) for f in fields(one)] == [getattr(folded, f.name) for f in fields(folded)]
        assert (one.enabled, one.window_cap) == (folded.enabled, folded.window_cap)
        # the normal form predicts what the configuration does, on histories of every kind
        for _ in range(3):
            h = tuple(int(x) for x in rng.integers(0, 3, size=int(rng.integers(1, 12))))
            c = Case(history=h, alphabet=3, multiplier=case.multiplier, base=case.base,
                     allowed_length=case.allowed_length, penalty_last_n=case.penalty_last_n, breakers=case.breakers)
            a, b = _composed(c, folded), _composed(c, folded.normal())
            assert type(a) is type(b) and (isinstance(a, composed.Raises) or (
                np.array_equal(_bits(a[0]), _bits(b[0])) and a[1] == b[1]))
    # exllamav2's declared pair: with penalty_last_n 64 and one-token breakers neither changes anything, so none is
    # tried; a window of 0 keeps window-zero:unlimited; a breaker of two tokens keeps single-token-breakers
    declared = ("single-token-breakers", "window-zero:unlimited")

    def tried(**kw):
        case = Case(history=(0,), alphabet=3, **{"penalty_last_n": 64, "breakers": ("a",), **kw})
        return [name for name, _ in variants(case_config(case), declared, case.breakers, symbol_tokenize)]

    assert tried() == []
    assert tried(penalty_last_n=0) == ["declared-window-zero:unlimited"]
    assert tried(breakers=("ab",)) == ["declared-single-token-breakers"]
    assert tried(breakers=("ab",), penalty_last_n=0) == [
        "declared-single-token-breakers", "declared-window-zero:unlimited",
        "declared-single-token-breakers+window-zero:unlimited"]
