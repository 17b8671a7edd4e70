"""Real libllama builds as subjects: the old init_dry ABI (llama-cpp-python 0.3.34) and builds of the pinned sdist
with bugs planted in llama_sampler_dry_apply / _reset (tests/patches/), against the pristine rebuild.

Each build is made by `dryz subject build` into the cache (minutes for a version's first build, seconds for a
patch after it). Without a compiler, cmake or PyPI these tests skip, unless DRYZ_REQUIRE_BUILDS=1 (CI sets it),
where they fail.

Every planted bug is a finding, exit 1, from `exhaustive`, `check` (on a case that shows it) and a short `fuzz`
campaign, never exit 2 (PLANTED says how each shows; a patch without an entry there fails the suite):

- restart-limit-plus-one.diff: Step 1 sets rep_limit one too large (`i - longest_match + 1`). Visible in the
  default space's `breaker` configuration.
- naive-match-cap-12.diff: the Z-algorithm's naive extension stops at 12 tokens (`n < 12`). Invisible in the
  default space (histories <= 11 tokens); the periodic control's 23- and 40-token histories and long fuzz
  inputs show it.
- z-naive-stops-one-short.diff: Step 2's naive extension stops one token before the window's start
  (`n + k < last_n_repeat - 1`), and step3-repeat-must-exceed-allowed.diff: Step 3 records a repeat only when it
  is longer than allowed_length (`repeat_len > ...`). Both break the case dryz once confirmed the init_dry ABI
  with (`a a`, allowed_length 1: logit 0, not -1), which used to refuse the library as one that cannot be
  loaded (exit 2); llama.cpp's own tests/test-sampling.cpp fails on both.
- reset-keeps-tokens.diff: llama_sampler_dry_reset leaves the ring buffer. No single case resets: the trace
  space (`exhaustive --traces`), a trace file and `fuzz --traces` show it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import conftest

PATCHES = conftest.PATCHES


_build = conftest.build


@pytest.fixture(scope="session")
def old_abi():
    return _build("0.3.34")


@pytest.fixture(scope="session")
def pristine():
    return _build("0.3.36")


# How each planted bug shows: the options `exhaustive` and `fuzz` need, and a case (or trace) for `check`.
AA = {"history": (0, 0), "alphabet": 1, "penalty_last_n": 64, "allowed_length": 1}  # the ABI confirmation case
PLANTED = {
    "restart-limit-plus-one.diff": {"exhaustive": [], "fuzz": [],
                                    "case": {"history": (2, 0, 2), "alphabet": 3, "breakers": ("c",),
                                             "penalty_last_n": 64}},
    "naive-match-cap-12.diff": {"exhaustive": [], "fuzz": [],
                                "case": {"history": (0,) * 14, "alphabet": 1, "penalty_last_n": 64,
                                         "allowed_length": 0}},
    "z-naive-stops-one-short.diff": {"exhaustive": [], "fuzz": [], "case": AA, "confirmation": True},
    "step3-repeat-must-exceed-allowed.diff": {"exhaustive": [], "fuzz": [], "case": AA, "confirmation": True},
    # Out of the reach of the symbol space and of a short campaign (a restart sequence of 20 tokens needs a
    # real vocabulary's long breaker): exhaustive certifies it; the construction probes find it (the gate's
    # construction mode, tests/test_gate.py); its minimized witness is a 21-token llama-spm case.
    "tail-cap-19.diff": {"exhaustive": None, "fuzz": None, "shown_by": ["restarts", "--vocab", "llama-spm", "--check",
                                                                      "construction", "--time", "60"],
                         "case": {"history": (29896, 259, 29906, 29871, 29941, 29871, 29946, 29871, 29945, 29871,
                                              29953, 29871, 29955, 29871, 29947, 29871, 29929, 29871, 29900,
                                              29871, 29896), "alphabet": 32000, "penalty_last_n": 21,
                                  "breakers": ("1 2 3 4 5 6 7 8 9 0 1",), "allowed_length": 0,
                                  "vocab": "llama-spm", "candidates": ((259, 0.0),)}},
    "reset-keeps-tokens.diff": {"exhaustive": ["--trace-events", "4"], "fuzz": ["--traces"],
                                "trace": {"schema": "dryz.trace/1", "alphabet": 1, "penalty_last_n": 64,
                                          "events": [["accept", [0, 0]], ["reset"], ["apply", None]]}},
}


# Planted bugs no output comparison can see (every mode passes on the plain build): shown only on a sanitized
# build, as class memory, by the module named.
SANITIZER_ONLY = {"repeat-count-past-end.diff": "tests/test_sanitize.py"}
# Planted bugs that kill the subject (a trace it dies on, class crash): shown by the module named.
CRASH_ONLY = {"reset-aborts.diff": "tests/test_crashing_traces.py"}


def test_every_planted_patch_says_how_it_shows():
    assert sorted([*PLANTED, *SANITIZER_ONLY, *CRASH_ONLY]) == sorted(p.name for p in PATCHES.glob("*.diff"))
    for patch, module in {**SANITIZER_ONLY, **CRASH_ONLY}.items():
        assert patch in (conftest.ROOT / module).read_text(), (patch, module)


@pytest.fixture(scope="session", params=sorted(PLANTED))
def buggy(request):
    return request.param, _build("0.3.36", request.param)


def dryz(lib: Path, *args, timeout=600):
    return conftest.dryz(*args, lib=lib, timeout=timeout)


def write_case(tmp_path, name, **fields) -> Path:
    from dryz.case import Case
    f = tmp_path / name
    f.write_text(Case(**fields).dumps())
    return f


# -- both ABIs ------------------------------------------------------------------------------------------


def test_old_abi_is_detected_and_driven(old_abi, tmp_path):
    """0.3.34's init_dry has 8 arguments: detected from the loaded file, and the source's example agrees."""
    p = dryz(old_abi, "subject", "show")
    assert p.returncode == 0, p.stderr
    ident = json.loads(p.stdout)
    assert ident["init_dry_abi"] == 8 and ident["llama_cpp_commit"].startswith("e3546c7")
    # read off the samplers init_dry makes (0.3.34 has the empty "?dry" sampler for DRY off), not off penalties
    assert ident["init_dry_abi_evidence"] == {
        "decided_by": "llama_sampler_name", "abi": 8,
        "names": {"off7_on8": "dry", "on7_off8": "?dry", "on_both": "dry", "off_both": "?dry"}}
    assert ident["built_by_dryz"]["llama_cpp_python"] == "0.3.34"
    # the fallback (for a library without the empty sampler, such as 0.3.16) reads the same ABI off this one
    code = ("import os; from dryz.subject.libllama import LibLlama; from dryz.subject.binding import ABI_PROBES; "
            "lib = LibLlama(os.environ['DRYZ_LIB']); "
            "print({q[0]: lib.L._probe_apply(lib.vocab, *q[1:]) for q in ABI_PROBES[:2]})")
    env = {k: v for k, v in os.environ.items() if k not in ("LLAMA_CPP_LIB_PATH", "DRYZ_FAULT")}
    q = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(env, DRYZ_LIB=str(old_abi)))
    assert q.stdout.strip() == "{'off7_on8': True, 'on7_off8': False}", q.stderr
    f = write_case(tmp_path, "ex.json", history=(0, 1, 2, 2, 1, 2, 24, 0, 1, 2), alphabet=26, penalty_last_n=64)
    p = dryz(old_abi, "check", str(f))
    assert p.returncode == 0, p.stdout + p.stderr
    v = json.loads(p.stdout)["verdict"]
    assert {i: L for i, L in enumerate(v["library_L"]) if L} == {1: 1, 2: 3, 24: 2}


def test_window_minus_one_is_n_ctx_train_on_the_old_abi_only(old_abi, pristine, tmp_path):
    """penalty_last_n -1: the training context on the 8-argument ABI (n_ctx_train 3 caps L at 2 for `aaaa`),
    DRY off on the 7-argument one; both agree with the model of their own ABI."""
    f = write_case(tmp_path, "m1.json", history=(0, 0, 0, 0), alphabet=1, penalty_last_n=-1, n_ctx_train=3)
    old = dryz(old_abi, "check", str(f))
    new = dryz(pristine, "check", str(f))
    assert old.returncode == 0 and new.returncode == 0, old.stdout + new.stdout
    assert json.loads(old.stdout)["verdict"]["library_L"] == [2]
    assert json.loads(new.stdout)["verdict"]["library_L"] == [0]


def test_negative_window_crashes_the_old_abi(old_abi, pristine, tmp_path):
    """penalty_last_n -2 on 0.3.34 enables DRY with a zero-capacity ring buffer; the first accept throws and
    kills the process. `dryz check` reports it as class crash (exit 1); on 0.3.36 it is DRY off."""
    f = write_case(tmp_path, "m2.json", history=(0, 0), alphabet=1, penalty_last_n=-2)
    old = dryz(old_abi, "check", str(f))
    assert old.returncode == 1, old.stdout + old.stderr
    v = json.loads(old.stdout)["verdict"]
    assert v["class"] == "crash" and v["signal"] == "SIGABRT" and "capacity is zero" in v["stderr"]
    assert dryz(pristine, "check", str(f)).returncode == 0


def test_a_file_without_dry_is_one_line(tmp_path):
    import ctypes.util
    libm = ctypes.util.find_library("m")
    path = next(p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6")
                if os.path.exists(p)) if libm else None
    if path is None:
        pytest.skip("no libm")
    p = dryz(Path(path), "subject", "show")
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert "does not export llama_sampler_init_dry" in p.stderr
    p = dryz(tmp_path / "nowhere.so", "exhaustive", "-n", "3")
    assert p.returncode == 2 and "no such file" in p.stderr and p.stderr.count("\n") == 1


# -- planted bugs are findings, never void ---------------------------------------------------------------


def test_exhaustive_on_a_buggy_build_is_a_finding(buggy, tmp_path):
    name, lib = buggy
    how = PLANTED[name]
    if how["exhaustive"] is None:  # out of the space's reach: certified, and the mode that reaches it finds it
        p = dryz(lib, "exhaustive", "--json", str(tmp_path / "r.json"))
        assert p.returncode == 0 and "CERTIFIED" in p.stdout, p.stdout + p.stderr
        q = dryz(lib, *how["shown_by"], "--json", str(tmp_path / "s.json"))
        assert q.returncode == 1, q.stdout + q.stderr
        found = json.loads((tmp_path / "s.json").read_text())["findings"]
        assert found and {f["klass"] for f in found} == {"construction-disagreement"}, found
        return
    p = dryz(lib, "exhaustive", *how["exhaustive"], "--json", str(tmp_path / "r.json"))
    assert p.returncode == 1, p.stdout + p.stderr
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["verdict"] == "mismatch" and all(r["checks"].values())
    assert r["subject"]["built_by_dryz"]["patch"] == name
    assert r["subject"]["init_dry_abi"] == 7 and r["subject"]["init_dry_abi_evidence"]["decided_by"] == \
        "llama_sampler_name"
    confirmation = r["controls"]["abi_confirmation"]
    assert confirmation["oracles_passed"] and confirmation["passed"] is not how.get("confirmation", False)
    if how.get("confirmation"):  # the case that used to refuse the library: a finding, printed as a reproducer
        assert confirmation["observed_logit"] == 0.0 and confirmation["class"] == "mismatch"
        assert ('mismatch (ABI confirmation control, the library misses logit -1): {"schema": "dryz.case/1", '
                '"history": [0, 0], "history_symbols": "aa"') in p.stdout
        assert "ABI confirmation case MISSED BY THE LIBRARY (aa, allowed_length 1: logit 0.0, not -1)" in p.stdout
        assert r["totals"]["mismatches"] > 0
    elif name.startswith("restart"):
        by = {c["name"]: c["mismatches"] for c in r["configs"]}
        assert by["base"] == 0 and by["window4"] == 0 and by["breaker"] > 0
    elif name.startswith("naive"):  # invisible in the space; the periodic control's long histories show it
        assert r["totals"]["mismatches"] == 0 and not r["controls"]["periodic"]["passed"]
        assert r["controls"]["periodic"]["oracles_passed"] and r["controls"]["periodic"]["library_failures"] > 0
        assert "periodic control, the library misses its closed form" in p.stdout
    else:  # reset: no single case resets; the trace space shows it
        assert r["totals"]["mismatches"] == 0 and r["controls"]["periodic"]["passed"]
        assert r["traces"]["disagreements"] > 0 and "  witness (base): mismatch at apply 0: +a +a R A" in p.stdout


def test_check_on_a_case_that_shows_a_planted_bug(buggy, tmp_path):
    name, lib = buggy
    how = PLANTED[name]
    f = tmp_path / "shows.json"
    if "trace" in how:
        f.write_text(json.dumps(how["trace"]))
    else:
        f = write_case(tmp_path, "shows.json", **how["case"])
    p = dryz(lib, "check", str(f))
    assert p.returncode == 1, p.stdout + p.stderr
    out = json.loads(p.stdout)
    assert out["verdict"]["class"].startswith("mismatch") and out["subject"]["built_by_dryz"]["patch"] == name
    if how.get("confirmation"):
        assert out["verdict"]["observed_logits"] == [0.0] and out["verdict"]["expected_logits"] == [-1.0]


def test_fuzz_minimize_replay_on_a_buggy_build(buggy, tmp_path):
    """A short campaign finds it and its findings reproduce on the same subject; minimize gives a proven-shortest
    reproducer made on that subject; replay of the project corpus on it flags changed verdicts."""
    name, lib = buggy
    how = PLANTED[name]
    if how["fuzz"] is None:  # no campaign reaches it in seconds: its witness minimizes and replays as stored
        m = dryz(lib, "minimize", str(write_case(tmp_path, "w.json", **how["case"])), "--corpus", str(tmp_path / "c"))
        assert m.returncode == 0, m.stdout + m.stderr
        [entry] = [json.loads(q.read_text()) for q in (tmp_path / "c").glob("*.json")]
        assert entry["expect"] == "mismatch-multi-token" and entry["shortest"] in ("proven", "1-minimal")
        assert len(entry["case"]["history"]) == 21 and entry["history_text"]
        assert dryz(lib, "replay", str(tmp_path / "c")).returncode == 0
        return
    work = tmp_path / "w"
    p = dryz(lib, "fuzz", *how["fuzz"], "--time", "20", "--jobs", "1", "--workdir", str(work), "--json",
             str(tmp_path / "f.json"))
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    summary = json.loads((tmp_path / "f.json").read_text())
    rechecked = [f for f in summary["findings"] if f["reproduces"] is not None]  # the rest: --time's grace spent
    assert rechecked and all(f["reproduces"] for f in rechecked[:20])
    assert all(f["subject"] == f"libllama:{(lib / 'libllama.so').resolve()}" for f in summary["findings"])
    confirmation = summary["controls"]["abi_confirmation"]
    assert confirmation["passed"] is not how.get("confirmation", False)
    r = dryz(lib, "replay")
    assert r.returncode == 1 and "CHANGED" in r.stdout, r.stdout[-2000:]
    if "trace" in how:  # trace crash files are minimized in tests/test_traces.py
        return
    if how.get("confirmation"):  # the control's case is the reproducer: minimized and stored like any
        assert "finding: mismatch (ABI confirmation control)" in p.stdout
        crashes = [write_case(tmp_path, "aa.json", **AA)]
    else:
        # The smallest crash files first; a reproducer whose reduced configuration leaves too many shorter
        # histories for the proof budget is 1-minimal, so up to three are minimized until one is proven shortest.
        crashes = sorted((Path(f["file"]) for f in summary["findings"]), key=lambda q: q.stat().st_size)[:3]
    for n, crash in enumerate(crashes):
        out = tmp_path / f"c{n}"
        m = dryz(lib, "minimize", str(crash), "--corpus", str(out))
        assert m.returncode == 0, m.stdout + m.stderr
        [entry] = [json.loads(q.read_text()) for q in out.glob("*.json")]
        assert entry["shortest"] in ("proven", "1-minimal") and entry["expect"].startswith("mismatch")
        if entry["shortest"] == "proven":
            break
    assert entry["shortest"] == "proven", [c.name for c in crashes]
    ident = json.loads(dryz(lib, "subject", "show").stdout)
    assert entry["subject"]["libllama_sha256"] == ident["libllama_sha256"]
    assert entry["subject"]["built_by_dryz"]["patch"] == name
    # The stored reproducer replays as recorded on its own subject.
    assert dryz(lib, "replay", str(out)).returncode == 0


def test_pristine_rebuild_is_clean(pristine, tmp_path):
    p = dryz(pristine, "exhaustive", "--json", str(tmp_path / "r.json"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "CERTIFIED" in p.stdout and "(built by dryz subject build)" in p.stdout
    assert dryz(pristine, "replay").returncode == 0
    f = dryz(pristine, "fuzz", "--time", "30", "--jobs", "1", "--workdir", str(tmp_path / "w"))
    assert f.returncode == 0, f.stdout[-2000:] + f.stderr[-2000:]


def test_build_refuses_a_patch_that_does_not_apply(tmp_path, pristine):
    bad = tmp_path / "bad.diff"
    bad.write_text("--- a/src/llama-sampler.cpp\n+++ b/src/llama-sampler.cpp\n@@ -1,1 +1,1 @@\n-no such line\n"
                   "+nor this\n")
    p = subprocess.run([sys.executable, "-m", "dryz", "subject", "build", "--patch", str(bad)], capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 2 and "the patch does not apply" in p.stderr.splitlines()[0]
    assert "FAILED" in p.stderr  # patch's own words, the last lines kept
