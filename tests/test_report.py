"""dryz report: a self-contained page from a certificate, a campaign and the corpus, rendered in a real headless
browser (Chromium, where installed; CI installs it and sets DRYZ_REQUIRE_BROWSER=1)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


from conftest import dryz


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    assert dryz("exhaustive", "-n", "6", "--json", "cert.json", "--no-progress", cwd=d).returncode == 0
    assert dryz("fuzz", "--time", "6", "--jobs", "1", "--workdir", "camp", cwd=d).returncode == 0
    p = dryz("report", "cert.json", "camp", str(ROOT / "corpus"), "--html", "r.html", "--markdown", "r.md",
             cwd=d)
    assert p.returncode == 0, p.stderr
    return d


def test_page_has_every_section_and_is_self_contained(page):
    html = (page / "r.html").read_text()
    for part in ("Certificate <code>cert.json</code>", "CERTIFIED", "Controls", "library L over all cases",
                 "penalty by L", "Fuzz campaign", "exec/s over time", "coverage over time", "Corpus",
                 "promise-finite-penalty", "documented-contained-restart", "<svg", "slow inputs</td><td>0 (slow-unit"):
        assert part in html, part
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "<script" not in html
    md = (page / "r.md").read_text()
    assert md.startswith("# dryz report") and "| base | 64 | - | 3,276 |" in md


def test_page_renders_in_a_headless_browser(page):
    if CHROMIUM is None:
        if os.environ.get("DRYZ_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium is not installed")
        pytest.skip("no chromium")
    shot = page / "shot.png"
    p = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={page / 'chr'}", "--window-size=1280,2400",
                        f"--screenshot={shot}", "--enable-logging=stderr", "--v=0", (page / "r.html").as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 50_000, p.stderr[-2000:]
    assert "CONSOLE" not in p.stderr and "Failed to load" not in p.stderr and "Uncaught" not in p.stderr
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={page / 'chr2'}", "--dump-dom",
                          (page / "r.html").as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert dom.count("<svg") >= 8 and "Fuzz campaign" in dom


def test_report_refuses_what_it_cannot_read(tmp_path):
    (tmp_path / "x.json").write_text('{"tool": "something else"}')
    (tmp_path / "bad.json").write_text("{,")
    (tmp_path / "empty").mkdir()
    for arg, msg in (("x.json", "not a result of dryz exhaustive, matrix, gate or conformance"), ("bad.json", "line 1 column 2"),
                     ("empty", "neither a campaign"), ("nowhere.json", "No such file")):
        p = dryz("report", arg, cwd=tmp_path)
        assert p.returncode == 2 and msg in p.stderr and p.stderr.count("\n") == 1, (arg, p.stderr)


def test_a_report_that_mixes_subjects_says_so_in_each_section(tmp_path):
    """Two certificates of different builds (their sha256): the page says at its top that its sections judge two
    subjects, and each certificate's header names its own; one subject alone gets no such note."""
    import json
    assert dryz("exhaustive", "-n", "3", "--json", "a.json", "--no-progress", cwd=tmp_path).returncode == 0
    a = json.loads((tmp_path / "a.json").read_text())
    b = dict(a, subject=dict(a["subject"], libllama_sha256="f" * 64, llama_cpp_python="0.3.34"))
    (tmp_path / "b.json").write_text(json.dumps(b))
    p = dryz("report", "a.json", "a.json", "--markdown", "one.md", cwd=tmp_path)
    assert p.returncode == 0 and "different subjects" not in (tmp_path / "one.md").read_text()
    p = dryz("report", "a.json", "b.json", "--markdown", "r.md", "--html", "r.html", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    md = (tmp_path / "r.md").read_text()
    assert md.count("this report's sections judge 2 different subjects") == 2
    assert md.splitlines()[2].startswith("**These sections judge 2 different subjects: llama-cpp-python 0.3.36")
    assert "This section judges llama-cpp-python 0.3.34" in md.split("## Certificate `b.json`")[1]
    assert "(sha256 ffffffffffff)" in md.split("## Certificate `b.json`")[1]
    html = (tmp_path / "r.html").read_text()
    assert html.count('<p class="mixed">') == 3
