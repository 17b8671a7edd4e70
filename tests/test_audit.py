"""`dryz audit`: one command answers "is DRY correct in this subject, and what differs" (issue 42, item 1): the
properties with their causes fitted, the certificate, the restart sweep and a campaign, within --time; one verdict,
the grid, each difference with its cause, what llama.cpp and the subject give, and the command that replays it."""

from __future__ import annotations

import json

from conftest import dryz, engine


def test_libllama_audit_names_its_one_difference_a_promise_of_the_source(tmp_path):
    p = dryz("audit", "--time", "90", "--json", str(tmp_path / "a.json"), "--workdir", str(tmp_path / "w"),
             cwd=tmp_path, timeout=1200)
    a = json.loads((tmp_path / "a.json").read_text())
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    verdict = next(ln for ln in p.stdout.splitlines() if ln.startswith("dryz audit:"))  # (after the progress)
    assert verdict.startswith("dryz audit: DIFFERS — libllama = llama.cpp with nothing; residual 0 of "), verdict
    assert a["tool"] == "dryz audit" and a["fit"]["models"] == [] and a["budget_seconds"] == 90
    differs = {k: [x["name"] for x in c["causes"]] for k, c in a["cells"].items() if c["status"] == "differs"}
    assert differs == {"finite-penalties": ["promise-finite-penalty"]}
    assert a["cells"]["requests"]["status"] == "not expressible"
    assert a["campaigns"]["certificate"]["text"].startswith("CERTIFIED: 88,560 cases")
    w = a["cells"]["finite-penalties"]["causes"][0]["witness"]
    assert w["shortest"] in ("proven", "1-minimal") and (tmp_path / w["minimized"]).is_file()
    assert "  finite penalties                        promise-finite-…" in p.stdout
    assert "llama.cpp and the subject alike: a -inf, b 0.0 (promise-finite-penalty" in p.stdout
    assert "replay: dryz --subject libllama: check " in p.stdout and "written   " in p.stdout


def test_an_engine_audit_names_each_cause_with_its_source_line(tmp_path):
    engine("exllamav2")
    p = dryz("--subject", "engine:exllamav2", "audit", "--time", "60", "--property", "window-cap", "--property",
             "window-zero", "--json", str(tmp_path / "a.json"), "--workdir", str(tmp_path / "w"), cwd=tmp_path,
             timeout=1200)
    a = json.loads((tmp_path / "a.json").read_text())
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    assert {"window-cap", "window-zero"} <= set(a["cells"])  # (and the cells of causes the campaign found)
    cap = {x["name"]: x for x in a["cells"]["window-cap"]["causes"]}
    assert {"raises-window:20", "window:one-wider"} <= set(cap)
    assert cap["raises-window:20"]["source"].startswith("exllamav2/generator/sampler.py:232 (0.3.2)")
    assert a["cells"]["window-zero"]["status"] == "declared"
    assert "source: exllamav2/generator/sampler.py:232 (0.3.2): assert settings.dry_range > settings.dry_max_ngram" \
        in p.stdout


def test_bad_input_is_one_line_before_any_work(tmp_path):
    for args, line in ((["--time", "5"], "dryz: error: --time must be in 30..86400 seconds, got 5"), (["--property", "nope"], "dryz: error: --property: ")):
        p = dryz("audit", *args, cwd=tmp_path)
        assert p.returncode == 2 and p.stderr.startswith(line) and p.stderr.count("\n") == 1, p.stderr
        assert not (tmp_path / "audit-work").exists()
