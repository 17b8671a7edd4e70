"""Refuse before working: every command and every option of dryz, swept from the click command tree (dryz.cli), is
given a bad value of its kind (an unwritable output path, a name its registry lacks, an input file that is not
there or not of its format, a number out of bounds, a duration that is none) and is refused: exit 2, one line,
no traceback, nothing written, no process left, its inputs unchanged, within a generous bound that only catches
hangs. The same options with good values of their kinds pass the same checks and write nothing either.

An option is covered by its type (dryz.options: one rule per kind of input), so a new option of an existing kind
is swept without a line here; an option whose value no type checks must be listed in FREE with its reason."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from conftest import ROOT, clean_env, session as _session
from dryz import options as O
from dryz.cli import cli
from dryz.formats import EXAMPLE_CASE

ENDS_WITHIN = 120  # seconds: only a hang is caught (a refusal is parsing, well under a second)

# Options whose value no type checks, and why (each is still given the bad value here, when it has one).
FREE = {
    ("exhaustive", "--breakers"): (None, "any string is a breaker"),
    ("mutate", "--id"): ("no-such-mutant", "a mutant of the release's source: read from its sdist, checked before "
                                           "any build (dryz.mutate.command.select)"),
    ("fuzz", "libfuzzer_flags"): ("not-a-flag", "libFuzzer's own flags, checked before the campaign starts"),
}


def commands():
    """(path, command) of every leaf command: what the sweep runs."""
    out = []

    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, path + [name])
        else:
            out.append((path, cmd))
    walk(cli, [])
    return out


def params(cmd):
    return [p for p in cmd.params if not getattr(p, "hidden", False) and not getattr(p, "is_flag", False)
            and p.name not in ("help", "version")]


def name_of(p) -> str:
    return max(p.opts, key=len) if isinstance(p, click.Option) else p.name


@pytest.fixture(scope="module")
def fx(tmp_path_factory):
    """Good inputs of every kind, in a folder of their own (the sweep checks nothing in it changes)."""
    d = tmp_path_factory.mktemp("inputs")
    case = d / "case.json"
    case.write_text(json.dumps(EXAMPLE_CASE))
    corpus = d / "corpus"
    corpus.mkdir()
    entry = corpus / "entry.json"
    shutil.copy(sorted((ROOT / "corpus" / "findings").glob("*.json"))[0], entry)
    p = subprocess.run([sys.executable, "-m", "dryz", "-q", "exhaustive", "-k", "2", "-n", "2", "-c", "base",
                        "--shard", "1/2", "--json", str(d / "shard.json"), "--no-progress", "-j", "1"],
                       capture_output=True, text=True, env=clean_env(), timeout=300)
    assert p.returncode == 0, p.stderr
    expect = d / "expect.txt"
    expect.write_text("crash\n")
    result = d / "properties.json"  # export --as issue --result: a subject's causes
    result.write_text(json.dumps({"tool": "dryz properties", "subject": {}, "cells": {}, "fit": {}}))
    return {"dir": d, "case": case, "corpus": corpus, "entry": entry, "shard": d / "shard.json", "expect": expect,
            "result": result}


def good(p, fx, out: Path):
    """A value of this parameter's kind that is taken (None: the parameter needs none)."""
    t = p.type
    readers = {id(O.CERTIFICATE): fx["shard"], id(O.RESUMED): fx["shard"], id(O.ENTRY): fx["entry"],
               id(O.REPORT_INPUT): fx["shard"],
               id(O.EXPECT_FILE): fx["expect"], id(O.WITNESS): fx["case"], id(O.INPUT): fx["case"],
               id(O.INPUT_FOLDER): fx["corpus"], id(O.TRIAGE): ROOT / "dryz" / "mutate" / "triage-0.3.36.json",
               id(O.KILL_ORDER): ROOT / "dryz" / "mutate" / "kill-matrix-0.3.36.json", id(O.ISSUE_RESULT): fx["result"]}
    if isinstance(t, O.Output):
        return str(out / ("folder-" if t.folder else "file-") / p.name) + ("" if t.folder else ".json")
    if isinstance(t, O.Input):
        assert id(t) in readers, f"no good input for {p.name}: add one of its kind here"
        return str(readers[id(t)])
    if isinstance(t, O.ChangeClass):
        return "crash"
    if isinstance(t, O.Name):
        return list(t.names())[0]
    if isinstance(t, O.Parsed):
        return t.good
    if isinstance(t, O.Base):
        return "libllama:"
    if isinstance(t, O.Subject):
        from dryz.subject.libllama import pip_library
        return str(pip_library()) if t.kind else "libllama:"
    if isinstance(t, O.Vocabulary):
        return "llama-bpe"
    if isinstance(t, O.Duration):
        return f"{int(t.lo)}s" if t.kind is int or t.lo >= 1 else "1s"
    if isinstance(t, O.Bound):
        return str(t.lo)
    if isinstance(t, click.IntRange):
        return str(t.min)
    if isinstance(t, click.Choice):
        return t.choices[0]
    return None


