"""The documentation: README is a front door (short, no commit ids or dates), the site builds strictly, every
generated page is what the code makes now, every `dryz ...` command README and the guides show exists with the
options they give it, the built site has no broken internal link or missing image, and Chromium renders it."""

import html.parser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from dryz import docs
from dryz.cli import cli

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
GUIDES = [README, ROOT / "docs" / "getting-started.md", *sorted((ROOT / "docs" / "guides").glob("*.md"))]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


# -- README --------------------------------------------------------------------------------------------------------

def test_readme_is_a_front_door():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 200, len(lines)
    # no commit ids (7 to 40 hex digits with a letter and a digit), no dates, no run logs
    hexes = re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", text)
    assert hexes == [], hexes
    assert re.findall(r"\b20\d\d-\d\d", text) == []
    assert not re.search(r"load (average )?\d|\d+ min \d+ s", text)
    # the sections a newcomer looks for, in order
    heads = [h for h in re.findall(r"^## (.+)$", text, re.M)]
    assert heads[:2] == ["Set-up", "Is DRY correct in what you run, and what differs?"]  # the one command, second
    for want in ("Set-up", "The first result", "Exit codes", "Audit your build", "Put the gate in CI",
                 "Fuzz for hours", "Minimize and explain a finding", "Compare releases",
                 "Audit llama-server or another engine", "Findings", "Documentation"):
        assert want in heads, want
    assert heads.index("Set-up") < heads.index("Exit codes") < heads.index("Audit your build")
    # PyPI renders README as the long description: no relative image there
    assert not [m for m in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text) if not m.startswith("https://")]


def test_readme_links_resolve():
    """Every relative link of README names a file of the repository (and a generated page exists)."""
    text = README.read_text()
    links = [m for m in re.findall(r"\]\(([^)]+)\)", text) if not re.match(r"[a-z]+:", m)]
    assert len(links) >= 30
    missing = [m for m in links if not (ROOT / m.split("#")[0]).exists()]
    assert missing == []


def test_the_checker_of_readme_catches_a_commit_id_and_a_date():
    """The patterns above are not vacuous."""
    bad = "built from 0c1e570 on 2026-12-04"
    assert re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", bad) == ["0c1e570"]
    assert re.findall(r"\b20\d\d-\d\d", bad) == ["2026-12"]


# -- generated pages -----------------------------------------------------------------------------------------------

