"""An atheris-free smoke loop over traces: random byte strings through decode_trace (dryz.decode.traces) and
check_trace for a while, printing exec/s (and any trace that does not agree).

    python -m dryz.fuzz.traces [--seconds 20] [--seed 0] [--max-len 512]
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from ..decode.traces import decode_trace
from ..subject.registry import open_subject, selected_spec
from ..trace_check import check_trace


# -- the smoke loop ------------------------------------------------------------------------------------------


def smoke(lib, seconds: float = 20.0, seed: int = 0, max_len: int = 512, control: bool = True, log=print) -> dict:
    """Random byte strings (length uniform in 0..max_len) through decode_trace and check_trace until `seconds`
    pass. Returns the counts and exec/s; any trace that does not agree is kept (JSON)."""
    rng = random.Random(seed)
    n = applies = events = 0
    bad = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        data = rng.randbytes(rng.randint(0, max_len))
        t = decode_trace(data)
        v = check_trace(t, lib, control=control)
        n += 1
        applies += len(v.applies)
        events += len(t.events)
        if not v.ok:
            bad.append({"status": v.status, "first_bad_apply": v.first_bad_apply, "trace": t.to_json(),
                        "input_hex": data.hex()})
            if log:
                log(f"{v.status} at apply {v.first_bad_apply}: {t.spelled()[:200]}")
    wall = time.perf_counter() - t0
    return {"inputs": n, "applies": applies, "events": events, "seconds": round(wall, 2),
            "exec_per_s": round(n / wall, 1), "applies_per_s": round(applies / wall, 1), "not_agree": len(bad),
            "bad": bad, "control": control, "max_len": max_len, "seed": seed}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dryz.fuzz.traces")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--no-control", action="store_true")
    a = ap.parse_args(argv)
    lib = open_subject(selected_spec())
    r = smoke(lib, a.seconds, a.seed, a.max_len, not a.no_control)
    print(f"dryz trace smoke: {r['inputs']:,} inputs in {r['seconds']} s = {r['exec_per_s']:,} exec/s; "
          f"{r['applies']:,} applies ({r['applies_per_s']:,}/s), {r['events']:,} events; not agreeing "
          f"{r['not_agree']}; subject {lib.spec}; fresh control "
          f"{'on' if r['control'] else 'off'}")
    return 1 if r["not_agree"] else 0


if __name__ == "__main__":
    sys.exit(main())
