"""Every case on which a fixed subject differs from its base, listed (the gate's differential keeps one minimized
witness per kind of difference and only counts the rest): dryz's own edge cases and random fuzz-decoder cases
(dryz.differential, unchanged), judged on both subjects, each difference printed with the parameters that
decide whether it is the intended change.

    python fixes/differences.py NEW_SPEC BASE_SPEC [N_RANDOM]
e.g. server:/path/to/patched/llama-server server:/path/to/llama-server 500
"""

from __future__ import annotations

import collections
import sys

from dryz.differential import Judge, compare, edge_cases, random_cases


def main(argv) -> int:
    new, base = argv[0], argv[1]
    n = int(argv[2]) if len(argv) > 2 else 500
    judges = {"base": Judge(base), "new": Judge(new)}
    cases = edge_cases() + random_cases(n)
    tally = collections.Counter()
    try:
        for case, _, kind, res in compare(judges, cases, "base"):
            key = (kind, "base<1" if case.base < 1 else "base>=1",
                   getattr(res["base"], "klass", res["base"].kind), getattr(res["new"], "klass", res["new"].kind))
            tally[key] += 1
    finally:
        for j in judges.values():
            j.close()
    print(f"{len(cases)} cases ({len(edge_cases())} edge, {n} random)")
    for (kind, b, kb, kn), c in sorted(tally.items()):
        print(f"{c:6d}  {kind:16s} {b:8s} base: {kb}  new: {kn}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
