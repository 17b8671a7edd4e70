"""How long `dryz exhaustive` takes to end after Ctrl-C: SIGINT to the run's process group once its work has begun
(the library is mapped, then one more second), until the process has exited (130, partial result written).

tests/test_interrupt.py asserts the behaviour (ends, exit 130, a partial result) with a generous timeout; the
latency is a figure, measured here, on whatever else the machine is doing.

Usage: python bench/interrupt_latency.py [REPEATS]   (workers 1, 2 and 8, alternating; the median per count)
Writes the record bench/records/interrupt_latency.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere).
"""

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from record import command_line, write_record


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def once(workers: str) -> float:
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.Popen([sys.executable, "-m", "dryz", "exhaustive", "--all-alphabets", "-n", "13", "-j",
                              workers, "--json", "p.json", "--no-progress"], cwd=d, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_default_sigint)
        while "libllama" not in open(f"/proc/{p.pid}/maps").read():
            time.sleep(0.02)
        time.sleep(1.0)
        t = time.monotonic()
        os.killpg(p.pid, signal.SIGINT)
        rc = p.wait(timeout=300)
        took = time.monotonic() - t
        if rc != 130:
            raise SystemExit(f"workers {workers}: exit {rc}, not 130")
        return took


def main(argv):
    repeats = int(argv[0]) if argv else 3
    seen = {w: [] for w in ("1", "2", "8")}
    for _ in range(repeats):
        for w in seen:
            seen[w].append(once(w))
    for w, xs in seen.items():
        print(f"workers {w}: SIGINT to exit {statistics.median(xs):.3f} s median of {len(xs)} "
              f"({', '.join(f'{x:.3f}' for x in xs)})")
    out = write_record("interrupt_latency", command_line(),
                       {f"workers {w}: SIGINT to exit s (median of {len(xs)})": round(statistics.median(xs), 3)
                        for w, xs in seen.items()},
                       rows=[{"workers": int(w), "seconds": [round(x, 3) for x in xs]} for w, xs in seen.items()])
    print(f"record: {out}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
