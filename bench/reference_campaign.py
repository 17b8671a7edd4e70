"""Run the shipped library against the reference design (dryz.oracle.reference) over small exhaustive spaces and
random cases (long repeats included); count cases per divergence class and keep the first case of each.

    /work/venv/bin/python bench/reference_campaign.py [--random N] [--seed S] [--out FILE]

Every case also checks the bridge: R(all shipped features) must equal the library bit for bit
(a miss is reported as ref-unexplained).
Writes the record bench/records/reference_campaign.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere); the
shortest case per class stays in --out.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time

from dryz.case import Case, f32
from dryz.subject import open_subject, selected_spec
from dryz.oracle.reference import divergences
from record import command_line, write_record

BREAKER_SETS = [(), ("a",), ("b",), ("ab",), ("ba",), ("",), ("ab", "b"), ("abc",), ("b", "a")]


def exhaustive_configs():
    for plen, allowed, mult, base, br in itertools.product(
            (-1, 0, 2, 3, 100), (-1, 0, 1, 2), (1.0, -1.0), (2.0, 0.5, 1e10), BREAKER_SETS):
        yield dict(penalty_last_n=plen, allowed_length=allowed, multiplier=mult, base=base, breakers=br)


def random_case(rng: random.Random) -> Case:
    k = rng.randint(1, 4)
    if rng.random() < 0.1:  # long repeats: the match cap and the exponent clamp
        n = rng.randint(45, 130)
        period = rng.randint(1, 3)
        unit = [rng.randrange(k) for _ in range(period)]
        h = tuple((unit * n)[:n])
    else:
        n = rng.randint(0, 16)
        h = tuple(rng.randrange(k) for _ in range(n))
    br = tuple(rng.choice(["", "a", "b", "c", "ab", "ba", "bc", "abc", "aab", "cab"])
               for _ in range(rng.choice([0, 0, 1, 2])))
    base = f32(rng.choice([2.0, 1.0, 0.5, 1.75, 3.0, 1e10, 2.0 ** 127, 0.0, -2.0, 1.0000005]))
    cands = None
    if rng.random() < 0.15:
        ids = rng.sample(range(max(k, 2) + 1), rng.randint(1, max(k, 2) + 1))
        cands = tuple((t, rng.choice([0.0, 1.5, -3.25, float("-inf")])) for t in ids)
    return Case(history=h, alphabet=k, penalty_last_n=rng.choice([-1, 0, 1, 2, 3, 5, 8, 64, 200]),
                breakers=br, multiplier=rng.choice([1.0, -1.0, 0.5, 2.0, 0.75]), base=base,
                allowed_length=rng.choice([-3, -1, 0, 1, 1, 2, 3, 5]), candidates=cands)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--random", type=int, default=30000)
    ap.add_argument("--seed", type=int, default=6)
    ap.add_argument("--max-len", type=int, default=6)
    ap.add_argument("--alphabet", type=int, default=3)
    ap.add_argument("--out", default="/tmp/reference_campaign.json")
    a = ap.parse_args(argv)
    lib = open_subject(selected_spec())
    counts: dict[str, int] = {}
    first: dict[str, dict] = {}
    totals = {"exhaustive": 0, "random": 0, "diverging": 0}
    t0 = time.perf_counter()

    def judge(case: Case, kind: str):
        totals[kind] += 1
        d = divergences(case, observed=lib.run(case).logits)
        if d:
            totals["diverging"] += 1
        for c in d:
            counts[c] = counts.get(c, 0) + 1
            if c not in first or len(case.history) < len(first[c]["history"]):
                first[c] = {"history": list(case.history), "case": case.to_json(), "all": d}

    for cfg in exhaustive_configs():
        for m in range(a.max_len + 1):
            for h in itertools.product(range(a.alphabet), repeat=m):
                judge(Case(history=h, alphabet=a.alphabet, **cfg), "exhaustive")
    t1 = time.perf_counter()
    rng = random.Random(a.seed)
    for _ in range(a.random):
        judge(random_case(rng), "random")
    t2 = time.perf_counter()
    report = {"totals": totals, "counts": dict(sorted(counts.items())), "seconds":
              {"exhaustive": round(t1 - t0, 1), "random": round(t2 - t1, 1)}, "shortest_seen": first}
    json.dump(report, open(a.out, "w"), indent=1)
    print(json.dumps({k: report[k] for k in ("totals", "counts", "seconds")}, indent=1))
    seconds = (t2 - t0) or 1e-9
    out = write_record("reference_campaign", command_line(),
                       {"exhaustive cases": totals["exhaustive"], "random cases": totals["random"],
                        "diverging cases": totals["diverging"], "divergence classes": len(counts),
                        "ref-unexplained": counts.get("ref-unexplained", 0),
                        "exhaustive s": report["seconds"]["exhaustive"], "random s": report["seconds"]["random"],
                        "cases/s": round((totals["exhaustive"] + totals["random"]) / seconds, 1)},
                       counts=report["counts"], max_len=a.max_len, alphabet=a.alphabet, seed=a.seed,
                       rows=[{"class": c, "cases": n} for c, n in report["counts"].items()])
    print(f"record: {out}", file=sys.stderr)
    return 1 if "ref-unexplained" in counts else 0


if __name__ == "__main__":
    sys.exit(main())
