"""Minimize a ~1,000-token fault-injected disagreement to a proven-shortest reproducer; report seconds and
predicate calls. Usage: python bench/minimizer.py
Writes the record bench/records/minimizer.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere)."""

import os
import sys
import time

os.environ["DRYZ_FAULT"] = "off-by-one"

from dryz.case import Case, f32  # noqa: E402
from dryz.shrink import reduce_case, signature_in  # noqa: E402
from dryz.subject import open_subject, selected_spec  # noqa: E402
from record import command_line, write_record  # noqa: E402


def main():
    rng_junk = [(i * 7919) % 23 for i in range(1000)]
    hist = tuple(rng_junk[:500] + [0, 1, 2, 3] * 60 + rng_junk[500:760])
    case = Case(history=hist, alphabet=24, penalty_last_n=len(hist), breakers=("x", "kl"),
                multiplier=f32(0.8), base=f32(1.1), allowed_length=2)
    signature = signature_in(open_subject(selected_spec()))
    target = signature(case)
    t = time.perf_counter()
    reduced, shortest, calls = reduce_case(case, target, signature)
    dt = time.perf_counter() - t
    print(f"{len(case.history)} tokens -> {len(reduced.history)} tokens {reduced.symbols!r}: shortest {shortest}, "
          f"{calls} predicate calls, {dt:.2f} s (class {target[0]})")
    out = write_record("minimizer", command_line(),
                       {"seconds": round(dt, 2), "predicate calls": calls, "tokens before": len(case.history),
                        "tokens after": len(reduced.history)},
                       fault="off-by-one", reduced=reduced.symbols, shortest=str(shortest), klass=target[0])
    print(f"record: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
