"""Traces: the schema (dryz/trace.py), the driver (dryz/subject/trace_driver.py), the state model and verdict
(dryz/oracle/trace_model.py), the enumerator, the fuzz decoder, the shrinker, and the planted
reset-keeps-tokens bug (tests/patches/reset-keeps-tokens.diff: llama_sampler_dry_reset leaves the ring buffer
as it was), which only a trace can show.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from dryz.enumerate.traces import CONFIGS, count_traces, enumerate_traces, iter_traces
from dryz.fuzz.traces import MAX_APPLIES, MAX_CLONES, MAX_EVENTS, MAX_TOKENS, decode_trace
from dryz.oracle.trace_model import capacity, check_trace, equivalent_cases, held_tokens
from dryz.shrink import flatten, merge, shrink_trace
from dryz.subject.trace_driver import run_trace
from dryz.trace import MAX_CLONES as TRACE_MAX_CLONES
from dryz.trace import TRACE_SCHEMA, Trace, TraceError

PATCHES = Path(__file__).parent / "patches"
REQUIRE = os.environ.get("DRYZ_REQUIRE_BUILDS") == "1"
A, B, C = 0, 1, 2


def T(events, alphabet=3, penalty_last_n=64, **kw) -> Trace:
    return Trace(events=tuple(events), alphabet=alphabet, penalty_last_n=penalty_last_n, **kw)


# -- the schema --------------------------------------------------------------------------------------------


def test_json_round_trip_every_event_kind():
    t = T([("accept", [A, B, C]), ("apply", None), ("clone",), ("reset",),
           ("apply", [(2, 0.5), (0, -math.inf)], True), ("accept", (B,)), ("apply", [[1, 3.0]], False), ("free",)],
          breakers=("c", "ab"), multiplier=0.8, base=1.75, allowed_length=2, n_ctx_train=128, note="hand")
    d = json.loads(t.dumps())
    assert d["schema"] == TRACE_SCHEMA == "dryz.trace/1"
    assert d["events"] == [["accept", [0, 1, 2]], ["apply", None], ["clone"], ["reset"],
                           ["apply", [[2, 0.5], [0, "-inf"]], True], ["accept", [1]], ["apply", [[1, 3.0]]],
                           ["free"]]
    assert d["spelled"] == "+abc A C R A* +b A* F"
    assert d["n_ctx_train"] == 128 and d["note"] == "hand"
    back = Trace.loads(t.dumps())
    assert back == t and back.dumps() == t.dumps()
    # normal forms: lists become tuples, a false sorted flag is dropped, multiplier/base are float32
    assert t.events[6] == ("apply", ((1, 3.0),)) and t.events[0] == ("accept", (0, 1, 2))
    assert t.multiplier == 0.800000011920929 and t.applies == [1, 4, 6] and t.size() == (8, 4)


def test_defaults_are_omitted_and_restored():
    t = T([("apply", None)])
    d = t.to_json()
    assert "n_ctx_train" not in d and "note" not in d
    assert Trace.from_json({"schema": "dryz.trace/1", "alphabet": 3, "penalty_last_n": 64,
                            "events": [["apply", None]]}) == t


BAD = [
    ([("jump",)], "unknown event 'jump'"),
    ([("apply", None), ("accept", [3])], "accept token 3 is outside the alphabet 0..2"),
    ([("accept", [-1]), ("apply", None)], "accept token -1 is outside the alphabet"),
    ([("accept", [0, 1])], "at least one apply"),
    ([("apply", None), ("free",), ("apply", None)], "free must be the last event"),
    ([("accept", []), ("apply", None)], "accept with no tokens"),
    ([("accept", ["a"]), ("apply", None)], "is not an integer"),
    ([("accept", [True]), ("apply", None)], "is not an integer"),
    ([("apply", None, True)], "sorted flag needs an explicit candidate array"),
    ([("apply", [(1, 0.0), (1, 2.0)])], "candidate id 1 appears twice"),
    ([("apply", [(64, 0.0)])], "candidate id 64 is outside the vocabulary"),
    ([("apply", [(0, math.nan)])], "must be a finite float32 or -inf"),
    ([("apply", [])], "must not be empty"),
    ([("reset", 1), ("apply", None)], "reset takes no arguments"),
    (["apply"], "an event is a non-empty tuple"),
    ([("clone",)] * (TRACE_MAX_CLONES + 1) + [("apply", None)], "clones 65 times"),
    ([("apply", None)] * ((1 << 14) + 1), "at most 16384"),
]


@pytest.mark.parametrize("events,message", BAD, ids=[m[:30] for _, m in BAD])
def test_validation_refuses_with_one_error_type(events, message):
    with pytest.raises(TraceError) as e:
        T(events)
    assert message in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("fields,message", [
    (dict(alphabet=0), "alphabet must be an integer in 1..64"),
    (dict(penalty_last_n=1 << 21), "is above 1,048,576"),
    (dict(breakers=("a?",)), "outside the dryz alphabet"),
    (dict(multiplier=math.inf), "must be a finite float32"),
    (dict(penalty_last_n=1 << 20, events=[("clone",)] * 40 + [("apply", None)]), "would hold"),
])
def test_configuration_is_validated(fields, message):
    kw = dict(events=[("apply", None)], alphabet=3, penalty_last_n=64) | fields
    with pytest.raises(TraceError, match=message.replace("?", r"\?")):
        Trace(**{**kw, "events": tuple(kw["events"])})


@pytest.mark.parametrize("text,message", [
    ("[1]", "must be a JSON object"),
    ('{"schema": "dryz.trace/2", "alphabet": 2, "penalty_last_n": 4, "events": [["apply", null]]}',
     "unknown trace schema"),
    ('{"schema": "dryz.trace/1", "alphabet": 2, "penalty_last_n": 4, "events": [["apply", null]], "x": 1}',
     "unknown trace field"),
    ('{"schema": "dryz.trace/1", "alphabet": 2, "events": [["apply", null]]}', "missing required field"),
    ('{"schema": "dryz.trace/1", "alphabet": 2, "penalty_last_n": 4, "events": [["apply", null]], '
     '"spelled": "R"}', "'spelled' does not spell"),
    ('{"schema": "dryz.trace/1", "alphabet": 2, "penalty_last_n": 4, "events": [["apply", [[0, "inf"]]]]}',
     "must be a number"),
    ('{"schema": "dryz.trace/1"', "not valid JSON"),
])
def test_json_errors(text, message):
    with pytest.raises(TraceError, match=message):
        Trace.loads(text)


# -- the state model ----------------------------------------------------------------------------------------


def test_model_ring_buffer_reset_and_clone_by_hand():
    # capacity 3: the buffer keeps the last 3 tokens; reset empties it; a clone carries its original's tokens
    t = T([("accept", [A, B, C, A]), ("apply", None), ("clone",), ("accept", [B]), ("apply", None),
           ("reset",), ("apply", None), ("accept", [C]), ("clone",), ("clone",), ("accept", [A, A]),
           ("apply", None), ("free",)], penalty_last_n=3)
    assert capacity(t) == 3
    assert held_tokens(t) == [(B, C, A), (C, A, B), (), (C, A, A)]
    cases = equivalent_cases(t)
    assert [c.history for c in cases] == held_tokens(t)
    assert all(c.penalty_last_n == 3 and c.candidates is None for c in cases)


@pytest.mark.parametrize("fields,abi,cap", [
    (dict(penalty_last_n=64), 7, 64), (dict(penalty_last_n=0), 7, 0), (dict(penalty_last_n=-1), 7, 0),
    (dict(penalty_last_n=5, multiplier=0.0), 7, 0), (dict(penalty_last_n=5, base=0.5), 7, 0),
    (dict(penalty_last_n=-1, n_ctx_train=100), 8, 100), (dict(penalty_last_n=7, n_ctx_train=4), 8, 7),
    (dict(penalty_last_n=0), 8, 0),
])
def test_capacity_as_init_dry_sets_it(fields, abi, cap):
    t = Trace(events=(("accept", (0,) * 9), ("apply", None)), alphabet=2, **({"penalty_last_n": 64} | fields))
    assert capacity(t, abi) == cap
    assert held_tokens(t, abi) == [(0,) * min(9, cap)]


def test_check_trace_on_the_sources_example(lib):
    # a b c c b c, then a clone continues with y a b c: the source's example, c:3 b:1 y:2
    t = T([("accept", [0, 1, 2, 2, 1, 2]), ("apply", None), ("clone",), ("accept", [24, 0, 1, 2]),
           ("apply", None), ("reset",), ("accept", [0, 0]), ("apply", None), ("free",)], alphabet=26)
    v = check_trace(t, lib)
    assert v.status == "agree" and v.first_bad_apply is None and v.ok
    L = [a.verdict.library_L for a in v.applies]
    assert L[0][:3] == [0, 1, 2] and not any(L[0][3:])
    assert {i: x for i, x in enumerate(L[1]) if x} == {1: 1, 2: 3, 24: 2}
    assert {i: x for i, x in enumerate(L[2]) if x} == {0: 1}  # after reset only a a
    assert all(a.fresh_equal for a in v.applies)
    assert [a.event for a in v.applies] == [1, 4, 7]


def test_generation_loop_with_custom_arrays_agrees(lib):
    rng = random.Random(7)
    events = [("accept", tuple(rng.randrange(4) for _ in range(20)))]
    for step in range(40):
        ids = rng.sample(range(6), 4)
        events.append(("apply", tuple((i, float(rng.choice([0.0, 1.5, -2.0]))) for i in ids), step % 3 == 0))
        events.append(("accept", (ids[0] % 4,)))
        if step in (13, 29):
            events.append(("clone",) if step == 13 else ("reset",))
    t = T(events, alphabet=4, penalty_last_n=9, breakers=("d",), allowed_length=2, multiplier=0.8, base=1.75)
    v = check_trace(t, lib)
    assert v.status == "agree" and len(v.applies) == 40 and all(a.fresh_equal for a in v.applies)
    assert any(a.verdict.differing == [] and (a.verdict.observed_array != a.case.logits).any() for a in v.applies)


def test_a_wrong_output_is_flagged_at_its_apply(lib):
    t = T([("accept", [0, 0]), ("apply", None), ("accept", [0]), ("apply", None)])
    outs = run_trace(t, lib)
    outs[1].logits[0] += 1.0  # as a library that forgot part of the penalty at the second apply would
    v = check_trace(t, lib, outputs=outs)
    assert v.status == "mismatch" and v.first_bad_apply == 1
    assert v.applies[1].fresh_equal is False and v.applies[0].status == "agree"
    assert v.signature()[1] == ("mismatch", ((0, "less"),))


class _FakeLib:
    """Records what the driver does with samplers: ids from a counter, frees counted."""
    abi = 7

    def __init__(self, fail_at_apply=None):
        self.next, self.freed, self.live, self.fail_at_apply, self.applies = 1, [], set(), fail_at_apply, 0

    def new_sampler(self, *a, **kw):
        s = self.next
        self.next += 1
        self.live.add(s)
        return s

    def clone(self, s):
        assert s in self.live
        return self.new_sampler()

    def accept(self, s, t):
        assert s in self.live

    def reset(self, s):
        assert s in self.live

    def apply_once(self, s, ids, logits, sorted_flag):
        assert s in self.live
        self.applies += 1
        if self.applies == self.fail_at_apply:
            raise RuntimeError("planted")
        return ("out", s)

    def free(self, s):
        assert s in self.live, f"sampler {s} freed twice or never made"
        self.live.remove(s)
        self.freed.append(s)


@pytest.mark.parametrize("fail", [None, 2])
def test_driver_frees_every_sampler_exactly_once(fail):
    t = T([("apply", None), ("clone",), ("clone",), ("apply", None), ("clone",), ("reset",), ("apply", None),
           ("free",)])
    fake = _FakeLib(fail)
    if fail:
        with pytest.raises(RuntimeError):
            run_trace(t, fake)
        assert fake.freed == [3, 2, 1]  # the current, then the kept originals newest first
    else:
        assert run_trace(t, fake) == [("out", 1), ("out", 3), ("out", 4)]
        assert fake.freed == [4, 3, 2, 1]  # the free event, then the originals
    assert not fake.live


def test_many_clones_run_and_free(lib):
    t = T([("accept", [0, 1])] + [("clone",), ("accept", [0])] * 64 + [("apply", None)], penalty_last_n=5)
    (out,) = run_trace(t, lib)
    assert held_tokens(t) == [(0,) * 5] and check_trace(t, lib).ok


# -- the enumerator ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3])
def test_enumeration_counts_match_the_closed_form(k):
    for n in range(1, 6):
        seqs = list(iter_traces(n, k))
        assert len(seqs) == count_traces(n, k) == len(set(seqs))
        assert all(("apply", None) in s and ("free",) not in s[:-1] for s in seqs)
    assert count_traces(5, 2) == 2981 and count_traces(7, 2) == 89881 and count_traces(5, 2, free=False) == 2541


def test_enumeration_n5_agrees_on_the_pip_build(lib):
    r = enumerate_traces(5, 2, lib=lib)
    assert r["count_ok"] and r["disagreements"] == 0 and r["traces"] == 4 * 2981
    assert [c["config"] for c in r["configs"]] == list(CONFIGS)
    for c in r["configs"]:
        assert c["traces"] == 2981 and c["applies"] == 4297 and c["control_differences"] == 0
    assert r["wall_seconds"] < 10


# -- the fuzz decoder and the shrinker ---------------------------------------------------------------------------


def test_decoder_is_deterministic_valid_and_bounded():
    rng = random.Random(3)
    kinds = set()
    for _ in range(400):
        data = rng.randbytes(rng.randint(0, 700))
        t = decode_trace(data)
        assert decode_trace(data) == t
        assert Trace.loads(t.dumps()) == t  # valid: it survives validation again
        ev, tokens = t.size()
        assert ev <= MAX_EVENTS and tokens <= MAX_TOKENS and len(t.applies) <= MAX_APPLIES
        assert sum(e[0] == "clone" for e in t.events) <= MAX_CLONES
        kinds |= {e[0] for e in t.events} | ({"breakers"} if t.breakers else set())
        kinds |= {"custom"} if any(e[0] == "apply" and e[1] is not None for e in t.events) else set()
    assert kinds == {"accept", "apply", "reset", "clone", "free", "breakers", "custom"}
    assert decode_trace(b"") == T([("apply", None)], alphabet=2, penalty_last_n=1, allowed_length=0)
    seed = T([("accept", [1]), ("apply", None)])
    assert decode_trace(seed.dumps().encode()) == seed


def _buggy_reset_predicate(t: Trace) -> bool:
    """A model-only stand-in for the planted bug: the held tokens differ from a model whose reset keeps them."""
    cap = capacity(t)
    held, cur = [], []
    for e in t.events:
        if e[0] == "accept":
            cur = (cur + list(e[1]))[-cap:] if cap else []
        elif e[0] == "apply":
            held.append(tuple(cur))
    return held != held_tokens(t)


def test_shrink_reaches_the_shortest_witness_without_a_library():
    t = T([("accept", [2, 1, 0, 1]), ("apply", None), ("clone",), ("accept", [1, 2]), ("reset",), ("apply", None),
           ("accept", [2]), ("apply", [(1, 0.0), (2, 1.0)], True), ("free",)], breakers=("c",), allowed_length=3)
    stats = {}
    s = shrink_trace(t, _buggy_reset_predicate, stats=stats)
    assert s.events == (("accept", (0,)), ("reset",), ("apply", None))
    assert (s.alphabet, s.penalty_last_n, s.breakers, s.allowed_length) == (1, 1, (), 0)
    assert stats["proved_shortest"] and stats["before"] == (9, 7) and stats["after"] == (3, 1)
    assert merge(flatten(T([("accept", [0, 1]), ("accept", [2]), ("apply", None)]))).events == (
        ("accept", (0, 1, 2)), ("apply", None))


def test_shrink_refuses_a_passing_input():
    with pytest.raises(ValueError):
        shrink_trace(T([("apply", None)]), lambda t: False)


# -- the planted bug: reset keeps the tokens ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def reset_keeps_tokens():
    from dryz.subject.build import BuildError, build
    try:
        return build("0.3.36", PATCHES / "reset-keeps-tokens.diff", log=lambda m: None)
    except (BuildError, OSError) as e:
        if REQUIRE:
            raise
        pytest.skip(f"cannot build libllama 0.3.36 + reset-keeps-tokens.diff: {str(e).splitlines()[0]}")


def _run(lib: Path, *args):
    env = {k: v for k, v in os.environ.items() if k not in ("DRYZ_LIB", "LLAMA_CPP_LIB_PATH", "DRYZ_FAULT")}
    env["DRYZ_LIB"] = str(lib)
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=600, env=env)


def test_reset_keeps_tokens_is_found_by_traces_only(reset_keeps_tokens, tmp_path):
    lib = reset_keeps_tokens
    # the single-apply certificate cannot see it: no case ever resets
    p = _run(lib, "dryz", "exhaustive", "--json", str(tmp_path / "main.json"))
    assert p.returncode == 0 and "CERTIFIED" in p.stdout, p.stdout + p.stderr
    # no trace of 3 events shows it; 18 of 4 events do, the first of each configuration `+a +a R A`
    p = _run(lib, "dryz.enumerate.traces", "-n", "3")
    assert p.returncode == 0 and "disagreements 0  wall" in p.stdout, p.stdout + p.stderr
    p = _run(lib, "dryz.enumerate.traces", "-n", "4", "--json", str(tmp_path / "t.json"))
    assert p.returncode == 1, p.stdout + p.stderr
    r = json.loads((tmp_path / "t.json").read_text())
    assert r["subject"]["built_by_dryz"]["patch"] == "reset-keeps-tokens.diff"
    assert {c["config"]: c["disagreements"] for c in r["configs"]} == {"base": 4, "window3": 4, "breaker": 2,
                                                                      "allowed0": 8}
    assert all(c["examples"][0]["spelled"] == "+a +a R A" for c in r["configs"])
    assert all(ex["status"] == "mismatch" for c in r["configs"] for ex in c["examples"])
    # shrink a longer witness: the shortest is one merged accept, the reset, the apply
    long = T([("accept", [0, 1, 0, 1]), ("apply", None), ("accept", [1]), ("apply", None), ("clone",), ("reset",),
              ("accept", [1, 0]), ("apply", None), ("clone",), ("apply", None), ("free",)], penalty_last_n=16,
             breakers=("c",))
    f = tmp_path / "long.json"
    f.write_text(long.dumps())
    p = _run(lib, "dryz.shrink_traces", str(f), "--json", str(tmp_path / "small.json"))
    assert p.returncode == 0, p.stdout + p.stderr
    small = Trace.loads((tmp_path / "small.json").read_text())
    assert small.spelled() == "+aa R A" and "shortest proven: True" in p.stdout
    # the same witness agrees on the pip build
    assert check_trace(small).ok
