"""Shortest witnesses for every reference-divergence class, stored as corpus entries.

    /work/venv/bin/python bench/reference_witnesses.py [--corpus DIR] [--only CLASS ...]

Each seed below triggers one class (found by bench/reference_campaign.py); minimize_divergence shrinks it
with the predicate "check() agrees with the as-shipped model and the class is the only divergence", then
proves it shortest (brute force over every shorter history, or the match-length bound for the threshold
classes). Entries: expect = the check() class ("agree"), reference_divergence = the class.
Writes the record bench/records/reference_witnesses.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere).
"""

from __future__ import annotations

import argparse
import sys
import time

from dryz.case import Case, f32
from dryz.corpus import DEFAULT_DIR, write_entry
from dryz.judge import check
from dryz.corpus import reference_witness_entry
from dryz.oracle.reference import divergences
from dryz.subject import open_subject, selected_spec
from dryz.shrink import minimize_divergence
from dryz.symbols import from_symbols
from record import command_line, write_record


def seed(symbols: str, alphabet: int | None = None, **kw) -> Case:
    h = tuple(from_symbols(symbols))
    return Case(history=h, alphabet=alphabet or max(h, default=0) + 1, **{"penalty_last_n": 64, **kw})


SEEDS = {
    "ref-multiplier-negative": seed("abab", multiplier=-1.0),
    "ref-base-below-1": seed("abab", base=0.5),
    "ref-penalty-last-n-0": seed("abab", penalty_last_n=0),
    "ref-penalty-last-n-negative": seed("abab", penalty_last_n=-1),
    "ref-multi-char-breaker": seed("cbcb", breakers=("ab",)),
    "ref-empty-breaker": seed("abab", breakers=("",)),
    "ref-allowed-length-0": seed("abab", allowed_length=0),
    "ref-allowed-length-negative": seed("abab", allowed_length=-1),
    "ref-match-cap-50": seed("a" * 60),
    "ref-exponent-clamp": seed("a" * 12, base=1e10),
    "ref-pow-overflow": seed("a" * 16, base=f32(2.0 ** 127)),
}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(DEFAULT_DIR / "findings"))
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args(argv)
    rows = []
    records = []
    subject = open_subject(selected_spec())
    for klass, case in SEEDS.items():
        if a.only and klass not in a.only:
            continue
        t0 = time.perf_counter()
        d = divergences(case, check(case, subject))
        if klass not in d:
            print(f"SEED DOES NOT SHOW {klass}: {d}")
            return 1
        w, shortest, calls = minimize_divergence(case, klass, subject, sole=True, log=print)
        secs = time.perf_counter() - t0
        prov = {"found_by": "bench/reference_witnesses.py (dryz.shrink.minimize_divergence)",
                "minimized_from": case.to_json(), "original_length": len(case.history),
                "predicate_calls": calls, "seconds": round(secs, 2)}
        data = reference_witness_entry(w, klass, check(w, subject), shortest, prov, subject.identity,
                             note=f"reference divergence {klass}: the shipped library (agreeing with the "
                                  f"as-shipped model) differs from text-generation-webui's DRY design")
        path = write_entry(a.corpus, data)
        rows.append((klass, w.symbols, len(w.history), shortest, path.name))
        records.append({"class": klass, "witness": w.symbols, "tokens": len(w.history),
                        "original_tokens": len(case.history), "shortest": str(shortest),
                        "predicate_calls": calls, "seconds": round(secs, 2), "entry": path.name})
        print(f"{klass}: {w.symbols!r} ({len(w.history)} tokens) {shortest}, calls {calls}, {secs:.1f}s -> {path}")
    print()
    for r in rows:
        print(" | ".join(map(str, r)))
    out = write_record("reference_witnesses", command_line(),
                       {"classes minimized": len(records),
                        "predicate calls": sum(r["predicate_calls"] for r in records),
                        "seconds": round(sum(r["seconds"] for r in records), 2),
                        "longest witness (tokens)": max((r["tokens"] for r in records), default=0)},
                       rows=records)
    print(f"record: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
