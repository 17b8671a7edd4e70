"""Fuzz target throughput over a real vocabulary, in-process (as bench/fuzz_ab.py measures the symbol target):
the target function of `dryz fuzz --vocab NAME --breakers MODE` on random inputs, uninstrumented unless
--instrumented (the harness's own instrument(), as a campaign runs it).

Usage: python bench/fuzz_vocab.py [--vocab llama-bpe] [--breakers default] [--band LO HI] [--inputs 2000]
       [--sampler clone|reset] [--instrumented]
Reports exec/s per core over the inputs whose history is LO..HI-1 tokens (default 0..256), after a warm-up pass
over the same inputs (which initializes one sampler per configuration met: init_dry is not what is measured,
its count is reported), best of --rounds passes; then one pass with the library's calls (run_clone) timed apart,
and the decoder alone (best of --rounds passes).
Writes the record bench/records/fuzz_vocab.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere).
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from record import command_line, write_record  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", default="llama-bpe")
    ap.add_argument("--breakers", default="default", choices=("default", "dict", "random"))
    ap.add_argument("--band", nargs=2, type=int, default=(0, 257))
    ap.add_argument("--inputs", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sampler", default="clone", choices=("clone", "reset"))
    ap.add_argument("--instrumented", action="store_true")
    a = ap.parse_args()
    os.environ["DRYZ_FUZZ_VOCAB"], os.environ["DRYZ_FUZZ_BREAKERS"] = a.vocab, a.breakers
    os.environ["DRYZ_VOCAB_SAMPLER"] = a.sampler
    os.environ.setdefault("DRYZ_CORPUS", str(Path(__file__).resolve().parent.parent / "corpus"))
    if a.instrumented:
        import importlib

        from dryz.fuzz import harness
        harness.instrument([importlib.import_module(m) for m in harness.INSTRUMENTED + ("dryz.oracle.seqindex",)])
    from dryz.fuzz import target
    target.load_subject()
    decode = target.decode
    rng = np.random.default_rng(0)
    lo, hi = a.band
    datas = []
    while len(datas) < a.inputs:
        d = rng.integers(0, 256, int(rng.integers(0, 3000))).astype(np.uint8).tobytes()
        if lo <= len(decode(d).history) < hi:
            datas.append(d)
    t = time.perf_counter()
    found = 0
    for d in datas:  # warm-up: every configuration's sampler initialized
        try:
            target.test_one_input(d)
        except target.Finding:
            found += 1
    warm = time.perf_counter() - t
    protos = len(target.SUBJECT.__dict__.get("_prototypes", {}))
    def one_pass() -> float:
        t = time.perf_counter()
        for d in datas:
            try:
                target.test_one_input(d)
            except target.Finding:
                pass
        return time.perf_counter() - t

    best = min(one_pass() for _ in range(a.rounds))

    def decode_pass() -> float:  # the decoder alone (bytes -> Case), the same inputs
        t = time.perf_counter()
        for d in datas:
            decode(d)
        return time.perf_counter() - t

    decoding = min(decode_pass() for _ in range(a.rounds)) / len(datas) * 1e6
    # The library's share: one more pass with the call sequencer's run_clone (clone, accepts, apply, free in C)
    # timed apart; the rest of an input is dryz's (decoding, the oracles, the verdict).
    from dryz.subject import libllama
    drive, inside = libllama._DRIVE, [0.0]
    timed = getattr(drive, "run_clone", None)
    if timed is not None:
        class Timed:
            def __getattr__(self, name):
                return getattr(drive, name)

            @staticmethod
            def run_clone(*args):
                t0 = time.perf_counter()
                try:
                    return timed(*args)
                finally:
                    inside[0] += time.perf_counter() - t0
        libllama._DRIVE = Timed()
        total = one_pass()
        libllama._DRIVE = drive
        share = (f"; in that pass the library's clone, accepts and apply took {inside[0] / len(datas) * 1e6:.0f} of "
                 f"{total / len(datas) * 1e6:.0f} us/input")
        library = {"library us/input (timed pass)": round(inside[0] / len(datas) * 1e6, 1),
                   "timed pass us/input": round(total / len(datas) * 1e6, 1)}
    else:
        share, library = "", {}
    lens = [len(decode(d).history) for d in datas]
    print(f"{a.vocab} breakers={a.breakers} sampler={a.sampler}{' instrumented' if a.instrumented else ''}: "
          f"{len(datas) / best:,.0f} exec/s  {best / len(datas) * 1e6:.0f} us/input  ({len(datas)} inputs, "
          f"histories {lo}..{hi - 1}, mean {np.mean(lens):.0f} tokens; warm-up {warm:.1f} s initializing "
          f"{protos} samplers; {found} findings{share}; decoding alone {decoding:.0f} us/input)")
    out = write_record("fuzz_vocab", command_line(),
                       {"exec/s": round(len(datas) / best, 1), "us/input": round(best / len(datas) * 1e6, 1),
                        "decoding alone us/input": round(decoding, 1), **library},
                       vocab=a.vocab, breakers=a.breakers, sampler=a.sampler, instrumented=a.instrumented,
                       inputs=len(datas), band=[lo, hi - 1], mean_tokens=round(float(np.mean(lens)), 1),
                       warmup_seconds=round(warm, 2), samplers_initialized=protos, findings=found)
    print(f"record: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
