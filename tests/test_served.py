"""The served semantics (dryz/oracle/served.py) and the softmax inversion (dryz/oracle/softmax.py): pure, no
server. The llama-server end to end is tests/test_server.py."""

from __future__ import annotations

import math

import pytest

from dryz.case import Case
from dryz.oracle import served
from dryz.oracle import softmax as sm
from dryz.symbols import SYMBOLS, from_symbols

SYMBOL_TEXTS = [s.encode() for s in SYMBOLS]
SOURCE_EXAMPLE = from_symbols("abccbcyabc")


def seed_case(history, **kw):
    kw.setdefault("alphabet", 25)
    return Case(history=tuple(history), penalty_last_n=kw.pop("penalty_last_n", 64), **kw)


def test_request_for_the_seed_case_is_what_a_front_end_sends():
    body = served.request_for(seed_case(SOURCE_EXAMPLE), SYMBOL_TEXTS)
    assert body == {"prompt": SOURCE_EXAMPLE, "n_predict": 1, "samplers": ["dry"], "post_sampling_probs": True,
                    "dry_multiplier": 1.0, "dry_base": 2.0, "dry_allowed_length": 1, "dry_penalty_last_n": 64}
    # no breakers on the symbol vocabulary: the field is left out (the server's four defaults are inert there)
    assert served.inert_breakers(SYMBOL_TEXTS)
    assert not served.inert_breakers(SYMBOL_TEXTS + [b"a:b"])
    assert served.request_for(seed_case(SOURCE_EXAMPLE), None)["dry_sequence_breakers"] == []
    assert served.request_for(seed_case(SOURCE_EXAMPLE, breakers=("c",)))["dry_sequence_breakers"] == ["c"]


def test_served_params_base_below_one_becomes_the_default():
    out = served.served_params({"prompt": [0], "dry_base": 0.5, "dry_multiplier": 1})
    assert isinstance(out, served.Effective) and out.base == 1.75 and out.multiplier == 1.0
    assert served.served_params({"prompt": [0], "dry_base": 0.5}, {"dry_base": 3.0}).base == 3.0
    assert served.served_params({"prompt": [0], "dry_base": 1.0}).base == 1.0


@pytest.mark.parametrize("name", ["dry_penalty_last_n", "dry_allowed_length"])
def test_served_params_hard_limits(name):
    out = served.served_params({"prompt": [0], name: -1})
    assert out == served.Refused(400, f"Field '{name}': Value must be between 0 <= value <= 2147483647, "
                                      "but got -1")
    # nlohmann's static_cast: an int64 wraps modulo 2^32, a double truncates toward zero
    assert getattr(served.served_params({"prompt": [0], name: 4294967297}), name.split("dry_")[1]
                   .replace("penalty_last_n", "penalty_last_n")) == 1
    eff = served.served_params({"prompt": [0], name: -0.5})
    assert isinstance(eff, served.Effective)
    assert (eff.allowed_length if name == "dry_allowed_length" else eff.penalty_last_n) == 0
    assert isinstance(served.served_params({"prompt": [0], name: 2 ** 31}), served.Refused)


def test_served_params_breakers_and_defaults():
    refused = served.served_params({"prompt": [0], "dry_sequence_breakers": []})
    assert refused == served.Refused(400, "Field 'dry_sequence_breakers': Error: dry_sequence_breakers must be a "
                                          "non-empty array of strings")
    assert refused.body()["error"]["type"] == "invalid_request_error"
    # a value of another type is read as the empty default, so it is refused the same way
    assert isinstance(served.served_params({"prompt": [0], "dry_sequence_breakers": "c"}), served.Refused)
    eff = served.served_params({"prompt": [0]})
    assert eff.breakers == ("\n", ":", "\"", "*")
    assert (eff.multiplier, eff.base, eff.allowed_length, eff.penalty_last_n) == (0.0, 1.75, 2, 64)
    assert eff.samplers == tuple(served.DEFAULT_SAMPLERS)
    assert served.served_params({"prompt": [0], "dry_sequence_breakers": None}).breakers == eff.breakers


