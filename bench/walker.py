"""The library's side of an enumeration alone: the one tree walker (dryz/subject/walker.py, its loop in C)
with a sink that discards the output, CPU seconds and microseconds per history.

Usage: python bench/walker.py [plain|canonical N] [--ctypes]
  plain: the default seed space (3 symbols, lengths 1..11, the three configurations), 797,157 histories per
  configuration; canonical N: every alphabet size, base, lengths 1..N (B(1..N) histories).
  --ctypes: the same calls made one by one through ctypes (DRYZ_DRIVE=ctypes's path), for comparison.
Writes the record bench/records/walker.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere).
"""

import sys
import time

from dryz.config import space_config
from dryz.space import PlainSpace, space_for
from dryz.subject import open_subject, selected_spec
from dryz.subject.walker import walk
from record import command_line, write_record


def main(argv):
    drive = "ctypes" if "--ctypes" in argv else "auto"
    argv = [a for a in argv if a != "--ctypes"]
    lib = open_subject(selected_spec())
    if not argv or argv[0] == "plain":
        runs = [(PlainSpace(3, 11), 11, space_config(n, 3, 11)) for n in ("base", "window4", "breaker")]
    else:
        n = int(argv[1])
        runs = [(space_for(space_config("base", 64, n), None, n), n, space_config("base", 64, n))]
    total, t0, c0 = 0, time.perf_counter(), time.process_time()
    for tree, n, spec in runs:
        total += walk(lib, tree, n, spec.sampler_args(), lambda *a: None, _drive=drive)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    print(f"{total:,} histories  {cpu:.2f} s CPU  {wall:.2f} s wall  {cpu / total * 1e6:.3f} us/history ({drive})")
    space = "plain" if not argv or argv[0] == "plain" else f"canonical {argv[1]}"
    out = write_record("walker", command_line(),
                       {"histories": total, "CPU s": round(cpu, 3), "wall s": round(wall, 3),
                        "us/history (CPU)": round(cpu / total * 1e6, 3)}, space=space, drive=drive)
    print(f"record: {out}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
