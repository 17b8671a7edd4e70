"""Every trace up to a bound, run on the library and judged after every apply.

The space, per configuration: every sequence of 1..N events over the event alphabet (dryz.trace_space: accept
one token of a k-symbol alphabet, apply with every symbol a candidate at logit 0, reset, clone; with `free`, the
default, also a free at the end), its size checked against the closed form (count_traces).

The walk runs in an isolation worker (dryz.subject.isolation), CHUNK traces per call, each trace's position
marked before it runs: a trace the subject dies on (an abort, a signal, a sanitizer report, a hang) is a verdict
of class crash (memory with a sanitizer report) naming that trace, and the walk goes on after it in a new worker;
every other trace is judged.

Each trace runs on its own fresh sampler (no prefix sharing: the clone under test never serves the walk). Each
apply's observed output is judged by dryz.check.check on the equivalent single Case the trace model gives, and
(the control) compared bit for bit with a fresh sampler's output on that Case. Both are memoised: check() runs
once per distinct (equivalent Case, observed output) pair, the fresh sampler once per distinct equivalent Case;
a library that answers one equivalent Case two ways gets both answers judged.

    python -m dryz.enumerate.traces -n 5 [-k 2] [--configs base,window3,breaker] [--json FILE]

Exit 0: no disagreement; 1: some trace disagrees or crashes the subject (the shortest ones are printed); 2: bad
input or the harness in doubt (the count control).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time

from ..verdict import AGREE
from ..judge import check
from ..oracle.trace_model import capacity, held_tokens_of
from ..subject.answers import Crash
from ..subject.isolation import Worker, mark
from ..subject.trace_driver import run_events
from ..trace_space import CONFIGS, DEFAULT, count_traces, iter_traces_from, trace_of
from ..trace_check import TraceVerdict, _Recorded, same_output
from . import certificate as cert
from ..subject.identity import same_subject, subject_details
from ..subject.registry import open_subject, selected_spec


# Traces one worker call walks (dryz.subject.isolation): a crash costs at most the redo of the traces before it in
# its call; the worker marks each trace's position before running it, so the parent names the trace it died on.
CHUNK = 1024
_WALK: dict = {}  # in the worker: per (configuration, space) the memos and the walk's iterator where it stopped


def _walk(lib, name: str, cfg: dict, n_max: int, k: int, free: bool, control: bool, start: int, count: int,
          max_examples: int, state: dict) -> dict:
    """Traces start..start+count-1 of the space (iter_traces order) run on lib and judged: the counts of run_config
    for that slice. Before each trace its position is marked (isolation.mark): when the subject kills the worker
    running this, the parent knows on which trace. state: the memos and the walk's iterator, kept between calls."""
    proto = trace_of((("apply", None),), k, cfg)  # validates the configuration once
    args, cap = proto.sampler_args(), capacity(proto, lib.abi)
    key = (name, tuple(sorted(cfg.items())), n_max, k, free)
    verdicts, fresh, at, walker = state.get(key) or ({}, {}, None, None)  # (history, ids, logits, sorted) -> status
    if at != start:  # not where the last call stopped
        walker = iter_traces_from(n_max, k, free, start)
    traces = applies = bad = checks = control_bad = fresh_runs = 0
    statuses: dict[str, int] = {}
    examples = []
    for i, events in zip(range(start, start + count), walker):
        mark(i)
        traces += 1
        outs = run_events(lib, args, events, k, proto.n_ctx_train)  # the enumerator's events are valid
        held = held_tokens_of(events, cap)
        first_bad = None
        for j, (h, out) in enumerate(zip(held, outs)):
            applies += 1
            vkey = (h, out.ids, out.logits.tobytes(), out.sorted)
            st = verdicts.get(vkey)
            if st is None:
                checks += 1
                case = proto.config_case(history=h)
                st = check(case, lib=_Recorded(lib.abi, out)).status
                if control and st == AGREE:
                    if h not in fresh:
                        fresh[h] = lib.run(case)
                        fresh_runs += 1
                    if not same_output(fresh[h], out):
                        st = "mismatch"
                        control_bad += 1
                verdicts[vkey] = st
            if st != AGREE and first_bad is None:
                first_bad = (j, st)
        if first_bad is not None:
            bad += 1
            statuses[first_bad[1]] = statuses.get(first_bad[1], 0) + 1
            if len(examples) < max_examples:
                t = trace_of(events, k, cfg)
                examples.append({"trace": t.to_json(), "spelled": t.spelled(), "first_bad_apply": first_bad[0],
                                 "status": first_bad[1]})
    state[key] = (verdicts, fresh, start + traces, walker)
    return {"traces": traces, "applies": applies, "distinct_judged": checks, "fresh_cases": fresh_runs,
            "disagreements": bad, "by_status": statuses, "control_differences": control_bad, "examples": examples}


def _walk_op(lib, *args) -> dict:
    """_walk as a call an isolation worker runs (its state kept in the worker, lost with it)."""
    return _walk(lib, *args, _WALK)


