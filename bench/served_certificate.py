"""The default certificate space through llama-server: every canonical history of the seed space (3 symbols,
lengths 1..11, multiplier 1, base 2, allowed length 1; configurations base, window4, breaker), run by a
ServerSubject (dryz/subject/server.py) and tallied by the same run_slice / check_batch as `dryz exhaustive`.

  python bench/served_certificate.py [--server PATH] [-k 3] [-n 11] [--parallel P] [--batch B] [--threads T]
                                     [-c CONFIG ...]

Prints per configuration: canonical histories and cases run, concrete cases covered, mismatches, wall seconds,
HTTP requests and their rate, restarts, and what was not answered with logits (by kind).
Writes the record bench/records/served_certificate.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dryz.config import space_config  # noqa: E402
from dryz.enumerate.run import run_slice  # noqa: E402
from dryz.subject.build import build  # noqa: E402
from dryz.subject.server import ServerSubject  # noqa: E402
from record import command_line, write_record  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default=None)
    ap.add_argument("-k", type=int, default=3)
    ap.add_argument("-n", type=int, default=11)
    ap.add_argument("-c", "--config", action="append", default=None)
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--ctx", type=int, default=64, help="context per slot (the seed space: 11 tokens)")
    a = ap.parse_args()
    server = a.server or str(build(server=True, log=lambda m: None) / "llama-server")
    others: Counter = Counter()
    total = time.perf_counter()
    rows = []
    with ServerSubject(server, parallel=a.parallel, batch=a.batch, threads=a.threads, ctx_per_slot=a.ctx) as s:
        print(f"{s.label()}  parallel {a.parallel}  batch {a.batch}  threads {a.threads}")
        for name in a.config or ["base", "window4", "breaker"]:
            spec = space_config(name, a.k, a.n)
            r0 = dict(s.stats)
            t0 = time.perf_counter()
            walk = s.walk

            def walk_hook(*args, **kw):
                return walk(*args, on_other=lambda c, o: others.update([type(o).__name__]), **kw)

            s.walk = walk_hook
            res = run_slice(s, a.k, a.n, spec, canonical=True)
            s.walk = walk
            dt = time.perf_counter() - t0
            req = s.stats["requests"] - r0["requests"]
            http = s.stats["seconds_http"] - r0["seconds_http"]
            print(f"{name:8s} canonical histories {res.canonical_histories:,}  canonical cases "
                  f"{res.canonical_cases:,}  covered cases {res.cases:,}  mismatches {res.mismatches}  "
                  f"oracle disagreements {res.oracle_disagreements}  max L {res.max_L}  {dt:.1f} s  "
                  f"({res.canonical_histories / dt:,.0f} histories/s; {req:,} requests, "
                  f"{req / http if http else 0:,.1f} requests/s of HTTP time {http:.1f} s)", flush=True)
            rows.append({"config": name, "canonical_histories": res.canonical_histories,
                         "canonical_cases": res.canonical_cases, "cases": res.cases, "mismatches": res.mismatches,
                         "oracle_disagreements": res.oracle_disagreements, "max_L": res.max_L,
                         "seconds": round(dt, 2), "histories_per_second": round(res.canonical_histories / dt, 1),
                         "requests": req, "http_seconds": round(http, 2)})
        seconds = time.perf_counter() - total
        print(f"total {seconds:.1f} s; restarts {s.stats['restarts']}, crashes "
              f"{s.stats['crashes']}; not answered with logits: {dict(others) or 'none'}")
        restarts, crashes, label = s.stats["restarts"], s.stats["crashes"], s.label()
    figures = {f"{r['config']} histories/s": r["histories_per_second"] for r in rows}
    figures.update({"mismatches": sum(r["mismatches"] for r in rows), "total s": round(seconds, 1),
                    "restarts": restarts, "crashes": crashes})
    out = write_record("served_certificate", command_line(), figures, server=label, k=a.k, max_len=a.n,
                       parallel=a.parallel, batch=a.batch, threads=a.threads, not_answered=dict(others), rows=rows)
    print(f"record: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
