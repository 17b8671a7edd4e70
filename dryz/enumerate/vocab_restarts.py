"""`dryz restarts --vocab NAME|all`: the restart sequences init_dry builds from breaker strings, on real
vocabularies, as a command: the construction probes (dryz.enumerate.vocab_probes: the independent model of
get_overlapping_token_sequences against the library, probe by probe) and the text promise
(dryz.enumerate.promise_sweep: rep_limit against the breaker as it occurs in the printed text).

A finding (exit 1) is a construction probe the library answers differently from the model, a text-promise
window whose observed rep_limit is not the model's (`construction-mismatch`), or a text-promise class that
neither the source documents nor a corpus entry already records (the same rule as `dryz fuzz`: the classes
of README's table are known behaviour, not new findings). Each finding comes with a Case over the vocabulary
that `dryz check|explain|minimize --vocab` take.

Per vocabulary the text promise runs first (about 2 s), then the construction probes (tens of seconds to
minutes). With a deadline (`--time`), no probe or breaker set starts after it; the result says what was
covered.
"""

from __future__ import annotations

import time
from ..corpus import known_classes
from ..oracle.promise_text import PROMISE_SETS
from ..oracle.restarts_vocab import restart_model
from ..subject.vendored_vocabs import vendored_names
from ..vocab_cases import construction
from .promise_sweep import promise_sweep
from .vocab_probes import _fillers, BREAKER_SUITE, compare_vocab, probe_case

CHECKS = ("construction", "promise")
# `all` runs CI's pair first (an SPM and a byte-level BPE vocabulary: the two tokenizer families whose
# construction differs most), then the others alphabetically.
FIRST = ("llama-spm", "gpt-2")


def vocab_names(specs) -> list[str]:
    """The vocabularies named (NAME, a GGUF path, or `all`: every vendored one), each once, in order."""
    out: list[str] = []
    for s in specs:
        if s == "all":
            names = vendored_names()
            out += [n for n in FIRST if n in names] + [n for n in names if n not in FIRST]
        else:
            out.append(s)
    return list(dict.fromkeys(out))


def _promise_case(v, w, deviations=()):
    """A text-promise witness (a window) as the probe observed it: X z X with z outside every restart
    sequence (of the construction the subject's deviations say), candidate z."""
    index, tokenize = construction(v, deviations)
    model = restart_model(w.breakers, index, tokenize)
    tails = {x for ts in model.seqs.values() for t in ts for x in t}
    z = next(f for f in _fillers(index, model.seqs, tails, 6) if f not in w.window)
    return probe_case(v, w.breakers, list(w.window) + [z] + list(w.window), (z,))


def _cheapest_first(v, sets, deviations=()):
    """Breaker sets in ascending order of the restart sequences the model makes from them on this vocabulary
    (what the probes cost): under a time budget, as many sets as fit are probed in full."""
    index, tokenize = construction(v, deviations)
    size = {name: len(restart_model(bs, index, tokenize).pairs()) for name, bs in sets}
    return sorted(sets, key=lambda x: size[x[0]])


