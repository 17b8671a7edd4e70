"""DRY's cost per request through llama-server, per vendored vocabulary.

Every /completion request builds a new sampler chain (server-context.cpp: launch_slot_with_task ->
common_sampler_init), so llama_sampler_init_dry, which detokenizes the whole vocabulary once per breaker
(get_overlapping_token_sequences), is paid per request. For each vocabulary this starts llama-server with
dryz's zero-logit tiny model over it and times sequential requests (client wall time, time.perf_counter) of one
token after a 16-token prompt, with samplers ["dry"] and:

  off       dry_multiplier 0 (init_dry returns an empty sampler: no breaker is processed)
  one       DRY on, dry_sequence_breakers ["\\n"]
  defaults  DRY on, the field left out: the server's four defaults "\\n" ":" "\\"" "*"

(no breakers at all cannot be asked for: [] is HTTP 400). DRY's share is (defaults - off) / defaults of the
median request.

  python bench/served_cost.py [--server PATH] [--requests N] [VOCAB...]

PATH defaults to `dryz subject build --server`'s cached build; VOCAB defaults to every vendored vocabulary.
Prints a Markdown table. Writes the record bench/records/served_cost.json (bench/record.py; $DRYZ_BENCH_RECORDS:
elsewhere).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dryz.subject.build import build  # noqa: E402
from dryz.subject.server import ServerProcess, check_binary  # noqa: E402
from dryz.subject.tinymodel import tiny_model  # noqa: E402
from dryz.subject.vendored_vocabs import resolve_vocab, vendored_names  # noqa: E402
from record import command_line, write_record  # noqa: E402

MODES = {"off": {"dry_multiplier": 0.0},
         "one": {"dry_multiplier": 0.8, "dry_sequence_breakers": ["\n"]},
         "defaults": {"dry_multiplier": 0.8}}


def time_requests(proc: ServerProcess, body: dict, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        status, resp = proc.post("/completion", body)
        out.append(time.perf_counter() - t0)
        if status != 200:
            raise SystemExit(f"HTTP {status}: {resp}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default=None, help="llama-server path [default: the cached dryz build]")
    ap.add_argument("--requests", type=int, default=30, help="timed requests per mode (after 3 warm-up ones)")
    ap.add_argument("vocabs", nargs="*")
    a = ap.parse_args()
    server = a.server or str(build(server=True, log=lambda m: None) / "llama-server")
    check_binary(server)
    names = a.vocabs or vendored_names()
    print(f"llama-server {server}; {a.requests} sequential requests per mode, median (ms)\n")
    print("| vocabulary | tokens | off | one breaker | default breakers | DRY's share (defaults) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    rows = []
    for name in names:
        ref = resolve_vocab(name)
        model = tiny_model(ref.path, ref.sha256)
        proc = ServerProcess(server, model, parallel=1, ctx_per_slot=256)
        try:
            proc.start()
            prompt = list(range(16))
            med = {}
            for mode, fields in MODES.items():
                body = {"prompt": prompt, "n_predict": 1, "samplers": ["dry"], "dry_base": 1.75,
                        "dry_allowed_length": 2, "dry_penalty_last_n": 64, **fields}
                time_requests(proc, body, 3)
                med[mode] = statistics.median(time_requests(proc, body, a.requests)) * 1e3
        finally:
            proc.stop()
        import gguf
        n = len(gguf.GGUFReader(str(ref.path)).fields["tokenizer.ggml.tokens"].data)
        share = (med["defaults"] - med["off"]) / med["defaults"] * 100
        print(f"| {name} | {n:,} | {med['off']:.1f} | {med['one']:.1f} | {med['defaults']:.1f} | {share:.0f} % |",
              flush=True)
        rows.append({"vocab": name, "tokens": n, **{f"{m}_ms": round(v, 2) for m, v in med.items()},
                     "dry_share_percent": round(share, 1)})
    out = write_record("served_cost", command_line(),
                       {f"{r['vocab']} DRY's share %": r["dry_share_percent"] for r in rows},
                       server=server, requests=a.requests, rows=rows)
    print(f"record: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
