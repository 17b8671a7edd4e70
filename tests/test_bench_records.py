"""Benchmarks as data: every bench/ script writes its record through bench/record.py (statically), and the cheapest
ones, run end to end with tiny parameters into a temporary folder ($DRYZ_BENCH_RECORDS), write a whole record
(command, commit, machine, load, date, figures) and leave bench/records/ as it was."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env

BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))
import record  # noqa: E402


def writes_record(source: str) -> list[str]:
    """What a bench/ Python script lacks to write its record through bench/record.py (empty: nothing): it imports
    write_record and command_line from record, and calls write_record(NAME, command_line(), FIGURES, ...)."""
    tree = ast.parse(source)
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "record"
                for a in n.names}
    missing = [f"from record import {name}" for name in ("write_record", "command_line") if name not in imported]
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id == "write_record"]
    if not calls:
        missing.append("a call of write_record(...)")
    def is_command_line(node) -> bool:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "command_line"
                and not node.args)

    # a name bound to command_line() (kept before the script changes sys.argv) is as good
    kept = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) and is_command_line(n.value)
            for t in n.targets if isinstance(t, ast.Name)}
    for c in calls:
        command = c.args[1] if len(c.args) > 1 else None
        if not (is_command_line(command) or isinstance(command, ast.Name) and command.id in kept):
            missing.append(f"write_record's command as command_line() (line {c.lineno})")
        if len(c.args) < 3:
            missing.append(f"write_record's figures (line {c.lineno})")
    return missing


def shell_writes_record(text: str) -> list[str]:
    """What a bench/ shell script lacks: its command line kept before it changes directory, and bench/record.py's
    time-lines step given that command line."""
    missing = []
    if 'cmd=("$0" "$@")' not in text:
        missing.append('cmd=("$0" "$@")')
    steps = re.findall(r'bench/record\.py time-lines \S+ "\$lines" -- "\$\{cmd\[@\]\}"', text)
    if not steps:
        missing.append('bench/record.py time-lines NAME "$lines" -- "${cmd[@]}"')
    return missing


def test_every_bench_script_writes_its_record_through_record_py():
    scripts = sorted(p for p in BENCH.iterdir() if p.is_file() and p.name != "record.py")
    assert {p.suffix for p in scripts} == {".py", ".sh"}, [p.name for p in scripts]
    known = {"campaign_ab.py", "canonical.sh", "engines.py", "exhaustive.sh", "fuzz_ab.py", "fuzz_instructions.py",
             "fuzz_libfuzzer_band.py", "fuzz_throughput.py", "fuzz_vocab.py", "interrupt_latency.py", "minimizer.py",
             "mutate_full.py",
             "paired.py", "reference_campaign.py", "reference_witnesses.py", "restart_sweep.py",
             "served_certificate.py", "served_cost.py", "vocab_breakers.py", "walker.py"}
    assert known <= {p.name for p in scripts}  # (the check sees them all)
    lacking = {}
    for p in scripts:
        missing = writes_record(p.read_text()) if p.suffix == ".py" else shell_writes_record(p.read_text())
        if missing:
            lacking[p.name] = missing
    assert lacking == {}


def test_the_static_check_fails_a_script_that_writes_no_record():
    assert writes_record("import time\nprint(time.time())\n") == [
        "from record import write_record", "from record import command_line", "a call of write_record(...)"]
    typed = "from record import command_line, write_record\nwrite_record('x', 'python bench/x.py', {'a': 1})\n"
    assert writes_record(typed) == ["write_record's command as command_line() (line 2)"]
    assert writes_record("from record import command_line, write_record\n"
                         "write_record('x', command_line(), {'a': 1})\n") == []
    assert writes_record("from record import command_line, write_record\nC = command_line()\n"
                         "write_record('x', C, {'a': 1})\n") == []
    assert writes_record("from record import command_line, write_record\nC = 'python x.py'\n"
                         "write_record('x', C, {'a': 1})\n") == ["write_record's command as command_line() (line 3)"]
    assert shell_writes_record("#!/bin/sh\necho hi\n") == [
        'cmd=("$0" "$@")', 'bench/record.py time-lines NAME "$lines" -- "${cmd[@]}"']


def test_records_go_to_dryz_bench_records_when_set(tmp_path, monkeypatch):
    monkeypatch.delenv(record.ENV, raising=False)
    assert record.records_dir() == ROOT / "bench" / "records"
    monkeypatch.setenv(record.ENV, str(tmp_path / "elsewhere"))
    assert record.records_dir() == tmp_path / "elsewhere"
    p = record.write_record("demo", "python bench/demo.py", {"n": 1})
    assert p == tmp_path / "elsewhere" / "demo.json"
    assert json.loads(p.read_text())["figures"] == {"n": 1}
    p = record.write_record("demo", "python bench/demo.py", {"n": 2}, records=tmp_path)  # an explicit folder wins
    assert p == tmp_path / "demo.json"
    monkeypatch.setenv(record.ENV, "")
    assert record.records_dir() == ROOT / "bench" / "records"


def test_command_line_is_quoted_as_a_shell_needs_it():
    assert record.command_line(["python", "bench/paired.py", "-a", "sh -c true"]) == \
        "python bench/paired.py -a 'sh -c true'"
    assert record.command_line() == shlex.join(sys.orig_argv)


def test_time_lines_figures_and_rows():
    figures, rows = record.time_lines(
        "dryz exhaustive: CERTIFIED\n"
        "workers=2  1.50 s wall  1000 KB peak RSS\n"
        "workers=1  2.00 s wall  900 KB peak RSS\n"
        "workers=2  1.70 s wall  1200 KB peak RSS\n"
        "workers=2  1.60 s wall  1100 KB peak RSS\n")
    assert rows[0] == {"label": "workers=2", "wall_seconds": 1.5, "peak_rss_kb": 1000} and len(rows) == 4
    assert figures == {"workers=2: wall s (median of 3)": 1.6, "workers=2: peak RSS KB (max)": 1200,
                       "workers=1: wall s (median of 1)": 2.0, "workers=1: peak RSS KB (max)": 900}


# ------------------------------------------------------------------------------------ the cheapest, end to end

def _snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in folder.glob("*.json")} if folder.is_dir() else {}


def run_bench(argv: list[str], records: Path, **env) -> dict:
    """Run ARGV from the repository's root with DRYZ_BENCH_RECORDS=RECORDS; bench/records/ must not change."""
    before = _snapshot(record.RECORDS)
    p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=clean_env(DRYZ_BENCH_RECORDS=records, **env))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert _snapshot(record.RECORDS) == before
    written = sorted(records.glob("*.json"))
    assert len(written) == 1, written
    assert f"record: {written[0]}" in p.stderr
    d = json.loads(written[0].read_text())
    d["stdout"] = p.stdout
    return d


