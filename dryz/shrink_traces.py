"""shrink_trace(trace, predicate): a smaller Trace that still satisfies predicate, through the generic ddmin
(minimize/ddmin.py).

Passes, repeated until none changes the trace:
  flatten   every accept of n tokens becomes n one-token accepts (same libllama calls), so ddmin can drop tokens
  events    ddmin over the events (a candidate that is not a valid Trace counts as not failing)
  tokens    each accepted token lowered to the smallest id that still fails
  applies   an explicit candidate array replaced by None (every symbol), else ddmin over its entries, logits
            to 0, the sorted flag dropped
  config    breakers (ddmin), allowed_length towards 1 then 0, multiplier/base to 1/2, penalty_last_n to the
            smallest that fails, the alphabet to the smallest that fails
Then, when the result is small (<= PROVE_EVENTS one-token events, alphabet <= 3, every apply over every symbol),
every trace of fewer events in the enumerator's space (dryz/enumerate_traces.py) under the reduced
configuration is tried, shortest first: the first that fails replaces the result (and the search repeats), so
the result is a shortest witness in that space ("shortest" = fewest events with one token per accept).
Finally adjacent accepts are merged into one event (the same libllama calls, checked with the predicate).
"""

from __future__ import annotations

from dataclasses import replace

from minimize import ddmin

from .trace import Trace, TraceError

PROVE_EVENTS = 7
PROVE_BUDGET = 20000  # traces tried by the shortest-witness search, at most
MAX_CALLS = 20000


class _Budget(Exception):
    pass


class _Pred:
    """The predicate on Traces: invalid traces are False; counts calls; caches by trace."""

    def __init__(self, predicate, max_calls):
        self.predicate, self.max_calls, self.calls, self.cache = predicate, max_calls, 0, {}

    def __call__(self, t: Trace | None) -> bool:
        if t is None:
            return False
        key = t.dumps()
        if key in self.cache:
            return self.cache[key]
        if self.calls >= self.max_calls:
            raise _Budget
        self.calls += 1
        out = bool(self.predicate(t))
        self.cache[key] = out
        return out


def _make(trace: Trace, **changes) -> Trace | None:
    try:
        return replace(trace, **changes)
    except TraceError:
        return None


def flatten(trace: Trace) -> Trace:
    ev = []
    for e in trace.events:
        if e[0] == "accept":
            ev.extend(("accept", (t,)) for t in e[1])
        else:
            ev.append(e)
    return trace.with_events(ev)


def merge(trace: Trace) -> Trace:
    ev: list = []
    for e in trace.events:
        if e[0] == "accept" and ev and ev[-1][0] == "accept":
            ev[-1] = ("accept", ev[-1][1] + e[1])
        else:
            ev.append(e)
    return trace.with_events(ev)


def shrink_trace(trace: Trace, predicate, max_calls: int = MAX_CALLS, prove: bool = True, stats: dict | None = None,
                 log=None) -> Trace:
    """A smaller trace that satisfies predicate(trace) (which must hold for the input; ValueError if not).
    stats, when given, receives calls, proved_shortest and the sizes before and after."""
    P = _Pred(predicate, max_calls)
    if not P(trace):
        raise ValueError("shrink_trace: the predicate does not hold for the input trace")
    cur = trace
    proved = False
    try:
        flat = flatten(cur)
        if P(flat):
            cur = flat
        while True:
            before = cur
            cur = _events_pass(cur, P)
            cur = _tokens_pass(cur, P)
            cur = _applies_pass(cur, P)
            cur = _config_pass(cur, P)
            if log:
                log(f"shrink: {cur.size()[0]} events, {cur.size()[1]} tokens ({P.calls} calls): {cur.spelled()}")
            if cur == before:
                break
        if prove:
            cur, proved = _prove_shortest(cur, P)
    except _Budget:
        pass
    merged = merge(cur)
    try:
        if merged != cur and P(merged):
            cur = merged
    except _Budget:
        pass
    if stats is not None:
        stats.update(calls=P.calls, proved_shortest=proved, before=trace.size(), after=cur.size(),
                     after_one_token_events=len(flatten(cur).events))
    return cur


def _events_pass(t: Trace, P) -> Trace:
    r = ddmin(list(t.events), lambda evs: P(_make(t, events=tuple(evs))))
    return t.with_events(r.items)


def _tokens_pass(t: Trace, P) -> Trace:
    ev = list(t.events)
    for i, e in enumerate(ev):
        if e[0] != "accept":
            continue
        toks = list(e[1])
        for j, x in enumerate(toks):
            for v in range(x):
                trial = toks[:j] + [v] + toks[j + 1:]
                cand = _make(t, events=tuple(ev[:i] + [("accept", tuple(trial))] + ev[i + 1:]))
                if P(cand):
                    toks = trial
                    break
        ev[i] = ("accept", tuple(toks))
        t = t.with_events(ev)
    return t


