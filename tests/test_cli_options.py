"""One meaning per option name across every command (dryz.options.MEANINGS), help text everywhere, and the old
spellings of renamed options: hidden, still working, each with one deprecation line."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from dryz.cli import cli
from dryz.options import MEANINGS


def commands():
    """(name, command) for every command and group of dryz."""
    out = []

    def walk(cmd, path):
        out.append((" ".join(path), cmd))
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, path + [name])
    walk(cli, ["dryz"])
    return out


def _kind(p: click.Option) -> str:
    """What an option takes, broadly: a flag, a number, a choice, a path, or text."""
    if p.is_flag:
        return "flag"
    t = p.type
    if isinstance(t, click.Choice):
        return "choice"
    if isinstance(t, click.Path):
        return "path"
    if t.name in ("integer", "float", "integer range", "float range"):
        return "number"
    return "text"


def _visible(cmd):
    return [p for p in cmd.params if isinstance(p, click.Option) and not p.hidden]


def test_every_command_and_option_has_help():
    missing = [name for name, cmd in commands() if not (cmd.help or "").strip()]
    missing += [f"{name} {p.opts[0]}" for name, cmd in commands() for p in _visible(cmd)
                if not (p.help or "").strip() and p.name not in ("help", "version")]
    assert not missing, missing


def test_one_meaning_per_option_name():
    """An option name that two commands take means the same in both: the same kind of value (flag, number,
    choice, path, text) and a help that starts with its registered meaning."""
    by_name: dict = {}
    for name, cmd in commands():
        for p in _visible(cmd):
            for opt in p.opts + p.secondary_opts:
                if opt.startswith("--"):
                    by_name.setdefault(opt, []).append((name, p))
    bad = []
    for opt, uses in sorted(by_name.items()):
        if len(uses) < 2 or opt in ("--help", "--version"):
            continue
        kinds = {_kind(p) for _, p in uses}
        if len(kinds) > 1:
            bad.append(f"{opt}: kinds {sorted(kinds)} in {[n for n, _ in uses]}")
        if opt not in MEANINGS and not opt.startswith("--no-"):
            bad.append(f"{opt}: taken by {[n for n, _ in uses]} but has no registered meaning")
            continue
        for n, p in uses:
            if opt in MEANINGS and not (p.help or "").startswith(MEANINGS[opt]):
                bad.append(f"{n} {opt}: help does not start with its meaning")
    assert not bad, bad
    assert set(MEANINGS) <= set(by_name), set(MEANINGS) - set(by_name)  # no meaning registered for nothing


def test_the_names_the_manual_promises():
    """--time is a command's wall-clock budget (per-unit budgets have their own names), -j/--jobs is processes,
    --release a llama-cpp-python release, and lists are options given once per item."""
    opts = {name: {o for p in _visible(cmd) for o in p.opts} for name, cmd in commands()}
    assert "--time-per-subject" in opts["dryz matrix"] and "--time" not in opts["dryz matrix"]
    assert "--time-per-mutant" in opts["dryz mutate"] and "--time" not in opts["dryz mutate"]
    assert "--build-jobs" in opts["dryz subject build"] and "-j" not in opts["dryz subject build"]
    assert "-j" in opts["dryz exhaustive"] and "--jobs" in opts["dryz exhaustive"]
    assert "--release" in opts["dryz subject build"] and "--release" in opts["dryz mutate"]
    assert "--breaker-sets" in opts["dryz fuzz"] and "--decode-breakers" in opts["dryz check"]
    assert "--trace-events" in opts["dryz exhaustive"]
    for name, cmd in commands():  # lists: given once per item
        for p in _visible(cmd):
            assert "comma-separated" not in (p.help or "").lower(), (name, p.opts)


def dryz(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "dryz", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args,old,new", [
    (["exhaustive", "-n", "3", "--no-progress", "--workers", "1"], "--workers", "-j/--jobs"),
    (["exhaustive", "-n", "3", "-c", "base", "--no-progress", "--traces", "2"], "--traces", "--trace-events"),
    (["mutate", "--list", "--operators", "negate,delete", "--ids", "negate-accept-93e76b07"], "--operators",
     "--operator"),
])
def test_old_spellings_still_work_and_say_so_once(args, old, new, tmp_path):
    p = dryz(*args)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [ln for ln in p.stderr.splitlines() if "deprecated" in ln]
    assert lines and all(ln.startswith("dryz: warning: ") for ln in lines)
    assert sum(old in ln for ln in lines) == 1 and f"use {new}" in lines[0]


def test_old_and_new_spellings_together_are_refused():
    p = dryz("exhaustive", "-n", "2", "--workers", "1", "-j", "1")
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith("dryz: error: give -j/--jobs or "
                                                                              "--workers, not both")


def test_the_new_list_options_select_the_same_mutants_as_the_old():
    new = dryz("mutate", "--list", "--operator", "negate", "--operator", "delete", "--id", "negate-accept-93e76b07")
    old = dryz("mutate", "--list", "--operators", "negate,delete", "--ids", "negate-accept-93e76b07")
    assert new.returncode == old.returncode == 0 and new.stdout == old.stdout and new.stdout.strip()
