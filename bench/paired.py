"""Two commands timed as whole processes, alternating A B A B ..., so a machine whose speed drifts (this project's
does, by 15-30 % between spells) affects both alike; the ratio is taken pair by pair.

    python bench/paired.py [-n 7] [--warmup 1] -a "COMMAND A" -b "COMMAND B"

Each command is split as a shell splits words and run without a shell, its output discarded. Per run: wall
seconds (monotonic clock) and CPU seconds (user + sys of the process and its children, from wait4). Prints
min, median and max of each, and of the ratios A/B per pair. Exit 1 when a run exits non-zero (its figures are
not comparable: no record is written), 2 on bad arguments. Writes the record bench/records/paired.json
(bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere): the medians as figures, every counted pair as a row.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time

from record import command_line, write_record


def run(argv: list[str]) -> tuple[float, float, int]:
    t = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, p.returncode


def row(name: str, xs: list[float]) -> str:
    return f"{name:<12} {min(xs):>10.3f} {statistics.median(xs):>10.3f} {max(xs):>10.3f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-a", required=True, help="command A")
    ap.add_argument("-b", required=True, help="command B")
    ap.add_argument("-n", type=int, default=7, help="counted pairs")
    ap.add_argument("--warmup", type=int, default=1, help="pairs run first and not counted")
    a = ap.parse_args(argv)
    if a.n < 1 or a.warmup < 0:
        ap.error("-n must be at least 1 and --warmup at least 0")
    A, B = shlex.split(a.a), shlex.split(a.b)
    rows = {k: [] for k in ("A wall", "A cpu", "B wall", "B cpu", "A/B wall", "A/B cpu")}
    bad = 0
    for i in range(a.warmup + a.n):
        wa, ca, ra = run(A)
        wb, cb, rb = run(B)
        bad += (ra != 0) + (rb != 0)
        if i < a.warmup:
            continue
        for k, v in (("A wall", wa), ("A cpu", ca), ("B wall", wb), ("B cpu", cb), ("A/B wall", wa / wb),
                     ("A/B cpu", ca / cb if cb else float("nan"))):
            rows[k].append(v)
    print(f"A: {a.a}\nB: {a.b}\n{a.n} pairs (+{a.warmup} warm-up), whole processes, alternating")
    print(f"{'':<12} {'min':>10} {'median':>10} {'max':>10}")
    for k, xs in rows.items():
        print(row(k, xs))
    if bad:
        print(f"{bad} run(s) exited non-zero: the figures are not comparable (no record written)", file=sys.stderr)
        return 1
    figures = {f"{k} median": round(statistics.median(xs), 4) for k, xs in rows.items()}
    pairs = [{k: round(xs[i], 4) for k, xs in rows.items()} for i in range(a.n)]
    out = write_record("paired", command_line(), figures, a=a.a, b=a.b, pairs=a.n, warmup=a.warmup, rows=pairs)
    print(f"record: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