def test_every_generated_page_is_current():
    """`python -m dryz.docs --check`: the command reference, the glossary, the environment, the corpus's witnesses,
    the benchmarks and mkdocs.yml's command navigation are what the code makes now."""
    assert docs.stale() == []
    p = subprocess.run([sys.executable, "-m", "dryz.docs", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout == "", p.stdout + p.stderr


def test_a_stale_page_is_caught(tmp_path, monkeypatch):
    """Edit a generated page, remove one, leave a page of a command that does not exist: each is named."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    monkeypatch.setattr(docs, "DOCS", tmp_path / "docs")
    assert docs.stale() == []
    g = tmp_path / "docs" / "reference" / "verdict-classes.md"
    g.write_text(g.read_text().replace("| `crash` | yes (1)", "| `crash` | no (0)"))
    (tmp_path / "docs" / "reference" / "cli" / "gate.md").unlink()
    (tmp_path / "docs" / "reference" / "cli" / "frobnicate.md").write_text("# dryz frobnicate\n")
    assert docs.stale() == ["reference/cli/frobnicate.md", "reference/cli/gate.md", "reference/verdict-classes.md"]


def test_the_glossary_is_the_registry():
    from dryz import verdict
    from dryz.oracle import served
    page = (ROOT / "docs" / "reference" / "verdict-classes.md").read_text()
    for k in verdict.KINDS:
        exit_code = 1 if k.finding else (2 if k.name == verdict.HARNESS_ERROR else 0)
        assert f"| `{k.name}` | {'yes' if k.finding else 'no'} ({exit_code}) |" in page
    for c in (*verdict.CLASSES, *served.CLASSES):
        assert f"`{c}`" in page, c


def test_every_command_has_a_reference_page():
    names = {docs.command_slug(list(p)) for p in docs.command_paths()}
    pages = {p.stem for p in (ROOT / "docs" / "reference" / "cli").glob("*.md")} - {"index"}
    assert names == pages
    assert {"gate", "exhaustive", "subject-build", "fuzz", "matrix", "mutate"} <= pages
    gate = (ROOT / "docs" / "reference" / "cli" / "gate.md").read_text()
    for opt in cli.commands["gate"].params:
        if isinstance(opt, click.Option) and not opt.hidden:
            assert f"`{opt.opts[-1]}`" in gate, opt.opts


def test_the_environment_page_is_every_variable_the_code_reads():
    page = (ROOT / "docs" / "reference" / "environment.md").read_text()
    code = docs.env_names_in_code()
    assert {"DRYZ_LIB", "DRYZ_SUBJECT", "DRYZ_CACHE", "DRYZ_FAULT", "DRYZ_INIT_DRY_ABI"} <= code
    assert all(f"`{v}`" in page for v in code)
    assert all(f"`{f}/`" in page for f in docs.cache_folders_in_code())


def test_benchmarks_page_from_zero_one_or_two_machines(tmp_path):
    empty = docs.benchmarks_page(tmp_path)
    assert "No benchmark record is checked in yet" in empty
    rec = {"name": "engines", "command": "python bench/engines.py", "commit": "abc1234", "cpu": "Xeon X",
           "cores": 2, "load": [0.5, 0.4, 0.3], "date": "2026-12-05T00:00:00Z", "figures": {"exec/s": 1234.5}}
    (tmp_path / "engines.json").write_text(json.dumps(rec))
    one = docs.benchmarks_page(tmp_path)
    assert "Every record below comes from one machine: **Xeon X, 2 cores**" in one
    assert "| exec/s | 1,234 |" in one and "`python bench/engines.py`" in one  # figures formatted
    (tmp_path / "other.json").write_text(json.dumps({**rec, "name": "other", "cpu": "EPYC Y"}))
    two = docs.benchmarks_page(tmp_path)
    assert "more than one machine" in two and "- machine: EPYC Y, 2 cores" in two


# -- every command the docs show exists ----------------------------------------------------------------------------

GLOBAL = {o for p in cli.params for o in (*p.opts, *p.secondary_opts)}


def _shown_commands(path: Path) -> list[str]:
    """Every `dryz ...` command a page shows: lines of sh blocks, `$ `-prompted lines of other blocks, inline code."""
    text = path.read_text()
    out = []
    for lang, body in re.findall(r"```(\w*)\n(.*?)```", text, re.S):
        for line in body.splitlines():
            if lang != "sh" and not line.startswith("$ "):
                continue
            for seg in re.split(r"\$\(|\)|;|&&| \| |#", line.removeprefix("$ ")):
                m = re.search(r"(?:^|[\s/])(dryz(?:\s.*)?)$", seg.strip())
                if m:
                    out.append(m.group(1).strip())
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for code in re.findall(r"`([^`]+)`", prose):
        code = " ".join(code.split())
        m = re.match(r"(?:\S*/)?(dryz(?: .*)?)$", code)
        if m and not re.match(r"dryz [\w|-]+:", m.group(1)):
            out.append(m.group(1))
    return out


def _check_command(cmd: str) -> list[str]:
    """What is wrong with one shown command: its command words must exist (`--help` exits 0) and every option it
    gives must be one of that command's (or a global option before it), never a hidden old spelling."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        words = cmd.split()
    words = [w.strip("[]") for w in words[1:]]
    if "--" in words:
        words = words[:words.index("--")]
    i, errors = 0, []
    while i < len(words) and words[i].startswith("-"):  # global options and their values
        if words[i].split("=")[0] not in GLOBAL:
            return [f"{cmd}: {words[i]} is not a global option"]
        i += 1 if words[i] in ("-q", "--quiet") or "=" in words[i] else 2
    if i >= len(words) or words[i] in ("COMMAND", "..."):
        return errors
    for alt in words[i].split("|"):
        node, path, j = cli, [], i
        names = [alt] + words[i + 1:]
        k = 0
        while isinstance(node, click.Group) and k < len(names) and names[k] in node.commands:
            node = node.commands[names[k]]
            path.append(names[k])
            k += 1
        if not path or isinstance(node, click.Group):
            errors.append(f"{cmd}: no command {' '.join(path + names[k:k + 1])!r}")
            continue
        res = CliRunner().invoke(cli, [*path, "--help"])
        if res.exit_code != 0:
            errors.append(f"{cmd}: dryz {' '.join(path)} --help exits {res.exit_code}")
        visible = {o for p in node.params if not getattr(p, "hidden", False) for o in (*p.opts, *p.secondary_opts)}
        visible |= {"-h", "--help"}
        for w in names[k:]:
            for opt in re.findall(r"^(--?[a-zA-Z][\w-]*)", w.split("|")[0]):
                if opt not in visible:
                    errors.append(f"{cmd}: dryz {' '.join(path)} has no option {opt}")
    return errors


def test_every_command_shown_exists():
    shown = [(p.name, c) for p in GUIDES for c in _shown_commands(p)]
    assert len(shown) >= 60, len(shown)
    # the pages show the commands of every task
    seen = " ".join(c for _, c in shown)
    for part in ("dryz exhaustive", "dryz gate", "dryz fuzz", "dryz minimize", "dryz matrix", "dryz properties",
                 "dryz conformance", "dryz subject build", "dryz explain", "dryz export", "dryz replay"):
        assert part in seen, part
    errors = [e for name, c in shown for e in _check_command(c)]
    assert errors == []


def test_the_command_checker_fails_on_what_does_not_exist():
    assert _check_command("dryz exhaustive --trace-events 7") == []
    assert _check_command("dryz --lib $L subject build --release 0.3.34 --patch x.diff") == []
    assert _check_command("dryz check|explain --vocab llama-bpe") == []
    assert _check_command("dryz frobnicate") == ["dryz frobnicate: no command 'frobnicate'"]
    assert _check_command("dryz exhaustive --no-such-flag") == ["dryz exhaustive --no-such-flag: dryz exhaustive "
                                                                "has no option --no-such-flag"]
    # an old spelling still works, but the docs must show the current one
    assert _check_command("dryz subject build --version 0.3.34") == [
        "dryz subject build --version 0.3.34: dryz subject build has no option --version"]
    assert _shown_commands(README)[0].startswith("dryz exhaustive")


# -- the certificate's fields, as file-formats.md lists them --------------------------------------------------------

def test_the_certificate_fields_are_documented(tmp_path):
    from conftest import dryz
    p = dryz("-q", "exhaustive", "-k", "2", "-n", "3", "--json", str(tmp_path / "c.json"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    from dryz.formats import FORMATS, check_as
    data = json.loads((tmp_path / "c.json").read_text())
    check_as(data, "certificate", "c.json")  # the format (dryz.formats) takes what a real run writes
    keys = set(data)
    page = (ROOT / "docs" / "reference" / "file-formats.md").read_text()
    table = page.split("## A certificate")[1].split("\n## ")[0]
    documented = set(re.findall(r"^\| `(\w+)` \|", table, re.M))
    shape = FORMATS["certificate"].shape
    assert keys <= documented and not [k for k in documented - keys if shape.fields[k].required]


# -- the built site ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                       capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "WARNING" not in p.stderr, p.stderr[-3000:]
    return out


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        for attr in ("href", "src"):
            if a.get(attr) and tag in ("a", "img", "link", "script"):
                self.refs.append((tag, a[attr]))


def _parse(page: Path) -> _Links:
    p = _Links()
    p.feed(page.read_text())
    return p


def test_the_site_builds_with_every_page(site):
    for page in ("index.html", "getting-started.html", "guides/ci-gate.html", "reference/verdict-classes.html",
                 "reference/cli/gate.html", "benchmarks.html", "ci/dryz-gate.yml", "report.png",
                 "engines/mistralrs.html", "mutate-0.3.36-sample60.html"):
        assert (site / page).exists(), page
    guide = (site / "guides" / "ci-gate.html").read_text()
    assert 'href="../ci/dryz-gate.yml"' in guide and "Put it in your fork" in guide


def _broken(site: Path) -> tuple[int, list[str]]:
    """Every href and src of every built page that stays on the site must resolve to a file, and every #fragment to
    an id on its page: (how many were checked, the broken ones)."""
    pages = sorted(p for p in site.rglob("*.html") if p.name != "404.html")  # 404: absolute links, any path
    parsed = {p.resolve(): _parse(p) for p in pages}
    broken, checked = [], 0
    for page, links in parsed.items():
        for tag, ref in links.refs:
            u = urllib.parse.urlsplit(ref)
            if u.scheme or ref.startswith("//"):
                continue
            target = page if not u.path else (page.parent / urllib.parse.unquote(u.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            checked += 1
            if not target.is_file() or site.resolve() not in target.parents:
                broken.append(f"{page.relative_to(site.resolve())}: {tag} {ref}")
            elif u.fragment and target.suffix == ".html" and u.fragment not in \
                    (parsed.get(target) or _parse(target)).ids:
                broken.append(f"{page.relative_to(site.resolve())}: {tag} {ref} (no such anchor)")
    return checked, broken


def test_no_broken_internal_link_or_missing_image(site):
    assert len(list(site.rglob("*.html"))) >= 40
    checked, broken = _broken(site)
    assert checked > 1000 and broken == []
    img = [r for _, r in _parse(site / "guides" / "minimize-explain.html").refs if r.endswith("report.png")]
    assert img == ["../report.png"] and (site / "report.png").stat().st_size > 10_000


def test_the_link_check_sees_a_broken_link_anchor_and_image(site, tmp_path):
    shutil.copytree(site, tmp_path / "s")
    page = tmp_path / "s" / "index.html"
    page.write_text(page.read_text().replace(
        "</body>", '<a href="no/such/page.html">x</a><a href="getting-started.html#nowhere">y</a>'
                   '<img src="gone.png"></body>'))
    _, broken = _broken(tmp_path / "s")
    assert broken == ["index.html: a no/such/page.html", "index.html: a getting-started.html#nowhere (no such anchor)",
                      "index.html: img gone.png"]


@pytest.mark.parametrize("page", ["index.html", "guides/ci-gate.html"])
def test_chromium_renders_the_site(site, page, tmp_path):
    if CHROMIUM is None:
        if os.environ.get("DRYZ_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium is not installed")
        pytest.skip("no chromium")
    p = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'chr'}", "--enable-logging=stderr", "--v=0",
                        "--dump-dom", (site / page).as_uri()], capture_output=True, text=True, timeout=120)
    dom = p.stdout
    assert "Failed to load" not in p.stderr and "ERR_FILE_NOT_FOUND" not in p.stderr, p.stderr[-2000:]
    assert "Uncaught" not in p.stderr, p.stderr[-2000:]
    assert 'class="md-content"' in dom and "dryz" in dom
    if page.startswith("guides"):
        assert "The gate in CI" in dom and "dryz-gate.yml" in dom
    else:
        assert "Is llama.cpp's DRY sampler correct" in dom


def test_a_record_bench_writes_is_on_the_benchmarks_page(tmp_path, monkeypatch):
    """bench/record.py writes what the page needs, and bench/engines.py writes through it."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import engines
    import record
    assert engines.write_record is record.write_record
    p = record.write_record("demo", "python bench/demo.py --n 3", {"cases/s": 10.5}, records=tmp_path, rows=[1])
    d = json.loads(p.read_text())
    assert p == tmp_path / "demo.json" and d["rows"] == [1] and d["figures"] == {"cases/s": 10.5}
    assert {"name", "command", "commit", "cpu", "cores", "python", "load", "date", "figures"} <= set(d)
    assert len(d["load"]) == 3 and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", d["date"])
    page = docs.benchmarks_page(tmp_path)
    assert f"**{d['cpu']}, {d['cores']} cores**" in page and "| cases/s | 10.5 |" in page
    assert f"`{d['commit']}`" in page and "`python bench/demo.py --n 3`" in page
    with pytest.raises(ValueError):
        record.write_record("../x", "c", {}, records=tmp_path)


def test_readme_engine_speeds_are_the_record():
    """README's sentence of engine speeds is made from bench/records/engines.json (dryz.docs.engines_sentence):
    a figure typed by hand, or a record re-measured without README following, fails here."""
    from dryz.docs import engines_sentence
    assert engines_sentence() in " ".join(README.read_text().split())


def test_an_engine_page_s_figures_are_its_rows_of_the_record(tmp_path):
    """docs/engines/NAME.md's figures block is made from its rows of bench/records/engines.json: the Aphrodite page
    gets both of its paths' rows, with the campaign's fitted causes and what they explained; the ik_llama.cpp page
    says the record has no row for it when it has none."""
    from dryz.docs import FIGURES_BEGIN, FIGURES_END, _figures_block
    cert = {"max_length": 11, "cases": 2391471, "wall_seconds": 10.5, "cases_per_second": 227759.1, "exit": 1,
            "verdict": "mismatch"}
    camp = {"execs": 12000, "seconds": 125.5, "fuzz_seconds": 121.0, "execs_per_second": 99.2, "findings": {"crash": 2},
            "exit": 1,
            "fitted": ["repeat-min:2", "no-clamp"], "explained": 9000}
    rec = {"command": "python bench/engines.py --time 120", "commit": "abc1234", "cores": 2, "cpu": "X", "load": [0.5],
           "rows": [{"subject": "engine:aphrodite", "certificate": cert, "campaign": camp},
                    {"subject": "engine:aphrodite-python", "certificate": cert, "campaign": dict(camp, fitted=[])}]}
    f = tmp_path / "engines.json"
    f.write_text(json.dumps(rec))
    page = _figures_block("aphrodite", f"x\n{FIGURES_BEGIN}\nold\n{FIGURES_END}\ny\n", f)
    assert page.splitlines()[2:5] == [
        "`python bench/engines.py --time 120` (record `bench/records/engines.json`, [benchmarks](../benchmarks.md), "
        "commit abc1234; one core each on a 2-core X, load 0.5 when it ended):",
        "- `engine:aphrodite`: the certificate space to length 11, 2,391,471 cases in 10.5 s (227,759 per second; "
        "against llama.cpp alone: mismatch); a 120-second campaign, 12,000 execs in libFuzzer's 121 s (99.2 per second; "
        "the command 125.5 s with its set-up and re-checks), judged with its 2 fitted causes: "
        "9,000 inputs explained by them; findings: crash 2.",
        "- `engine:aphrodite-python`: the certificate space to length 11, 2,391,471 cases in 10.5 s (227,759 per "
        "second; against llama.cpp alone: mismatch); a 120-second campaign, 12,000 execs in libFuzzer's 121 s (99.2 per "
        "second; the command 125.5 s with its set-up and re-checks); findings: crash 2."]
    assert "the record has no row for this engine." in _figures_block("ik_llama", page, f)


def test_readme_states_the_mutation_score_the_committed_run_gives():
    """README's sentence of the mutation score is made from docs/results/mutation-0.3.36/ and the test set
    (dryz.docs.mutation_sentence): a figure typed by hand, or a run re-made without README following, fails."""
    from dryz.docs import mutation_sentence
    assert mutation_sentence() in " ".join(README.read_text().split())


def test_a_conformance_result_is_taken_with_its_files_named_in_the_repository(tmp_path, monkeypatch):
    """python -m dryz.docs --take-conformance: the files a result names are copied under docs/results/conformance/
    and named there, and a copied witness's own mention of another file (what it was minimized from) is that
    file's copy, or WORKDIR/... for one the result does not name: no path into the run's workdir is left."""
    from dryz import docs
    root = tmp_path / "repo"
    monkeypatch.setattr(docs, "ROOT", root)
    monkeypatch.setattr(docs, "DOCS", root / "docs")
    monkeypatch.setattr(docs, "CONFORMANCE", root / "docs" / "results" / "conformance.json")
    work = tmp_path / "work"
    (work / "row" / "probes").mkdir(parents=True)
    probe, seed = work / "row" / "probes" / "p.json", work / "row" / "seed.json"
    probe.write_text('{"history": [0]}')
    seed.write_text("{}")
    witness = work / "row" / "w.json"
    witness.write_text(json.dumps({"provenance": {"minimized_from": str(probe), "seed": str(seed)}}))
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"rows": [{"witness": str(witness), "probe": str(probe), "note": "/nowhere"}]}))
    assert docs.take_conformance(result, work) == 2
    data = json.loads((root / "docs" / "results" / "conformance.json").read_text())
    assert data["rows"][0] == {"witness": "docs/results/conformance/row/w.json",
                               "probe": "docs/results/conformance/row/probes/p.json", "note": "/nowhere"}
    w = json.loads((root / "docs" / "results" / "conformance" / "row" / "w.json").read_text())
    assert w["provenance"] == {"minimized_from": "docs/results/conformance/row/probes/p.json",
                               "seed": "WORKDIR/row/seed.json"}
    assert (root / "docs" / "results" / "conformance" / "row" / "probes" / "p.json").read_text() == '{"history": [0]}'
