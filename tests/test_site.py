"""The documentation site reads well in a real browser: every built page, rendered in headless Chromium at a desktop
and a tablet width, keeps to its main column (a table wider than the column becomes cards, a code block scrolls in
its own box), never cuts a name in code across lines ("oracle-disagreeme nt"), has no empty table header row, and
shows its search. Chromium is Debian's `chromium` (CI installs it and sets DRYZ_REQUIRE_BROWSER=1)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--allow-file-access-from-files"]
WIDTHS = (1280, 820)  # a desktop (search as a box) and a tablet (search as a button); the main column narrower


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if CHROMIUM is None:
        if os.environ.get("DRYZ_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium is not installed")
        pytest.skip("no chromium")
    out = tmp_path_factory.mktemp("site")
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                       capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return out


def measured(site: Path, pages: list[Path], work: Path) -> list[dict]:
    """tests/site/probe.html's measurements of each page at each width (one Chromium run)."""
    probe = (Path(__file__).parent / "site" / "probe.html").read_text()
    run = work / "probe.html"
    run.write_text(probe.replace("PAGES", json.dumps([p.as_uri() for p in pages]))
                   .replace("WIDTHS", json.dumps(list(WIDTHS))))
    p = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={work / 'chromium'}", "--virtual-time-budget=900000",
                        "--dump-dom", run.as_uri()], capture_output=True, text=True, timeout=900)
    m = re.search(r"RESULT(.*?)END", html.unescape(p.stdout), re.S)
    assert m, p.stderr[-2000:]
    return json.loads(m.group(1))


def problems(r: dict) -> list[str]:
    if "error" in r:
        return [r["error"]]
    out = [f"overflows the main column: {x}" for x in r["over"]]
    if r["main"][0] > r["main"][1] + 1:
        out.append(f"the main column scrolls: {r['main'][0]} px of content in {r['main'][1]}")
    out += [f"a table wider than its box: {x}" for x in r["wide"]]
    out += [f"a name in code cut across lines: {x}" for x in r["broken"]]
    out += ["an empty table header row"] * r["emptyHead"]
    if r["width"] >= 1280 and r["search"]["box"] < 100:
        out.append("no search box")
    if r["width"] < 1280 and r["search"]["box"] < 100 and r["search"]["button"] == 0:
        out.append("no search box or button")
    return out


def test_every_page_reads_within_its_column(site, tmp_path):
    pages = sorted(p for p in site.rglob("*.html") if p.name != "404.html")
    assert {"results/conformance.html", "engines/mistralrs.html", "benchmarks.html"} <= \
        {str(p.relative_to(site)) for p in pages}
    # a page that overflows, planted beside them: the check sees it (a wide unbreakable line, a cut class name)
    bad = site / "planted.html"
    text = (site / "getting-started.html").read_text()
    bad.write_text(text.replace("<h1", '<p style="white-space:nowrap">' + "overflowing " * 120 + "</p>"
                                '<p style="width:6em"><code class="dryz-words" style="word-break:break-all">'
                                'oracle-disagreement</code></p>'
                                "<h1", 1))
    results = measured(site, pages + [bad], tmp_path)
    assert len(results) == len(WIDTHS) * (len(pages) + 1)
    found = {(Path(r["page"]).name, r["width"]): problems(r) for r in results}
    planted = found.pop(("planted.html", 1280))
    assert any(x.startswith("overflows the main column: p: overflowing") for x in planted), planted
    assert any(x.startswith("the main column scrolls") for x in planted), planted
    assert "a name in code cut across lines: oracle-disagreement" in planted, planted
    found.pop(("planted.html", 820))
    assert {k: v for k, v in found.items() if v} == {}


def test_benchmark_figures_are_formatted():
    from dryz.docs import _number
    assert [_number(x) for x in (3591668.7, 6412.1, 39.7, 0.4, 0.87812, 2391471, "x")] == \
        ["3,591,669", "6,412", "39.7", "0.4", "0.8781", "2,391,471", "x"]
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert not re.search(r"\| \d{4,}\.\d+ \|", page) and "| | |" not in page
