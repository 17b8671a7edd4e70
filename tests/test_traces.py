"""Traces: the schema (dryz/trace.py), the drivers (LibLlama.run_trace: dryz/subject/_drive.c, and its ctypes
form dryz/subject/trace_driver.py), the state model (dryz/oracle/trace_model.py), the verdict
(dryz/trace_check.py), the enumerator, the fuzz decoder, the shrinker, and the planted
reset-keeps-tokens bug (tests/patches/reset-keeps-tokens.diff: llama_sampler_dry_reset leaves the ring buffer
as it was), which only a trace can show.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from dryz.enumerate.traces import enumerate_traces
from dryz.trace_space import CONFIGS, count_traces, iter_traces
from dryz.decode.traces import MAX_APPLIES, MAX_CLONES, MAX_EVENTS, MAX_TOKENS, decode_trace
from dryz.oracle.trace_model import capacity, equivalent_cases, held_tokens
from dryz.shrink import flatten, merge, shrink_trace
from dryz.subject.trace_driver import run_trace
from dryz.trace_check import check_trace
from dryz.trace import MAX_CLONES as TRACE_MAX_CLONES
from dryz.trace import TRACE_SCHEMA, Program, Trace, TraceError

import conftest

WITNESS = Path(__file__).parent.parent / "corpus" / "traces" / "agree-trace-b8f14250dc.json"
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
    r = enumerate_traces(5, lib, 2)
    assert r["count_ok"] and r["disagreements"] == 0 and r["traces"] == 4 * 2981
    assert [c["config"] for c in r["configs"]] == list(CONFIGS)
    for c in r["configs"]:
        assert c["traces"] == 2981 and c["applies"] == 4297 and c["control_differences"] == 0
    assert r["wall_seconds"] > 0  # its speed is bench's (README: dryz exhaustive --traces 7)


# -- the fuzz decoder and the shrinker ---------------------------------------------------------------------------


def test_decoder_is_deterministic_valid_and_bounded():
    rng = random.Random(3)
    kinds = set()
    for _ in range(400):
        data = rng.randbytes(rng.randint(0, 700))
        t = decode_trace(data)
        assert decode_trace(data) == t
        assert Trace.loads(t.dumps()) == t  # valid: it survives validation again
        assert t.program() == Program.of(t)  # the Program the decoder collected is the events'
        assert isinstance(t.events, tuple) and all(isinstance(e, tuple) for e in t.events)
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
    return conftest.build("0.3.36", "reset-keeps-tokens.diff")


def _run(lib: Path, *args):
    """python -m ARGS with DRYZ_LIB set to lib (dryz, or the fuzz harness module)."""
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=600,
                          env=conftest.clean_env(DRYZ_LIB=lib))


def test_reset_keeps_tokens_is_found_by_traces_only(reset_keeps_tokens, tmp_path, lib):
    pip, lib = lib, reset_keeps_tokens
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
    # minimize a longer witness through the normal command: events, tokens and configuration shrink to the
    # project corpus's witness, proven shortest in the enumerator's space, with per-pass statistics
    long = T([("accept", [0, 1, 0, 1]), ("apply", None), ("accept", [1]), ("apply", None), ("clone",), ("reset",),
              ("accept", [1, 0]), ("apply", None), ("clone",), ("apply", None), ("free",)], alphabet=2,
             penalty_last_n=16, breakers=("c",))
    f = tmp_path / "long.json"
    f.write_text(long.dumps())
    p = _run(lib, "dryz", "minimize", str(f), "--corpus", str(tmp_path / "c"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "reproducer: '+a R +b A' (4 events, 4 with one token per accept), shortest: proven" in p.stdout
    (written,) = (tmp_path / "c").glob("*.json")
    entry = json.loads(written.read_text())
    assert written.name == "mismatch-trace-b8f14250dc.json" and entry["expect"] == "mismatch"
    assert entry["provenance"]["passes"]["events"]["wins"] >= 1
    assert entry["provenance"]["original_events"] == 11 and entry["provenance"]["one_token_events"] == 4
    mine = json.loads(WITNESS.read_text())
    assert mine["trace"] == entry["trace"] and mine["expect"] == "agree" and mine["shortest"] == "proven"
    # the project corpus's witness: agree on the pip build, changed on this one, and only it
    assert check_trace(Trace.from_json(mine["trace"]), pip).ok
    p = _run(lib, "dryz", "replay")
    assert p.returncode == 1, p.stdout + p.stderr
    changed = [ln for ln in p.stdout.splitlines() if ln.startswith("CHANGED")]
    assert len(changed) == 1 and WITNESS.name in changed[0] and "expected agree, now mismatch" in changed[0]
    # the certificate with the trace space: a mismatch (exit 1), the counts equal to the closed form
    p = _run(lib, "dryz", "exhaustive", "--trace-events", "5", "--json", str(tmp_path / "cert.json"))
    assert p.returncode == 1 and p.stdout.startswith("dryz exhaustive: MISMATCH"), p.stdout + p.stderr
    r = json.loads((tmp_path / "cert.json").read_text())
    assert r["verdict"] == "mismatch" and r["checks"]["trace_counts"] and r["totals"]["mismatches"] == 0
    assert {c["config"]: c["disagreements"] for c in r["traces"]["configs"]} == {
        "base": 82, "window3": 82, "breaker": 38, "allowed0": 148}
    assert "  witness (base): mismatch at apply 0: +a +a R A" in p.stdout


# -- traces through the normal commands (pip build) ------------------------------------------------------------


def _dryz(*args, **kw):
    return conftest.dryz(*args, timeout=300, **kw)


def test_exhaustive_with_traces_certifies_and_records_the_trace_space(tmp_path):
    out = tmp_path / "main.json"
    p = _dryz("exhaustive", "-k", "2", "-n", "4", "--trace-events", "4", "--json", str(out))
    assert p.returncode == 0 and p.stdout.startswith("dryz exhaustive: CERTIFIED"), p.stdout + p.stderr
    r = json.loads(out.read_text())
    tr = r["traces"]
    assert (tr["n_max"], tr["alphabet"], tr["free"], tr["traces"], tr["applies"]) == (4, 2, True, 4 * 511, 4 * 672)
    assert [c["config"] for c in tr["configs"]] == list(CONFIGS) and tr["disagreements"] == 0
    assert all(c["traces"] == c["expected_traces"] == 511 and not c["examples"] for c in tr["configs"])
    assert r["checks"]["trace_counts"] is True and r["verdict"] == "certified"
    assert "  base      last_n=64   traces       511 (closed form 511)  applies       672  disagreements 0" in p.stdout


def test_certificate_judge_reads_the_trace_section():
    from dryz.enumerate.certificate import judge
    r = {"space": {"expected_cases": None}, "configs": [], "controls": {
        "periodic": {"passed": True}, "multiplier_zero": {"passed": True}},
        "traces": {"n_max": 3, "alphabet": 2, "free": True, "configs": [
            {"traces": count_traces(3, 2), "disagreements": 0}, {"traces": count_traces(3, 2), "disagreements": 0}]}}
    r["configs"] = [{"off_by_one_flagged": 1, "penalized_cases": 1, "mismatches": 0, "oracle_disagreements": 0,
                     "cases": 0}]
    assert judge(r) == ("certified", {"periodic_oracles": True, "off_by_one": True, "multiplier_zero": True,
                                      "trace_counts": True})
    r["traces"]["configs"][1]["disagreements"] = 2
    assert judge(r)[0] == "mismatch"
    r["traces"]["configs"][0]["traces"] -= 1  # a walk that lost a trace: the harness is in doubt
    assert judge(r)[0] == "void" and judge(r)[1]["trace_counts"] is False
    r["traces"]["configs"][0]["traces"] += 1
    r["traces"]["free"] = False  # the closed form is recomputed from the section, not read from it
    assert judge(r)[0] == "void"


@pytest.mark.parametrize("args,message", [
    (["--trace-events", "0"], "--trace-events must be in 1..9 events, got 0"),
    (["--trace-events", "10"], "--trace-events must be in 1..9 events, got 10"),
    (["--trace-events", "3", "--shard", "1/2"], "--trace-events runs with a whole, fresh space (not with --shard or --resume)"),
])
def test_exhaustive_traces_bad_input(args, message):
    p = _dryz("exhaustive", *args)
    assert p.returncode == 2 and p.stderr == f"dryz: error: {message}\n" and p.stdout == ""


def test_trace_corpus_entry_loads_replays_and_keeps_case_entries(tmp_path, lib):
    from dryz.corpus import DEFAULT_DIR, CorpusError, dumps_readable, entries, file_name, load_entry, replay
    e = load_entry(WITNESS)
    assert e.case is None and e.trace.spelled() == "+a R +b A" and e.expect == "agree"
    assert (e.trace.alphabet, e.trace.penalty_last_n, e.trace.allowed_length) == (2, 2, 0)
    assert file_name(e.data) == WITNESS.name and dumps_readable(e.data) == WITNESS.read_text()
    every = [load_entry(p) for p in entries(DEFAULT_DIR)]
    assert sum(x.trace is not None for x in every) == 1
    for x in every:  # every case entry reads as before: a Case, its file name, its bytes
        if x.case is not None:
            assert x.trace is None and file_name(x.data) == x.path.name
            assert dumps_readable(x.data) == x.path.read_text()
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / WITNESS.name).write_text(WITNESS.read_text())
    rows = replay(tmp_path / "t", lib)
    assert [(r.expect, r.got, r.ok) for r in rows] == [("agree", "agree", True)]
    bad = dict(e.data, spelled="+a A")
    with pytest.raises(CorpusError, match="spelled '\\+a A' does not match the trace"):
        from dryz.corpus import validate_entry
        validate_entry(bad, "x")
    with pytest.raises(CorpusError, match="trace: event 0: accept token 7 is outside"):
        validate_entry(dict(e.data, trace=dict(e.data["trace"], events=[["accept", [7]], ["apply", None]],
                                               spelled="+h A"), spelled="+h A"), "x")


def test_check_and_explain_a_trace_file(tmp_path):
    p = _dryz("check", str(WITNESS))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["input"] == "trace corpus entry" and out["verdict"]["class"] == "agree"
    (a,) = out["verdict"]["applies"]
    assert (a["event"], a["case"]["history"], a["fresh_equal"], a["class"]) == (3, [1], True, "agree")
    p = _dryz("explain", str(WITNESS))
    assert p.returncode == 0, p.stderr
    assert "trace     +a R +b A" in p.stdout and "class     agree" in p.stdout
    assert "apply 0 (event 3): holds 'b'" in p.stdout and "fresh sampler identical" in p.stdout
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "dryz.trace/1", "alphabet": 2, "penalty_last_n": 4, "events": [["free"], '
                   '["apply", null]]}')
    for cmd in ("check", "explain", "minimize"):
        p = _dryz(cmd, str(bad))
        assert p.returncode == 2 and p.stderr == (f"dryz: error: {bad}: event 0: free must be the last event "
                                                  "(1 event(s) after it would act on a freed sampler)\n"), p.stderr
    p = _dryz("minimize", str(WITNESS), "--corpus", str(tmp_path / "c"))
    assert p.returncode == 2 and "the trace agrees with the oracles; nothing to minimize" in p.stderr
    crash = tmp_path / "crash-0123456789abcdef"
    crash.write_bytes(bytes(range(40)))
    p = _dryz("check", "--trace", str(crash))
    assert p.returncode == 0 and json.loads(p.stdout)["input"] == "trace fuzz input", p.stderr


def test_trace_reducer_runs_its_passes_by_fixpoint_and_proves_by_first_shorter():
    from dryz.shrink import TraceReducer
    t = T([("accept", [1, 1, 0]), ("apply", None), ("clone",), ("accept", [1]), ("reset",), ("accept", [1]),
           ("apply", None)], alphabet=2, penalty_last_n=9)
    r = TraceReducer(_buggy_reset_predicate)
    small, status, calls = r.minimize(t)
    assert small.spelled() == "+a R A" and status == "proven" and calls == r.calls > 0
    assert list(r.stats) == list(TraceReducer.PASSES) and r.stats["events"].wins >= 1
    assert all(s.runs >= 2 for s in r.stats.values())  # the fixpoint's last round changes nothing
    # the search is the enumerator's space: an explicit array puts a trace outside it (1-minimal, not proven)
    r2 = TraceReducer(lambda x: any(e[0] == "apply" and e[1] is not None for e in x.events))
    small2, status2, _ = r2.minimize(T([("accept", [0]), ("apply", [(0, 1.0)])]))
    assert status2 == "1-minimal" and small2.events == (("apply", ((0, 0.0),)),)


def test_fuzz_trace_target_and_campaign_switch(tmp_path, monkeypatch, lib):
    from dryz.fuzz.campaign import Campaign
    from dryz.fuzz import target
    seed = T([("accept", [0, 0]), ("apply", None), ("reset",), ("apply", None)], alphabet=2)
    target.test_one_trace(seed.dumps().encode())  # agrees on the pip build: no Finding
    for _ in range(20):
        target.test_one_trace(random.Random(_).randbytes(300))
    monkeypatch.delenv("DRYZ_FUZZ_TARGET", raising=False)
    assert target.entry_point() is target.test_one_input
    monkeypatch.setenv("DRYZ_FUZZ_TARGET", "traces")
    assert target.entry_point() is target.test_one_trace
    counts = {}
    for kind in ("cases", "traces"):
        c = Campaign(seconds=1, jobs=1, workdir=tmp_path / kind, artifacts=tmp_path / kind / "a", target=kind,
                     subject=lib)
        c.log = lambda m: None
        assert c.subject_env()["DRYZ_FUZZ_TARGET"] == kind
        seeds = sorted(c.seed().glob("*"))
        counts[kind] = len(seeds)
        if kind == "traces":  # every seed is a trace the decoder reads back (case entries as one-apply traces)
            assert all(decode_trace(s.read_bytes()).dumps() == s.read_text() for s in seeds)
    from dryz.corpus import DEFAULT_DIR, entries
    from dryz.corpus import load_entry
    loaded = [load_entry(p) for p in entries(DEFAULT_DIR)]
    symbol_cases = sum(1 for e in loaded if e.case is not None and e.case.vocab is None)
    traces = sum(1 for e in loaded if e.trace is not None)
    # real-vocabulary entries seed neither; the ABI confirmation case (dryz.enumerate.controls) seeds both
    assert counts == {"cases": symbol_cases + 1, "traces": symbol_cases + traces + 1}
    from dryz.enumerate.controls import abi_confirmation_case
    from dryz.trace import trace_of_case
    assert abi_confirmation_case().dumps() in {q.read_text() for q in (tmp_path / "cases" / "seeds").glob("*")}
    assert trace_of_case(abi_confirmation_case()).dumps() in {
        q.read_text() for q in (tmp_path / "traces" / "seeds").glob("*")}


# -- the C sequencer: LibLlama.run_trace and run_many ------------------------------------------------------------


def _same(a, b) -> bool:
    return (a.ids == b.ids and a.size == b.size and a.sorted == b.sorted
            and a.logits.astype("float32").tobytes() == b.logits.astype("float32").tobytes())


def test_c_sequencer_equals_the_ctypes_calls(lib):
    """LibLlama.run_trace (one call into _drive.run_trace) leaves what the ctypes driver's calls leave, apply by
    apply, bit for bit; run_batch and run_many (fresh samplers, or clones of one that never accepted a token)
    leave what run() leaves on every equivalent case."""
    import numpy as np
    rng = random.Random(11)
    applies = 0
    for _ in range(150):
        t = decode_trace(rng.randbytes(rng.randint(0, 700)))
        c_out, py_out = lib.run_trace(t), run_trace(t, lib)
        assert len(c_out) == len(py_out) == len(t.applies)
        assert all(_same(a, b) for a, b in zip(c_out, py_out))
        cases = equivalent_cases(t)
        fresh = [lib.run(c) for c in cases]
        assert all(_same(a, b) for a, b in zip(lib.run_batch(cases), fresh))
        p = t.program()
        hist = np.array([x for c in cases for x in c.history], dtype=np.int32)
        counts = np.array([len(c.history) for c in cases], dtype=np.int32)
        for clone in (False, True):
            got = lib.run_many(t.sampler_args(), t.n_ctx_train, hist, counts, p.ids, p.logits, p.sizes, p.sorted,
                               clone=clone).outputs()
            assert all(_same(a, b) for a, b in zip(got, fresh))
        applies += len(cases)
    assert applies > 3000


class _CountingTraceCalls:
    """llama_sampler_{init_dry,clone,accept,apply,reset,free} as ctypes callbacks that call the library's own and
    count: every sampler made must be freed exactly once, none used after its free."""

    def __init__(self, lib):
        import ctypes
        vp = ctypes.c_void_p
        real = lib.trace_addresses
        init_t = ctypes.CFUNCTYPE(vp, *lib.L.llama_sampler_init_dry.argtypes)
        r_init, r_clone = init_t(real[0]), ctypes.CFUNCTYPE(vp, vp)(real[1])
        r_accept = ctypes.CFUNCTYPE(None, vp, ctypes.c_int32)(real[2])
        r_apply, r_reset = ctypes.CFUNCTYPE(None, vp, vp)(real[3]), ctypes.CFUNCTYPE(None, vp)(real[4])
        r_free = ctypes.CFUNCTYPE(None, vp)(real[5])
        self.live, self.freed, self.calls, self.bad = set(), [], {}, 0

        def count(name):
            self.calls[name] = self.calls.get(name, 0) + 1

        def init(*a):
            s = r_init(*a)
            count("init")
            self.live.add(s)
            return s

        def clone(s):
            self.bad += s not in self.live
            c = r_clone(s)
            count("clone")
            self.live.add(c)
            return c

        def accept(s, t):
            self.bad += s not in self.live
            count("accept")
            r_accept(s, t)

        def apply(s, arr):
            self.bad += s not in self.live
            count("apply")
            r_apply(s, arr)

        def reset(s):
            self.bad += s not in self.live
            count("reset")
            r_reset(s)

        def free(s):
            self.bad += s not in self.live
            self.live.discard(s)
            self.freed.append(s)
            count("free")
            r_free(s)

        self.cbs = [init_t(init), ctypes.CFUNCTYPE(vp, vp)(clone), ctypes.CFUNCTYPE(None, vp, ctypes.c_int32)(accept),
                    ctypes.CFUNCTYPE(None, vp, vp)(apply), ctypes.CFUNCTYPE(None, vp)(reset),
                    ctypes.CFUNCTYPE(None, vp)(free)]
        self.fns = tuple(ctypes.cast(c, vp).value for c in self.cbs)


@pytest.mark.parametrize("events,calls", [
    ([("accept", [0, 1]), ("apply", None), ("clone",), ("clone",), ("apply", None), ("clone",), ("reset",),
      ("apply", None), ("free",)], {"init": 1, "clone": 3, "accept": 2, "apply": 3, "reset": 1, "free": 4}),
    ([("clone",), ("accept", [1]), ("apply", None)], {"init": 1, "clone": 1, "accept": 1, "apply": 1, "free": 2}),
])
def test_c_sequencer_frees_every_sampler_exactly_once(lib, events, calls):
    from dryz.subject import libllama
    if libllama._DRIVE is None:
        pytest.skip("the C sequencer is not built")
    t = T(events, breakers=("c",))
    cnt = _CountingTraceCalls(lib)
    p = t.program()
    args = (cnt.fns, lib.vocab_address, lib.abi, t.n_ctx_train, *t.sampler_args()[:4], t.breakers, p.ops, p.tokens,
            p.counts, p.ids, p.logits, p.sizes, p.sorted)
    libllama._DRIVE.run_trace(*args)
    assert cnt.calls == calls and not cnt.live and not cnt.bad
    # events the arrays do not match, or a free before the end: refused before the library is called
    for bad in ((b"pp",) + args[10:], (b"fp",) + args[10:], (p.ops,) + args[10:11] + (p.counts[:0],) + args[12:]):
        cnt = _CountingTraceCalls(lib)
        with pytest.raises(ValueError):
            libllama._DRIVE.run_trace(cnt.fns, *args[1:9], *bad)
        assert not cnt.calls


# -- the verdict: one batch per candidate array, the same classes as check() apply by apply ------------------------


def _reference_verdict(t, lib, outs):
    """The definition check_trace computes, apply by apply: check() on the equivalent Case with the recorded
    output, and a fresh sampler (run()) on that Case, bit-identical to it."""
    from dryz.verdict import AGREE, MISMATCH
    from dryz.judge import check
    from dryz.trace_check import _Recorded, same_output
    rows = []
    for case, out in zip(equivalent_cases(t, lib.abi), outs):
        v = check(case, lib=_Recorded(lib.abi, out))
        fresh = same_output(lib.run(case), out)
        klass = MISMATCH if v.status == AGREE and not fresh else v.klass
        status = MISMATCH if v.status == AGREE and not fresh else v.status
        rows.append((klass, status, fresh, v.to_json()))
    return rows


def test_check_trace_gives_every_apply_checks_class_and_the_fresh_control(lib):
    """check_trace (dryz/trace_check.py: the trace in one call, its applies judged as one ragged batch per
    candidate array, the fresh samplers in one call) against the definition, on random traces whose outputs
    are the library's or altered the ways a broken library would alter them (a logit, the sorted flag, an id)."""
    import numpy as np
    from dryz.subject.answers import Output
    rng = random.Random(21)
    classes = set()
    # 'a' completes inside the restart sequence 'aab': the documented contained-restart limitation
    contained = T([("accept", [1, 1, 0, 0, 1]), ("apply", None), ("accept", [1]), ("apply", None), ("clone",),
                   ("accept", [0, 0, 1]), ("apply", None), ("apply", [(1, 0.5), (0, 0.0)], True)], alphabet=2,
                  penalty_last_n=5, breakers=("aab", "a"), allowed_length=0)
    for n in range(250):
        t = contained if n == 0 else decode_trace(rng.randbytes(rng.randint(0, 800)))
        outs = lib.run_trace(t)
        for _ in range(rng.choice((0, 0, 1, 3))):
            k = rng.randrange(len(outs))
            o = outs[k]
            how = rng.random()
            if how < 0.5:
                lg = o.logits.copy()
                lg[rng.randrange(len(lg))] -= np.float32(rng.choice((1.0, 0.5, 1e30)))
                outs[k] = Output(o.ids, lg, o.sorted, o.size)
            elif how < 0.8:
                outs[k] = Output(o.ids, o.logits, not o.sorted, o.size)
            else:
                outs[k] = Output(o.ids[::-1], o.logits[::-1].copy(), o.sorted, o.size)
        v = check_trace(t, lib, outputs=outs)
        ref = _reference_verdict(t, lib, outs)
        assert [a.klass for a in v.applies] == [r[0] for r in ref], n
        assert [a.status for a in v.applies] == [r[1] for r in ref], n
        assert [a.fresh_equal for a in v.applies] == [r[2] for r in ref], n
        bad = next((i for i, r in enumerate(ref) if r[1] != "agree"), None)
        assert v.first_bad_apply == bad and v.status == ("agree" if bad is None else ref[bad][1])
        assert v.klass == next((r[0] for r in ref if r[0] != "agree"), "agree")
        if n % 25 == 0 or bad is not None:
            assert [a.verdict.to_json() for a in v.applies] == [r[3] for r in ref]
        classes |= {r[0] for r in ref}
    assert {"agree", "mismatch", "promise-finite-penalty", "documented-contained-restart"} <= classes


