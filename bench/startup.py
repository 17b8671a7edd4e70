"""The main job's start-up: `dryz exhaustive` (the default space, the default libllama) of this work tree (A)
against the same command at an earlier commit (B), whole processes, alternating A B A B, the ratio taken pair by
pair (bench/paired.py's way); and the modules each run imported (the set tests/test_startup.py bounds).

    python bench/startup.py --base COMMIT [-n 15] [--warmup 2] [--name startup]

B is `git archive COMMIT dryz minimize` unpacked into a temporary folder (with this tree's compiled
dryz/subject/_drive*.so beside its source) and run with the same interpreter, PYTHONPATH pointing at it. Both run
in an empty temporary folder, so neither writes into the tree. Writes the record bench/records/NAME.json (default
startup.json; bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from record import ROOT, command_line, write_record

PROBE = ("import atexit, json, sys\n"
         "atexit.register(lambda: json.dump(sorted(sys.modules), open(sys.argv[1], 'w')))\n"
         "from dryz.cli import main\n"
         "main(sys.argv[2:])\n")


def run(argv, cwd, env) -> tuple[float, float, int]:
    """Wall and CPU seconds (the process and its children, from wait4) and the exit code of one whole run."""
    t = time.monotonic()
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    return time.monotonic() - t, ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status)


def modules(cwd, env) -> list[str]:
    """The modules a whole `dryz exhaustive` run had imported at its exit."""
    out = Path(cwd) / "modules.json"
    subprocess.run([sys.executable, "-c", PROBE, str(out), "exhaustive", "--no-progress"], cwd=cwd, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return json.loads(out.read_text())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the commit B is (git archive)")
    ap.add_argument("-n", type=int, default=15, help="counted pairs")
    ap.add_argument("--warmup", type=int, default=2, help="pairs run first and not counted")
    ap.add_argument("--name", default="startup", help="the record's name")
    a = ap.parse_args(argv)
    cmd = command_line()
    base = subprocess.run(["git", "rev-parse", "--short", a.base], cwd=ROOT, capture_output=True, text=True)
    if base.returncode != 0:
        ap.error(f"--base {a.base}: not a commit of this repository")
    with tempfile.TemporaryDirectory() as tmp:
        tree, work_a, work_b = Path(tmp) / "base", Path(tmp) / "a", Path(tmp) / "b"
        for d in (tree, work_a, work_b):
            d.mkdir()
        archive = subprocess.run(["git", "archive", a.base, "dryz", "minimize"], cwd=ROOT, capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        for so in (ROOT / "dryz" / "subject").glob("_drive*.so"):
            shutil.copy(so, tree / "dryz" / "subject" / so.name)
        env = {k: v for k, v in os.environ.items() if k not in ("DRYZ_LIB", "DRYZ_SUBJECT", "PYTHONPATH")}
        env_a, env_b = dict(env, PYTHONPATH=str(ROOT)), dict(env, PYTHONPATH=str(tree))
        job = [sys.executable, "-m", "dryz", "exhaustive", "--no-progress"]
        rows = {k: [] for k in ("A wall", "A cpu", "B wall", "B cpu", "A/B wall", "A/B cpu")}
        for i in range(a.warmup + a.n):
            wa, ca, ra = run(job, work_a, env_a)
            wb, cb, rb = run(job, work_b, env_b)
            if ra or rb:
                print(f"a run exited {ra or rb}: the figures are not comparable (no record written)", file=sys.stderr)
                return 1
            if i >= a.warmup:
                for k, v in (("A wall", wa), ("A cpu", ca), ("B wall", wb), ("B cpu", cb), ("A/B wall", wa / wb),
                             ("A/B cpu", ca / cb)):
                    rows[k].append(v)
        mods_a, mods_b = modules(work_a, env_a), modules(work_b, env_b)
    ours = (lambda ms: [m for m in ms if m.split(".")[0] in ("dryz", "minimize")])
    print(f"A: this tree, B: {base.stdout.strip()}; {a.n} pairs (+{a.warmup} warm-up), whole processes, alternating")
    print(f"{'':<12} {'min':>10} {'median':>10} {'max':>10}")
    for k, xs in rows.items():
        print(f"{k:<12} {min(xs):>10.3f} {statistics.median(xs):>10.3f} {max(xs):>10.3f}")
    print(f"modules imported: A {len(mods_a)} ({len(ours(mods_a))} of dryz's), B {len(mods_b)} "
          f"({len(ours(mods_b))} of dryz's)")
    figures = {f"{k} median": round(statistics.median(xs), 4) for k, xs in rows.items()}
    figures.update({"A modules": len(mods_a), "A dryz modules": len(ours(mods_a)), "B modules": len(mods_b),
                    "B dryz modules": len(ours(mods_b))})
    pairs = [{k: round(xs[i], 4) for k, xs in rows.items()} for i in range(a.n)]
    out = write_record(a.name, cmd, figures, base=base.stdout.strip(), pairs=a.n, warmup=a.warmup,
                       job="dryz exhaustive --no-progress", only_a=sorted(set(ours(mods_a)) - set(ours(mods_b))),
                       only_b=sorted(set(ours(mods_b)) - set(ours(mods_a))), rows=pairs)
    print(f"record: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
