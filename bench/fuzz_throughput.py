"""Fuzz target throughput by history length: the harness's whole per-input work (bytes -> Case -> check(),
both oracles and the library), in-process on one core, on random inputs. Best of REPEATS passes per band
(this VM's wall clock is noisy).

Usage: python bench/fuzz_throughput.py [N] [REPEATS] [--instrumented]
  --instrumented: dryz's code instrumented by atheris for Python coverage, as dryz/fuzz/harness.py runs it
  (without libFuzzer's own per-input work).
Writes the record bench/records/fuzz_throughput.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere).
"""

import sys
import time

import numpy as np

from record import command_line, write_record

COMMAND = command_line()  # (before --instrumented is taken out of sys.argv)
INSTRUMENTED = "--instrumented" in sys.argv

if "--instrumented" in sys.argv:  # dryz instrumented exactly as the harness instruments it
    import importlib
    sys.argv.remove("--instrumented")
    from dryz.fuzz.harness import INSTRUMENTED, instrument
    instrument([importlib.import_module(name) for name in INSTRUMENTED])
    from dryz.decode.cases import decode
    from dryz.fuzz.target import test_one_input
else:
    from dryz.decode.cases import decode
    from dryz.fuzz.target import test_one_input


def main(n=3000, repeats=3):
    rng = np.random.default_rng(0)
    datas = [rng.integers(0, 256, int(rng.integers(0, 3000))).astype(np.uint8).tobytes() for _ in range(6 * n)]
    datas += [rng.integers(0, 256, 3000).astype(np.uint8).tobytes() for _ in range(30 * n)]  # for the last band
    lens = [len(decode(d).history) for d in datas]
    test_one_input(datas[0])
    rows = []
    for lo, hi in ((0, 64), (64, 257), (0, 257), (257, 1025), (1000, 1025)):
        sel = [d for d, k in zip(datas, lens) if lo <= k < hi][:n]
        best = 0.0
        for _ in range(repeats):
            t = time.perf_counter()
            for d in sel:
                test_one_input(d)
            best = max(best, len(sel) / (time.perf_counter() - t))
        mean = np.mean([k for k, d in zip(lens, datas) if lo <= k < hi][:n])
        print(f"histories {lo:>4}..{hi - 1:<4} {len(sel):>5} inputs  {best:8.0f} exec/s  mean length {mean:.0f}")
        rows.append({"band": [lo, hi - 1], "inputs": len(sel), "exec_per_second": round(best, 1),
                     "mean_length": round(float(mean), 1)})
    out = write_record("fuzz_throughput", COMMAND,
                       {f"histories {r['band'][0]}..{r['band'][1]} exec/s": r["exec_per_second"] for r in rows},
                       n=n, repeats=repeats, instrumented=INSTRUMENTED, rows=rows)
    print(f"record: {out}", file=sys.stderr)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
