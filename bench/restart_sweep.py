"""Multi-token breakers through the shipped library: verdict counts per class, per configuration.

    /work/venv/bin/python bench/restart_sweep.py [-k K] [-n N] [--all-pairs] [--json PATH]

Every history of length 1..N over K symbols (default 3, 7), every symbol a candidate, multiplier 1, base 2,
allowed_length 1, no window cut; the configurations of dryz.enumerate.restarts.CONFIGS (length-2 and length-3 breakers, one
contained in another, overlapping ones), and with --all-pairs every set of one or two 1-3-character breakers over
the first three symbols. `predicted` is the PREREG derivation's prediction (admits_difference); `rep_only` counts
histories whose rep_limits differ without any change in the output.
Writes the record bench/records/restart_sweep.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time

from dryz.subject import open_subject, selected_spec
from dryz.enumerate.restarts import CONFIGS, MERGES_BREAKERS, merges_compare, merges_promise_sweep, sweep
from dryz.verdict import CLASSES as CLASS_ORDER
from record import command_line, write_record


def merges_report(max_len: int = 5) -> dict:
    from dryz.subject import open_subject, selected_spec
    lib = open_subject(selected_spec())
    names = ["a", "b", "c", "ab", "bc", "abc"]
    rows = []
    print(f"merges vocabulary (tokens {' '.join(names)}; merges a+b b+c ab+c), histories up to {max_len}:")
    for b in MERGES_BREAKERS:
        r = merges_compare(lib, b, max_len)
        seqs = " ".join(f"{names[h]}>{'.'.join(names[t] for t in tail) or '()'}" for h, tail in r.seqs)
        print(f"  {str(list(b)):18s} map {seqs:48s} histories {r.histories} mismatches {r.mismatches}")
        rows.append({"breakers": list(b), "histories": r.histories, "mismatches": r.mismatches})
    strings = ["".join(p) for n in (1, 2, 3) for p in itertools.product("abc", repeat=n)]
    sets = [(s,) for s in strings] + list(itertools.combinations(strings, 2))
    sw = merges_promise_sweep(lib, sets, max_len)
    classes: dict = {}
    for r in sw:
        for c, n in r["classes"].items():
            classes[c] = classes.get(c, 0) + n
    wrong = [r["breakers"] for r in sw if bool(r["rep_differs"]) != r["predicted"]]
    print(f"  promise sweep: {len(sets)} breaker sets, {sum(1 for r in sw if r['rep_differs'])} with a rep_limit "
          f"difference; classes {classes}; prediction wrong for {wrong or 'none'}")
    return {"compare": rows, "promise_classes": classes, "sets": len(sets), "prediction_wrong": wrong}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", type=int, default=3)
    ap.add_argument("-n", type=int, default=7)
    ap.add_argument("--all-pairs", action="store_true")
    ap.add_argument("--merges", action="store_true",
                    help="also the merges vocabulary: the modelled map against the library, and its promise sweep")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    configs = list(CONFIGS)
    if a.all_pairs:
        strings = ["".join(p) for n in (1, 2, 3) for p in itertools.product("abc", repeat=n)]
        sets = [(s,) for s in strings] + list(itertools.combinations(strings, 2))
        configs += [("+".join(s), s) for s in sets]
    t0 = time.perf_counter()
    results = sweep(open_subject(selected_spec()), a.k, a.n, configs)
    seconds = time.perf_counter() - t0
    totals: dict = {}
    wrong_prediction = []
    for r in results:
        for c, n in r.counts.items():
            totals[c] = totals.get(c, 0) + n
        if ("documented-contained-restart" in r.counts) != r.predicted:
            wrong_prediction.append(r.name)
    print(f"{len(results)} configurations x {results[0].histories} histories (k={a.k}, N={a.n}), "
          f"{seconds:.1f} s")
    for r in results[:len(CONFIGS)]:
        counts = "  ".join(f"{c} {r.counts[c]}" for c in CLASS_ORDER if c in r.counts)
        print(f"  {r.name:22s} {str(list(r.breakers)):22s} predicted {str(r.predicted):5s} {counts}"
              f"  rep_only {r.rep_only}  e.g. {r.examples.get('documented-contained-restart', '-')}")
    if a.all_pairs:
        differing = [r for r in results[len(CONFIGS):] if len(r.counts) > 1]
        print(f"  all pairs: {len(results) - len(CONFIGS)} sets, {len(differing)} with a class other than agree")
    print("totals: " + "  ".join(f"{c} {totals[c]}" for c in CLASS_ORDER if c in totals)
          + "".join(f"  {c} {n}" for c, n in totals.items() if c not in CLASS_ORDER))
    print(f"derivation's prediction wrong for: {wrong_prediction or 'none'}")
    merges = None
    if a.merges:
        merges = merges_report()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"k": a.k, "max_len": a.n, "seconds": round(seconds, 2), "totals": totals,
                       "prediction_wrong": wrong_prediction, "configs": [r.to_json() for r in results],
                       "merges": merges}, f,
                      indent=1)
    out = write_record("restart_sweep", command_line(),
                       {"configurations": len(results), "histories per configuration": results[0].histories,
                        "seconds": round(seconds, 2), **{f"{c} histories": n for c, n in totals.items()},
                        "prediction wrong": len(wrong_prediction)},
                       k=a.k, max_len=a.n, all_pairs=a.all_pairs, prediction_wrong=wrong_prediction,
                       merges=merges,
                       rows=[{"config": r.name, "breakers": list(r.breakers), "predicted": r.predicted,
                              "counts": dict(r.counts), "rep_only": r.rep_only} for r in results])
    print(f"record: {out}", file=sys.stderr)
    bad = set(totals) - {"agree", "documented-contained-restart"}
    return 1 if bad or wrong_prediction else 0


if __name__ == "__main__":
    sys.exit(main())
