"""check() throughput on decoded random fuzz inputs, by history length (in-process, one core).

Usage: python bench/fuzz_throughput.py [N]
"""

import sys
import time

import numpy as np

from dryz.check import check
from dryz.decode import decode


def main(n=2000):
    rng = np.random.default_rng(0)
    datas = [rng.integers(0, 256, int(rng.integers(0, 3000))).astype(np.uint8).tobytes() for _ in range(4 * n)]
    cases = [decode(d) for d in datas]
    check(cases[0])
    for lo, hi in ((0, 64), (64, 256), (256, 1025)):
        sel = [c for c in cases if lo <= len(c.history) < hi][:n]
        t = time.perf_counter()
        for c in sel:
            check(c)
        dt = time.perf_counter() - t
        print(f"histories {lo:>4}..{hi - 1:<4} {len(sel):>5} cases  {len(sel) / dt:8.0f} exec/s  "
              f"mean length {np.mean([len(c.history) for c in sel]):.0f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