def check_fields(d: dict, name: str, command: str) -> None:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    assert d["name"] == name
    assert d["command"] == command
    assert re.fullmatch(re.escape(head) + r"(-dirty)?", d["commit"]), d["commit"]
    assert isinstance(d["cpu"], str) and d["cpu"]
    assert d["cores"] == os.cpu_count()
    assert len(d["load"]) == 3 and all(isinstance(x, (int, float)) and x >= 0 for x in d["load"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", d["date"])
    assert d["figures"] and all(isinstance(v, (int, float, str)) for v in d["figures"].values())  # flat


def test_paired_writes_its_record(tmp_path):
    argv = [sys.executable, "bench/paired.py", "-n", "2", "--warmup", "0", "-a", "true", "-b", "sh -c true"]
    d = run_bench(argv, tmp_path)
    check_fields(d, "paired", shlex.join(argv))
    assert set(d["figures"]) == {"A wall median", "A cpu median", "B wall median", "B cpu median",
                                 "A/B wall median", "A/B cpu median"}
    assert d["a"] == "true" and d["b"] == "sh -c true" and d["pairs"] == 2 and d["warmup"] == 0
    assert len(d["rows"]) == 2 and set(d["rows"][0]) == {"A wall", "A cpu", "B wall", "B cpu", "A/B wall", "A/B cpu"}


def test_paired_writes_no_record_of_a_failing_run(tmp_path):
    argv = [sys.executable, "bench/paired.py", "-n", "1", "--warmup", "0", "-a", "true", "-b", "false"]
    p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env=clean_env(DRYZ_BENCH_RECORDS=tmp_path))
    assert p.returncode == 1 and "no record written" in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_walker_writes_its_record(tmp_path):
    argv = [sys.executable, "bench/walker.py", "canonical", "3"]
    d = run_bench(argv, tmp_path)
    check_fields(d, "walker", shlex.join(argv))
    histories = int(re.match(r"([\d,]+) histories", d["stdout"]).group(1).replace(",", ""))
    assert d["figures"]["histories"] == histories == 8  # B(1) + B(2) + B(3) = 1 + 2 + 5
    assert set(d["figures"]) == {"histories", "CPU s", "wall s", "us/history (CPU)"}
    assert d["space"] == "canonical 3" and d["drive"] == "auto"


def test_minimizer_writes_its_record(tmp_path):
    argv = [sys.executable, "bench/minimizer.py"]
    d = run_bench(argv, tmp_path)
    check_fields(d, "minimizer", shlex.join(argv))
    f = d["figures"]
    assert f["tokens before"] == 1000 and f["tokens after"] == len(d["reduced"]) == 3
    assert f["predicate calls"] > 0 and d["shortest"] == "proven" and d["fault"] == "off-by-one"
    assert f"{f['predicate calls']} predicate calls" in d["stdout"]


@pytest.mark.skipif(not Path("/usr/bin/time").exists(), reason="the shell scripts time with /usr/bin/time")
def test_canonical_sh_writes_its_record(tmp_path):
    argv = ["bench/canonical.sh", "all", "3"]
    d = run_bench(argv, tmp_path, DRYZ=Path(sys.executable).parent / "dryz", PYTHON=sys.executable)
    check_fields(d, "canonical-all", shlex.join(argv))
    assert [r["label"] for r in d["rows"]] == ["all-alphabets n=3 base"]
    assert set(d["figures"]) == {"all-alphabets n=3 base: wall s (median of 1)",
                                 "all-alphabets n=3 base: peak RSS KB (max)"}
    assert d["figures"]["all-alphabets n=3 base: wall s (median of 1)"] == d["rows"][0]["wall_seconds"]
    assert "all-alphabets n=3 base" in d["stdout"] and "CERTIFIED" in d["stdout"]  # its output as before
