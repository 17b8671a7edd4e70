"""dryz mutate: the operators over the pinned sdist's DRY code (deterministic, stable ids, every diff applies,
comments and strings untouched), the stratified sample, the verdict of a mode's process, the score's arithmetic,
equivalence by object code, and (tests/test_mutate_real.py) real mutants built and killed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from dryz.mutate.modes import classify, from_gate, mode_names, modes_for
from dryz.mutate.operators import FUNCTIONS, OPERATORS, SOURCE, generate
from dryz.mutate.report import TRIAGE_SCHEMA, TriageError, load_triage, summarize
from dryz.mutate.runner import Killer, sample

REQUIRE = os.environ.get("DRYZ_REQUIRE_BUILDS") == "1"


@pytest.fixture(scope="module")
def source():
    from dryz.mutate.operators import sdist_source
    from dryz.subject.build import BuildError
    try:
        return sdist_source("0.3.36")
    except (BuildError, OSError) as e:
        if REQUIRE:
            raise
        pytest.skip(f"no llama-cpp-python 0.3.36 sdist: {e}")


@pytest.fixture(scope="module")
def mutants(source):
    return generate(source)


def test_the_pinned_sources_mutants(mutants):
    """The exact list this source gives: 347 mutants over the six functions, every operator present."""
    assert len(mutants) == 347
    assert Counter(m.operator for m in mutants) == {"const": 98, "bound": 52, "ror": 53, "delete": 51, "aor": 42,
                                                    "negate": 33, "return": 18}
    assert Counter(m.function for m in mutants) == {"apply": 226, "overlap": 47, "init": 47, "accept": 14,
                                                    "clone": 7, "reset": 6}
    assert {m.function for m in mutants} == {name for name, _ in FUNCTIONS}
    assert set(OPERATORS) == {m.operator for m in mutants}
    assert len({m.id for m in mutants}) == len(mutants)


def test_generation_is_deterministic_and_ids_survive_edits_elsewhere(source, mutants):
    again = generate(source)
    assert [m.to_json() for m in again] == [m.to_json() for m in mutants]
    # Two lines added far above the DRY section: every id is the same, every line number moves by 2.
    shifted = generate(source.replace("#include", "// one\n// two\n#include", 1))
    assert [m.id for m in shifted] == [m.id for m in mutants]
    assert all(b.line == a.line + 2 for a, b in zip(mutants, shifted))


def test_every_diff_applies_with_patch(tmp_path, source, mutants):
    """Each mutant's diff applies to the sdist's file with patch -p1 (as dryz subject build applies it), and
    changes exactly the line it names."""
    if shutil.which("patch") is None:
        pytest.skip("no patch")
    root = tmp_path / "tree"
    (root / "src").mkdir(parents=True)
    target = root / SOURCE
    lines = source.split("\n")
    for m in mutants:
        target.write_text(source)
        p = subprocess.run(["patch", "-p1", "--batch", "--silent"], input=m.diff, text=True, cwd=root,
                           capture_output=True)
        assert p.returncode == 0, (m.id, p.stdout, p.stderr)
        new = target.read_text().split("\n")
        assert lines[m.line - 1] == m.before.split("\n")[0], m.id
        if m.operator == "delete":
            assert new == lines[:m.line - 1] + lines[m.line:], m.id
        elif m.operator == "return":
            assert len(new) == len(lines) + 1 and "return" in m.after, m.id
        else:
            assert new[m.line - 1] == m.after and new[:m.line - 1] == lines[:m.line - 1], m.id


def test_comments_and_strings_are_never_mutated():
    src = ("\n// DRY\n"
           "static void get_overlapping_token_sequences(int a) {\n    return;\n}\n"
           "static void llama_sampler_dry_accept(int a) {\n    // if (a < b) a = a + 1;\n"
           "    LOG(\"x == y, i + 1\");\n    a = 3 /* b < c */;\n}\n"
           "static void llama_sampler_dry_apply(int a) {\n}\n"
           "static void llama_sampler_dry_reset(int a) {\n}\n"
           "static struct llama_sampler * llama_sampler_dry_clone(int a) {\n}\n"
           "struct llama_sampler * llama_sampler_init_dry(int a) {\n}\n"
           "struct llama_sampler * llama_sampler_init_dry_testing(int a) {\n}\n")
    ms = generate(src)
    assert {(m.operator, m.description.split(": ", 1)[1]) for m in ms} == {("delete", "`return;` deleted"),
        ("return", "`return;` inserted before `LOG(\"x == y, i + 1\");`"),
        ("delete", "`LOG(\"x == y, i + 1\");` deleted"),
        ("return", "`return;` inserted before `a = 3 /* b < c */;`"),
        ("const", "`3` -> `4` in `a = 3 /* b < c */;`"), ("const", "`3` -> `2` in `a = 3 /* b < c */;`"),
        ("delete", "`a = 3 /* b < c */;` deleted")}


def test_sample_is_stratified_and_deterministic(mutants):
    s = sample(mutants, 80)
    assert len(s) == 80 and [m.id for m in s] == [m.id for m in sample(list(reversed(mutants)), 80)][::-1]
    assert Counter(m.function for m in s) == {"apply": 52, "overlap": 11, "init": 11, "accept": 3, "clone": 2,
                                              "reset": 1}
    assert set(Counter(m.operator for m in s)) == set(OPERATORS)
    assert [m.line for m in s] == sorted(m.line for m in s)
    assert sample(mutants, None) == mutants and sample(mutants, 10_000) == mutants
    assert len(sample(mutants, 3)) == 3


def test_a_modes_process_verdict():
    assert classify(0, "", False)[0] == "survived"
    assert classify(1, "", False)[0] == "killed"
    assert classify(2, "dryz: error: bad\n", False) == ("error", "dryz: error: bad", [])
    assert classify(-6, "terminate called\n", False) == ("crash", "died of SIGABRT", [])
    assert classify(None, "", True)[0] == "timeout"
    asan = ("==1==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x60 at pc 0x7f bp 0x7f sp 0x7f\n"
            "WRITE of size 4 at 0x60 thread T0\n"
            "    #0 0x7f12 in llama_sampler_dry_reset(llama_sampler*) /x/src/llama-sampler.cpp:3597:5\n"
            "    #1 0x7f13 in llama_sampler_reset /x/src/llama-sampler.cpp:400:9\n")
    status, detail, frames = classify(-6, asan, False)
    assert status == "memory" and frames[0] == "llama_sampler_dry_reset(llama_sampler*) llama-sampler.cpp:3597:5"
    assert detail.startswith("AddressSanitizer: heap-buffer-overflow (WRITE of size 4) in llama_sampler_dry_reset")
    # exhaustive's pool worker dies with the report on stderr, the command exits 1: still memory
    assert classify(1, asan, False)[0] == "memory"


def test_the_killer_is_the_gates_plan():
    """The killer is dryz.gate.plan on the mutant's library (no base: no differential), not a list of its own."""
    from dryz import gate
    modes = modes_for(120, lib="/L")
    assert [m.name for m in modes] == [m.name for m in gate.plan("libllama:/L", 120)]
    assert {m.name for m in modes} == set(gate.NAMES) - {"differential"}
    from dryz.children import argv as child_argv
    m = next(m for m in modes if m.name == "fuzz-vocab-random")
    argv = child_argv(m.spec, m.args(Path("/w"), 10))
    assert argv[1:6] == ["-m", "dryz", "--subject", "libllama:/L", "-q"]
    assert "--breaker-sets" in argv and argv[-2:] == ["--", "-ignore_crashes=0"]
    assert mode_names(120, ["replay", "certificate"]) == ["certificate", "replay"]
    with pytest.raises(ValueError, match="unknown mode"):
        modes_for(120, ["nope"])
    k = Killer(("certificate",), 60.0)
    assert k.to_json() == {"modes": ["certificate"], "budget": 60.0, "lanes": 2, "stop_on_finding": False}


