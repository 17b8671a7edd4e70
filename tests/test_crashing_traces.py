"""Traces the subject dies on. `dryz exhaustive --trace-events N` walks the trace space in an isolation worker: a trace
the subject dies on is a verdict of class crash (memory with a sanitizer report) naming that trace, the walk goes
on after it, every other trace is judged, and the certificate's verdict is crash (exit 1). `dryz minimize` shrinks
such a trace as it shrinks a crashing case: the same kind of error in the same function, every evaluation in the
isolation worker; the entry names the trace (and keeps the sanitizer report's frames).

Two planted bugs: tests/patches/reset-aborts.diff (a plain build: a reset of a sampler that holds tokens calls
abort()) and repeat-count-past-end.diff on the sanitized build (tests/test_sanitize.py: a write one slot past
the end of dry_repeat_count once Step 1 finds a restart sequence). Builds are made on first use (the sanitized
one takes minutes); without a compiler they skip, unless DRYZ_REQUIRE_BUILDS=1 (CI).
"""

from __future__ import annotations

import json
import os

import conftest
import pytest

from dryz.subject.answers import Crash
from dryz.subject.isolation import Worker, mark
from dryz.trace_space import CONFIGS, count_traces, iter_traces

# A trace with a reset in the middle (12 events, 14 tokens): the plain planted build aborts at its reset.
LONG = {"schema": "dryz.trace/1", "alphabet": 3, "penalty_last_n": 8, "breakers": ["c"], "multiplier": 1.0,
        "base": 2.0, "allowed_length": 1,
        "events": [["accept", [0, 1, 2, 0, 1]], ["apply", None], ["accept", [2, 2, 1]], ["clone"],
                   ["apply", [[0, 0.5], [1, -1.0], [2, 0.0]]], ["accept", [0]], ["apply", None],
                   ["accept", [1, 0, 1, 2]], ["reset"], ["accept", [0]], ["apply", None], ["free"]]}
# One for the sanitized build: a breaker completes (b) in a window longer than the history.
LONG_SAN = {"schema": "dryz.trace/1", "alphabet": 3, "penalty_last_n": 16, "breakers": ["b"], "multiplier": 1.0,
            "base": 2.0, "allowed_length": 1,
            "events": [["accept", [0, 2, 0, 2, 0]], ["apply", None], ["accept", [2, 2, 1]], ["clone"],
                       ["accept", [0, 1]], ["apply", [[0, 0.5], [1, -1.0], [2, 0.0]]], ["accept", [0]],
                       ["apply", None], ["accept", [1, 0, 1, 2]], ["reset"], ["accept", [0]], ["apply", None],
                       ["free"]]}


def _mark_then_abort(subject, n):
    mark(n)
    os.abort()


def _no_mark_abort(subject):
    os.abort()


def test_a_call_that_dies_says_how_far_it_got(lib):
    """isolation.mark: what the call last marked is the parent's Worker.last_mark after the Crash; a call that
    marked nothing leaves None; the next call starts a new worker."""
    with Worker(lib.spec, lib) as w:
        out = w.call(_mark_then_abort, 7)
        assert isinstance(out, Crash) and out.signal == "SIGABRT" and w.last_mark == 7
        out = w.call(_no_mark_abort)
        assert isinstance(out, Crash) and w.last_mark is None and w.restarts == 1


def _aborts(events) -> bool:
    """The planted reset-aborts bug: a reset while the sampler holds a token (accepted since init or the last
    reset; a clone keeps its original's tokens). Every configuration of the trace space has a ring buffer."""
    holds = False
    for e in events:
        if e[0] == "accept":
            holds = True
        elif e[0] == "reset":
            if holds:
                return True
            holds = False
    return False


def dryz(lib, *args, **kw):
    return conftest.dryz(*args, lib=lib, timeout=900, **kw)


@pytest.fixture(scope="module")
def reset_aborts():
    return conftest.build("0.3.36", "reset-aborts.diff")


