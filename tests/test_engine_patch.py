"""An engine's DRY with a patch (`--subject engine:NAME+patch=FILE`, dryz.subject.engines.patching) and the gate of
such a patch by the causes (dryz.gate.causes): the patch applies to the pinned engine's file, hunk by hunk at
exactly its lines, or is refused in one line; the patched subject names the patch and its sha256; the gate's
judgement of two fits (the base's and the patched engine's) passes only when the fits differ by exactly the
declared causes, with no residual."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env
from dryz.gate.causes import Causes
from dryz.gate.changes import cause_of, is_model
from dryz.gate.result import GateResult
from dryz.subject.binding import SubjectError
from dryz.subject.engines.patching import PatchError, apply, parse, read
from dryz.subject.registry import check_spec, normal_spec

FIXES = ROOT / "fixes" / "engines"
EXL = FIXES / "exllamav2-short-window.diff"
APH = FIXES / "aphrodite-one-token-repeat.diff"
REQUIRE = os.environ.get("DRYZ_REQUIRE_ENGINES") == "1"

DIFF = """why: a rationale above the first ---

--- a/pkg/f.py
+++ b/pkg/f.py
@@ -2,3 +2,3 @@
 two
-three
+THREE
 four
"""


def test_a_hunk_applies_at_exactly_its_line():
    (fp,) = parse(DIFF)
    assert fp.path == "pkg/f.py" and len(fp.hunks) == 1
    assert apply("one\ntwo\nthree\nfour\nfive\n", fp, "t") == "one\ntwo\nTHREE\nfour\nfive\n"


def test_a_hunk_that_does_not_match_the_file_is_refused_naming_the_line():
    (fp,) = parse(DIFF)
    with pytest.raises(PatchError, match=r"t: does not apply: f.py line 3 is 'tree', the patch expects 'three'"):
        apply("one\ntwo\ntree\nfour\n", fp, "t")


def test_not_a_diff_and_a_file_outside_the_engines_dry_are_refused(tmp_path):
    with pytest.raises(PatchError, match="not a unified diff"):
        parse("just text\n")
    p = tmp_path / "x.diff"
    p.write_text(DIFF)
    with pytest.raises(PatchError, match=r"it changes pkg/f.py; a patch of engine:exllamav2 changes "
                                         r"exllamav2/generator/sampler.py"):
        read(p, ("exllamav2/generator/sampler.py",), "exllamav2")


def test_the_spec_takes_a_patch_only_where_dryz_runs_the_engines_dry_from_source(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    rel = os.path.relpath(EXL)
    assert normal_spec(f"engine:exllamav2+patch={rel}") == f"engine:exllamav2+patch={EXL}"
    check_spec(f"engine:exllamav2+patch={rel}")
    with pytest.raises(SubjectError, match="its DRY is Rust compiled into the mistralrs wheel"):
        check_spec(f"engine:mistralrs+patch={rel}")
    with pytest.raises(SubjectError, match="patch its Python fallback, engine:aphrodite-python"):
        check_spec(f"engine:aphrodite+patch={APH}")
    with pytest.raises(SubjectError, match="no such file"):
        check_spec("engine:exllamav2+patch=/nonexistent/fix.diff")


def test_the_committed_patches_are_read_as_their_engines_patches():
    assert [f.path for f in read(EXL, ("exllamav2/generator/sampler.py",), "exllamav2")] == \
        ["exllamav2/generator/sampler.py"]
    assert [f.path for f in read(APH, ("aphrodite/v1/sample/ops/dry.py",), "aphrodite-python")] == \
        ["aphrodite/v1/sample/ops/dry.py"]


def _engine(name: str) -> None:
    if importlib.util.find_spec(name) is None:
        if REQUIRE:
            pytest.fail(f"{name} is not installed (DRYZ_REQUIRE_ENGINES=1)")
        pytest.skip(f"{name} is not installed")


def _check(spec: str, case: dict, tmp_path) -> dict:
    f = tmp_path / "case.json"
    f.write_text(json.dumps(case))
    p = subprocess.run([sys.executable, "-m", "dryz", "--subject", spec, "check", str(f)], capture_output=True,
                       text=True, env=clean_env(), timeout=300)
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


def test_exllamav2_patched_answers_where_it_raised(tmp_path):
    """raises-window:20's witness: the pinned exllamav2 raises AssertionError, the patched one answers; its
    identity names the patch and its sha256."""
    _engine("exllamav2")
    case = {"history": [0, 0], "alphabet": 1, "penalty_last_n": 1, "allowed_length": 0}
    plain = _check("engine:exllamav2", case, tmp_path)
    assert plain["verdict"]["class"] == "crash" and "AssertionError" in plain["verdict"]["detail"]
    fixed = _check(f"engine:exllamav2+patch={EXL}", case, tmp_path)
    assert fixed["verdict"]["class"] == "agree" and fixed["verdict"]["observed_logits"] == [0.0]
    s = fixed["subject"]
    assert s["spec"] == f"engine:exllamav2+patch={EXL}"
    import hashlib
    assert s["patch"] == {"file": str(EXL), "sha256": hashlib.sha256(EXL.read_bytes()).hexdigest()}
    assert "+ patch exllamav2-short-window.diff (sha256 " in s["engine_version"]


def test_a_patch_that_does_not_apply_to_the_installed_engine_is_one_line(tmp_path):
    _engine("exllamav2")
    bad = tmp_path / "bad.diff"
    bad.write_text(EXL.read_text().replace("-            assert settings.dry_range > settings.dry_max_ngram",
                                           "-            assert settings.dry_range >= settings.dry_max_ngram"))
    f = tmp_path / "case.json"
    f.write_text(json.dumps({"history": [0, 0], "alphabet": 1, "penalty_last_n": 4}))
    p = subprocess.run([sys.executable, "-m", "dryz", "--subject", f"engine:exllamav2+patch={bad}", "check", str(f)],
                       capture_output=True, text=True, env=clean_env(), timeout=300)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "did not answer the handshake" in p.stderr and p.stderr.rstrip().endswith(
        "the patch expects 'assert settings.dry_range >= settings.dry_max_ng')"), p.stderr  # (its last words)


def test_aphrodite_patched_penalizes_a_one_token_repeat(tmp_path):
    """repeat-min:2's witness `aa`, allowed_length 0: the Python fallback leaves `a` at 0, patched -2 (llama.cpp's)."""
    _engine("torch")
    case = {"history": [0, 0], "alphabet": 1, "penalty_last_n": 64, "allowed_length": 0}
    plain = _check("engine:aphrodite-python", case, tmp_path)
    assert plain["verdict"]["observed_logits"] == [0.0]
    fixed = _check(f"engine:aphrodite-python+patch={APH}", case, tmp_path)
    assert fixed["verdict"]["class"] == "agree" and fixed["verdict"]["observed_logits"] == [-2.0]


# -- the gate's judgement by the causes (pure: two fits given) ---------------------------------------------------

def test_declarations_name_a_removed_cause_or_a_narrowed_one():
    assert cause_of("raises-window:20") == ("raises-window:20", None)
    assert cause_of("repeat-min:2=repeat-min:1") == ("repeat-min:2", "repeat-min:1")
    assert cause_of("repeat-min:2=match-cap:1") is None and cause_of("repeat-min:2=repeat-min:2") is None
    assert not is_model("crash") and not is_model("semantic-change@window=-1")


def _fit(models, residual=0):
    return {"fit": {"models": list(models), "residual": residual, "answers": 100, "llama.cpp": 10},
            "cells": {}, "witnesses": []}


def _judged(base, new, declared, residual=0, tmp_path=Path(".")) -> GateResult:
    c = Causes("engine:x+patch=p", "engine:x", declared, tmp_path, lambda m: None)
    c.fits = {"base": _fit(base), "subject": _fit(new, residual)}
    res = GateResult("", 0, 60, 1, 0.0, [], declared=sorted(declared))
    c.judge(res, tmp_path)
    return res


def test_the_fits_differ_by_exactly_the_declared_causes(tmp_path):
    res = _judged(["raises-window:20", "raises-history:1", "no-clamp"], ["no-clamp"],
                  ["raises-window:20", "raises-history:1"], tmp_path=tmp_path)
    assert [(c.klass, c.declared) for c in res.changes] == [("raises-window:20", True), ("raises-history:1", True)]
    assert res.declared_unseen == [] and res.modes[0].name == "causes" and res.modes[0].verdict == "pass"


def test_without_the_declaration_the_removed_causes_are_undeclared_changes(tmp_path):
    res = _judged(["raises-window:20", "no-clamp"], ["no-clamp"], [], tmp_path=tmp_path)
    assert [(c.klass, c.declared) for c in res.changes] == [("raises-window:20", False)]


def test_a_narrowed_cause_is_declared_old_equals_new(tmp_path):
    res = _judged(["repeat-min:2", "no-clamp"], ["no-clamp", "repeat-min:1"], ["repeat-min:2=repeat-min:1"],
                  tmp_path=tmp_path)
    assert [(c.klass, c.declared) for c in res.changes] == [("repeat-min:2=repeat-min:1", True)]
    res = _judged(["repeat-min:2", "no-clamp"], ["no-clamp", "repeat-min:1"], ["repeat-min:2"], tmp_path=tmp_path)
    assert [(c.klass, c.declared) for c in res.changes] == [("repeat-min:2=repeat-min:1", False)]
    assert res.declared_unseen == ["repeat-min:2"]


def test_a_cause_the_patch_adds_and_a_residual_fail(tmp_path):
    res = _judged(["no-clamp"], ["no-clamp", "match-cap:12"], [], residual=3, tmp_path=tmp_path)
    assert [(c.klass, c.declared) for c in res.changes] == [("match-cap:12", False)]
    assert res.modes[0].verdict == "finding"
    res = _judged(["no-clamp"], ["no-clamp"], ["raises-window:20"], tmp_path=tmp_path)
    assert res.changes == [] and res.declared_unseen == ["raises-window:20"]


def test_a_campaign_s_failed_control_is_judged_by_the_causes_like_its_findings(tmp_path):
    """A campaign's controls judge against llama.cpp alone: one an engine fails (its ABI confirmation case) is one
    of the inputs the gate fits both engines on, beside the campaign's findings."""
    d = tmp_path / "fuzz"
    (d / "artifacts").mkdir(parents=True)
    (d / "artifacts" / "crash-1").write_bytes(b"x")
    case = {"schema": "dryz.case/1", "history": [0, 0], "alphabet": 1, "penalty_last_n": 64, "allowed_length": 1}
    (d / "summary.json").write_text(json.dumps({"controls": {"abi_confirmation": {"case": case, "passed": False},
                                                             "other": {"case": case, "passed": True}}}))
    c = Causes("engine:x+patch=p", "engine:x", [], tmp_path, lambda m: None)
    got = c._campaign_inputs("fuzz")
    assert [f.name for f in got] == ["crash-1", "fuzz-control-abi_confirmation.json"]
    assert json.loads(got[1].read_text()) == case
