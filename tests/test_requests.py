"""Request sequences (dryz.requests): requests sent in turn to one fresh instance, each judged on its own as
llama.cpp's semantics make requests independent. The model prefix-cache:suffix predicts what a prompt cache does
(pure); the fit picks it for an instance with a cache and nothing for one without; `dryz check`, `explain`,
`minimize` and `replay` read sequences; a subject that runs none says so. mistral.rs with its prefix cache on
(engine:mistralrs-cached) against the same facts, read back exactly, beside the cache off (a control)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import dryz, engine

ADAPTERS = Path(__file__).parent / "adapters"
CACHE = "cmd:" + " ".join([sys.executable, str(ADAPTERS / "prompt_cache.py")])
NO_CACHE = CACHE + " off"
M = ("prefix-cache:suffix",)
# Sequences of the requests property (symbols renamed in order of appearance) and what llama.cpp leaves for each
# request (every request alone), and what it leaves when each request is read from the end of the longest prefix an
# earlier prompt shares with it (the prefix cache: 'abceabce' after 'abcabcd' is read as 'eabce').
FACTS = {
    ("abcabcd", "abceabce", "abceabce"): ([[0.0] * 5, [-8.0] + [0.0] * 4, [-8.0] + [0.0] * 4],
                                          [[0.0] * 5, [-1.0] + [0.0] * 4, [-8.0] + [0.0] * 4]),
    ("ab", "aba"): ([[0.0, 0.0], [0.0, -1.0]], [[0.0, 0.0], [0.0, 0.0]]),
    ("abab", "ababab", "abababab"): ([[-2.0, 0.0], [-8.0, 0.0], [-32.0, 0.0]], [[-2.0, 0.0], [0.0, 0.0], [0.0, 0.0]]),
    ("abcab/c", "abcabdab/c"): ([[0.0] * 4, [0.0, 0.0, 0.0, -2.0]], [[0.0] * 4, [0.0] * 4]),
}
# The witness 'a', then 'aa': per request its class, what llama.cpp gives, what the cached instance gave.
PER_REQUEST = [{"class": "agree", "llama.cpp": {"logits": [0.0]}, "subject": {"logits": [0.0]}},
               {"class": "mismatch", "llama.cpp": {"logits": [-1.0]}, "subject": {"logits": [0.0]}}]


def _seq(prompts):
    from dryz.conformance.properties import _sequence
    return _sequence(prompts)


def _logits(answers) -> list:
    return [[float(x) for x in a.logits] for a in answers]


def seq_file(tmp_path, prompts, name="seq.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(_seq(prompts).to_json()))
    return p


def test_the_prefix_cache_model_reads_the_unshared_suffix():
    from dryz.causes import prediction
    from dryz.oracle.deviations import context
    for prompts, (llama, cached) in FACTS.items():
        items = _seq(prompts).items()
        assert [[float(x) for x in prediction(i, ())[0]] for i in items] == llama, prompts
        assert [[float(x) for x in prediction(i, M)[0]] for i in items] == cached, prompts
    # nothing shared, everything shared, a prefix of an earlier prompt: the whole prompt; else the suffix
    assert context(M, (0, 1), [(1,)]) == (0, 1) and context(M, (0, 1), [(0, 1, 2)]) == (0, 1)
    assert context(M, (0, 1, 0), [(0, 1), (0, 2)]) == (0,) and context(M, (0, 1, 0), [(0,), (0, 1, 1)]) == (0,)
    assert context((), (0, 1, 0), [(0, 1)]) == (0, 1, 0)  # llama.cpp: earlier requests change nothing


def test_the_sequence_format_and_its_refusals(tmp_path):
    from dryz.requests import MAX_REQUESTS, Requests, RequestsError
    s = _seq(("ab", "aba"))
    assert Requests.from_json(json.loads(s.dumps())) == s and s.spelled() == "ab | aba" and s.tokens() == 5
    for bad, why in (({"schema": "dryz.requests/1", "requests": []}, "at least one request"),
                     ({"schema": "dryz.requests/1", "requests": [{"history": [0]}]}, "request 1: case is missing"),
                     ({"schema": "dryz.requests/1", "requests": [], "extra": 1}, "unknown request sequence field"),
                     ({"schema": "dryz.requests/1",
                       "requests": [s.requests[0].to_json()] * (MAX_REQUESTS + 1)}, f"at most {MAX_REQUESTS}")):
        with pytest.raises(RequestsError, match=why):
            Requests.from_json(bad)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({"schema": "dryz.requests/1", "requests": "ab"}))
    r = dryz("--subject", CACHE, "check", str(p))
    assert r.returncode == 2 and r.stderr.strip() == (
        f"dryz: error: {p}: not a request sequence (dryz.requests/1): field 'requests' is a string, not an array")


def test_a_subject_that_runs_no_sequences_says_so(tmp_path):
    r = dryz("check", str(seq_file(tmp_path, ("ab", "aba"))))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "runs no request sequences: it is no instance that requests are sent to in turn" in r.stderr
    r = dryz("properties", "--property", "requests")
    assert r.returncode == 2 and "requests in turn                       not expressible" in r.stdout, r.stdout


def test_an_instance_with_a_prompt_cache_is_fitted_prefix_cache_and_one_without_conforms(tmp_path):
    from dryz.causes import fit, items
    from dryz.requests_check import judge_answers
    from dryz.judge import semantics
    from dryz.subject import open_subject
    for spec, want in ((CACHE, 1), (NO_CACHE, 0)):
        s = open_subject(spec)
        try:
            assert s.caps.sequences and s.runs_sequences() is None
            pairs = []
            for prompts, facts in FACTS.items():
                seq = _seq(prompts)
                got = s.run_sequence(seq)
                assert _logits(got) == facts[want], (spec, prompts)
                v = judge_answers(seq, got, semantics(s))
                assert v.klass == ("mismatch" if want else "agree")
                pairs += list(zip(items(seq), got))
            f = fit(pairs, sorted_flag=False)
            assert (f.models, f.residual) == ((M if want else ()), [])
        finally:
            s.close()


def test_check_explain_minimize_and_replay_a_sequence(tmp_path):
    f = seq_file(tmp_path, ("abcabcd", "abceabce"))
    r = dryz("--subject", CACHE, "check", str(f))
    out = json.loads(r.stdout)
    assert r.returncode == 1 and out["input"] == "request sequence" and out["verdict"]["class"] == "mismatch"
    assert [x["class"] for x in out["verdict"]["requests"]] == ["agree", "mismatch"]
    assert out["verdict"]["requests"][1]["observed_logits"][0] == -1.0
    assert dryz("--subject", NO_CACHE, "check", str(f)).returncode == 0
    e = dryz("--subject", CACHE, "explain", str(f))
    assert e.returncode == 1 and "requests  abcabcd | abceabce" in e.stdout
    assert "request 2: 'abceabce'     class mismatch" in e.stdout and "\nrequest 2:\nclass mismatch" in e.stdout
    # shrunk keeping the cause: 'a' then 'aa' (read as 'a': nothing), no sequence of fewer tokens shows it
    m = dryz("--subject", CACHE, "minimize", str(f), "--cause", "prefix-cache:suffix", "--fitted",
             "prefix-cache:suffix", "--corpus", str(tmp_path / "w"), "--json", str(tmp_path / "m.json"))
    assert m.returncode == 0, m.stdout + m.stderr
    assert "reproducer: 2 requests 'a | aa' (3 tokens), shortest: proven" in m.stdout
    entry = json.loads(Path(json.loads((tmp_path / "m.json").read_text())["written"]).read_text())
    assert entry["spelled"] == "a | aa" and entry["shortest"] == "proven" and entry["expect"] == "mismatch"
    assert entry["per_request"] == PER_REQUEST
    assert entry["provenance"]["cause"] == "prefix-cache:suffix"
    # without a cause: the same failure (the second request's mismatch, penalizing less)
    m = dryz("--subject", CACHE, "minimize", str(f), "--corpus", str(tmp_path / "w2"))
    assert m.returncode == 0 and "reproducer: 2 requests 'a | aa' (3 tokens), shortest: proven" in m.stdout
    assert dryz("--subject", CACHE, "replay", str(tmp_path / "w")).returncode == 0
    r = dryz("--subject", NO_CACHE, "replay", str(tmp_path / "w"))
    assert r.returncode == 1 and "mismatch, now agree" in r.stdout
    r = dryz("replay", str(tmp_path / "w"))  # libllama runs no sequences: not judged, nothing judged at all
    assert r.returncode == 2 and "runs no request sequences" in r.stdout + r.stderr


def test_properties_fit_the_prefix_cache_and_witness_it_per_request(tmp_path):
    r = dryz("--subject", CACHE, "properties", "--property", "requests", "--json", str(tmp_path / "p.json"))
    assert r.returncode == 1, r.stdout + r.stderr
    p = json.loads((tmp_path / "p.json").read_text())
    cell = p["cells"]["requests"]
    assert p["fit"]["models"] == ["prefix-cache:suffix"] and p["fit"]["residual"] == 0
    assert cell["status"] == "differs" and [c["name"] for c in cell["causes"]] == ["prefix-cache:suffix"]
    w = cell["causes"][0]["witness"]
    assert w["request"] == 2 and [c["history_symbols"] for c in w["probe"]["requests"]] == ["a", "aa"]
    assert w["per_request"] == PER_REQUEST
    assert "first probe: requests 'a', then 'aa' window 256" in r.stdout
    assert "request 2 'aa': a: llama.cpp -1.0, subject 0.0" in r.stdout
    r = dryz("--subject", NO_CACHE, "properties", "--property", "requests")
    assert r.returncode == 0 and "requests in turn                       conforms" in r.stdout, r.stdout


# -- mistral.rs ---------------------------------------------------------------------------------------------------


def test_mistralrs_prefix_cache_read_back_exactly_and_fitted():
    """engine:mistralrs-cached on the known sequences: each request read back exactly (the read-back asks on fresh
    Runners where a repeat of the prompt reads otherwise); engine:mistralrs (cache off) conforms on them."""
    from dryz.causes import fit, items
    from dryz.subject import open_subject
    engine("mistralrs")
    for spec, want in (("engine:mistralrs-cached", 1), ("engine:mistralrs", 0)):
        s = open_subject(spec)
        try:
            assert s.caps.sequences and s.caps.instance_per_case == bool(want)
            pairs = []
            for prompts, facts in FACTS.items():
                seq = _seq(prompts)
                got = s.run_sequence(seq)
                assert _logits(got) == facts[want], (spec, prompts)
                pairs += list(zip(items(seq), got))
            # single cases: a fresh instance each ('abababab' after 'abceabce' is read whole), as llama.cpp
            assert _logits(s.run_batch(list(_seq(("abceabce", "abababab")).requests))) == [
                [-8.0] + [0.0] * 4, [-32.0] + [0.0] * 4]
            f = fit(pairs, sorted_flag=False)
            assert (f.models, f.residual) == ((M if want else ()), [])
        finally:
            s.close()
    ident = json.loads(dryz("--subject", "engine:mistralrs-cached", "subject", "show").stdout)
    assert ident["engine"] == "mistral.rs-cached" and ident["engine_version"].endswith("(prefix_cache_n 16)")
    assert ident["sources"]["prefix-cache:suffix"].startswith("mistralrs-core/src/prefix_cacher.rs:466 ")


def test_mistralrs_prefix_cache_witness_minimizes_to_a_then_aa(tmp_path):
    engine("mistralrs")
    f = seq_file(tmp_path, ("abcabcd", "abceabce"))
    m = dryz("--subject", "engine:mistralrs-cached", "minimize", str(f), "--cause", "prefix-cache:suffix",
             "--fitted", "prefix-cache:suffix", "--corpus", str(tmp_path / "w"))
    assert m.returncode == 0 and "reproducer: 2 requests 'a | aa' (3 tokens), shortest: proven" in m.stdout, \
        m.stdout + m.stderr
    assert "request 2 'aa': mismatch; llama.cpp [-1.0]; subject [0.0]" in m.stdout
    assert dryz("--subject", "engine:mistralrs", "check", str(f)).returncode == 0


def _conformance_witness(tmp_path, row: str) -> dict:
    """`dryz conformance` on one row, the requests property only: the cell's cause and its minimized witness."""
    p = dryz("conformance", "--row", row, "--property", "requests", "--time-per-subject", "5", "-n", "2",
             "--workdir", str(tmp_path / "w"), "--json", str(tmp_path / "c.json"), timeout=1800)
    assert p.returncode == 1, p.stdout + p.stderr
    r = json.loads((tmp_path / "c.json").read_text())["rows"][0]
    assert "prefix-cache:suffix" in r["fit"]["models"]  # (the campaign's findings add other causes, maybe a residual)
    (cause,) = r["cells"]["requests"]["causes"]
    assert cause["name"] == "prefix-cache:suffix" and cause["kind"] == "observed"
    w = cause["witness"]
    assert w["shortest"] == "proven" and Path(w["minimized"]).is_file()
    assert [c["history_symbols"] for c in w["minimized_case"]["requests"]] == ["a", "aa"]
    v = w["minimized_values"]
    assert v["request"] == 2 and v["llama.cpp"] == {"logits": [-1.0]} and v["subject"] == {"logits": [0.0]}
    assert v["per_request"][0] == PER_REQUEST[0]
    assert "= llama.cpp with prefix-cache:suffix" in p.stdout and "requests in turn " in p.stdout
    return r


def test_the_matrix_minimizes_the_prefix_cache_witness(tmp_path):
    r = _conformance_witness(tmp_path, CACHE)
    assert r["fit"]["models"] == ["prefix-cache:suffix"] and r["fit"]["residual"] == 0  # single cases: llama.cpp


def test_mistralrs_as_users_run_it_is_a_row_with_its_minimized_witness(tmp_path):
    engine("mistralrs")
    r = _conformance_witness(tmp_path, "engine:mistralrs-cached")
    assert r["subject"] == "mistral.rs-cached 0.9.5"
    assert r["cells"]["requests"]["causes"][0]["source"].startswith("mistralrs-core/src/prefix_cacher.rs:466 ")
    # the modes that enumerate tens of thousands of cases are not run at a fresh Runner per case (the fuzz is)
    assert {k: c["verdict"] for k, c in r["campaigns"].items() if k != "fuzz"} == {
        "certificate": "not expressible", "restarts": "not expressible"}
    assert "instance_per_case" in r["campaigns"]["certificate"]["text"]
