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


def _imports(path: Path) -> set[str]:
    """The dryz modules a file imports (absolute names), read from its code: module-level and inside functions."""
    import ast
    pkg = path.relative_to(ROOT).with_suffix("").parts
    here = pkg[:-1] if pkg[-1] != "__init__" else pkg[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - node.level + 1]
                mod = ".".join(base + ((node.module,) if node.module else ()))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.startswith("dryz")}


def test_oracles_and_subjects_never_import_the_verdict_path():
    """dryz/oracle/ (pure models) and dryz/subject/ (what is audited) sit below dryz.check: neither imports it,
    nor a mode, the corpus or the command line."""
    above = ("dryz.check", "dryz.trace_check", "dryz.corpus", "dryz.cli", "dryz.enumerate", "dryz.fuzz",
             "dryz.shrink", "dryz.matrix", "dryz.gate", "dryz.differential", "dryz.explain", "dryz.report")
    bad = {}
    for layer in ("oracle", "subject"):
        for p in sorted((ROOT / "dryz" / layer).rglob("*.py")):
            up = sorted(m for m in _imports(p) if m.startswith(above) and not m.startswith("dryz.check_"))
            if up:
                bad[str(p.relative_to(ROOT))] = up
    assert not bad, bad


def test_cli_is_arguments_and_printing():
    """cli.py parses options and calls each mode's command: at most ~600 lines, and no mode's error mapped there
    one by one (main() ends every DryzError the same way)."""
    text = (ROOT / "dryz" / "cli.py").read_text()
    assert len(text.splitlines()) <= 600
    allowed = {"OSError", "TypeError", "ValueError", "KeyError", "OverflowError", "BrokenPipeError",
               "NothingToMinimize"}
    head = text.split("\ndef main(")[0]
    caught = re.findall(r"except\s*\(?([\w.,\s]+?)\)?(?:\s+as\s+\w+)?:", head)
    names = [c.rsplit(".", 1)[-1] for group in caught for c in re.split(r",\s*", group.strip())]
    assert not [c for c in names if c not in allowed], names
    assert "isinstance(e" not in head  # nor mapped inside a broad handler


# Exceptions that are not "one line and exit 2": control flow inside a mode (interrupted runs, a finding the
# harness raises to libFuzzer, a minimizer with nothing to do, a dying child), click's own, and the request
# rejections of llama-server's model (an oracle's value, never raised to a command).
NOT_EXIT_TWO = {"dryz.enumerate.exhaustive.ExhaustiveInterrupted", "dryz.enumerate.run.Interrupted",
                "dryz.enumerate.traces.TraceSpaceInterrupted", "dryz.fuzz.campaign._Terminated",
                "dryz.fuzz.target.Finding", "dryz.shrink.NothingToMinimize",
                "dryz.subject.command._Gone", "dryz.subject.answers.SubjectCrashed", "dryz.subject.server.ServerDied",
                "dryz.oracle.served.RequestError"}


def test_every_error_a_command_can_meet_is_a_dryz_error():
    """Every exception class dryz defines ends a command as one line and exit 2 (dryz.errors.DryzError), unless
    it is named in NOT_EXIT_TWO with its reason: a new module's error cannot fall through to 'internal error'."""
    import importlib
    import inspect
    import pkgutil

    import dryz
    from dryz.errors import DryzError
    missing = []
    for m in pkgutil.walk_packages(dryz.__path__, "dryz."):
        if m.name in ("dryz.__main__", "dryz.fuzz.harness"):
            continue
        mod = importlib.import_module(m.name)
        for name, c in inspect.getmembers(mod, inspect.isclass):
            if c.__module__ == mod.__name__ and issubclass(c, BaseException) \
                    and f"{m.name}.{name}" not in NOT_EXIT_TWO and not issubclass(c, DryzError):
                missing.append(f"{m.name}.{name}")
    assert not missing, missing
