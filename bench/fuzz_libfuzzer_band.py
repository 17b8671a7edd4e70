"""The fuzz target's throughput under libFuzzer itself, one process, on a fixed set of inputs of one band.

bench/fuzz_throughput.py times the harness in-process (best of REPEATS); here libFuzzer runs
fuzz/dry_fuzz.py (instrumented as in a campaign) over N random inputs whose histories fall in LO..HI-1 tokens,
each once (its seed-corpus pass, -runs=0), and the wall time minus a start-up-only run gives exec/s. This is
the rate a campaign gets for such inputs before fork-mode bookkeeping, without caches warmed by repeats.

Usage: python bench/fuzz_libfuzzer_band.py [N] [LO HI] [--uninstrumented]
  --uninstrumented: the same run with dryz not instrumented (what libFuzzer and atheris cost without it).
Writes the record bench/records/fuzz_libfuzzer_band.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere).
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from record import command_line, write_record

REPO = Path(__file__).resolve().parent.parent
HARNESS = REPO / "fuzz" / "dry_fuzz.py"


def timed(cmd, env) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"fuzz_libfuzzer_band: {' '.join(map(str, cmd[:2]))} failed:\n{r.stderr[-2000:]}")
    return time.perf_counter() - t


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 10000
    lo, hi = (int(args[1]), int(args[2])) if len(args) > 2 else (0, 257)
    sys.path.insert(0, str(REPO))
    from dryz.decode.cases import decode
    rng = np.random.default_rng(0)
    work = Path(tempfile.mkdtemp())
    seeds, empty = work / "inputs", work / "empty"
    seeds.mkdir()
    empty.mkdir()
    count = 0
    while count < n:
        data = rng.integers(0, 256, int(rng.integers(0, 3000))).astype(np.uint8).tobytes()
        if lo <= len(decode(data).history) < hi:
            (seeds / f"{count:06d}").write_bytes(data)
            count += 1
    harness = HARNESS
    env = dict(os.environ, DRYZ_CORPUS=str(REPO / "corpus"), PYTHONPATH=str(REPO))
    plain = "--uninstrumented" in sys.argv
    if plain:
        env["DRYZ_INSTRUMENT"] = "0"  # the harness then leaves dryz uninstrumented
    flags = ["-runs=0", "-max_len=4096", "-rss_limit_mb=4096"]

    def run(inputs) -> float:
        out = work / "corpus"
        out.mkdir()
        try:
            return timed([sys.executable, harness, *flags, out, inputs], env)
        finally:
            shutil.rmtree(out)

    rows = []
    for _ in range(2):
        start, total = run(empty), run(seeds)
        print(f"{n} inputs, histories {lo}..{hi - 1}{' (dryz uninstrumented)' if plain else ''}: "
              f"{total:.2f} s, start-up {start:.2f} s -> {n / (total - start):.0f} exec/s")
        rows.append({"seconds": round(total, 3), "start_up_seconds": round(start, 3),
                     "exec_per_second": round(n / (total - start), 1)})
    shutil.rmtree(work)
    out = write_record("fuzz_libfuzzer_band", command_line(),
                       {f"exec/s (best of {len(rows)})": max(r["exec_per_second"] for r in rows),
                        f"start-up s (median of {len(rows)})":
                            round(statistics.median(r["start_up_seconds"] for r in rows), 3)},
                       inputs=n, band=[lo, hi - 1], instrumented=not plain, rows=rows)
    print(f"record: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
