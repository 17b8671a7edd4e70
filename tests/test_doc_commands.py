"""Every documented command runs as written. Each shell block of README and the guides says in the Markdown, on the
line before it, whether it runs here: `<!-- runnable -->` (exit 0), `<!-- runnable: exit N -->`, or
`<!-- not runnable: WHY -->` (an install, a build, hours of fuzzing, a checkout of your own). The runnable ones run,
in their page's order, in a fresh clone's layout (the repository's files, nothing built or written), with the
environment's `bin` folder on PATH as README's set-up says, each within BLOCK_SECONDS; each must end with the
exit its mark states and without an error line, a traceback or a missing command or file on the way."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env

PAGES = [ROOT / "README.md", ROOT / "docs" / "getting-started.md", *sorted((ROOT / "docs" / "guides").glob("*.md")),
         ROOT / "docs" / "adapters.md", ROOT / "docs" / "traces.md",
         *sorted((ROOT / "docs" / "explanation").glob("*.md"))]
SHELL = re.compile(r"^```(sh|bash|shell|console)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
MARK = re.compile(r"<!-- (runnable(?:: exit (\d+))?|not runnable: (.+?)) -->$")
BLOCK_SECONDS = 300  # one block, wall: a block that needs longer is marked not runnable, with why
# What a block's output must not hold, whatever its exit: dryz refusing it, dryz failing, the shell not finding a
# command or a file the page names.
BROKEN = ("dryz: error", "Traceback (most recent call last)", "command not found", "No such file or directory",
          "internal error")


def shell_blocks(page: Path) -> list[tuple[str | None, int | None, str, int]]:
    """(mark, exit the mark states or None, the block's text, its line) for each shell block of a page; the mark
    is the comment on the line before the fence (None: unmarked)."""
    text = page.read_text()
    out = []
    for m in SHELL.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        mark = MARK.match(before)
        line = text[:m.start()].count("\n") + 1
        if mark is None:
            out.append((None, None, m[2], line))
        elif mark[1].startswith("runnable"):
            out.append(("runnable", int(mark[2] or 0), m[2], line))
        else:
            out.append(("not runnable", None, m[2], line))
    return out


def test_every_shell_block_says_whether_it_runs():
    unmarked = [f"{p.relative_to(ROOT)}:{line}" for p in PAGES for mark, _, _, line in shell_blocks(p)
                if mark is None]
    assert unmarked == [], "mark each: <!-- runnable -->, <!-- runnable: exit N --> or <!-- not runnable: WHY -->"
    runnable = {p.name for p in PAGES for mark, *_ in shell_blocks(p) if mark == "runnable"}
    assert {"README.md", "getting-started.md", "minimize-explain.md", "adapters.md"} <= runnable


def test_the_marks_are_read_as_written(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("<!-- runnable: exit 1 -->\n```sh\ndryz x\n```\n\n```sh\nls\n```\n"
                    "<!-- not runnable: builds llama.cpp -->\n```sh\nmake\n```\n")
    assert shell_blocks(page) == [("runnable", 1, "dryz x\n", 2), (None, None, "ls\n", 6),
                                  ("not runnable", None, "make\n", 10)]


def fresh_clone(dest: Path) -> Path:
    """The repository's files as a clone has them (tracked, and new ones not ignored), nothing else."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
    return dest


@pytest.mark.parametrize("page", [p for p in PAGES if any(m == "runnable" for m, *_ in shell_blocks(p))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_runnable_blocks_run_as_written(page, tmp_path):
    clone = fresh_clone(tmp_path / "dryz")
    env = clean_env(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for mark, want, block, line in shell_blocks(page):
        if mark != "runnable":
            continue
        try:
            p = subprocess.run(["bash", "-o", "pipefail", "-c", block], cwd=clone, env=env, capture_output=True,
                               text=True, timeout=BLOCK_SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{page.name}:{line} ran past {BLOCK_SECONDS} s: mark it not runnable, with why")
        where = f"{page.name}:{line} ({block.strip()!r}):\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}"
        assert p.returncode == want, where
        assert not [b for b in BROKEN if b in p.stdout + p.stderr], where
