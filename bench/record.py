"""One way a benchmark writes what it measured: bench/records/NAME.json, holding the command that made it, the
commit it measured, the machine (CPU model, cores, Python), the load average when it ended, the date (UTC) and
the figures. `python -m dryz.docs` makes docs/benchmarks.md from every record (tests/test_docs.py fails until the
page is regenerated after a record changes).

    from record import command_line, write_record    # a bench/ script run as `python bench/NAME.py`
    write_record("name", command_line(), {"exec/s": 1234.5, ...}, rows=[...])

DRYZ_BENCH_RECORDS=DIR writes the records to DIR instead of bench/records/ (tests and trial runs: the checked-in
records are real measurements and stay as they are).

A shell script writes its record by handing this file the lines of /usr/bin/time it printed
("LABEL  SECONDS s wall  KB KB peak RSS"):

    python3 bench/record.py time-lines NAME LINES_FILE -- "$0" "$@"

rows: one per line (label, wall seconds, peak RSS in KB); figures: per label the median wall seconds and the
largest peak RSS.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "bench" / "records"
ENV = "DRYZ_BENCH_RECORDS"


def records_dir() -> Path:
    """Where records go: $DRYZ_BENCH_RECORDS when set (and not empty), else bench/records/."""
    return Path(os.environ[ENV]) if os.environ.get(ENV) else RECORDS


def command_line(argv: list[str] | None = None) -> str:
    """The exact command line that was run, quoted as a shell would need it: the interpreter and its arguments as
    the process was started (sys.orig_argv), or ARGV."""
    return shlex.join(sys.orig_argv if argv is None else argv)


def machine() -> dict:
    """The CPU model, the number of cores and the Python version."""
    try:
        model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                      if ln.startswith("model name")), None)
    except OSError:
        model = None
    return {"cpu": model or platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "python": platform.python_version()}


def commit() -> str:
    """The commit measured (short), with `-dirty` when the work tree has changes; `unknown` outside git;
    $DRYZ_BENCH_COMMIT when a script measured another checkout (bench/suite.sh: its fresh clone's HEAD, which the
    work tree's HEAD may have moved past by the time the record is written)."""
    if os.environ.get("DRYZ_BENCH_COMMIT"):
        return os.environ["DRYZ_BENCH_COMMIT"]

    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT)
    head = git("rev-parse", "--short", "HEAD")
    if head.returncode != 0:
        return "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return head.stdout.strip() + ("-dirty" if dirty else "")


def write_record(name: str, command: str, figures: dict, records: Path | None = None, **fields) -> Path:
    """Write NAME.json to RECORDS, else $DRYZ_BENCH_RECORDS, else bench/records/: name, command, commit, cpu,
    cores, python, load (1, 5 and 15 minutes), date, the figures (a flat dict: figure -> value) and any further
    fields the script keeps (its per-run rows). Returns its path."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"a record's name is a file name, got {name!r}")
    record = {"name": name, "command": command, "commit": commit(), **machine(),
              "load": [round(x, 2) for x in os.getloadavg()],
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "figures": figures, **fields}
    out = Path(records or records_dir()) / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    return out


TIME_LINE = re.compile(r"^(?P<label>.*?)\s+(?P<wall>[\d.]+) s wall\s+(?P<rss>\d+) KB peak RSS\s*$")


def time_lines(text: str) -> tuple[dict, list]:
    """The figures and rows of /usr/bin/time lines ("LABEL  SECONDS s wall  KB KB peak RSS"); other lines are
    left out."""
    rows = []
    for line in text.splitlines():
        m = TIME_LINE.match(line.strip())
        if m:
            rows.append({"label": m["label"], "wall_seconds": float(m["wall"]), "peak_rss_kb": int(m["rss"])})
    figures = {}
    for label in dict.fromkeys(r["label"] for r in rows):
        mine = [r for r in rows if r["label"] == label]
        figures[f"{label}: wall s (median of {len(mine)})"] = statistics.median(r["wall_seconds"] for r in mine)
        figures[f"{label}: peak RSS KB (max)"] = max(r["peak_rss_kb"] for r in mine)
    return figures, rows


def main(argv: list[str]) -> int:
    """`record.py time-lines NAME LINES_FILE -- COMMAND...`: the record of a shell script's /usr/bin/time lines."""
    if len(argv) < 5 or argv[0] != "time-lines" or argv[3] != "--":
        print("usage: python3 bench/record.py time-lines NAME LINES_FILE -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    name, lines, command = argv[1], Path(argv[2]), argv[4:]
    figures, rows = time_lines(lines.read_text())
    if not rows:
        print(f"record.py: no /usr/bin/time line in {lines}: no record written", file=sys.stderr)
        return 1
    print(f"record: {write_record(name, command_line(command), figures, rows=rows)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
