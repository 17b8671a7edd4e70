"""ik_llama.cpp's DRY (`--subject ik-llama:`, dryz/subject/ik_llama.py): dryz's own binding to the fork's API
(llama_sampler_init_dry, llama_sample_dry, llama_sampler_dry_accept/reset/clone/free) in the CPU wheel of
ik-llama-cpp-python 0.1.5, judged against llama.cpp's DRY by every mode. Skipped, with the extra to install, when
the wheel is missing; required under DRYZ_REQUIRE_ENGINES=1 (CI).

The facts asserted are the fork's at commit 55d3c05bf7b3 (docs/engines/ik_llama.md): what conforms (a
certificate, a trace through reset) and each of its differences, with the exact logits it leaves beside
llama.cpp's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REQUIRE_ENGINES, clean_env, dryz

SPEC = "ik-llama:"
SHA256 = "cc2e99ffa20c846b7d69a061a145939d487e035ef5920ad4e6bd5b64812f4654"  # the 0.1.5 wheel's libllama.so


@pytest.fixture(scope="module")
def ik():
    from dryz.subject.ik_llama import missing
    why = missing()
    if why is not None:
        if REQUIRE_ENGINES:
            pytest.fail(f"ik_llama.cpp required (DRYZ_REQUIRE_ENGINES=1): {why}")
        pytest.skip(why)
    return SPEC


def write_case(tmp_path, name, history, **kw):
    from dryz.case import Case
    from dryz.symbols import from_symbols
    h = tuple(from_symbols(history))
    p = tmp_path / name
    p.write_text(Case(history=h, alphabet=kw.pop("alphabet", max(h) + 1), **kw).dumps())
    return p


def write_trace(tmp_path, name, events, **kw):
    p = tmp_path / name
    p.write_text(json.dumps({"schema": "dryz.trace/1", "alphabet": 2, "penalty_last_n": 64, "breakers": [],
                             "multiplier": 1.0, "base": 2.0, "allowed_length": 1, "events": events, **kw}))
    return p


def check(spec, path):
    p = dryz("--subject", spec, "check", str(path))
    return p.returncode, json.loads(p.stdout)["verdict"]


def test_the_subject_names_the_wheel_and_the_fork_commit(ik):
    p = dryz("--subject", ik, "subject", "show")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert (s["kind"], s["distribution"], s["ik_llama_commit"], s["libllama_sha256"]) == \
        ("ik-llama", "ik-llama-cpp-python 0.1.5", "55d3c05bf7b377deaa5dc84d255d9740a345a206", SHA256)
    assert s["libllama_path"].endswith("/ik_llama_cpp/lib/libllama.so")
    assert s["capabilities"]["calls"] == ["accept", "apply", "clone", "free", "reset"]
    assert s["capabilities"]["in_process"] is True and s["init_dry_abi"] == 7


def test_a_certificate_on_the_fork_certifies_the_space_llama_cpp_certifies(ik, tmp_path):
    out = tmp_path / "cert.json"
    p = dryz("--subject", ik, "-q", "exhaustive", "-n", "6", "-j", "1", "--no-progress", "--json", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    c = json.loads(out.read_text())
    assert c["verdict"] == "certified"
    assert c["totals"] == {"cases": 9828, "mismatches": 0, "oracle_disagreements": 0}
    assert [(k["name"], k["cases"], k["penalized_cases"], k["max_L"]) for k in c["configs"]] == \
        [("base", 3276, 1317, 5), ("window4", 3276, 915, 3), ("breaker", 3276, 614, 5)]


def test_a_conforming_case_and_each_difference_with_the_exact_logits(ik, tmp_path):
    code, v = check(ik, write_case(tmp_path, "ok.json", "abcab", penalty_last_n=64, allowed_length=2))
    assert code == 0 and v["class"] == "agree" and v["observed_logits"] == [0.0, 0.0, -1.0]
    # penalty_last_n -1: llama.cpp's init_dry clamps it to 0 (DRY off); the fork's window is the vocabulary's size
    code, v = check(ik, write_case(tmp_path, "m1.json", "aa", penalty_last_n=-1))
    assert code == 1 and v["class"] == "mismatch"
    assert (v["expected_logits"], v["observed_logits"]) == ([0.0], [-1.0])
    # every window is capped at the vocabulary's size (64 symbols): the 65th token back is out of the fork's window
    code, v = check(ik, write_case(tmp_path, "cap.json", "a" * 65, penalty_last_n=65, allowed_length=0))
    assert code == 1 and v["class"] == "mismatch"
    assert (v["expected_logits"], v["observed_logits"]) == ([-2.0 ** 64], [-2.0 ** 63])
    # penalty_last_n below -1: DRY enabled with a ring buffer of capacity 0; the first accept throws
    code, v = check(ik, write_case(tmp_path, "m2.json", "a", penalty_last_n=-2))
    assert code == 1 and v["class"] == "crash" and v["signal"] == "SIGABRT"
    assert v["stderr"].endswith("what():  ring buffer: capacity is zero")


def test_a_trace_through_reset_conforms_and_a_clone_crashes_judged_and_minimized_in_a_worker(ik, tmp_path):
    code, v = check(ik, write_trace(tmp_path, "reset.json", [["accept", [0, 1, 0, 1]], ["apply", None], ["reset"],
                                                             ["accept", [0, 0]], ["apply", None]]))
    assert code == 0 and v["class"] == "agree"
    assert [a["verdict"]["observed_logits"] for a in v["applies"]] == [[-2.0, 0.0], [-1.0, 0.0]]
    clone = write_trace(tmp_path, "clone.json", [["accept", [0, 1, 0, 1]], ["clone"], ["apply", None]])
    code, v = check(ik, clone)
    assert code == 1 and (v["class"], v["signal"]) == ("crash", "SIGSEGV")
    assert check("libllama:", clone)[1]["applies"][0]["verdict"]["observed_logits"] == [-2.0, 0.0]
    p = dryz("--subject", ik, "minimize", str(clone), "--corpus", str(tmp_path / "min"))
    assert p.returncode == 0, p.stdout + p.stderr
    (entry,) = (tmp_path / "min").glob("crash-trace-*.json")
    e = json.loads(entry.read_text())
    assert (e["class"], e["shortest"], e["spelled"]) == ("crash", "proven", "C A")
    p = dryz("--subject", ik, "replay", str(tmp_path / "min"))
    assert p.returncode == 0 and "replayed 1 entries: 1 as expected, 0 changed" in p.stdout, p.stdout + p.stderr


def test_properties_judge_the_fork_cell_by_cell(ik, tmp_path):
    out = tmp_path / "props.json"
    p = dryz("--subject", ik, "properties", "--property", "repeats", "--property", "window-negative",
             "--json", str(out))
    assert p.returncode == 1, p.stdout + p.stderr
    cells = json.loads(out.read_text())["cells"]
    assert (cells["repeats"]["status"], cells["window-negative"]["status"]) == ("conforms", "differs")


BOTH = """
import sys
from dryz.case import Case
from dryz.subject import open_subject
subjects = [open_subject(s) for s in sys.argv[1:]]
case = Case(history=(0, 1, 0, 1), alphabet=2, penalty_last_n=-1)
print([[float(x) for x in s.run(case).logits] for s in subjects])
"""


def test_the_fork_and_llama_cpp_load_into_one_process_in_either_order(ik):
    """Both libraries export the same names; the fork is loaded local and deep-bound, so each runs its own code."""
    for order, want in (([ik, "libllama:"], [[-2.0, 0.0], [0.0, 0.0]]), (["libllama:", ik], [[0.0, 0.0], [-2.0, 0.0]])):
        p = subprocess.run([sys.executable, "-c", BOTH, *order], capture_output=True, text=True, env=clean_env())
        assert p.returncode == 0 and json.loads(p.stdout) == want, p.stderr


def test_without_the_wheel_the_subject_is_one_line_naming_the_extra():
    code = ("import sys, importlib.util as u; f = u.find_spec; "
            "u.find_spec = lambda n, *a: None if n == 'ik_llama_cpp' else f(n, *a); "
            "from dryz.cli import main; sys.argv = ['dryz', '--subject', 'ik-llama:', 'subject', 'show']; main()")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env())
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "pip install 'dryz[ik-llama]'" in p.stderr and "ik-llama-cpp-python 0.1.5" in p.stderr


def test_a_real_vocabulary_case_on_a_fresh_sampler_and_after_reset(ik, tmp_path):
    """llama-bpe through the fork's own tokenizer (its vocabulary loaded into the fork); the case on a fresh
    sampler (init_dry) and on its configuration's sampler after llama_sampler_dry_reset (DRYZ_VOCAB_SAMPLER=reset,
    `dryz fuzz --vocab NAME --sampler reset`): the same verdict and logits."""
    from conftest import vocab
    from dryz.case import Case
    from dryz.subject import open_subject
    v = vocab("llama-bpe", open_subject(ik))
    h = v.tokenize("the cat sat on the mat: the cat sat on the")
    ids = sorted(set(h))
    p = tmp_path / "bpe.json"
    p.write_text(Case(history=h, alphabet=v.n_tokens, penalty_last_n=64, breakers=("\n", ":", "\"", "*"),
                      allowed_length=2, candidates=tuple((t, 0.0) for t in ids), vocab="llama-bpe",
                      vocab_sha256=v.ref.sha256).dumps())
    got = []
    for mode in ("clone", "reset"):
        r = dryz("--subject", ik, "check", str(p), env={"DRYZ_VOCAB_SAMPLER": mode})
        assert r.returncode == 0, r.stdout + r.stderr
        verdict = json.loads(r.stdout)["verdict"]
        got.append((verdict["class"], verdict["observed_logits"]))
    penalized = {t: lg for t, lg in zip(ids, got[0][1]) if lg}
    assert got[0] == got[1] and got[0][0] == "agree"
    assert penalized == {v.tokenize(" mat")[0]: -4.0}, penalized  # " cat sat on the" repeats: L 4, 2^(4-2)


def test_the_witnesses_replay(ik):
    """(The reproductions with the fork's library alone are the generated issue reports' scripts,
    docs/engines/ik_llama/issues/: tests/test_issue.py runs them.)"""
    from conftest import ROOT
    d = ROOT / "corpus" / "engines" / "ik_llama"
    p = dryz("--subject", ik, "replay", str(d))
    assert p.returncode == 0 and "replayed 4 entries: 4 as expected, 0 changed" in p.stdout, p.stdout + p.stderr


def test_the_fork_is_the_8_argument_init_dry_with_the_vocabulary_size_as_n_ctx_train(ik):
    """Rows 1-3 of docs/engines/ik_llama.md are one cause: every output equals dryz's model of llama.cpp's
    8-argument init_dry with n_ctx_train = the vocabulary's size (64 symbols), where many differ from the pinned
    7-argument one's. (Windows below -1 crash the fork, as they crash that ABI: not run here, in this process.)"""
    import random
    from dryz.case import Case
    from dryz.config import Semantics
    from dryz.judge import judge_output
    from dryz.subject import open_subject
    subject = open_subject(ik)
    rng = random.Random(7)
    got = {7: {}, 8: {}}
    for last_n in (-1, 0, 1, 3, 63, 64, 65, 200):
        for length in (1, 2, 3, 5, 8, 64, 65, 66, 130):
            for _ in range(4):
                k = rng.choice((1, 2, 3))
                c = Case(history=tuple(rng.randrange(k) for _ in range(length)), alphabet=k, penalty_last_n=last_n,
                         allowed_length=rng.choice((0, 1, 2)), n_ctx_train=64)
                out = subject.run(c)
                for abi in (7, 8):
                    v = judge_output(c, Semantics(kind="ik-llama", abi=abi), out).status
                    got[abi][v] = got[abi].get(v, 0) + 1
    assert got[8] == {"agree": 288}
    assert got[7] == {"agree": 251, "mismatch": 37}, got[7]  # the pinned 7-argument semantics