def bad(p) -> list[str]:
    """Values of this parameter's kind that must be refused."""
    t = p.type
    if isinstance(t, O.Checked) or isinstance(t, O.Duration):
        return list(t.bad)
    if isinstance(t, O.Bound):
        return ["x", str(t.lo - 1)]
    if isinstance(t, click.IntRange):
        return ["x", str(t.min - 1)]
    if isinstance(t, click.Choice):
        return ["no-such-choice"]
    return []


def test_every_option_is_of_a_checked_kind():
    """A path, a name or a number is never taken as plain text: each option's type checks it (or it is listed in
    FREE, with why), so a new option of an existing kind is swept automatically."""
    loose = []
    for path, cmd in commands():
        for p in params(cmd):
            t = p.type
            if isinstance(t, (O.Checked, O.Bound, click.Choice, click.IntRange)):
                continue
            if (path[-1], name_of(p)) in FREE:
                continue
            loose.append(f"dryz {' '.join(path)} {name_of(p)} ({type(t).__name__})")
    for p in params(cli):
        if not isinstance(p.type, O.Checked):
            loose.append(f"dryz {name_of(p)}")
    assert not loose, loose


def cases():
    """(command path, the parameter's name, a bad value) for every parameter of every command, the group's too."""
    out = []
    for path, cmd in commands():
        for p in params(cmd):
            values = bad(p)
            if not values and (path[-1], name_of(p)) in FREE and FREE[(path[-1], name_of(p))][0]:
                values = [FREE[(path[-1], name_of(p))][0]]
            out += [(tuple(path), name_of(p), v) for v in values]
    for p in params(cli):
        out += [((), name_of(p), v) for v in bad(p)]
    return out


def argv_for(path, target: str, value: str, fx, out: Path) -> list[str]:
    """The command line: every required parameter with a good value, the target with `value`."""
    if not path:  # a group option: on a command that would otherwise run (one second)
        return [target, value, "exhaustive", "-k", "2", "-n", "2", "-c", "base", "--no-progress"]
    cmd = cli
    for name in path:
        cmd = cmd.commands[name]
    args = list(path)
    for p in params(cmd):
        if name_of(p) == target:
            args += ([target] if isinstance(p, click.Option) else []) + [value]
        elif p.required:
            v = good(p, fx, out)
            assert v is not None, (path, p.name)
            args += ([name_of(p)] if isinstance(p, click.Option) else []) + [v]
    if path[-1] == "mutate":
        args.append("--list")  # (with a good value it would only list: nothing built)
    return args


def snapshot(d: Path) -> dict:
    return {str(p.relative_to(d)): (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else b"")
            for p in sorted(d.rglob("*"))}


@pytest.mark.parametrize("path,target,value", cases(), ids=lambda x: " ".join(x) if isinstance(x, tuple) else
                         str(x))
