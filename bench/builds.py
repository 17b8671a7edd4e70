"""How long a fresh build takes: `dryz subject build` of each kind (libllama; with --server, llama-server) from an
empty cache, whole process, on this machine with every core. What `dryz subject build` tells a machine that has
not built that kind yet (dryz.subject.build.FRESH_CORE_SECONDS: the wall seconds times the compiler's jobs).

    python bench/builds.py [--kind libllama] [--kind llama-server] [--jobs N]

Each build runs with DRYZ_CACHE set to a new temporary folder (the sdist is read from the real cache through
DRYZ_SDIST_DIR, so nothing is downloaded and the real cache is left as it was). Per kind: the wall seconds of the
whole command, the compile steps (ninja's [n/m]) and the build step's own seconds, from the temporary cache's
build history. Writes the record bench/records/builds.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from record import command_line, write_record

KINDS = {"libllama": [], "llama-server": ["--server"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", action="append", choices=sorted(KINDS), help="a kind to build (default: both)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="the compiler's jobs (default: every core)")
    a = ap.parse_args(argv)
    cmd = command_line()
    real = Path(os.environ.get("DRYZ_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or
                                                        Path.home() / ".cache") / "dryz")
    figures, rows = {}, []
    for kind in a.kind or list(KINDS):
        with tempfile.TemporaryDirectory(prefix="dryz-bench-build-") as tmp:
            env = dict(os.environ, DRYZ_CACHE=tmp, DRYZ_SDIST_DIR=str(real / "sdists"), DRYZ_QUIET="1")
            load = os.getloadavg()[0]
            t = time.monotonic()
            p = subprocess.run([sys.executable, "-m", "dryz", "subject", "build", *KINDS[kind], "--build-jobs",
                                str(a.jobs)], env=env, capture_output=True, text=True)
            wall = time.monotonic() - t
            if p.returncode != 0:
                print(f"{kind}: the build failed (exit {p.returncode}): {p.stderr[-500:]}", file=sys.stderr)
                return 1
            [hist] = [r for r in json.loads((Path(tmp) / "build-times.json").read_text()) if r["kind"] == kind]
        row = {"kind": kind, "wall_seconds": round(wall, 1), "build_seconds": hist["seconds"], "steps": hist["steps"],
               "jobs": a.jobs, "load_before": round(load, 2)}
        rows.append(row)
        print(f"{kind}: {wall:.0f} s wall ({hist['seconds']:.0f} s compiling {hist['steps']} steps with {a.jobs} jobs)")
        figures[f"{kind}: fresh build wall s"] = row["wall_seconds"]
        figures[f"{kind}: fresh build core s"] = round(hist["seconds"] * a.jobs, 1)
        figures[f"{kind}: compile steps"] = hist["steps"]
    out = write_record("builds", cmd, figures, rows=rows)
    print(f"record: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