def _applies_pass(t: Trace, P) -> Trace:
    for i, e in enumerate(t.events):
        if e[0] != "apply" or e[1] is None:
            continue
        ev = list(t.events)

        def with_apply(a):
            return _make(t, events=tuple(ev[:i] + [a] + ev[i + 1:]))

        if P(with_apply(("apply", None))):
            t = with_apply(("apply", None))
            continue
        sorted_tail = e[2:]
        r = ddmin(list(e[1]), lambda c: bool(c) and P(with_apply(("apply", tuple(c), *sorted_tail))))
        cands = tuple(r.items)
        if sorted_tail and P(with_apply(("apply", cands))):
            sorted_tail = ()
        zeroed = tuple((tid, 0.0) for tid, _ in cands)
        if zeroed != cands and P(with_apply(("apply", zeroed, *sorted_tail))):
            cands = zeroed
        t = with_apply(("apply", cands, *sorted_tail))
    return t


def _config_pass(t: Trace, P) -> Trace:
    if t.breakers:
        r = ddmin(list(t.breakers), lambda b: P(_make(t, breakers=tuple(b))))
        if not r.items and P(_make(t, breakers=())):
            t = replace(t, breakers=())
        else:
            t = replace(t, breakers=tuple(r.items))
        if t.breakers and P(_make(t, breakers=())):
            t = replace(t, breakers=())
    for a in (0, 1):  # smaller, never negative
        if (a < t.allowed_length or t.allowed_length < 0) and P(_make(t, allowed_length=a)):
            t = replace(t, allowed_length=a)
            break
    if (t.multiplier, t.base) != (1.0, 2.0) and P(_make(t, multiplier=1.0, base=2.0)):
        t = replace(t, multiplier=1.0, base=2.0)
    for n in range(1, min(t.penalty_last_n, 65)):
        if P(_make(t, penalty_last_n=n)):
            t = replace(t, penalty_last_n=n)
            break
    for k in range(1, t.alphabet):
        if P(_make(t, alphabet=k)):
            t = replace(t, alphabet=k)
            break
    return t


def _prove_shortest(t: Trace, P) -> tuple[Trace, bool]:
    """Search every shorter trace of the enumerator's space (one-token accepts, applies over every symbol,
    reset, clone, free last) under t's configuration, shortest first; a shorter failing one replaces t. Then,
    among the failing traces of that shortest length, take the first whose merged form has the fewest events.
    True when t is then known to be shortest in that space. Skipped (False) when the space below t holds more
    than PROVE_BUDGET traces."""
    from .enumerate.traces import count_traces, iter_traces
    flat = flatten(t)
    n = len(flat.events)
    if (n > PROVE_EVENTS or any(e[0] == "apply" and e[1] is not None for e in t.events)
            or count_traces(n, t.alphabet) > PROVE_BUDGET):
        return t, False
    best, best_merged = flat, len(merge(flat).events)
    for events in iter_traces(n, t.alphabet, free=True):
        if len(events) > len(best.events):
            break
        cand = _make(t, events=events)
        if cand is None:
            continue
        m = len(merge(cand).events)
        if len(events) == len(best.events) and m >= best_merged:
            continue  # not shorter, and merges no better
        if P(cand):
            best, best_merged = cand, m
    return best, True


# -- predicates and the command -----------------------------------------------------------------------------


def same_status(status: str, lib=None, control: bool = True):
    """The predicate 'check_trace gives this status' (e.g. mismatch) on the process's subject."""
    from .oracle.trace_model import check_trace

    def pred(t: Trace) -> bool:
        return check_trace(t, lib, control=control).status == status
    return pred


def main(argv=None) -> int:
    import argparse
    import sys
    import time
    from .oracle.trace_model import check_trace
    ap = argparse.ArgumentParser(prog="python -m dryz.shrink_traces",
                                 description="shrink a trace that does not agree to a shortest one that fails the "
                                             "same way (the same trace status) on the same subject")
    ap.add_argument("trace", help="a dryz.trace/1 JSON file")
    ap.add_argument("--json", help="write the shrunk trace here")
    a = ap.parse_args(argv)
    try:
        with open(a.trace) as f:
            t = Trace.loads(f.read())
    except (OSError, TraceError) as e:
        print(f"dryz: error: {e}", file=sys.stderr)
        return 2
    v = check_trace(t)
    if v.ok:
        print("dryz: error: the trace agrees on this subject: nothing to shrink", file=sys.stderr)
        return 2
    stats: dict = {}
    t0 = time.perf_counter()
    small = shrink_trace(t, same_status(v.status), stats=stats)
    wall = time.perf_counter() - t0
    print(f"shrunk {stats['before']} -> {stats['after']} (events, tokens), {stats['after_one_token_events']} "
          f"one-token events, shortest proven: {stats['proved_shortest']}, {stats['calls']} predicate calls, "
          f"{wall:.2f} s")
    print(small.dumps())
    if a.json:
        with open(a.json, "w") as f:
            f.write(small.dumps() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
