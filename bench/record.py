"""One way a benchmark writes what it measured: bench/records/NAME.json, holding the command that made it, the
commit it measured, the machine (CPU model, cores, Python), the load average when it ended, the date (UTC) and
the figures. `python -m dryz.docs` makes docs/benchmarks.md from every record (tests/test_docs.py fails until the
page is regenerated after a record changes).

    from record import write_record          # a bench/ script run as `python bench/NAME.py`
    write_record("name", "python bench/name.py --flag", {"exec/s": 1234.5, ...}, rows=[...])
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "bench" / "records"


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
    """The commit measured (short), with `-dirty` when the work tree has changes; `unknown` outside git."""
    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT)
    head = git("rev-parse", "--short", "HEAD")
    if head.returncode != 0:
        return "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return head.stdout.strip() + ("-dirty" if dirty else "")


def write_record(name: str, command: str, figures: dict, records: Path | None = None, **fields) -> Path:
    """Write bench/records/NAME.json: name, command, commit, cpu, cores, python, load (1, 5 and 15 minutes), date,
    the figures (a flat dict: figure -> value) and any further fields the script keeps. Returns its path."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"a record's name is a file name, got {name!r}")
    record = {"name": name, "command": command, "commit": commit(), **machine(),
              "load": [round(x, 2) for x in os.getloadavg()],
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "figures": figures, **fields}
    out = (records or RECORDS) / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    return out
