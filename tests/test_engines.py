"""Other engines' DRY (`--subject engine:NAME`, dryz/subject/engines/): each adapter reads back what its engine's DRY
did, exactly, and declares only what the engine's own documentation states; a planted bug in an adapter is a
difference; an engine that raises is a crash finding (the rest judged), an adapter that fails is the harness in
doubt (exit 2), a missing package is one line naming the extra; `dryz properties` and `dryz conformance` judge
them property by property; the engine witnesses in corpus/engines/ replay on their engines."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, dryz, engine

ADAPTERS = Path(__file__).parent / "adapters"


def case(tmp_path, history, name="case.json", **kw) -> Path:
    from dryz.case import Case
    from dryz.symbols import from_symbols
    h = tuple(from_symbols(history))
    p = tmp_path / name
    p.write_text(Case(history=h, alphabet=kw.pop("alphabet", max(h) + 1), penalty_last_n=kw.pop("penalty_last_n", 64),
                      **kw).dumps())
    return p


def verdict(p) -> dict:
    return json.loads(p.stdout)["verdict"]


def test_a_missing_engine_package_is_one_line_naming_the_extra():
    code = ("import sys; import dryz.subject.engines as e; "
            "e.ENGINES['exllamav2'] = e.Engine('exllamav2', 'x', ('dryz_absent_package',), 'exllamav2', '0.3.2'); "
            "from dryz.cli import main; sys.argv = ['dryz', '--subject', 'engine:exllamav2', 'subject', 'show']; main()")
    p = __import__("subprocess").run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "pip install 'dryz[exllamav2]'" in p.stderr and "dryz_absent_package" in p.stderr
    p = dryz("--subject", "engine:nosuch", "subject", "show")
    assert p.returncode == 2 and p.stderr.strip() == (
        "dryz: error: --subject: engine:nosuch: unknown engine 'nosuch' (engines: mistralrs, mistralrs-cached, "
        "exllamav2, aphrodite, aphrodite-python)")


def test_exllamav2_raising_on_a_case_is_a_crash_finding(tmp_path):
    spec = engine("exllamav2")
    p = dryz("--subject", spec, "check", str(case(tmp_path, "a", penalty_last_n=64)))
    v = verdict(p)
    assert p.returncode == 1 and v["class"] == "crash", p.stdout + p.stderr
    assert v["detail"] == "the engine raised: IndexError: deque index out of range (sampler.py:234)"
    # dry_range at or below dry_max_ngram (20): the engine's own assertion
    v = verdict(dryz("--subject", spec, "check", str(case(tmp_path, "aa", penalty_last_n=4))))
    assert v["class"] == "crash" and v["detail"].startswith("the engine raised: AssertionError")


def test_a_planted_adapter_bug_is_a_difference_and_an_adapter_failure_is_exit_2(tmp_path):
    engine("exllamav2")
    # exllamav2's answers to the occurrence probes differ from llama.cpp's, all for its longest-suffix rule (a
    # repeats cause): the occurrence cell conforms once that cause is composed
    real = dryz("--subject", "engine:exllamav2", "properties", "--property", "occurrence-caps")
    assert real.returncode == 0 and "every occurrence                       conforms         34 judged" in real.stdout
    assert "causes    1 fitted: llama.cpp with suffix:longest-only; residual 0 of 34 answers" in real.stdout
    planted = "cmd:" + " ".join([sys.executable, str(ADAPTERS / "planted_exllamav2.py")])
    p = dryz("--subject", planted, "properties", "--property", "occurrence-caps", "--json", str(tmp_path / "p.json"))
    assert p.returncode == 1 and "DIFFERS" in p.stdout, p.stdout + p.stderr
    r = json.loads((tmp_path / "p.json").read_text())
    cell = r["cells"]["occurrence-caps"]
    # no deviation model explains the planted exponent: every answer is the residual, the cell's cause
    assert r["fit"]["models"] == [] and r["fit"]["residual"] == 34
    assert cell["status"] == "differs" and cell["classes"] == {"mismatch": 34}
    assert [(c["kind"], c["name"], c["probes"]) for c in cell["causes"]] == [("residual", "unexplained mismatch", 34)]
    broken = "cmd:" + " ".join([sys.executable, str(ADAPTERS / "broken_adapter.py")])
    p = dryz("--subject", broken, "check", str(case(tmp_path, "abcab")))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "the adapter itself failed, not the engine" in p.stderr


def test_mistralrs_read_back_is_exact(tmp_path):
    spec = engine("mistralrs")
    # abcdabcdab + c extends the repeat abcdab: L 6, 2^(6 - 3) = 8, read back bit for bit
    p = dryz("--subject", spec, "check", str(case(tmp_path, "abcdabcdab", allowed_length=3, penalty_last_n=20)))
    v = verdict(p)
    assert p.returncode == 0 and v["observed_logits"] == [0.0, 0.0, -8.0, 0.0], p.stdout + p.stderr
    # a penalty whose probability underflows (-128: log-probability -inf) is still read back exactly
    v = verdict(dryz("--subject", spec, "check", str(case(tmp_path, "abcabcabcab"))))
    assert v["class"] == "agree" and v["observed_logits"][2] == -128.0
    # a breaker as the last token: llama.cpp penalizes nothing, mistral.rs does not look (an undocumented difference)
    v = verdict(dryz("--subject", spec, "check", str(case(tmp_path, "cac", breakers=("c",)))))
    assert v["class"] == "mismatch" and v["expected_logits"][0] == 0.0 and v["observed_logits"][0] == -1.0
    # a window that cuts the history cannot be sent (mistral.rs has no window parameter): not judged, exit 2
    p = dryz("--subject", spec, "check", str(case(tmp_path, "abab", penalty_last_n=2)))
    assert p.returncode == 2 and "not judged" in p.stderr and "no window parameter" in p.stderr


def test_mistralrs_read_back_asks_only_what_decides_the_logit():
    """The read-back's cost in requests (the adapter's own count), on the mistral.rs Runner itself: a penalty whose
    log-probability underflows (-128 after abcabcabcab) is found among the penalties the formula can give (2^k:
    about log2(2n) requests, not the 34 of a bisection over every float32); a candidate at -inf or beside a large
    initial logit asks nothing it does not need; with base < 1 every candidate level with </s> is proven at 0 with
    one request for all the lower bounds and one each, but for one whose initial logit no hidden penalty moves."""
    import math

    import numpy as np

    from dryz.case import Case
    from dryz.subject.command import Command
    from dryz.subject.engines import mistralrs as M
    engine("mistralrs")

    class Symbols:
        vocab_names = None

        def _symbols(self):
            return {"name": "symbols"}

    adapter = M.Adapter(0)

    def read(history, allowed_length=1, base=2.0, **kw):
        k = 1 + max(history)
        c = Case(history=tuple(history), alphabet=k, penalty_last_n=64, multiplier=1.0, base=base,
                 allowed_length=allowed_length, **kw)
        before = adapter.requests
        logits, _ = adapter.run(Command._request(Symbols(), c, 1))
        return logits, adapter.requests - before

    abc = [0, 1, 2] * 3 + [0, 1]
    logits, asks = read(abc, candidates=((2, 0.0),))
    # the first ask; 2^k among the 14 penalties of the formula and the largest float32 (4); confirmed (1)
    assert logits == [-128.0] and asks == 1 + 4 + 1 and len(M._family(1.0, 2.0, 1, 11)) == 14
    big = float(np.float32(1e30))
    logits, asks = read(abc, candidates=((2, -math.inf), (1, big), (0, 0.0)))
    assert logits == [-math.inf, big, 0.0] and asks == 1  # c -inf, b 1e30 and a level (base 2): all certain
    logits, asks = read([0, 1] * 9 + [2, 3], candidates=((0, 0.0), (2, 0.0), (3, 0.0), (4, 0.0)), base=0.5)
    assert logits == [0.0] * 4 and asks == 1 + 1 + 4  # 0.5^19 could hide: every p >= 0 at once, then each p <= 0
    # the same beside initial logits of 1,000 and -1,000: no penalty a log-probability hides (below 1e-5) moves them
    logits, asks = read([0, 1] * 9 + [2, 3], candidates=((0, 1000.0), (2, -1000.0), (3, 0.0), (4, 0.0)), base=0.5)
    assert logits == [1000.0, -1000.0, 0.0, 0.0] and asks == 1 + 1 + 2
    # both signs count (a negative multiplier or base hides negative penalties): -256 - 1e-5 rounds to -256, but
    # -256 + 1e-5 does not (float32's step below 256 in magnitude is half the step above)
    assert np.float32(np.float32(-256.0) - np.float32(1e-5)) == -256.0 and not M._unmoved(np.float32(-256.0))
    assert M._unmoved(np.float32(1000.0)) and M._unmoved(np.float32(-512.0)) and not M._unmoved(np.float32(0.0))
    # base -2 (mistral.rs checks no base): b after `ababa` gets (-2)^3 = -8, its logit raised; no estimate (its
    # log-probability is above </s>'s): found among 0 and +-1..32 with the largest float32 (4 asks), confirmed (1)
    logits, asks = read([0, 1, 0, 1, 0], candidates=((1, 0.0),), base=-2.0, allowed_length=0)
    assert logits == [8.0] and asks == 1 + 4 + 1 and len(M._family(1.0, -2.0, 0, 5)) == 7


def test_mistralrs_asks_sent_together_answer_as_one_by_one():
    """The read-back's asks of one round go to mistral.rs together (streamed, answered as a batch): each answers
    as it does alone, so the logits and the number of asks are those of the asks sent one by one."""
    import random

    from dryz.case import Case
    from dryz.subject.command import Command
    from dryz.subject.engines import mistralrs as M
    engine("mistralrs")

    class Symbols:
        vocab_names = None

        def _symbols(self):
            return {"name": "symbols"}

    together, alone = M.Adapter(0), M.Adapter(0)
    alone._choices = lambda text, dry, biased: [alone._choice(text, dry, b) for b in biased]
    streamed = []
    send = together._choices

    def counted(text, dry, biased):
        streamed.append(len(biased))
        return send(text, dry, biased)
    together._choices = counted
    rng = random.Random(5)
    for _ in range(12):
        history = tuple(rng.randrange(4) for _ in range(rng.randrange(8, 40)))
        c = Case(history=history, alphabet=5, penalty_last_n=64, multiplier=rng.choice((1.0, 3e-7, -0.5)),
                 base=rng.choice((0.5, 0.9, 2.0, 1.75)), allowed_length=rng.randrange(0, 4))
        req = Command._request(Symbols(), c, 1)
        before = (together.requests, alone.requests)
        assert together.run(req) == alone.run(req), c
        assert together.requests - before[0] == alone.requests - before[1]
    assert max(streamed) >= 4  # rounds of several asks were sent together


def test_aphrodite_refuses_as_it_documents(tmp_path):
    spec = engine("aphrodite")
    v = verdict(dryz("--subject", spec, "check", str(case(tmp_path, "abab", base=0.5))))
    assert v["class"] == "declared-base-below-one:refused", v
    v = verdict(dryz("--subject", spec, "check", str(case(tmp_path, "aa"))))  # L 1 is never penalized: a finding
    assert v["class"] == "mismatch" and v["expected_logits"] == [-1.0] and v["observed_logits"] == [0.0]


def test_aphrodite_compiled_scan_and_its_python_fallback(tmp_path):
    """engine:aphrodite runs the op 0.24.1's CUDA runner calls (torch.ops._C.dry_scan_penalties from the wheel's
    library, on the CPU), engine:aphrodite-python apply_dry's Python fallback (DryRequestState); each names its
    path. Both scan only when the tail (the tokens back to a breaker, at most dry_max_ngram + 1) is longer than
    allowed_length + 1; where a breaker ends the tail the fallback counts the breaker into it, the compiled scan
    does not, so the two differ there."""
    compiled, fallback = engine("aphrodite"), engine("aphrodite-python")

    def both(history, **kw):
        f = case(tmp_path, history, **kw)
        out = [json.loads(dryz("--subject", s, "check", str(f)).stdout) for s in (compiled, fallback)]
        return [(o["verdict"]["class"], o["verdict"]["observed_logits"]) for o in out], [o["subject"] for o in out]

    # no breaker: both find abc again before d: L 3, 2^(3 - 2)
    (c, p), (cs, ps) = both("abcdabc", allowed_length=2)
    assert c == p == ("agree", [0.0, 0.0, 0.0, -2.0])
    assert cs["engine"] == "aphrodite" and ("compiled scan _C::dry_scan_penalties from aphrodite/_C_stable_libtorch"
                                            ".abi3.so (sha256 d78652145f69ef31) on the CPU; torch 2.13.0"
                                            ) in cs["engine_version"]
    assert ps["engine"] == "aphrodite-python" and "Python fallback DryRequestState" in ps["engine_version"]
    # breaker c, then aaa: llama.cpp penalizes a (L 2, 2^0); the compiled scan's tail aaa is not longer than
    # allowed_length + 1, the fallback's caaa is, and it penalizes a as llama.cpp does
    (c, p), _ = both("caaa", allowed_length=2, breakers=("c",))
    assert c == ("mismatch", [0.0, 0.0, 0.0]) and p == ("agree", [-1.0, 0.0, 0.0])
    # breaker d: the fallback's tail dabc passes and it penalizes the breaker d (the token after abc, which
    # llama.cpp exempts); the compiled scan's abc does not pass
    (c, p), _ = both("abcdabc", allowed_length=2, breakers=("d",))
    assert c == ("agree", [0.0, 0.0, 0.0, 0.0]) and p == ("mismatch", [0.0, 0.0, 0.0, -2.0])


def test_aphrodite_s_runtime_names_the_driver_stand_in_after_loading_it():
    """A process that has loaded the compiled scan (its libcuda.so.1 stand-in among it) still finds no driver on
    a machine without one: the stand-in answers to the driver's name, and a report script given the environment
    without it cannot load the op (CI's report scripts failed so, after an in-process engine in the suite)."""
    if importlib.util.find_spec("nvidia") is None:
        pytest.skip("nvidia-cuda-runtime not installed")
    code = ("import torch\n"
            "from dryz.subject.engines.aphrodite import _driver, load_scan, runtime, wheel\n"
            "before = [p.name for p in runtime(wheel(), True)[2]]\n"
            "load_scan(wheel(), torch)\n"
            "print(_driver(), before == [p.name for p in runtime(wheel(), True)[2]], before)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=600)
    assert p.returncode == 0, p.stderr
    has, same, names = p.stdout.split(" ", 2)
    assert same == "True", p.stdout
    assert has == "False" and "libcuda.so.1" in names or has == "True" and "libcuda.so.1" not in names, p.stdout


def test_exhaustive_counts_what_an_engine_cannot_express(tmp_path):
    spec = engine("mistralrs")
    p = dryz("--subject", spec, "exhaustive", "--no-progress", "-k", "2", "-n", "5", "-c", "window4",
             "--json", str(tmp_path / "c.json"))
    r = json.loads((tmp_path / "c.json").read_text())
    [c] = r["configs"]
    # histories longer than the window (5: 32 of them, 2 candidates each) cannot be sent; the rest are judged
    assert c["not_judged_cases"] == 64 and c["cases"] == sum(2 ** n * 2 for n in range(1, 5))
    assert r["verdict"] == "certified" and p.returncode == 0, p.stdout + p.stderr
    assert "NOT JUDGED 64" in p.stdout and "3 NOT JUDGED" in p.stdout


def test_conformance_two_rows(tmp_path):
    engine("exllamav2")
    p = dryz("conformance", "--row", "libllama:", "--row", "engine:exllamav2", "--property", "window-negative",
             "--property", "occurrence-caps", "--property", "window-cap", "--time-per-subject", "5", "-n", "4",
             "--workdir", str(tmp_path / "w"), "--json", str(tmp_path / "c.json"), timeout=1800)
    r = json.loads((tmp_path / "c.json").read_text())
    lib, ex = r["rows"]
    assert {k: c["status"] for k, c in lib["cells"].items()} == {
        "window-cap": "conforms", "window-negative": "conforms", "occurrence-caps": "conforms"}
    assert lib["campaigns"]["certificate"]["verdict"] == "pass"
    assert ex["subject"] == "exllamav2 0.3.2"
    assert ex["cells"]["window-negative"]["status"] == "conforms"
    # the occurrence probes differ only by a cause of another property (the longest-suffix rule): conforms
    assert ex["cells"]["occurrence-caps"]["status"] == "conforms"
    assert ex["fit"]["models"][:1] == ["raises-window:20"] and ex["fit"]["residual"] == 0
    w = ex["cells"]["window-cap"]
    causes = {c["name"]: c for c in w["causes"]}
    assert w["status"] == "differs" and set(causes) == {"raises-window:20", "window:one-wider"}
    raised = causes["raises-window:20"]
    assert raised["kind"] == "observed" and raised["source"].startswith("exllamav2/generator/sampler.py:232 (0.3.2)")
    assert raised["witness"]["shortest"] == "proven" and Path(raised["witness"]["minimized"]).is_file()
    assert raised["witness"]["minimized_case"]["penalty_last_n"] == 1
    assert raised["witness"]["minimized_values"]["subject"]["raised"].startswith("the engine raised: AssertionError")
    wider = causes["window:one-wider"]["witness"]  # shortest with a window past the assertion: 22 tokens, window 21
    assert wider["minimized_case"]["penalty_last_n"] == 21 and len(wider["minimized_case"]["history"]) == 22
    assert p.returncode == 1, p.stdout + p.stderr
    grid = {ln[:34].strip(): ln[34:].split() for ln in p.stdout.splitlines() if ln.startswith("window cap ")}
    assert grid == {"window cap": ["✓", "768", "raises-window:20", "+1"]}, p.stdout
    # the HTML page: the grid's differing cell links to its drill-down, which names the command that replays it
    h = dryz("report", str(tmp_path / "c.json"), "--html", str(tmp_path / "c.html"))
    page = (tmp_path / "c.html").read_text()
    assert h.returncode == 0 and '<a href="#exllamav2-window-cap">' in page and 'id="exllamav2-window-cap"' in page
    assert "dryz --subject engine:exllamav2 check " in page


@pytest.mark.parametrize("name", ["mistralrs", "exllamav2", "aphrodite"])
def test_engine_witnesses_replay(name):
    spec = engine(name)
    d = ROOT / "corpus" / "engines" / name
    assert len(list(d.glob("*.json"))) >= 3
    p = dryz("--subject", spec, "replay", str(d), timeout=1800)
    assert p.returncode == 0, p.stdout + p.stderr


def test_engine_witnesses_stay_out_of_the_project_corpus():
    """corpus/engines holds other engines' verdicts: the default replay and a campaign's known classes (what it
    does not report as new) read the project's own entries only."""
    from dryz.corpus import DEFAULT_DIR, ENGINES_DIR, entries, known_classes
    assert list(ENGINES_DIR.rglob("*.json")) and not [p for p in entries(DEFAULT_DIR) if ENGINES_DIR in p.parents]
    assert "mismatch" not in known_classes() and "crash" not in known_classes()
    assert entries(ENGINES_DIR / "exllamav2")  # asked for by name, they are entries like any


def test_a_model_mistralrs_cannot_load_is_one_line(tmp_path):
    engine("mistralrs")
    from dryz.subject.cache import cache_dir
    from dryz.subject.engines.mistralrs import MODEL_DIR
    good = cache_dir() / "engines" / MODEL_DIR / "tiny.gguf"
    if not good.exists():  # the adapter writes it on its first start
        dryz("--subject", "engine:mistralrs", "subject", "show")
    bad = tmp_path / "cache" / "engines" / MODEL_DIR
    bad.mkdir(parents=True)
    (bad / "tiny.gguf").write_bytes(good.read_bytes()[:-100])  # a tensor's data cut short
    p = dryz("--subject", "engine:mistralrs", "check", str(case(tmp_path, "aa")), env={"DRYZ_CACHE": tmp_path / "cache"})
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "mistral.rs 0.9.5 cannot load" in p.stderr and "tiny.gguf: GGUF tensor" in p.stderr


def test_a_differing_property_of_libllama_is_written_and_replays(tmp_path):
    """llama.cpp itself differs on finite penalties (its clamp ignores the multiplier: the penalty is inf): the
    property's first probe is written as a corpus entry (its expected logits -inf, kept as JSON strings) and
    `dryz check` on it gives the class again, exit 1."""
    p = dryz("properties", "--property", "finite-penalties", "--corpus", str(tmp_path / "w"))
    assert p.returncode == 1 and "finite penalties                       DIFFERS" in p.stdout, p.stdout + p.stderr
    (entry,) = (tmp_path / "w").glob("*.json")
    assert entry.name.startswith("promise-finite-penalty-")
    c = dryz("check", str(entry))
    assert c.returncode == 1 and verdict(c)["class"] == "promise-finite-penalty", c.stdout[-2000:] + c.stderr


def test_the_checked_in_conformance_witnesses_replay(tmp_path):
    """docs/results/conformance.json (rendered into docs/results/conformance.md): one run of every default row;
    every cause of a differing cell that is not declared names its minimized witness (an observed one, the engine's
    source line that does it), checked in under
    docs/results/conformance/, and each row's witnesses replay on that row's subject as recorded (llama-server's
    row: tests/test_server.py replays the served-* witnesses)."""
    from dryz.conformance.matrix import DEFAULT_ROWS
    r = json.loads((ROOT / "docs" / "results" / "conformance.json").read_text())
    assert [row["spec"].split(":")[0] for row in r["rows"]] == [s.split(":")[0] for s in DEFAULT_ROWS]
    for row in r["rows"]:
        folders = set()
        for key, c in row["cells"].items():
            if c["status"] != "differs":
                continue
            for cause in c["causes"]:
                if cause["kind"] == "declared":
                    continue
                if cause["kind"] == "observed":  # a finding names the engine's code that does it
                    from dryz.oracle.deviations import pattern
                    sources = row["identity"].get("sources") or {}
                    assert sources.get(cause["name"]) or sources.get(pattern(cause["name"])), \
                        (row["spec"], key, cause["name"], "no source line")
                w = cause["witness"]
                assert not Path(w["minimized"]).is_absolute() and (ROOT / w["minimized"]).is_file() and \
                    w["shortest"] in ("proven", "1-minimal"), \
                    (row["spec"], key, cause["name"])
                folders.add((ROOT / w["minimized"]).parent)
        if row["spec"].startswith("server"):
            continue
        if row["spec"].startswith("engine:"):
            engine(row["spec"].split(":", 1)[1])
        for folder in folders:
            p = dryz("--subject", row["spec"], "replay", str(folder), cwd=tmp_path)
            assert p.returncode == 0 and " 0 changed, 0 invalid" in p.stdout, (row["spec"], p.stdout[-2000:],
                                                                               p.stderr[-1000:])


@pytest.mark.parametrize("args, line", [
    (["--row", "bogus:x"], "dryz: error: --row: 'bogus:x': unknown kind 'bogus' (kinds: libllama, llama-cpp-python, "
                           "cmd, server, engine"),
    (["--property", "nope"], "dryz: error: --property: unknown property 'nope' (properties: repeats, "),
    (["--time-per-subject", "0"], "dryz: error: --time-per-subject must be in 1..86400 seconds, got 0"),
])
def test_conformance_bad_input_is_one_line(args, line, tmp_path):
    p = dryz("conformance", *args, cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.startswith(line) and p.stderr.count("\n") == 1, p.stderr
    assert not (tmp_path / "conformance-work").exists()


def test_an_engine_that_raises_on_some_histories_is_judged_on_the_rest(tmp_path):
    """exllamav2 0.3.2 raises on every history at window 4 (an assertion in its apply_dry) and on the one-token
    histories (an IndexError): those histories are class crash, counted as covered with what the engine raised,
    and every other history of the space is judged (a crash on one case never voids the slice)."""
    engine("exllamav2")
    p = dryz("--subject", "engine:exllamav2", "exhaustive", "-n", "4", "-j", "1", "--no-progress", "--json",
             str(tmp_path / "r.json"), cwd=tmp_path)
    r = json.loads((tmp_path / "r.json").read_text())
    assert p.returncode == 1 and r["verdict"] == "crash", p.stdout[-2000:] + p.stderr[-2000:]
    assert all(r["checks"].values()) and r["checks"]["covered_cases"]
    base, window4, breaker = r["configs"]
    assert window4["cases"] == 0 and window4["raised_histories"] == 120  # 3 + 9 + 27 + 81 histories
    assert base["raised_histories"] == 3 and base["cases"] + base["raised_cases"] == 3 * 120
    assert base["mismatches"] > 0 and breaker["cases"] > 0
    assert "histories the subject raised on (class crash; the rest judged): the engine raised: AssertionError" \
        in p.stdout


@pytest.mark.parametrize("name", ["exllamav2", "aphrodite", "aphrodite-python"])
def test_an_engine_in_a_fuzz_job_answers_as_its_adapter_process(name):
    """A fuzz job runs an in-process engine's adapter in its own process (no pipe per input): the same handshake and,
    for every case, the same answer as the adapter's own process gives (logits bit for bit, the same raise or
    refusal), over cases that penalize, raise and are refused."""
    import random

    import numpy as np

    from dryz.case import Case
    from dryz.subject.answers import Output
    from dryz.subject.command import InProcessEngine
    from dryz.subject.registry import open_subject, opened_here
    engine(name)
    rng = random.Random(7)
    cases = [Case(history=tuple(rng.randrange(k) for _ in range(rng.randrange(1, 40))), alphabet=k,
                  penalty_last_n=rng.choice((0, 3, 21, 64)), allowed_length=rng.randrange(0, 4),
                  base=rng.choice((0.5, 1.75, 2.0)), multiplier=rng.choice((-1.0, 0.8, 1.0)),
                  breakers=rng.choice(((), ("c",), ("ab",))))
             for k in (2, 3, 5) for _ in range(60)]
    here, there = opened_here(f"engine:{name}"), open_subject(f"engine:{name}")
    try:
        assert isinstance(here, InProcessEngine) and here.identity["engine"] == there.identity["engine"]
        kinds = set()
        for a, b in zip(here.run_batch(cases), there.run_batch(cases)):
            assert type(a) is type(b)
            if isinstance(a, Output):
                assert np.array_equal(np.asarray(a.logits).view(np.uint32), np.asarray(b.logits).view(np.uint32))
            else:
                assert a.detail == b.detail if hasattr(a, "detail") else a.message == b.message
            kinds.add(type(a).__name__)
        assert "Output" in kinds and len(kinds) >= 2, kinds  # some raise (exllamav2) or are refused (Aphrodite)
    finally:
        there.close()


def test_exllamav2_and_mistralrs_apply_a_base_of_0_or_below_as_base_below_one_applied(tmp_path):
    """Neither engine checks its base: a negative base's odd powers raise a logit (exllamav2's campaign met it in
    inputs mutated from JSON seeds). `ababa`, allowed_length 0, base -2: b follows `aba`, (-2)^3 = -8, its logit
    raised by 8 (llama.cpp: base < 1 is DRY off). Each answer is what its row's fitted causes give, and is not
    without base-below-one:applied."""
    from dryz.case import Case
    from dryz.causes import explains
    from dryz.judge import check_answer
    from dryz.subject.registry import open_subject
    fits = {row["spec"]: tuple(row["fit"]["models"]) for row in json.loads(
        (ROOT / "docs" / "results" / "conformance.json").read_text())["rows"]}
    for name, want in (("exllamav2", [0.0, 8.0]), ("mistralrs", [0.0, 8.0])):
        spec = engine(name)
        lib = open_subject(spec)
        try:
            c = Case(history=(0, 1, 0, 1, 0), alphabet=2, penalty_last_n=64, base=-2.0, allowed_length=0)
            v, out = check_answer(c, lib)
            assert v.klass == "mismatch" and [float(x) for x in out.logits] == want, (name, out)
            fit = fits[spec]
            assert explains(c, out, fit, False, 7)
            assert not explains(c, out, tuple(m for m in fit if m != "base-below-one:applied"), False, 7)
        finally:
            lib.close()


def test_a_fitted_campaign_counts_the_control_its_causes_explain(tmp_path):
    """exllamav2 answers the ABI confirmation case `aa` (allowed_length 1) with logit 0, not -1: its last token is
    not in its n-gram trie (last-follower:unseen). Alone, a campaign's control is a finding (exit 1); with the row's
    fitted causes (docs/results/conformance.json), the control is counted as explained and is no finding, and the
    inputs they explain are said on one line (most of exllamav2's inputs need them: thousands in seconds)."""
    engine("exllamav2")
    models = next(tuple(row["fit"]["models"]) for row in json.loads(
        (ROOT / "docs" / "results" / "conformance.json").read_text())["rows"] if row["spec"] == "engine:exllamav2")
    assert "last-follower:unseen" in models
    p = dryz("--subject", "engine:exllamav2", "fuzz", "--time", "3", "--jobs", "1", "--recheck", "1", "--workdir", "w",
             *[x for m in models for x in ("--fitted", m)], cwd=tmp_path, timeout=300)
    assert ("control: ABI confirmation case: logit 0.0, not -1 (aa, allowed_length 1), explained by the fitted "
            "causes") in p.stderr + p.stdout
    assert "(ABI confirmation control)" not in p.stdout
    s = json.loads((tmp_path / "w" / "summary.json").read_text())
    assert s["controls"]["abi_confirmation"]["explained_by"] == list(models)
    # what the causes explained is said, one line (inputs the causes do not explain are findings)
    ex = s["explained"]
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("explained: "))
    assert ex["inputs"] > 0 and line.startswith(f"explained: {ex['inputs']:,} explained by the causes (") and \
        line.endswith("; not findings") and all(f"{m} {n:,}" in line for m, n in ex["by_cause"].items())
    p = dryz("--subject", "engine:exllamav2", "fuzz", "--time", "3", "--jobs", "1", "--recheck", "1", "--workdir", "w2",
             cwd=tmp_path, timeout=300)
    assert p.returncode == 1 and "finding: mismatch (ABI confirmation control): " in p.stdout