def run(lib, specs, checks=CHECKS, seconds: float | None = None, log=None) -> dict:
    """Run the checks on each vocabulary; the result JSON (see the module doc). log(line) per vocabulary."""
    t0 = time.monotonic()
    deadline = None if seconds is None else t0 + seconds
    names = vocab_names(specs)
    rows: dict = {}
    findings: list = []
    partial = False
    suite = dict(BREAKER_SUITE)

    def late() -> bool:
        return deadline is not None and time.monotonic() > deadline

    def row_of(name):
        if name not in rows:
            v = lib.vocabulary(name)
            rows[name] = {"vocab": v.ref.name, "path": str(v.ref.path), "sha256": v.ref.sha256,
                          "tokens": v.n_tokens, "seconds": 0.0}
        return lib.vocabulary(name), rows[name]

    # The text promise on every vocabulary first (seconds each), then the construction probes: the specific
    # breaker sets on every vocabulary (under a time budget the cheapest first), then the union set ("all",
    # the costliest) on every vocabulary; so a time budget spreads over the vocabularies before it deepens.
    work = [("promise", n, None) for n in names if "promise" in checks]
    if "construction" in checks:
        for first in (True, False):
            sets = [x for x in BREAKER_SUITE if (x[0] != "all") == first]
            work += [("construction", n, sets) for n in names] if sets else []
    for check, name, sets in work:
        if late():
            partial = True
            break
        t = time.monotonic()
        v, row = row_of(name)
        if check == "promise":
            r = promise_sweep(name, lib=lib, deadline=deadline)
            row["promise"] = {"windows": r.counts, "vocabulary_histories": r.vocab_counts,
                              "sets_complete": r.sets_done, "sets": len(PROMISE_SETS),
                              "witnesses": {c: {"set": w.breaker_set, "breakers": w.breakers,
                                                "window": list(w.window), "text": w.text}
                                            for c, w in sorted(r.witnesses.items())},
                              **({"not_judged": r.not_judged} if r.not_judged else {})}
            partial |= not r.complete
            for cls, w in sorted(r.witnesses.items()):
                if cls == "construction-mismatch" or cls not in known_classes():
                    findings.append({"vocab": v.ref.name, "check": "promise", "klass": cls,
                                     "detail": f"breaker set {w.breaker_set} {w.breakers}, window of "
                                               f"{len(w.window)} tokens ({w.text}): {w.info}",
                                     "case": _promise_case(v, w, lib.caps.deviations).to_json()})
        else:
            if deadline is not None and len(sets) > 1:
                sets = _cheapest_first(v, sets, lib.caps.deviations)
            s = compare_vocab(name, lib, sets, deadline=deadline)
            c = row.setdefault("construction", {"probes": 0, "shadowed": 0, "disagreements": 0,
                                                "sets_complete": 0, "sets": len(BREAKER_SUITE),
                                                "sets_incomplete": []})
            c["probes"] += s.probes
            c["shadowed"] += s.shadowed
            c["disagreements"] += len(s.disagreements)
            c["sets_complete"] += sum(1 for x in s.sets if x["complete"])
            c["sets_incomplete"] += [x["set"] for x in s.sets if not x["complete"]]
            for x in s.sets:  # probes the subject could not express: counted, with why
                for why, n in x.get("not_judged", {}).items():
                    c.setdefault("not_judged", {})[why] = c.get("not_judged", {}).get(why, 0) + n
            partial |= any(not x["complete"] for x in s.sets) or len(s.sets) < len(sets)
            shown: dict = {}
            for d in sorted(s.disagreements, key=lambda d: len(d.history)):  # the shortest 3 of each kind
                shown[d.kind] = shown.get(d.kind, 0) + 1
                if shown[d.kind] > 3:
                    continue
                findings.append({"vocab": v.ref.name, "check": "construction", "klass": "construction-disagreement",
                                 "detail": f"{d.kind} probe, breaker set {d.breaker_set}: {d.hypothesis}; "
                                           f"predicted {d.predicted}, library {d.library}",
                                 "case": probe_case(v, suite[d.breaker_set], d.history, d.candidates).to_json()})
        row["seconds"] = round(row["seconds"] + time.monotonic() - t, 1)
    out = []
    for name in names:
        if name in rows:
            out.append(rows[name])
            if log:
                log(row_text(rows[name]))
        else:
            out.append({"vocab": name, "skipped": "time budget spent"})
            if log:
                log(row_text(out[-1]))
    rows = out
    return {"tool": "dryz restarts --vocab", "subject": lib.identity, "checks": list(checks),
            "vocabularies": rows, "findings": findings, "verdict": "finding" if findings else "agree",
            "partial": partial, "time_budget": seconds, "wall_seconds": round(time.monotonic() - t0, 1)}


def _counts(d: dict) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in sorted(d.items(), key=lambda kv: -kv[1])) or "none"


def row_text(row: dict) -> str:
    if "skipped" in row:
        return f"{row['vocab']:<15} not run ({row['skipped']})"
    parts = [f"{row['vocab']:<15} {row['tokens']:>7,} tokens"]
    p = row.get("promise")
    if p:
        parts.append(f"promise: {p['sets_complete']}/{p['sets']} breaker sets, windows {_counts(p['windows'])}; "
                     f"vocabulary histories {_counts(p['vocabulary_histories'])}")
    c = row.get("construction")
    if c:
        parts.append(f"construction: {c['probes']:,} probes ({c['shadowed']:,} shadowed), "
                     f"{c['sets_complete']}/{c['sets']} breaker sets, {c['disagreements']} disagreements")
    return "  ".join(parts) + f"  ({row['seconds']} s)"


def summary_text(result: dict) -> str:
    """The closing lines: each finding with its case, the verdict and what was covered."""
    import json
    lines = [f"finding ({f['vocab']}, {f['check']}): {f['klass']}: {f['detail'][:300]}\n  case: {json.dumps(f['case'])}"
             for f in result["findings"]]
    rows = result["vocabularies"]
    ran = [r for r in rows if "skipped" not in r]
    cover = f"{len(ran)} of {len(rows)} vocabularies"
    if result["partial"]:
        cover += f" (time budget {result['time_budget']:g} s: partial)"
    return "\n".join(lines + [f"verdict   {result['verdict']}: {len(result['findings'])} finding(s) over {cover}, "
                               f"{result['wall_seconds']} s"])
