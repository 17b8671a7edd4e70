"""Whole fuzz campaigns of two builds of dryz, alternating (A B A B ...): `dryz fuzz --jobs 1` as a user runs it,
its own summary line read back. For a machine whose speed drifts and that others load: each pair runs back to
back, so a slow spell hits both builds alike; the ratio is taken pair by pair.

Usage: python bench/campaign_ab.py X Y [--pairs 3] [--time 60] [-- DRYZ FUZZ OPTIONS]
  X, Y: a git revision of this repository or a directory holding dryz/ (and corpus/, minimize/).
  Options after --: passed to `dryz fuzz` (e.g. --traces, or --vocab llama-bpe).
Each build is copied to a temporary directory as the package `dryz` (its call sequencer dryz/subject/_drive.c
compiled with setuptools, as pip builds it) and run with PYTHONPATH set to it, in a fresh work directory, by this
interpreter. Prints per campaign the summary's execs and seconds, exec/s over the whole run (set-up included)
and over libFuzzer's own time (what the summary says, for builds that say it)
and the campaign's CPU seconds (user + system of every process it waited for); then per build the median
exec/s and per pair the ratio X/Y. Writes the record bench/records/campaign_ab.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere).
"""

import argparse
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_ab import build_drive  # noqa: E402
from record import command_line, write_record  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SUMMARY = re.compile(r"summary: (?:traces: )?([\d,]+) execs in ([\d.]+) s")
FUZZ_RATE = re.compile(r"\(([\d,]+) exec/s over libFuzzer's")  # builds since 2026-12-03 say it


def materialize(spec: str, into: Path) -> Path:
    """The build at into/dryz (+ corpus/, minimize/), its _drive compiled; returns into."""
    src = Path(spec)
    into.mkdir(parents=True)
    if (src / "dryz").is_dir():
        for name in ("dryz", "corpus", "minimize"):
            if (src / name).exists():
                shutil.copytree(src / name, into / name, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    else:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", spec, "dryz", "corpus", "minimize"],
                                 capture_output=True)
        if archive.returncode:
            sys.exit(f"campaign_ab: {spec!r} is neither a directory with dryz/ nor a git revision")
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    build_drive(into / "dryz" / "subject" / "_drive.c", into, "dryz.subject._drive")
    return into


def campaign(root: Path, seconds: int, extra: list) -> dict:
    work = Path(tempfile.mkdtemp(prefix="campaign-"))
    env = {**__import__("os").environ, "PYTHONPATH": str(root)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "dryz", "fuzz", "--jobs", "1", "--time", str(seconds), "--workdir",
                        str(work / "fuzz-work"), *extra], cwd=work, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(work, ignore_errors=True)
    m = SUMMARY.search(p.stdout)
    if not m:
        sys.exit(f"campaign_ab: no summary (exit {p.returncode}):\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
    execs, secs = int(m.group(1).replace(",", "")), float(m.group(2))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    f = FUZZ_RATE.search(p.stdout)
    return {"execs": execs, "seconds": secs, "rate": execs / secs, "cpu": cpu, "wall": wall, "exit": p.returncode,
            "fuzz_rate": f.group(1) if f else "-"}


def main():
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser()
    ap.add_argument("x")
    ap.add_argument("y")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--time", type=int, default=60)
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="campaign-ab-"))
    roots = {"x": materialize(a.x, work / "x"), "y": materialize(a.y, work / "y")}
    runs = {"x": [], "y": []}
    for i in range(a.pairs):
        order = ("x", "y") if i % 2 == 0 else ("y", "x")
        for k in order:
            r = campaign(roots[k], a.time, extra)
            runs[k].append(r)
            print(f"pair {i + 1} {(a.x if k == 'x' else a.y):>24}: {r['execs']:>8,} execs in {r['seconds']:5.1f} s = "
                  f"{r['rate']:7.1f} exec/s (libFuzzer's time: {r['fuzz_rate']})  (CPU {r['cpu']:5.1f} s, {r['execs'] / max(r['cpu'], 1e-9):7.1f} execs "
                  f"per CPU second; exit {r['exit']})", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    for k, spec in (("x", a.x), ("y", a.y)):
        rates = [r["rate"] for r in runs[k]]
        print(f"{spec:>24}: median {statistics.median(rates):7.1f} exec/s (min {min(rates):.1f}, max {max(rates):.1f})")
    ratios = [x["rate"] / y["rate"] for x, y in zip(runs["x"], runs["y"])]
    print(f"{'ratio X/Y per pair':>24}: " + ", ".join(f"{r:.2f}" for r in ratios) +
          f"  (median {statistics.median(ratios):.2f})")
    figures = {f"{k.upper()}: {spec} median exec/s": round(statistics.median(r["rate"] for r in runs[k]), 1)
               for k, spec in (("x", a.x), ("y", a.y))}
    figures["ratio X/Y (median of pairs)"] = round(statistics.median(ratios), 3)
    rows = [{"pair": i + 1, "build": spec, **{f: (round(v, 3) if isinstance(v, float) else v) for f, v in r.items()}}
            for k, spec in (("x", a.x), ("y", a.y)) for i, r in enumerate(runs[k])]
    out = write_record("campaign_ab", command_line(), figures, x=a.x, y=a.y, time=a.time, fuzz_options=extra,
                       ratios=[round(r, 3) for r in ratios], rows=rows)
    print(f"record: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