def test_a_bad_value_is_refused_before_any_work(path, target, value, fx, tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    out = tmp_path / "out"  # where good outputs would go: never made
    argv = argv_for(path, target, value, fx, out)
    before = snapshot(fx["dir"])
    p = subprocess.Popen([sys.executable, "-m", "dryz", *argv], cwd=cwd, env=clean_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=ENDS_WITHIN)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        pytest.fail(f"dryz {' '.join(argv)} did not end within {ENDS_WITHIN} s")
    assert p.returncode == 2, (argv, p.returncode, stdout[-500:], stderr[-500:])
    assert stderr.startswith("dryz: error: ") and stderr.count("\n") == 1, (argv, stderr)
    assert "Traceback" not in stdout + stderr and stdout == "", (argv, stdout[-500:])
    assert not any(cwd.iterdir()) and not out.exists(), (argv, list(cwd.iterdir()))
    assert snapshot(fx["dir"]) == before, argv  # the inputs unchanged
    deadline = time.monotonic() + 30
    while _session(p.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _session(p.pid), argv  # no process left


@pytest.mark.parametrize("path,cmd", commands(), ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_good_values_of_every_kind_pass_the_same_checks(path, cmd, fx, tmp_path, monkeypatch):
    """Every parameter of the command given a good value of its kind: the command line is taken (the checks all
    pass) and nothing is written (a probe file is made and removed)."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    args = []
    for p in params(cmd):
        v = good(p, fx, out)
        if v is None or (path[-1], name_of(p)) in FREE:
            continue
        args += ([name_of(p)] if isinstance(p, click.Option) else []) + [v]
    before = snapshot(fx["dir"])
    cmd.make_context(" ".join(path), args)  # (raises click's UsageError for a value refused)
    assert not out.exists() and not [x for x in tmp_path.iterdir()], list(tmp_path.iterdir())
    assert snapshot(fx["dir"]) == before
    group = cli.make_context("dryz", [x for p in params(cli) for x in (name_of(p), good(p, fx, out))
                                      if p.name != "lib_path"] + ["exhaustive"])
    assert group.params["subject_spec"] == "libllama:"


@pytest.mark.parametrize("argv,said", [
    (["merge", "<SHARD>", "--json", "<SHARD>"], "--json <SHARD>: it is also this command's input (PATHS): the result "
                                                "would overwrite it"),
    (["export", "<ENTRY>", "--as", "c", "--output", "<ENTRY>"], "--output <ENTRY>: it is also this command's input "
                                                                "(ENTRY)"),
    (["report", "<SHARD>", "--html", "OUT/r", "--markdown", "OUT/r"], "--markdown OUT/r: also --html: two results to "
                                                                      "one file"),
])
def test_values_are_checked_together_before_any_work(argv, said, fx, tmp_path):
    """What no one option can say: an output naming the command's input, two outputs naming one file."""
    sub = {"<SHARD>": str(fx["shard"]), "<ENTRY>": str(fx["entry"])}
    args = [sub.get(a, a.replace("OUT/", str(tmp_path / "out") + "/")) for a in argv]
    before = snapshot(fx["dir"])
    p = subprocess.run([sys.executable, "-m", "dryz", *args], cwd=tmp_path, env=clean_env(), capture_output=True,
                       text=True, timeout=ENDS_WITHIN)
    for k, v in sub.items():
        said = said.replace(k, v)
    said = said.replace("OUT/", str(tmp_path / "out") + "/")
    assert p.stderr.startswith(f"dryz: error: {said}"), p.stderr
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and snapshot(fx["dir"]) == before
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [
    ["exhaustive", "-k", "2", "-n", "2", "-c", "base", "--no-progress", "--json", "OUT/r.json"],
    ["report", "SHARD", "--markdown", "OUT/r.md"],
    ["export", "ENTRY", "--as", "c", "--output", "OUT/t.c"],
    ["check", "--no-isolate", "CASE"],
    ["replay", "CORPUS", "--json", "OUT/replay.json"],
])
def test_good_values_still_run(argv, fx, tmp_path):
    """Cheap commands run to their end with good values of the kinds above, writing where they were told to."""
    sub = {"SHARD": str(fx["shard"]), "ENTRY": str(fx["entry"]), "CASE": str(fx["case"]),
           "CORPUS": str(fx["corpus"])}
    args = [sub.get(a, a.replace("OUT/", str(tmp_path / "out") + "/")) for a in argv]
    p = subprocess.run([sys.executable, "-m", "dryz", *args], cwd=tmp_path, env=clean_env(), capture_output=True,
                       text=True, timeout=600)
    assert p.returncode in (0, 1), (args, p.stderr[-1000:])
    written = [a for a in argv if a.startswith("OUT/")]
    assert all((tmp_path / "out" / w.removeprefix("OUT/")).exists() for w in written), written
