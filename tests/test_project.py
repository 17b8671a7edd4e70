"""The project's own promises: README's commands are what CI runs; the layout reads as the pipeline."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Set-up\n.*?```sh\n(.*?)```", text, re.S).group(1)
    return [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]


def test_readme_has_two_setup_commands_and_ci_runs_the_test_one():
    cmds = readme_commands()
    assert len(cmds) == 2
    assert "dryz exhaustive" in cmds[0]
    test_cmd = cmds[1].split("&&")[-1].strip()
    assert "pytest" in test_cmd
    assert test_cmd in (ROOT / ".ci" / "run").read_text()


def test_top_level_layout():
    for name in ("dryz", "fuzz", "corpus", "minimize", "PREREG.md", "README.md", "LICENSE", "pyproject.toml",
                 ".ci/run", "bench", "tests"):
        assert (ROOT / name).exists(), name
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert 'llama-cpp-python==0.3.36' in (ROOT / "pyproject.toml").read_text()