def crash_record(trace, crash: Crash) -> dict:
    """A trace the subject died on, as the certificate names it: the trace, its class (memory with a sanitizer
    report, else crash; verdict.crash_verdict's rule) and how it died."""
    v = TraceVerdict.crashed(trace, crash)
    return {"trace": trace.to_json(), "spelled": trace.spelled(), "class": v.klass, "signal": crash.signal,
            "detail": v.crash.get("summary") or crash.detail}


def run_config(name: str, cfg: dict, n_max: int, lib, k: int = 2, free: bool = True, control: bool = True,
               max_examples: int = 5, worker=None) -> dict:
    """Every trace of the configuration's space run and judged: in this process, or with worker (an isolation
    worker on lib) in slices of CHUNK traces there, where a trace the subject dies on is a verdict of class crash
    (memory with a sanitizer report) naming that trace, and the walk goes on after it in a new worker."""
    total = count_traces(n_max, k, free)
    acc = {"traces": 0, "applies": 0, "distinct_judged": 0, "fresh_cases": 0, "disagreements": 0, "by_status": {},
           "control_differences": 0, "examples": [], "crashed_traces": 0, "crashes": []}

    def add(part: dict) -> None:
        for f in ("traces", "applies", "distinct_judged", "fresh_cases", "disagreements", "control_differences"):
            acc[f] += part[f]
        for st, n in part["by_status"].items():
            acc["by_status"][st] = acc["by_status"].get(st, 0) + n
        acc["examples"] = (acc["examples"] + part["examples"])[:max_examples]

    t0 = time.perf_counter()
    if worker is None:
        add(_walk(lib, name, cfg, n_max, k, free, control, 0, total, max_examples, {}))
    pos, size = (total, CHUNK) if worker is None else (0, CHUNK)
    while pos < total:
        n = min(size, total - pos)
        out = worker.call(_walk_op, name, cfg, n_max, k, free, control, pos, n, max_examples)
        if not isinstance(out, Crash):
            add(out)
            pos += n
            continue
        at = worker.last_mark if n > 1 else pos
        if at is None or not pos <= at < pos + n or (out.signal == "hang" and n > 1):
            size = 1  # a worker that cannot mark, or a call out of time (slow, or hung on one trace): one per call
            continue
        if at > pos:  # the traces before it in the call: judged again (their answers died with the worker)
            size = at - pos
            continue
        trace = trace_of(next(iter_traces_from(n_max, k, free, at)), k, cfg)
        rec = crash_record(trace, out)
        acc["traces"] += 1
        acc["crashed_traces"] += 1
        acc["by_status"][rec["class"]] = acc["by_status"].get(rec["class"], 0) + 1
        if len(acc["crashes"]) < max_examples:
            acc["crashes"].append(rec)
        pos, size = pos + 1, CHUNK
    wall = time.perf_counter() - t0
    return {"config": name, **{**DEFAULT, **cfg}, "breakers": list(cfg.get("breakers", ())), "n_max": n_max,
            "alphabet": k, "free": free, "traces": acc["traces"], "expected_traces": total,
            "count_ok": acc["traces"] == total, "applies": acc["applies"], "distinct_judged": acc["distinct_judged"],
            "fresh_cases": acc["fresh_cases"], "disagreements": acc["disagreements"], "by_status": acc["by_status"],
            "control_differences": acc["control_differences"], "examples": acc["examples"],
            "crashed_traces": acc["crashed_traces"], "crashes": acc["crashes"], "wall_seconds": round(wall, 3)}


def enumerate_traces(n_max: int, lib, k: int = 2, configs=None, free: bool = True, control: bool = True,
                     max_examples: int = 5, isolate: bool = True) -> dict:
    """Every configuration's run_config, with the totals and the subject's identity; with isolate (the default),
    in an isolation worker on lib, so a trace the subject dies on is judged (class crash) and the rest too."""
    names = list(CONFIGS) if configs is None else list(configs)
    with contextlib.ExitStack() as stack:
        worker = stack.enter_context(Worker(lib.spec, lib)) if isolate else None
        runs = [run_config(nm, CONFIGS[nm], n_max, lib, k, free, control, max_examples, worker) for nm in names]
    return {"schema": "dryz.trace-enumeration/1", "subject": lib.identity, "n_max": n_max, "alphabet": k,
            "configs": runs, "traces": sum(r["traces"] for r in runs),
            "applies": sum(r["applies"] for r in runs), "disagreements": sum(r["disagreements"] for r in runs),
            "crashed_traces": sum(r["crashed_traces"] for r in runs),
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
    verdict = "VOID (trace count)" if not r["count_ok"] else ("CRASH" if r["crashed_traces"] else "DISAGREE"
                                                               if r["disagreements"] else "AGREE")
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
        for x in c["crashes"][:3]:
            print(f"    {x['class']} on {x['spelled']}: {x['detail']}")
    print(f"total     traces {r['traces']:,}  applies {r['applies']:,}  disagreements {r['disagreements']:,}  "
          f"wall {r['wall_seconds']:.2f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
    if not r["count_ok"]:
        return 2
    return 1 if r["disagreements"] or r["crashed_traces"] else 0


if __name__ == "__main__":
    sys.exit(main())
