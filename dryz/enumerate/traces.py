"""Every trace up to a bound, run on the library and judged after every apply.

The space, per configuration: every sequence of 1..N events over the event alphabet (dryz.trace_space: accept
one token of a k-symbol alphabet, apply with every symbol a candidate at logit 0, reset, clone; with `free`, the
default, also a free at the end), its size checked against the closed form (count_traces).

Each trace runs on its own fresh sampler (no prefix sharing: the clone under test never serves the walk). Each
apply's observed output is judged by dryz.check.check on the equivalent single Case the trace model gives, and
(the control) compared bit for bit with a fresh sampler's output on that Case. Both are memoised: check() runs
once per distinct (equivalent Case, observed output) pair, the fresh sampler once per distinct equivalent Case;
a library that answers one equivalent Case two ways gets both answers judged.

    python -m dryz.enumerate.traces -n 5 [-k 2] [--configs base,window3,breaker] [--json FILE]

Exit 0: no disagreement; 1: some trace disagrees (the shortest ones are printed); 2: bad input or the harness
in doubt (the count control).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from ..verdict import AGREE
from ..judge import check
from ..oracle.trace_model import capacity, held_tokens_of
from ..subject.trace_driver import run_events
from ..trace_space import CONFIGS, DEFAULT, count_traces, iter_traces, trace_of
from ..trace_check import _Recorded, same_output
from . import certificate as cert
from ..subject.identity import same_subject, subject_details
from ..subject.registry import open_subject, selected_spec


def run_config(name: str, cfg: dict, n_max: int, lib, k: int = 2, free: bool = True, control: bool = True,
               max_examples: int = 5) -> dict:
    proto = trace_of((("apply", None),), k, cfg)  # validates the configuration once
    args, cap = proto.sampler_args(), capacity(proto, lib.abi)
    verdicts: dict = {}   # (history, ids, logits bytes, sorted) -> status
    fresh: dict = {}      # history -> fresh Output
    traces = applies = bad = checks = control_bad = 0
    statuses: dict[str, int] = {}
    examples = []
    t0 = time.perf_counter()
    for events in iter_traces(n_max, k, free):
        traces += 1
        outs = run_events(lib, args, events, k, proto.n_ctx_train)  # the enumerator's events are valid
        held = held_tokens_of(events, cap)
        first_bad = None
        for i, (h, out) in enumerate(zip(held, outs)):
            applies += 1
            key = (h, out.ids, out.logits.tobytes(), out.sorted)
            st = verdicts.get(key)
            if st is None:
                checks += 1
                case = proto.config_case(history=h)
                st = check(case, lib=_Recorded(lib.abi, out)).status
                if control and st == AGREE:
                    if h not in fresh:
                        fresh[h] = lib.run(case)
                    if not same_output(fresh[h], out):
                        st = "mismatch"
                        control_bad += 1
                verdicts[key] = st
            if st != AGREE and first_bad is None:
                first_bad = (i, st)
        if first_bad is not None:
            bad += 1
            statuses[first_bad[1]] = statuses.get(first_bad[1], 0) + 1
            if len(examples) < max_examples:
                t = trace_of(events, k, cfg)
                examples.append({"trace": t.to_json(), "spelled": t.spelled(), "first_bad_apply": first_bad[0],
                                 "status": first_bad[1]})
    wall = time.perf_counter() - t0
    expected = count_traces(n_max, k, free)
    return {"config": name, **{**DEFAULT, **cfg}, "breakers": list(cfg.get("breakers", ())), "n_max": n_max,
            "alphabet": k, "free": free, "traces": traces, "expected_traces": expected,
            "count_ok": traces == expected, "applies": applies, "distinct_judged": checks,
            "fresh_cases": len(fresh), "disagreements": bad, "by_status": statuses,
            "control_differences": control_bad, "examples": examples, "wall_seconds": round(wall, 3)}


def enumerate_traces(n_max: int, lib, k: int = 2, configs=None, free: bool = True, control: bool = True,
                     max_examples: int = 5) -> dict:
    """Every configuration's run_config, with the totals and the subject's identity."""
    names = list(CONFIGS) if configs is None else list(configs)
    runs = [run_config(nm, CONFIGS[nm], n_max, lib, k, free, control, max_examples) for nm in names]
    return {"schema": "dryz.trace-enumeration/1", "subject": lib.identity, "n_max": n_max, "alphabet": k,
            "configs": runs, "traces": sum(r["traces"] for r in runs),
            "applies": sum(r["applies"] for r in runs), "disagreements": sum(r["disagreements"] for r in runs),
            "count_ok": all(r["count_ok"] for r in runs),
            "wall_seconds": round(sum(r["wall_seconds"] for r in runs), 3)}


class TraceSpaceInterrupted(Exception):
    """Ctrl-C in the trace space of `exhaustive --trace-events`: the certificate it was added to is marked interrupted."""


def add_to_certificate(result: dict, n: int, lib, alphabet: int = 2) -> dict:
    """Run every trace of 1..n events (every configuration) on the certificate's subject, put its counts in
    result["traces"] and judge the certificate again. Ctrl-C: result marked interrupted (not a certificate, not
    resumable), TraceSpaceInterrupted raised."""
    if not same_subject(lib.identity, result["subject"]):
        raise ValueError("the trace space would run on another subject than the certificate's")
    try:
        r = enumerate_traces(n, lib, alphabet)
    except KeyboardInterrupt:
        result["verdict"] = "interrupted"
        result["interrupted"] = {"note": "the history space finished; the trace space (--trace-events) was interrupted: "
                                         "not a certificate, and not resumable (run the command again)"}
        raise TraceSpaceInterrupted() from None
    result["traces"] = cert.traces_json(r)
    result["verdict"], result["checks"] = cert.judge(result)
    result["wall_seconds"] = round(result["wall_seconds"] + r["wall_seconds"], 3)
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dryz.enumerate.traces", description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=5, help="at most this many events per trace (default 5)")
    ap.add_argument("-k", type=int, default=2, help="alphabet size (default 2)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}")
    ap.add_argument("--no-free", action="store_true", help="no traces ending in free")
    ap.add_argument("--no-control", action="store_true", help="skip the fresh-sampler control")
    ap.add_argument("--json", help="write the full result here")
    a = ap.parse_args(argv)
    names = [c for c in a.configs.split(",") if c]
    unknown = [c for c in names if c not in CONFIGS]
    if unknown or not 1 <= a.n <= 12 or not 1 <= a.k <= 8:
        print(f"dryz: error: unknown configuration(s) {unknown}" if unknown else
              "dryz: error: -n must be in 1..12 and -k in 1..8", file=sys.stderr)
        return 2
    r = enumerate_traces(a.n, open_subject(selected_spec()), a.k, names, not a.no_free, control=not a.no_control)
    verdict = "VOID (trace count)" if not r["count_ok"] else ("DISAGREE" if r["disagreements"] else "AGREE")
    print(f"dryz traces: {verdict}")
    print(f"subject   {'; '.join(subject_details(r['subject']))}")
    print(f"space     every trace of 1..{a.n} events over {{accept x {a.k} symbols, apply, reset, clone}}"
          + ("" if a.no_free else " (+ free last)"))
    for c in r["configs"]:
        print(f"  {c['config']:<8} last_n={c['penalty_last_n']:<3} breakers={c['breakers']}  traces {c['traces']:>9,}"
              f"  applies {c['applies']:>9,}  judged {c['distinct_judged']:>5,}  disagreements {c['disagreements']:,}"
              f"  control differences {c['control_differences']}  {c['wall_seconds']:.2f} s")
        for ex in c["examples"][:3]:
            print(f"    {ex['status']} at apply {ex['first_bad_apply']}: {ex['spelled']}")
    print(f"total     traces {r['traces']:,}  applies {r['applies']:,}  disagreements {r['disagreements']:,}  "
          f"wall {r['wall_seconds']:.2f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
    if not r["count_ok"]:
        return 2
    return 1 if r["disagreements"] else 0


if __name__ == "__main__":
    sys.exit(main())