def test_a_gate_verdict_as_a_kill():
    from dryz import gate
    r = gate.ModeResult("fuzz", "finding", 1, 12.0, 10.0, "1 finding", [])
    assert from_gate(r).status == "killed" and from_gate(r).kills
    r.findings.append(gate.Finding("fuzz", "memory", "AddressSanitizer: container-overflow in f"))
    assert from_gate(r).status == "memory" and from_gate(r).detail.startswith("AddressSanitizer")
    for verdict, status in (("pass", "survived"), ("crash", "crash"), ("timeout", "timeout"), ("error", "error"),
                            ("cancelled", "not run")):
        m = from_gate(gate.ModeResult("x", verdict, None, 1.0, None, "", []))
        assert m.status == status and m.kills == (status in ("crash", "timeout"))


def _result(i, status, killers=(), upstream="survived", names=("a", "b")):
    r = {"id": f"m{i}", "operator": "ror", "function": "apply", "status": status, "description": f"m{i}",
         "seconds": 10.0 + i}
    if status in ("killed", "survived"):
        r["modes"] = [{"mode": n, "status": "killed" if n in killers else "survived", "seconds": 1.0 + i}
                      for n in names]
        r["killed_by"] = list(killers)
        r["upstream"] = {"mode": "upstream", "status": upstream, "seconds": 1.0}
    return r


