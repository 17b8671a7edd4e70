"""The Case's one JSON form and its validation."""

import json
import math

import pytest

from dryz.case import Case, CaseError, f32


def test_json_round_trip():
    c = Case(history=(0, 1, 0), alphabet=2, penalty_last_n=-1, breakers=("ab",), multiplier=f32(0.8),
             base=f32(1.1), allowed_length=0, candidates=((1, -math.inf), (0, 2.5)), sorted=True)
    assert Case.loads(c.dumps()) == c
    d = json.loads(c.dumps())
    assert d["history_symbols"] == "aba" and d["candidates"][0] == [1, "-inf"]


@pytest.mark.parametrize("patch,fragment", [
    ({"alphabet": 0}, "alphabet must be an integer in 1..64"),
    ({"history": [0, 5]}, "outside the alphabet"),
    ({"history": [0, -1]}, "outside the alphabet"),
    ({"history": [300]}, "outside the alphabet"),
    ({"history": "abc"}, "'history' must be a list"),
    ({"multiplier": 1e39}, "it rounds to inf as a float32"),
    ({"base": float("inf")}, "must be a finite float32"),
    ({"penalty_last_n": 1 << 40}, "does not fit the C int32"),
    ({"penalty_last_n": (1 << 31) - 1}, "would allocate"),
    ({"allowed_length": 1 << 30}, "allowed_length must be within"),
    ({"breakers": ["a?"]}, "outside the dryz alphabet"),
    ({"candidates": [[0, 0.0], [0, 1.0]]}, "appears twice"),
    ({"candidates": [[64, 0.0]]}, "outside the vocabulary"),
    ({"candidates": [[-1, 0.0]]}, "outside the vocabulary"),
    ({"candidates": [[0, "nan"]]}, "must be a number"),
    ({"history_symbols": "zz"}, "does not spell"),
    ({"schema": "other/9"}, "unknown case schema"),
    ({"bogus": 1}, "unknown case field"),
])
def test_bad_json_is_one_clear_error(patch, fragment):
    d = {"history": [0, 1], "alphabet": 2, "penalty_last_n": 8}
    d.update(patch)
    with pytest.raises(CaseError) as e:
        Case.from_json(d)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_missing_field():
    with pytest.raises(CaseError, match="missing required field 'alphabet'"):
        Case.from_json({"history": [], "penalty_last_n": 3})
    with pytest.raises(CaseError, match="not valid JSON"):
        Case.loads("{")


@pytest.mark.parametrize("fields,fragment", [
    ({"history": (0, 1.0)}, "history token 1.0 is not an integer"),
    ({"history": (0, 9)}, "history token 9 is outside the alphabet"),
    ({"candidates": ((1.0, 0.0),)}, "candidate id 1.0 is not an integer"),
])
def test_constructor_names_what_it_refuses(fields, fragment):
    """Cases built in Python (not from JSON) are refused with the same one-line reasons."""
    with pytest.raises(CaseError) as e:
        Case(**{"history": (0, 1), "alphabet": 2, "penalty_last_n": 4, **fields})
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_usual_parameters_are_rounded_to_float32_and_recorded_both_ways():
    """multiplier 0.8, base 1.1 (llama.cpp's usual values) are taken as written and rounded to the float32 the
    C float parameter receives; the JSON keeps both; a reduction that changes the value drops the old spelling."""
    from dataclasses import replace
    c = Case.from_json({"history": [0, 0], "alphabet": 1, "penalty_last_n": 4, "multiplier": 0.8, "base": 1.1,
                        "allowed_length": 0})
    assert c.multiplier == 0.800000011920929 and c.base == 1.100000023841858
    d = c.to_json()
    assert d["multiplier"] == c.multiplier and d["as_written"] == {"multiplier": 0.8, "base": 1.1}
    assert Case.from_json(d) == c and Case.from_json(d).as_written == c.as_written
    assert replace(c, multiplier=1.0).as_written == (("base", 1.1),)
    with pytest.raises(CaseError, match="too large for a float32"):
        Case.from_json({"history": [0], "alphabet": 1, "penalty_last_n": 4, "multiplier": 10 ** 400})
