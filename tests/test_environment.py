"""Environment variables are options: every DRYZ_* variable dryz reads (dryz.options.ENVIRONMENT, the environment
page's tables) is read with the type of the option it stands for, before any work: a value it refuses is one line
naming the variable and exit 2, with nothing written; a good value is taken; where the variable and its option are
both given, the option wins (the variable is not read). The test suite's and the CI workflow's own variables are
not dryz's: whatever their value, dryz runs as without them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import click
import pytest

from conftest import ROOT, dryz
from dryz.docs import TEST_ENV
from dryz.options import ENVIRONMENT

PAGE = ROOT / "docs" / "reference" / "environment.md"
CHEAP = ("exhaustive", "-k", "2", "-n", "2", "-c", "base", "--no-progress", "-j", "1")  # a run of a second


def _listed() -> set[str]:
    return set(re.findall(r"^\| `(DRYZ_[A-Z0-9_]+)` \|", PAGE.read_text(), re.M))


def _pip_lib() -> str:
    from dryz.subject.libllama import pip_library
    return str(pip_library())


def good(name: str, tmp: Path) -> str:
    """A value each variable takes (the table must cover every registered variable: a new one needs its own)."""
    values = {
        "DRYZ_SUBJECT": "libllama:", "DRYZ_LIB": _pip_lib(), "DRYZ_QUIET": "1", "DRYZ_NO_BUILD": "1",
        "DRYZ_CACHE": None,
        "DRYZ_SDIST_DIR": str(tmp), "DRYZ_INIT_DRY_ABI": "7", "DRYZ_CORPUS": str(ROOT / "corpus"),
        "DRYZ_ADAPTER_TIMEOUT": "60s", "DRYZ_DASK_TIMEOUT": "2s", "DRYZ_CLANG": shutil.which("clang") or "sh",
        "DRYZ_CLANGXX": shutil.which("clang++") or "sh", "DRYZ_FAULT": "off-by-one", "DRYZ_DRIVE": "ctypes",
        "DRYZ_VOCAB_SAMPLER": "reset", "DRYZ_INSTRUMENT": "0", "DRYZ_FUZZ_FORKSERVER": "0",
        "DRYZ_FUZZ_TARGET": "traces", "DRYZ_FUZZ_VOCAB": "llama-bpe", "DRYZ_FUZZ_BREAKERS": "dict",
        "DRYZ_FORKSERVER": str(tmp / "socket"), "DRYZ_ISOLATION_FDS": "3,4", "DRYZ_ISOLATION_TIMEOUT": "30",
        "DRYZ_FUZZ_RECORD": str(tmp / "artifacts"), "DRYZ_FUZZ_EXPLAINED": str(tmp / "explained"),
        "DRYZ_CAUSES": "match-cap:12,no-clamp",
    }
    assert set(values) == set(ENVIRONMENT), set(values) ^ set(ENVIRONMENT)
    from dryz.subject.cache import cache_dir
    return values[name] if values[name] is not None else str(cache_dir())  # the cache in use (builds are there)


def bad(name: str) -> str | None:
    """A value the variable's type refuses (None: a variable whose value is free, such as a socket's path)."""
    t = ENVIRONMENT[name].type
    if t is None:
        return None
    if isinstance(t, click.Choice):
        return "no-such-value"
    return t.bad[0]


def test_the_page_lists_exactly_the_registered_variables_and_the_suites():
    assert _listed() == set(ENVIRONMENT) | set(TEST_ENV)
    assert not set(ENVIRONMENT) & set(TEST_ENV)


@pytest.mark.parametrize("name", sorted(ENVIRONMENT))
def test_a_value_the_variable_refuses_is_one_line_naming_it(name, tmp_path):
    value = bad(name)
    if value is None:
        pytest.skip(f"{name} takes any value (set by dryz itself)")
    p = dryz(*CHEAP, "--json", "r.json", cwd=tmp_path, env={name: value}, timeout=120)
    assert p.returncode == 2, (name, value, p.stdout[-500:], p.stderr[-500:])
    assert p.stderr.startswith(f"dryz: error: {name}") and p.stderr.count("\n") == 1, (name, p.stderr)
    assert "Traceback" not in p.stderr and p.stdout == "" and not any(tmp_path.iterdir())


@pytest.mark.parametrize("name", sorted(ENVIRONMENT))
def test_a_good_value_is_taken(name, tmp_path):
    p = dryz(*CHEAP, "--json", "r.json", cwd=tmp_path, env={name: good(name, tmp_path)}, timeout=300)
    if name == "DRYZ_FAULT":  # taken: the planted fault fails the certificate's own controls (the run is void)
        assert p.returncode == 2 and p.stderr == "dryz: error: the harness is in doubt, the run is void: failed " \
                                                 "periodic_oracles\n", p.stderr
        return
    assert p.returncode == 0, (name, p.stdout[-800:], p.stderr[-800:])
    assert "dryz: error" not in p.stderr and (tmp_path / "r.json").exists()


@pytest.mark.parametrize("name", sorted(TEST_ENV))
def test_the_suites_own_variables_are_not_read_by_dryz(name, tmp_path):
    p = dryz(*CHEAP, cwd=tmp_path, env={name: "no-such-value"}, timeout=120)
    assert p.returncode == 0 and "dryz: error" not in p.stderr, (name, p.stderr[-500:])


@pytest.mark.parametrize("name", sorted(n for n, v in ENVIRONMENT.items() if v.option))
def test_the_option_wins_and_the_variable_is_not_read(name, tmp_path):
    """A refused value in the variable and its option on the command line: the option is taken, the variable not
    read (the command is refused for something else only where it is given a bad input on purpose)."""
    option = ENVIRONMENT[name].option[0]
    args = {"--subject": ["--subject", "libllama:", *CHEAP], "--lib": ["--lib", _pip_lib(), *CHEAP],
            "-q": ["-q", *CHEAP], "--no-build": ["--no-build", *CHEAP],
            # fuzz's own options: the campaign refused for its --workdir, proving the variable was not read first
            "--fault": ["fuzz", "--fault", "slow", "--workdir", "/proc/dryz-refused"],
            "--sampler": ["fuzz", "--sampler", "clone", "--workdir", "/proc/dryz-refused"]}[option]
    p = dryz(*args, cwd=tmp_path, env={name: bad(name)}, timeout=120)
    if args[0] == "fuzz":
        assert p.returncode == 2 and p.stderr.startswith("dryz: error: --workdir: cannot write"), p.stderr
    else:
        assert p.returncode == 0 and name not in p.stderr, p.stderr[-500:]


def test_an_option_and_its_variable_take_the_same_value_the_option_first(monkeypatch):
    """Where both are given the option's value is the one used; the variable alone is used as the option would be."""
    from dryz.cli import cli
    fuzz = cli.commands["fuzz"]
    monkeypatch.setenv("DRYZ_VOCAB_SAMPLER", "reset")
    monkeypatch.setenv("DRYZ_FAULT", "abort")
    assert fuzz.make_context("fuzz", ["--workdir", "w"]).params["sampler"] == "reset"
    assert fuzz.make_context("fuzz", ["--workdir", "w"]).params["fault"] == "abort"
    ctx = fuzz.make_context("fuzz", ["--sampler", "clone", "--fault", "slow", "--workdir", "w"])
    assert (ctx.params["sampler"], ctx.params["fault"]) == ("clone", "slow")


@pytest.mark.parametrize("value,secs", [("60", 60), ("60s", 60), ("1.5m", 90), ("2 min", 120), ("1h30m", 5400),
                                        ("500ms", 0.5)])
def test_durations_read_alike_in_an_option_and_a_variable(value, secs, monkeypatch):
    from dryz.cli import cli
    from dryz.options import env
    monkeypatch.setenv("DRYZ_ADAPTER_TIMEOUT", value)
    assert env("DRYZ_ADAPTER_TIMEOUT") == secs
    if secs >= 10:
        assert cli.commands["gate"].make_context("gate", ["--time", value]).params["seconds"] == secs