def test_the_score():
    """killed / (generated - stillborn - shown equivalent), per mode and for the baseline."""
    results = [_result(0, "killed", ["a"]), _result(1, "killed", ["a", "b"], upstream="killed"),
               _result(2, "killed", ["b"]), _result(3, "survived"), _result(4, "survived", upstream="killed"),
               _result(5, "stillborn"), _result(6, "equivalent")]
    triage = {"m3": {"verdict": "equivalent", "reason": "only a log line"}}
    s = summarize(results, 7, ["a", "b"], triage)
    assert (s["denominator"], s["killed"], s["score"]) == (4, 3, 0.75)
    assert (s["stillborn"], s["equivalent_proven"], s["equivalent_argued"]) == (1, 1, 1)
    assert s["upstream"] == {"killed": 2, "score": 0.5, "run": 5}
    assert s["killed_by_upstream_only"] == ["m4"]
    by = {m["mode"]: m for m in s["modes"]}
    assert (by["a"]["killed"], by["a"]["score"], by["a"]["only_killer"]) == (2, 0.5, 1)
    assert by["a"]["median_seconds_to_kill"] == 1.5
    assert [(x["id"], x["triage"]) for x in s["survivors"]] == [("m3", triage["m3"]), ("m4", None)]
    # a mutant no mode killed and some mode could not judge: status error, counted nowhere, named
    s = summarize(results + [_result(7, "error")], 8, ["a", "b"], triage)
    assert (s["denominator"], s["score"], s["errors"]) == (4, 0.75, ["m7"])


def test_an_unjudged_mutant_is_not_done(tmp_path):
    from dryz.mutate.runner import done_ids
    (tmp_path / "results").mkdir()
    for i, status in enumerate(("killed", "error", "survived")):
        (tmp_path / "results" / f"m{i}.json").write_text(json.dumps({"status": status}))
    assert done_ids(tmp_path) == {"m0", "m2"}


def test_triage_file(tmp_path):
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"schema": TRIAGE_SCHEMA, "mutants": {"x": {"verdict": "maybe", "reason": "r"}}}))
    with pytest.raises(TriageError, match="verdict equivalent|gap"):
        load_triage(f)
    assert load_triage(tmp_path / "none.json") == {}


def test_the_shipped_triage_names_real_mutants(mutants):
    from dryz.mutate.report import default_triage
    path = default_triage("0.3.36")
    triage = load_triage(path)
    assert triage, "the pinned release's survivors are triaged"
    assert set(triage) <= {m.id for m in mutants}


def test_cli_refuses_bad_options(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "dryz", "mutate", *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)
    p = run("--sample", "0")
    assert p.returncode == 2 and p.stderr == "dryz: error: --sample must be at least 1, got 0\n"
    p = run("--mode", "nope", "--list")
    assert p.returncode == 2 and p.stderr.startswith("dryz: error: --mode: unknown mode 'nope'") and \
        p.stderr.count("\n") == 1