def test_served_params_multiplier_clamp_samplers_prompt():
    assert served.served_params({"prompt": [0], "dry_multiplier": 1e39}).multiplier == served.FLT_MAX
    assert served.served_params({"prompt": [0], "dry_multiplier": -1e39}).multiplier == -served.FLT_MAX
    eff = served.served_params({"prompt": [0], "samplers": ["DRY", "Temp", "nope", "top-k"]})
    assert eff.samplers == ("dry", "temperature", "top_k")
    assert served.served_params({"prompt": []}) == served.Refused(400, '"prompt" must not be empty')
    with pytest.raises(served.RequestError):
        served.served_params({"prompt": "abc"})


def test_served_outcome_classes():
    base = seed_case(SOURCE_EXAMPLE, base=0.5)
    o = served.served_outcome(base, SYMBOL_TEXTS)
    assert o.classes == ("served-base-replaced",) and o.effective_case.base == 1.75
    assert o.effective_case.history == base.history
    assert served.served_outcome(seed_case(SOURCE_EXAMPLE), SYMBOL_TEXTS).classes == ()
    assert served.served_outcome(seed_case(SOURCE_EXAMPLE, penalty_last_n=-1), SYMBOL_TEXTS).classes == \
        ("served-window-refused",)
    assert served.served_outcome(seed_case(SOURCE_EXAMPLE, allowed_length=-1), SYMBOL_TEXTS).classes == \
        ("served-allowed-refused",)
    assert served.served_outcome(seed_case(SOURCE_EXAMPLE), None).classes == ("served-breakers-required",)
    assert served.served_outcome(seed_case(()), SYMBOL_TEXTS).classes == ("served-empty-prompt",)
    assert set(served.CLASSES) == set(served.DESCRIPTIONS)


# -- the softmax inversion ------------------------------------------------------------------------------------

def _invert(logits, T):
    """Each logit's preimage from the probabilities the chain gives (token 0: the anchor at 0)."""
    ps = sm.probs(logits, T)
    S_lo, S_hi = sm.sum_interval(ps[0])
    return [sm.preimage(p, T, 0.0, S_lo, S_hi) for p in ps]


def test_seed_penalties_are_one_float_at_their_temperature():
    # the anchor (0), an unpenalised candidate (0), penalties 1..32 at T = 1/2, 64..256 at T = 4, 512 at 32
    for T, pens in ((0.5, [1, 2, 4, 8, 16, 32]), (4.0, [64, 128, 256]), (32.0, [512])):
        logits = [0.0, 0.0] + [-float(p) for p in pens]
        iv = _invert(logits, T)
        for z, (lo, hi) in zip(logits[2:], iv[2:]):
            assert lo == hi == z, (T, z, lo, hi)
        lo, hi = iv[1]
        assert lo < 0.0 < hi and sm.width(lo, hi) > 1  # the maximum: an interval that holds the initial 0


def test_what_float32_softmax_cannot_resolve():
    # at T = 1 a penalty of 1 (|z'| = 1) is three floats (the reason for T = 1/2); past ~103 it is p = 0
    lo, hi = _invert([0.0, -1.0], 1.0)[1]
    assert sm.width(lo, hi) == 3 and lo <= -1.0 <= hi
    lo, hi = _invert([0.0, -128.0], 1.0)[1]
    assert lo == -math.inf and -128.0 < hi < -100.0


def test_key_order_and_forward_model():
    xs = [-math.inf, -1.0, -0.0, 0.0, sm.f32(1e-45), 1.0, math.inf]
    assert [sm.key(x) for x in xs] == sorted(sm.key(x) for x in xs)
    assert all(sm.unkey(sm.key(x)) == x for x in xs)
    assert sm.probs([0.0, 0.0]) == [0.5, 0.5]


def test_one_float_from_two_to_eighty_seven():
    """Every |z'| in [2, 87] (z' = (z - max) / T) is one float32 after the softmax, whatever else is at the
    maximum (1, 3 or 64 tokens); that range is what the subject's temperatures aim for."""
    import random
    rng = random.Random(7)
    for n_max in (1, 3, 64):
        for _ in range(150):
            z = -sm.f32(2 ** rng.uniform(1, math.log2(87)))
            iv = _invert([0.0] * n_max + [z], 1.0)[-1]
            assert iv == (z, z), (n_max, z, iv)