def test_a_campaign_counts_a_crash_its_causes_explain_when_it_is_re_checked(ik, tmp_path):
    """ik_llama.cpp's process dies (SIGABRT) on a window below -1, which its fitted cause window-context:64 models as
    a raise: a fuzz job cannot judge that input (the crash ends it), so the campaign judges the crash file when it
    re-checks it in a clean process. With the cause, the file is explained (kept among the explained inputs, and
    not a finding); without it, it is a crash finding."""
    import shutil
    from pathlib import Path

    from dryz.fuzz.campaign import Campaign
    from dryz.subject.registry import open_subject
    # the crash file a campaign wrote for `a` with window -5 (a JSON seed mutated; the input's bytes, as libFuzzer
    # names a crash by them)
    crash = tmp_path / "crash-a7c6de89237045affaa20323513748a7b608c84b"
    crash.write_text('{"schema": "dryz.case/1", "history": [0], "history_symbols": "a", "alphabet": 1, '
                     '"penalty_last_n": -5, "breakers": [], "multiplier": 1.0, "base": 2.0, "allowed_length": 0}')
    lib = open_subject(ik)
    try:
        rows = []
        for causes in (("window-context:64",), ()):
            work = tmp_path / ("with" if causes else "without")
            (work / "artifacts").mkdir(parents=True)
            art = Path(shutil.copy(crash, work / "artifacts" / crash.name))
            camp = Campaign(seconds=10, jobs=1, workdir=work, artifacts=work / "artifacts", subject=lib,
                            causes=causes)
            rows.append(camp.recheck(art))
        explained, found = rows
        assert (explained["klass"], explained["signal"], explained["explained_by"]) == \
            ("crash", "SIGABRT", ["window-context:64"])
        (kept,) = (tmp_path / "with" / "explained").glob("*.json")
        assert json.loads(kept.read_text())["case"]["penalty_last_n"] == -5
        assert (found["klass"], found["reproduces"]) == ("crash", True) and "explained_by" not in found
        assert not (tmp_path / "without" / "explained").exists()
    finally:
        lib.close()
