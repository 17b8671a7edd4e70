"""The whole mutation run's wall time on a local Dask cluster: `dryz mutate` over every mutant of a release with
--scheduler (a distributed.LocalCluster of N workers, one thread each, on this machine), timed from start to end,
written as a benchmark record to bench/records/mutate-VERSION.json (bench/record.py): the wall minutes, the
mutants' own minutes summed (each timed in its worker), the workers, and the counts by status.

Usage: python bench/mutate_full.py [--workers N] [--workdir DIR] [-- MUTATE-OPTIONS...]
  default: --workers 2, --workdir docs/results/mutation-0.3.36, and the options of docs/results/mutation.md's
  command (--first-kill --time-per-mutant 30 --keep-builds); a workdir that holds finished mutants resumes, and
  the record then times only what was left (its rows say how many were done before).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from record import command_line, write_record

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["--first-kill", "--time-per-mutant", "30", "--keep-builds"]


def figures_of_run(workdir: Path, wall_seconds: float, workers: int, since: float) -> tuple[str, dict]:
    """(the record's name, its figures) for a run in `workdir` that took `wall_seconds` with `workers` Dask
    workers: the mutants whose result was written after `since` (a time.time()), i.e. by this run."""
    plan = json.loads((workdir / "plan.json").read_text())
    results = [json.loads(p.read_text()) for p in (workdir / "results").glob("*.json") if p.stat().st_mtime >= since]
    statuses: dict[str, int] = {}
    for r in results:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    task = sum(r.get("seconds", 0.0) for r in results)
    figures = {"mutants": len(plan["mutants"]), "mutants this run": len(results), "wall minutes":
               round(wall_seconds / 60, 1), "task minutes": round(task / 60, 1), "dask workers": workers,
               "median seconds per mutant": sorted(r.get("seconds", 0.0) for r in results)[len(results) // 2]
               if results else None, **{f"status {k}": v for k, v in sorted(statuses.items())}}
    return f"mutate-{plan['version']}", figures


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--workdir", default="docs/results/mutation-0.3.36")
    ap.add_argument("rest", nargs="*")
    a = ap.parse_args()
    cmd_line = command_line()  # before anything else runs
    import distributed

    from dryz.mutate.runner import done_ids
    workdir = (ROOT / a.workdir).resolve()
    before = len(done_ids(workdir)) if (workdir / "results").is_dir() else 0
    with distributed.LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        cmd = [sys.executable, "-m", "dryz", "mutate", *(a.rest or DEFAULT), "--workdir", str(workdir),
               "--scheduler", cluster.scheduler_address]
        t, since = time.monotonic(), time.time()
        rc = subprocess.run(cmd, cwd=ROOT).returncode
        wall = time.monotonic() - t
    print(f"dryz mutate exited {rc} after {wall / 60:.1f} min", file=sys.stderr)
    if rc not in (0, 1):  # the harness in doubt (or interrupted): no figure
        sys.exit(rc)
    name, figures = figures_of_run(workdir, wall, a.workers, since)
    out = write_record(name, cmd_line, figures, done_before=before,
                       cluster=f"distributed.LocalCluster(n_workers={a.workers}, threads_per_worker=1)")
    print(f"record: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