def test_held_spans_equal_the_ring_buffer_event_by_event():
    from dryz.oracle.trace_model import held_spans, held_tokens_of
    rng = random.Random(4)
    for _ in range(400):
        t = decode_trace(rng.randbytes(rng.randint(0, 900)))
        for abi in (7, 8):
            cap = capacity(t, abi)
            assert held_tokens(t, abi) == held_tokens_of(t.events, cap)
            s, e = held_spans(t.program().ops, t.program().counts, cap)
            assert (len(s), len(e)) == (len(t.applies),) * 2


def test_the_trace_model_runs_no_subject_and_imports_no_verdict():
    """dryz/oracle/trace_model.py is a pure model: it imports neither dryz.check nor dryz.subject."""
    import ast
    import dryz.oracle.trace_model as m
    tree = ast.parse(Path(m.__file__).read_text())
    imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert not {x for x in imported if x.lstrip(".").split(".")[0] in ("check", "subject", "trace_check")}


def test_a_traces_config_is_every_equivalent_cases():
    from dryz.config import case_config
    from dryz.trace_check import trace_config
    rng = random.Random(9)
    for _ in range(200):
        t = decode_trace(rng.randbytes(rng.randint(0, 300)))
        for abi in (7, 8):
            assert all(case_config(c, abi) == trace_config(t, abi) for c in equivalent_cases(t, abi))


def test_the_decoder_reads_bytes_as_it_always_did():
    """A crash file of an earlier campaign decodes to the same trace: 600 random inputs, digest of their traces
    as the decoder of 3c595ab (before the Program was collected while decoding) gave them."""
    import hashlib
    rng = random.Random(2026)
    h = hashlib.sha256()
    for _ in range(600):
        h.update(decode_trace(rng.randbytes(rng.randint(0, rng.choice([60, 900, 4096])))).dumps().encode())
    assert h.hexdigest() == "035b82bf4c913e0e791db1f79211b35b75b56f5b331e6a6ac64ba0a87b903ae8"