def test_exhaustive_judges_each_trace_the_plain_build_aborts_on(reset_aborts, tmp_path):
    """Every trace with a reset of a sampler holding tokens is a crash verdict naming that trace; every other
    trace is judged (all agree); the counts are the closed form's; the history space (no reset) is certified;
    the verdict is crash, exit 1."""
    p = dryz(reset_aborts, "exhaustive", "-n", "3", "--trace-events", "4", "--json", str(tmp_path / "r.json"))
    assert p.returncode == 1, p.stdout + p.stderr[-2000:]
    assert p.stdout.startswith("dryz exhaustive: CRASH") and "SIGABRT" not in p.stderr
    assert "crash   (base): class crash on trace '+a A R': the process running the subject died (SIGABRT)" \
        in p.stdout
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["verdict"] == "crash" and all(r["checks"].values())
    assert sum(c["mismatches"] for c in r["configs"]) == 0
    seqs = list(iter_traces(4, 2))
    crashing = [s for s in seqs if _aborts(s)]
    survivors = [s for s in seqs if not _aborts(s)]
    assert len(crashing) == 96 and len(seqs) == count_traces(4, 2)
    tr = r["traces"]
    assert [c["config"] for c in tr["configs"]] == list(CONFIGS)
    for c in tr["configs"]:
        assert c["traces"] == c["expected_traces"] == len(seqs)
        assert c["crashed_traces"] == len(crashing) and c["by_status"] == {"crash": len(crashing)}
        assert c["disagreements"] == 0 and c["control_differences"] == 0
        assert c["applies"] == sum(e == ("apply", None) for s in survivors for e in s)  # the rest: judged
        assert [x["spelled"] for x in c["crashes"]] == ["+a A R", "+a R A", "+b A R", "+b R A", "A +a R"]
        assert {x["class"] for x in c["crashes"]} == {"crash"} and {x["signal"] for x in c["crashes"]} == {"SIGABRT"}
    # the gate's traces mode reads the certificate: each configuration's first crashed trace is a finding whose
    # witness is the trace (dryz minimize shrinks it)
    from dryz.gate.modes import read_certificate
    from dryz.gate.result import ModeResult
    m = ModeResult("traces", "finding", 1, 0.0, None, "", [])
    read_certificate(m, r, tmp_path)
    assert "the subject died on 384 trace(s)" in m.text
    found = [f for f in m.findings if f.klass == "crash"]
    assert [f.spelled for f in found] == ["+a A R"] * 4
    assert json.loads(open(found[0].witness).read())["events"] == [["accept", [0]], ["apply", None], ["reset"]]


def test_minimize_shrinks_a_trace_the_plain_build_aborts_on(reset_aborts, tmp_path):
    src = tmp_path / "long.json"
    src.write_text(json.dumps(LONG))
    m = dryz(reset_aborts, "minimize", str(src), "--corpus", str(tmp_path / "c"), "--json", str(tmp_path / "m.json"))
    assert m.returncode == 0, m.stdout + m.stderr[-2000:]
    assert "class crash, 12 events, 14 tokens" in m.stdout
    out = json.loads((tmp_path / "m.json").read_text())
    assert out["class"] == "crash" and out["shortest"] == "proven"
    entry = json.loads(open(out["written"]).read())
    assert entry["expect"] == entry["class"] == "crash" and entry["spelled"] == "+a R A"
    assert entry["trace"]["events"] == [["accept", [0]], ["reset"], ["apply", None]]
    assert entry["verdict"] == {"status": "crash", "first_bad_apply": None, "signal": "SIGABRT",
                                "detail": "the process running the subject died (SIGABRT)"}
    assert entry["applies"] == [] and "sanitizer" not in entry
    assert entry["provenance"]["original_events"] == 12 and entry["subject"]["built_by_dryz"]["patch"] == \
        "reset-aborts.diff"
    assert dryz(reset_aborts, "replay", str(tmp_path / "c")).returncode == 0  # replays as recorded
    assert conftest.dryz("replay", str(tmp_path / "c")).returncode == 1  # the pip build: agree, changed


def test_the_sanitized_build_s_memory_error_in_a_trace(tmp_path):
    """exhaustive on the base configuration (no restart sequence: its history space is clean) with the trace
    space: the breaker configuration's traces that complete the breaker are class memory, named; minimize
    shrinks a 13-event trace to the proven-shortest '+b A', its entry with the report's kind and frames."""
    san = conftest.build("0.3.36", "repeat-count-past-end.diff", ("address", "undefined"))
    p = dryz(san, "exhaustive", "-n", "2", "-c", "base", "--trace-events", "3", "--json", str(tmp_path / "r.json"))
    assert p.returncode == 1, p.stdout + p.stderr[-2000:]
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["verdict"] == "crash" and r["configs"][0]["mismatches"] == 0 and all(r["checks"].values())
    by = {c["config"]: c for c in r["traces"]["configs"]}
    assert [by[n]["crashed_traces"] for n in CONFIGS] == [0, 0, 3, 0]
    b = by["breaker"]
    assert [x["spelled"] for x in b["crashes"]] == ["+a +b A", "+b +a A", "+b +b A"]
    assert b["by_status"] == {"memory": 3} and b["traces"] == b["expected_traces"] and b["disagreements"] == 0
    assert all(x["class"] == "memory" and x["detail"].startswith("AddressSanitizer: ") for x in b["crashes"])
    assert "class memory on trace" in p.stdout
    src = tmp_path / "long.json"
    src.write_text(json.dumps(LONG_SAN))
    m = dryz(san, "minimize", str(src), "--corpus", str(tmp_path / "c"), "--json", str(tmp_path / "m.json"))
    assert m.returncode == 0, m.stdout + m.stderr[-2000:]
    entry = json.loads(open(json.loads((tmp_path / "m.json").read_text())["written"]).read())
    assert entry["expect"] == "memory" and entry["shortest"] == "proven" and entry["spelled"] == "+b A"
    assert entry["trace"]["breakers"] == ["b"] and entry["trace"]["allowed_length"] == 0
    assert entry["sanitizer"]["kind"] in ("container-overflow", "heap-buffer-overflow")
    assert entry["sanitizer"]["frames"][0].startswith("llama_sampler_dry_apply(")
    assert entry["verdict"]["detail"] == entry["sanitizer"]["summary"]
    assert dryz(san, "replay", str(tmp_path / "c")).returncode == 0
