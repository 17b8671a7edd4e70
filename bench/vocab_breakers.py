"""The restart-sequence construction, model against library, on every vocabulary llama.cpp vendors.

    .venv/bin/python bench/vocab_breakers.py [NAME ...] [--promise]

Per vocabulary: tokens; the model's build time over the whole breaker suite (dryz.enumerate.vocab_probes.
BREAKER_SUITE, every set, texts already loaded) and for the largest set ("all") alone; probes and
disagreements of compare_vocab; init_dry with the 4 default breakers (median of 5 fresh samplers, each freed);
with --promise, the text-level sweep's class counts (dryz.oracle.promise_text).
Writes the record bench/records/vocab_breakers.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere).
"""

from __future__ import annotations

import statistics
import sys
import time

from dryz.enumerate.vocab_probes import BREAKER_SUITE, DEFAULTS, compare_vocab
from dryz.oracle.restarts_vocab import TextIndex, restart_model
from dryz.subject import open_subject, selected_spec
from dryz.subject.vendored_vocabs import VocabUnavailable, load, vendored_names
from record import command_line, write_record


def init_dry_seconds(lib, vocab, breakers, n=5) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        s = lib.new_sampler(1.0, 2.0, 0, 4096, breakers=breakers, vocab=vocab.handle)
        times.append(time.perf_counter() - t)
        lib.free(s)
    return statistics.median(times)


def main(argv):
    promise = "--promise" in argv
    names = [a for a in argv if not a.startswith("--")] or vendored_names()
    lib = open_subject(selected_spec())
    print(f"{'vocab':16} {'tokens':>7} {'texts s':>8} {'model s':>8} {'all s':>7} {'probes':>7} {'shadow':>6} "
          f"{'disagree':>8} {'init_dry ms':>11}  compare s")
    total = 0
    rows = []
    for name in names:
        try:
            v = load(name, lib)
        except VocabUnavailable as e:
            print(f"{name:16} unavailable: {e}")
            continue
        t = time.perf_counter()
        idx = TextIndex(v.texts())
        t_texts = time.perf_counter() - t
        t = time.perf_counter()
        for _, bs in BREAKER_SUITE:
            restart_model(bs, idx, v.tokenize)
        t_model = time.perf_counter() - t
        t = time.perf_counter()
        restart_model(dict(BREAKER_SUITE)["all"], idx, v.tokenize)
        t_all = time.perf_counter() - t
        t = time.perf_counter()
        s = compare_vocab(name, lib)
        t_cmp = time.perf_counter() - t
        init = init_dry_seconds(lib, v, DEFAULTS)
        total += len(s.disagreements)
        print(f"{name:16} {v.n_tokens:7d} {t_texts:8.3f} {t_model:8.3f} {t_all:7.3f} {s.probes:7d} {s.shadowed:6d} "
              f"{len(s.disagreements):8d} {init * 1e3:11.1f}  {t_cmp:.1f}", flush=True)
        for d in s.disagreements[:3]:
            print("   ", d)
        row = {"vocab": name, "tokens": v.n_tokens, "texts_s": round(t_texts, 3), "model_s": round(t_model, 3),
               "all_s": round(t_all, 3), "probes": s.probes, "shadowed": s.shadowed,
               "disagreements": len(s.disagreements), "init_dry_ms": round(init * 1e3, 2),
               "compare_s": round(t_cmp, 2)}
        if promise:
            from dryz.enumerate.promise_sweep import promise_sweep
            r = promise_sweep(name, lib)
            print(f"{'':16} promise texts {r.counts}  vocabulary {r.vocab_counts}", flush=True)
            row.update(promise_counts=dict(r.counts), promise_vocab_counts=dict(r.vocab_counts))
        rows.append(row)
    print(f"total construction disagreements: {total}")
    figures = {"vocabularies": len(rows), "construction disagreements": total}
    figures.update({f"{r['vocab']} init_dry ms": r["init_dry_ms"] for r in rows})
    out = write_record("vocab_breakers", command_line(), figures, promise=promise,
                       unavailable=[n for n in names if n not in {r["vocab"] for r in rows}], rows=rows)
    print(f"record: {out}", file=sys.stderr)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
