"""dryz gate: every mode on a subject within a budget, one exit code; with --base, the behaviour changes against
the base, judged against what the pull request declares.

In CI (DRYZ_REQUIRE_BUILDS=1) with a short budget: the pinned build passes; each planted patch of
tests/patches/ fails and the gate names the mode that saw it; 0.3.36 against 0.3.34 lists the -1 and
negative-window changes as minimized witnesses and fails unless they are declared, exactly.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dryz import gate as g

import conftest

ROOT = Path(__file__).resolve().parents[1]
BUDGET = "60"  # seconds: the fixed modes take about 25 s per lane, the timed ones get what is left

# Each planted patch and the modes that must see it (others may too).
PLANTED = {
    "restart-limit-plus-one.diff": {"certificate"},   # the breaker configuration
    "naive-match-cap-12.diff": {"certificate"},        # the periodic control's long closed forms
    "reset-keeps-tokens.diff": {"traces"},             # only a trace resets; every single-case mode passes
    "tail-cap-19.diff": {"construction"},              # only real vocabularies' long breakers reach 20 tokens
}
# ... and the single-case certificates that must not (the bug is out of their reach).
BLIND = {"reset-keeps-tokens.diff": {"certificate", "parameters", "window-caps"},
         "tail-cap-19.diff": {"certificate", "parameters", "window-caps", "traces", "restarts"}}


def dryz(*args, timeout=1800, cwd=None):
    return conftest.dryz(*args, timeout=timeout, cwd=cwd)


_build = conftest.build


# -- the plan -------------------------------------------------------------------------------------------------


def test_plan_names_every_mode_and_passes_the_subject_through():
    from dryz.children import argv as child_argv
    modes = g.plan("libllama:/x/libllama.so", 300, base="/b/libllama.so")
    names = [m.name for m in modes]
    assert sorted(names) == sorted(g.NAMES)
    for m in modes:  # every command line starts with the subject
        argv = child_argv(m.spec, m.args(Path("/w"), 10))
        assert argv[3:5] == ["--subject", "libllama:/x/libllama.so"] and argv[5] == "-q"
        assert "{" not in " ".join(argv)
        assert f"--json=/w/{m.name}.json" in argv  # every mode's result is read from its JSON
    d = next(m for m in modes if m.name == "differential")
    assert "--base" in d.args(Path("/w"), 10) and "/b/libllama.so" in d.args(Path("/w"), 10)
    assert d.lane == next(m for m in modes if m.name == "fuzz").lane
    # the differential follows the symbol campaign in its lane (it compares on that campaign's kept inputs)
    lane = [m.name for m in modes if m.lane == d.lane]
    assert lane.index("differential") == lane.index("fuzz") + 1
    assert "differential" not in [m.name for m in g.plan("libllama:x", 300)]


@pytest.mark.parametrize("budget", [60, 300, 1800])
def test_plan_fills_each_lane_with_the_budget(budget):
    """Per lane: the fixed modes' estimates, the timed modes' shares and their overheads add up to the budget
    (when it is large enough for the minimum campaign)."""
    modes = g.plan("libllama:x", budget, base="b")
    for lane in (0, 1):
        ms = [m for m in modes if m.lane == lane]
        total = sum(m.seconds + m.overhead for m in ms)
        if all(m.seconds > g.MIN_SECONDS for m in ms if m.timed):
            assert abs(total - budget) < 1, (lane, total)
        for m in ms:
            if m.record.share:
                assert m.seconds == pytest.approx(max(g.MIN_SECONDS, m.record.share * budget), abs=0.1)
    fuzz = [m for m in modes if m.name.startswith("fuzz")]
    assert len(fuzz) == 4 and all(m.timed for m in fuzz)
    one = g.plan("libllama:x", budget, lanes=1)
    assert {m.lane for m in one} == {0}


def test_plan_refuses_unknown_modes():
    with pytest.raises(g.GateError, match="unknown mode"):
        g.plan("libllama:x", 60, modes=["certificate", "nosuch"])


def test_change_classes_and_declarations():
    from dryz.case import Case
    c = lambda h, **kw: Case(history=h, alphabet=1, **kw)  # noqa: E731
    assert g.change_class("crash", c((0,), penalty_last_n=-5)) == "crash@window<-1"
    assert g.change_class("crash", c((0,), penalty_last_n=-1, n_ctx_train=0)) == "crash@window=-1,n_ctx_train<=0"
    assert g.change_class("semantic-change", c((0, 0, 0), penalty_last_n=3, n_ctx_train=2)) == \
        "semantic-change@window>0,n_ctx_train<window"
    assert g.change_class("semantic-change", c((0, 0), penalty_last_n=0)) == "semantic-change@window=0"
    assert g.declared("crash@window<-1", ["crash"])
    assert g.declared("crash@window=-1,n_ctx_train<=0", ["crash@window=-1"])
    assert not g.declared("crash@window=-1", ["crash@window=-1,n_ctx_train<=0"])
    assert not g.declared("semantic-change@window=-1", ["semantic"])   # a prefix must end at @ or ,
    assert not g.declared("crash@window<-1", ["semantic-change"])


def test_expect_file(tmp_path):
    f = tmp_path / "expect"
    f.write_text("# this PR makes -1 mean 'off'\nsemantic-change@window=-1\n\n  crash  # every crash\n")
    assert [d for _, d in g.read_expect_file(f)] == ["semantic-change@window=-1", "crash"]


def test_excerpt_keeps_the_lines_that_show_the_case():
    text = ("dryz explain: x.json (case JSON)\nclass mismatch  (the library differs)\nsubject     s\n"
            "candidate   L(A)  L(B) L(lib)     expected     observed  where the repeat is\n"
            "a              0     0      1            0           -1    <- DIFFERS\n"
            "b              1     1      1           -1           -1  ...\n(2 more candidates)\n")
    assert g.excerpt(text) == ["class mismatch  (the library differs)",
                               "candidate   L(A)  L(B) L(lib)     expected     observed  where the repeat is",
                               "a              0     0      1            0           -1    <- DIFFERS"]


# -- the command ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args,msg", [
    (["--time", "5"], "--time must be in 10..86400"),
    (["--expect-change", "crash"], "give --base"),
    (["--expect-change", "crash@window=7", "--base", "x"], "a class is CLASS"),
    (["--base", "/nonexistent/libllama.so"], "--base"),
    (["--mode", "nosuch"], "unknown mode"),
    (["--lib", "/nonexistent/libllama.so"], "--lib: libllama:/nonexistent/libllama.so: no such file"),
])
def test_bad_input_is_one_line(args, msg, tmp_path):
    p = dryz("gate", "--workdir", str(tmp_path / "w"), *args, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.startswith("dryz: error: ") and p.stderr.count("\n") == 1 and msg in p.stderr


def test_a_short_gate_on_the_pinned_build_passes(tmp_path):
    """A few modes in one lane on the pip build: each passes; the summary, JSON and HTML are written and
    name the subject."""
    md, js, ht = tmp_path / "g.md", tmp_path / "g.json", tmp_path / "g.html"
    p = dryz("gate", "--time", "20", "--lanes", "1", "--mode", "certificate", "--mode", "restarts", "--mode",
             "replay", "--mode", "promise", "--workdir", str(tmp_path / "w"), "--markdown", str(md), "--json",
             str(js), "--html", str(ht), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(js.read_text())
    assert r["tool"] == "dryz gate" and r["verdict"] == "pass" and r["exit"] == 0
    assert [m["name"] for m in r["modes"]] == ["certificate", "restarts", "replay", "promise"]
    assert all(m["verdict"] == "pass" and m["exit"] == 0 for m in r["modes"])
    by = {m["name"]: m for m in r["modes"]}
    assert by["certificate"]["text"] == "CERTIFIED: 2,391,471 cases, 0 mismatches"
    from dryz.corpus import DEFAULT_DIR, entries
    n = len(entries(DEFAULT_DIR))
    assert by["replay"]["text"] == f"{n}/{n} as expected"
    assert by["promise"]["given"] is not None and by["promise"]["text"].endswith(")") and \
        "0 finding(s) (documented classes seen: " in by["promise"]["text"]
    text = md.read_text()
    assert text == p.stdout and len(text.splitlines()) <= 60
    assert text.startswith("### dryz gate: PASS") and "llama-cpp-python 0.3.36" in text
    # the console's ending (stderr: stdout is the summary as --markdown writes it)
    lines = p.stderr.splitlines()
    end = lines[lines.index("classes   findings and changes: none"):]
    assert end[1:4] == [f"written   {tmp_path / 'w' / 'gate.json'} (every mode's result)", f"          {js} (the result)",
                        f"          {md} (the summary)"], end
    assert end[4].startswith(f"next      dryz report {tmp_path / 'w' / 'gate.json'} --html gate.html"), end
    assert r["subject"]["libllama_sha256"][:16] in text
    page = ht.read_text()
    assert "Gate <code>gate.json</code>" in page and "Certificate <code>certificate.json</code>" in page


def test_the_workflow_uses_options_the_gate_has():
    wf = (ROOT / "docs" / "ci" / "dryz-gate.yml").read_text()
    cmd = re.search(r"\n\s+dryz gate (--lib .+?)--json dryz-gate.json", wf, re.S).group(1)
    opts = set(re.findall(r"(--[a-z-]+)", cmd))
    assert {"--lib", "--base", "--time", "--markdown", "--html", "--workdir"} <= opts
    assert "--lib build/bin/libllama.so" in cmd and '"$DRYZ_BASE"' in cmd and "DRYZ_BASE: \"0.3.36\"" in wf
    helptext = dryz("gate", "--help").stdout
    assert all(o in helptext for o in opts | {"--expect-file", "--json"})
    assert "actions/upload-artifact" in wf and "gh pr comment" in wf and "GITHUB_STEP_SUMMARY" in wf


# -- real subjects (built by dryz subject build; CI requires them) --------------------------------------------


def _gate(tmp_path, *args, name="g"):
    js = tmp_path / f"{name}.json"
    p = dryz("gate", "--time", BUDGET, "--workdir", str(tmp_path / name), "--json", str(js), *args)
    assert js.exists(), p.stdout + p.stderr
    return p, json.loads(js.read_text())


@pytest.mark.parametrize("patch", sorted(PLANTED))
def test_the_gate_fails_on_each_planted_patch_and_names_the_mode(patch, tmp_path):
    lib = _build("0.3.36", patch)
    p, r = _gate(tmp_path, "--lib", str(lib))
    assert p.returncode == 1, p.stdout + p.stderr
    assert r["verdict"] == "fail" and r["subject"]["built_by_dryz"]["patch"] == patch
    found = {m["name"] for m in r["modes"] if m["verdict"] == "finding"}
    assert PLANTED[patch] <= found, (patch, found)
    assert not found & BLIND.get(patch, set()), (patch, found)
    assert not {m["verdict"] for m in r["modes"]} & {"error", "timeout"}, [m["text"] for m in r["modes"]]
    for name in PLANTED[patch]:  # the mode's finding has a witness, minimized and explained
        f = next(m for m in r["modes"] if m["name"] == name)["findings"][0]
        assert f["witness"] and f["explain"], f
        assert f["minimized"] and f["shortest"] in ("proven", "1-minimal"), f
    for name in PLANTED[patch]:
        assert re.search(rf"^\| {name} \| finding \|", p.stdout, re.M), p.stdout
        assert f"- **{name}**" in p.stdout or any(f"- **{m}**" in p.stdout for m in found)
    assert len(p.stdout.splitlines()) <= 60


@pytest.fixture(scope="module")
def against_0334(tmp_path_factory):
    new, old = _build("0.3.36"), _build("0.3.34")
    tmp = tmp_path_factory.mktemp("base")
    p, r = _gate(tmp, "--lib", str(new), "--base", "0.3.34")
    return new, old, tmp, p, r


# The behaviour changes from 0.3.34 to 0.3.36 (README, "Every release side by side"): -1 and other negative
# windows, and the window's cap at n_ctx_train.
CHANGES_0334 = {"crash@window<-1", "crash@window=-1,n_ctx_train<=0", "semantic-change@window=-1",
                "semantic-change@window>0,n_ctx_train<=0"}


def test_base_0334_lists_the_window_changes_as_minimized_witnesses(against_0334):
    new, old, tmp, p, r = against_0334
    assert p.returncode == 1, p.stdout + p.stderr
    assert r["base"]["init_dry_abi"] == 8 and r["base"]["built_by_dryz"]["llama_cpp_python"] == "0.3.34"
    by = {m["name"]: m for m in r["modes"]}
    assert all(m["verdict"] == "pass" for m in r["modes"]), [(m["name"], m["verdict"], m["text"]) for m in r["modes"]]
    assert by["differential"]["findings"] == []  # the subject never crashes or breaks a promise there
    changes = {c["klass"]: c for c in r["changes"]}
    assert set(changes) == CHANGES_0334
    assert all(not c["declared"] and c["shortest"] == "proven" and Path(c["witness"]).exists()
               for c in changes.values())
    assert changes["crash@window<-1"]["spelled"].startswith("`a`, window ")
    assert "capacity is zero" in changes["crash@window<-1"]["base"] and changes["crash@window<-1"]["new"] == "agree"
    assert changes["semantic-change@window=-1"]["spelled"].startswith("`aa`, window -1")
    for c in changes.values():  # each change explained on both subjects
        assert any(x.startswith("new:") for x in c["explain"]) and any(x.startswith("base:") for x in c["explain"])
    assert "**Behaviour changes against the base**" in p.stdout and "| `crash@window<-1` | **no** |" in p.stdout
    assert len(p.stdout.splitlines()) <= 60


def test_base_0334_passes_when_exactly_the_changes_are_declared(against_0334, tmp_path):
    new, old, tmp, _, _ = against_0334
    expect = tmp_path / "expect"
    expect.write_text("crash  # both crash changes\nsemantic-change@window=-1\n"
                      "semantic-change@window>0,n_ctx_train<=0\n")
    p, r = _gate(tmp_path, "--lib", str(new), "--base", str(old), "--expect-file", str(expect), "--mode",
                 "differential")
    assert p.returncode == 0, p.stdout + p.stderr
    assert r["verdict"] == "pass" and all(c["declared"] for c in r["changes"])
    assert {c["klass"] for c in r["changes"]} == CHANGES_0334 and r["declared_unseen"] == []
    # one change left undeclared fails; a declaration nothing shows fails too, and is named
    p, r = _gate(tmp_path, "--lib", str(new), "--base", str(old), "--mode", "differential", "--expect-change",
                 "crash", "--expect-change", "semantic-change@window=-1", "--expect-change",
                 "semantic-change@window=0", name="g2")
    assert p.returncode == 1
    assert [c["klass"] for c in r["changes"] if not c["declared"]] == ["semantic-change@window>0,n_ctx_train<=0"]
    assert r["declared_unseen"] == ["semantic-change@window=0"]
    assert "| `semantic-change@window=0` | declared, **not seen** |" in p.stdout


def test_ctrl_c_leaves_a_partial_result_and_no_process(tmp_path):
    """SIGINT to the gate (as Ctrl-C sends it): every mode's process is stopped, the result says interrupted,
    exit 130, and nothing the gate started is left running."""
    import signal
    import time
    work = tmp_path / "w"
    env = {k: v for k, v in os.environ.items() if k not in ("DRYZ_LIB", "LLAMA_CPP_LIB_PATH", "DRYZ_FAULT")}
    p = subprocess.Popen([sys.executable, "-m", "dryz", "gate", "--time", "120", "--workdir", str(work), "--mode",
                          "certificate", "--mode", "fuzz", "--mode", "traces", "--mode", "fuzz-traces"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
                         preexec_fn=conftest.default_sigint)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (work / "fuzz" / "libfuzzer.log").exists():
        time.sleep(0.5)
    assert (work / "fuzz" / "libfuzzer.log").exists(), "the campaign never started"
    time.sleep(3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, out + err
    r = json.loads((work / "gate.json").read_text())
    assert r["verdict"] == "interrupted" and r["exit"] == 130
    by = {m["name"]: m for m in r["modes"]}
    assert by["certificate"]["verdict"] == "pass"  # what finished before stays
    assert by["fuzz"]["verdict"] == "interrupted"
    assert out.startswith("### dryz gate: INTERRUPTED (partial)")
    time.sleep(1)
    left = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = open(f"/proc/{d}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(work) in cmd:
                left.append(cmd[:200])
    assert left == []


def test_a_vocabulary_lane_s_crash_file_is_read_as_its_campaign_read_it(tmp_path):
    """A vocabulary lane's finding without a decoded case beside it (a crash: the re-check decoded none) is read by
    minimize and explain with that lane's --vocab and --breakers; one with FILE.case.json needs no flags."""
    from dryz.gate.modes import read_fuzz
    crash, judged = tmp_path / ("crash-" + "a" * 40), tmp_path / ("crash-" + "b" * 40)
    crash.write_bytes(b"\x01\x02")
    judged.write_bytes(b"\x03\x04\x05")
    (tmp_path / (judged.name + ".case.json")).write_text("{}")
    summary = {"execs": 10, "seconds": 1.0, "cov": 1, "findings": [],
               "vocab": {"name": "llama-bpe", "path": "/x/ggml-vocab-llama-bpe.gguf", "breakers": "dict",
                         "spec": "llama-bpe"}}
    for f, klass in ((crash, "crash"), (judged, "mismatch")):
        summary["findings"] = [{"file": str(f), "klass": klass, "reproduces": True}]
        r = g.ModeResult("fuzz-vocab-dict", "finding", 1, 1.0, 1.0, "", [])
        read_fuzz(r, summary, tmp_path)
        (found,) = r.findings
        if f is crash:
            assert found.witness == str(crash) and found.reader == ["--vocab", "llama-bpe", "--decode-breakers", "dict"]
        else:
            assert found.witness == str(judged) + ".case.json" and found.reader == []
    del summary["vocab"]  # a symbol-vocabulary lane: bytes are the symbol decoder's
    summary["findings"] = [{"file": str(crash), "klass": "crash", "reproduces": True}]
    r = g.ModeResult("fuzz", "finding", 1, 1.0, 1.0, "", [])
    read_fuzz(r, summary, tmp_path)
    assert r.findings[0].reader == []