def test_cli_lists_mutants(tmp_path, source):
    p = subprocess.run([sys.executable, "-m", "dryz", "-q", "mutate", "--list", "--sample", "5"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(x) for x in p.stdout.splitlines()]
    assert len(rows) == 5 and all(r["diff"].startswith(f"--- a/{SOURCE}\n+++ b/{SOURCE}\n@@ ") for r in rows)


def _fake_run_one(mutant, **kw):
    return {"schema": "dryz.mutant/1", "id": mutant["id"], "operator": mutant["operator"],
            "function": mutant["function"], "line": mutant["line"], "description": mutant["description"],
            "status": "killed", "killed_by": ["restarts"], "modes": [], "seconds": 0.0}


def test_mutants_as_dask_tasks_by_address(tmp_path, mutants, monkeypatch):
    """--scheduler ADDRESS: each mutant a task on that cluster, each result written as it finishes. dryz's client
    is not the process's default one (a run on a scheduler given by address had died at its first result:
    'No clients found')."""
    distributed = pytest.importorskip("distributed")
    from dryz.mutate import runner
    monkeypatch.setattr(runner, "run_one", _fake_run_one)
    chosen = mutants[:3]
    plan = {"version": "0.3.36", "control": {"object_code": {}, "upstream_exe": None}}
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  dashboard_address=None) as c:
        (tmp_path / "results").mkdir()
        out = runner.run(plan, chosen, Killer(("restarts",)), tmp_path, scheduler=c.scheduler_address,
                         log=lambda m: None)
    assert [r["id"] for r in out] == [m.id for m in chosen]
    assert sorted(p.stem for p in (tmp_path / "results").glob("*.json")) == sorted(m.id for m in chosen)


def test_kill_first_order():
    """Each lane's modes ordered by new kills per median second (greedy), the rest by their median; unknown
    modes keep their place at the end; the shipped matrix of 0.3.36 starts lane 0 with the restart sweep."""
    from dryz.mutate.order import default_matrix, kill_first, load_matrix
    m = {"median_seconds_to_kill": {"a": 1.0, "b": 0.6, "c": 2.0}, "killed_by": {"x": ["a", "c"], "y": ["a"],
                                                                                    "z": ["c"], "w": ["b"]}}
    assert kill_first([["a", "b", "c", "d"]], m) == ["a", "b", "c", "d"]  # a: 2 kills/1 s; b: 1/0.6 s
    m["median_seconds_to_kill"]["b"] = 0.5
    assert kill_first([["a", "b", "c", "d"]], m) == ["b", "a", "c", "d"]  # a tie of kills per second: the quicker
    m["killed_by"]["z"] = ["a"]
    assert kill_first([["c", "a"], ["b"]], m) == ["a", "c", "b"]  # c kills nothing new: after, by median
    shipped = load_matrix(default_matrix("0.3.36"))
    lanes = [[n.name for n in modes_for(30, None) if n.lane == i] for i in (0, 1)]
    order = kill_first(lanes, shipped)
    assert sorted(order) == sorted(sum(lanes, [])) and order[0] == "restarts"


def test_a_committed_run_resumes_on_another_machine(tmp_path, monkeypatch):
    """A workdir whose control's builds are not on this machine (committed elsewhere): the control is built and
    run again here and the results kept; a pristine build of other DRY object code is refused (exit 2)."""
    from dryz.mutate import runner
    from dryz.mutate.operators import Mutant  # noqa: F401
    lib = tmp_path / "pristine"
    lib.mkdir()
    (lib / "libllama.so").write_bytes(b"x")
    code = {"sha256": "a" * 64}
    monkeypatch.setattr(runner, "build", lambda *a, **k: lib)
    monkeypatch.setattr(runner, "fingerprint", lambda p: code)
    monkeypatch.setattr(runner, "run_killer", lambda *a, **k: [])
    killer, work = Killer(("restarts",)), tmp_path / "w"
    plan = runner.prepare("0.3.36", killer, work, [], "s", {}, with_upstream=False, log=lambda m: None)
    saved = json.loads((work / "plan.json").read_text())
    saved["control"]["pristine"] = "/elsewhere/pristine"
    (work / "plan.json").write_text(json.dumps(saved))
    (work / "results" / "m.json").write_text('{"status": "killed"}')
    said = []
    again = runner.prepare("0.3.36", killer, work, [], "s", {}, with_upstream=False, log=said.append)
    assert again["control"]["pristine"] == str(lib) and any("the control again" in m for m in said)
    assert (work / "results" / "m.json").exists()
    saved["control"]["pristine"] = "/elsewhere/pristine"
    saved["control"]["object_code"] = {"sha256": "b" * 64}
    (work / "plan.json").write_text(json.dumps(saved))
    with pytest.raises(runner.MutateError, match="another compiler"):
        runner.prepare("0.3.36", killer, work, [], "s", {}, with_upstream=False, log=lambda m: None)
    assert plan["control"]["pristine"] == str(lib)


def test_a_plan_in_kill_first_order_keeps_its_budget():
    """gate.plan's order reorders each lane and changes no mode's planned seconds or lane."""
    from dryz.gate import plan
    a = plan("libllama:LIB", 60)
    order = ["restarts", "fuzz-traces", "fuzz"]
    b = plan("libllama:LIB", 60, order=order)
    assert {(m.name, m.lane, m.seconds) for m in a} == {(m.name, m.lane, m.seconds) for m in b}
    assert [m.name for m in b if m.lane == 0][:2] == ["restarts", "fuzz-traces"]
    assert [m.name for m in b if m.lane == 1][0] == "fuzz"


def test_a_campaign_planned_first_leaves_the_fixed_modes_their_time(tmp_path):
    """A timed mode that runs before its lane's fixed modes is given its share, not the time they need."""
    from dryz.gate import plan
    from dryz.gate.run import _Lanes
    modes = plan("libllama:LIB", 120, order=["fuzz-traces"])
    lanes = _Lanes(modes, tmp_path, 120, lambda m: None, False)
    first = next(m for m in modes if m.lane == 0)
    assert first.name == "fuzz-traces"
    natural = _Lanes(plan("libllama:LIB", 120), tmp_path, 120, lambda m: None, False)
    fixed = [m for m in natural.modes if m.lane == 0 and not m.timed]
    for m in fixed:  # as when its fixed modes have run, for their planned seconds
        natural.results[m.name] = None
    natural.t0 -= sum(m.seconds for m in fixed)
    assert abs(lanes.given(first) - natural.given(next(m for m in natural.modes if m.name == "fuzz-traces"))) < 1


def test_what_test_dry_never_runs(source, mutants):
    """test_dry's sampler comes from llama_sampler_init_dry_testing (init_dry with no breaker strings, the token
    sequences handed over): every mutant of get_overlapping_token_sequences and of init's loop over the breaker
    strings is out of its reach, and no other."""
    from dryz.mutate.testset import unreachable_by_test_dry
    out = {m.id for m in mutants if unreachable_by_test_dry(m.to_json(), source)}
    assert {m.id for m in mutants if m.function == "overlap"} <= out
    init = [m for m in mutants if m.function == "init" and m.id in out]
    assert init and all("breaker" in m.description or "continue" in m.description or "sequence_break" in
                        m.description or "MAX_" in m.description or "strlen" in m.description or
                        "num_breakers" in m.description for m in init), [m.description for m in init]
    assert not any(unreachable_by_test_dry(m.to_json(), source) for m in mutants if m.function in
                   ("apply", "accept", "reset", "clone"))
    assert "init-15519ca0" not in " ".join(out)  # init's enabling condition: test_dry runs it
    assert {"const-init-bdec7db8", "const-init-54614e06"} <= out  # MAX_CHAR_LEN, MAX_SEQ_LEN: used only there
    assert not out & {"const-init-a5daed88", "delete-init-96719e35"}  # the window's clamp: test_dry runs it


def test_a_killed_compiler_is_not_a_stillborn_mutant(tmp_path, monkeypatch, mutants):
    """A build whose compiler died of a signal is the machine's doing: status error (tried again on resume), not
    stillborn; one that got SIGINT is the user's Ctrl-C (KeyboardInterrupt), never a failed build."""
    import signal
    import sys

    from dryz.mutate import runner
    from dryz.subject import build as builder
    from dryz.subject.cache import BuildKilled
    m = mutants[0].to_json()
    monkeypatch.setattr(runner, "build", lambda *a, **k: (_ for _ in ()).throw(BuildKilled("cmake was killed")))
    res = runner.run_one(m, "0.3.36", Killer(("restarts",)), {}, None)
    assert res["status"] == "error" and "killed" in res["build_error"]
    log = tmp_path / "b.log"
    # the child dies of the signal whatever disposition it inherited (a runner started as a background job has
    # SIGINT ignored, and its children with it): it sets the signal's default action before sending it to itself
    for sig, raised in ((signal.SIGKILL, BuildKilled), (signal.SIGINT, KeyboardInterrupt)):
        die = f"import os, signal; s = signal.Signals({int(sig)}); s == signal.SIGKILL or signal.signal(s, " \
              "signal.SIG_DFL); os.kill(os.getpid(), s)"
        with pytest.raises(raised):
            builder._run([sys.executable, "-c", die], log, "x")
