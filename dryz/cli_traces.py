"""The trace side of the dryz commands (dryz/cli.py calls these): `exhaustive --traces N`, reading a trace file
for `check`, `explain` and `minimize`, and judging trace corpus entries in `replay`.

A trace file is a dryz.trace/1 JSON object, a dryz.corpus/1 entry with a `trace`, or (`check --trace`, a fuzz
crash file of `dryz fuzz --traces`) bytes decoded by dryz.fuzz.traces.decode_trace.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

import click

from .inputs import fail, is_fuzz_artifact, load_subject, parse_json_file, read, say

TRACE_ALPHABET = 2   # the trace space's alphabet (dryz/enumerate/traces.py's default)
MAX_TRACE_EVENTS = 9  # --traces N: 1..9 (N=9: 2,492,781 traces per configuration, ~28 times N=7, 8.6 s here)


# -- exhaustive --traces N --------------------------------------------------------------------------------------


def validate_traces_option(n, shard, resume_path) -> None:
    if n is None:
        return
    if not 1 <= n <= MAX_TRACE_EVENTS:
        fail(f"--traces must be in 1..{MAX_TRACE_EVENTS} events, got {n}")
    if shard is not None or resume_path is not None:
        fail("--traces runs with a whole, fresh space (not with --shard or --resume)")


def add_traces(result: dict, n: int, json_path) -> dict:
    """Run every trace of 1..n events (every configuration of dryz.enumerate.traces) on the certificate's
    subject, put its counts in result["traces"], judge the certificate again and rewrite it."""
    from .enumerate import certificate as cert
    from .enumerate.traces import enumerate_traces
    from .output import write_json
    lib = load_subject()
    from .subject.protocol import same_subject
    if not same_subject(lib.identity, result["subject"]):
        fail("the trace space would run on another subject than the certificate's")
    try:
        r = enumerate_traces(n, lib, TRACE_ALPHABET)
    except KeyboardInterrupt:  # the history space's certificate is already written: mark it not a certificate
        result["verdict"] = "interrupted"
        result["interrupted"] = {"note": "the history space finished; the trace space (--traces) was interrupted: "
                                         "not a certificate, and not resumable (run the command again)"}
        write_json(json_path, result)
        click.echo(f"dryz exhaustive: INTERRUPTED in the trace space; {json_path} is marked interrupted (not a "
                   "certificate)", err=True)
        sys.exit(130)
    result["traces"] = cert.traces_json(r)
    result["verdict"], result["checks"] = cert.judge(result)
    result["wall_seconds"] = round(result["wall_seconds"] + r["wall_seconds"], 3)
    write_json(json_path, result)
    return result


def traces_text(tr: dict) -> str:
    from .subject.symbols import SYMBOLS
    k = tr["alphabet"]
    accepts = ", ".join(f"accept {SYMBOLS[i]}" for i in range(k))
    lines = [f"traces    every trace of 1..{tr['n_max']} events over {{{accepts}, apply, reset, clone}}"
             f"{' (+ free last)' if tr['free'] else ''}, every symbol a candidate at each apply"]
    for c in tr["configs"]:
        brk = f" breakers={c['breakers']}" if c["breakers"] else ""
        extra = f" allowed={c['allowed_length']}" if c["allowed_length"] != 1 else ""
        lines.append(f"  {c['config']:<9} last_n={c['penalty_last_n']:<3}{brk}{extra}  traces {c['traces']:>9,} "
                     f"(closed form {c['expected_traces']:,})  applies {c['applies']:>9,}  "
                     f"disagreements {c['disagreements']:,}  control differences {c['control_differences']}")
    lines.append(f"  {'total':<9} {'':<10} traces {tr['traces']:>9,}  applies {tr['applies']:,}  "
                 f"disagreements {tr['disagreements']:,}  wall {tr['wall_seconds']:.2f} s")
    for c in tr["configs"]:
        if c["examples"]:
            ex = c["examples"][0]
            lines.append(f"  witness ({c['config']}): {ex['status']} at apply {ex['first_bad_apply']}: "
                         f"{ex['spelled']}")
    return "\n".join(lines)


# -- reading a trace file ----------------------------------------------------------------------------------------


def load_trace_file(path: str, read_as: str = "auto", as_trace: bool = False):
    """(Trace, kind) when the file is a trace (trace JSON, a trace corpus entry, or with as_trace fuzz bytes for
    decode_trace), else None (the file is for the Case reader). as_trace: anything else is an error."""
    from .corpus import CORPUS_SCHEMA, CorpusError, validate_entry
    from .trace import TRACE_SCHEMA, Trace, TraceError
    raw = read(path)
    # Fuzz bytes only with --as bytes or for a libFuzzer crash file's name; anything else is JSON (bad JSON, or
    # JSON in another encoding, is one line from parse_json_file, never bytes by default).
    if read_as == "bytes" or (read_as == "auto" and is_fuzz_artifact(path)):
        if not as_trace:
            return None  # a case fuzz input: the Case reader decodes it
        from .fuzz.traces import decode_trace
        try:
            return decode_trace(raw), "trace fuzz input"
        except TraceError as e:
            fail(f"{path}: decodes to an invalid trace: {e}")
    data = parse_json_file(path, raw)
    if isinstance(data, dict) and data.get("schema") == TRACE_SCHEMA:
        try:
            return Trace.from_json(data), "trace JSON"
        except TraceError as e:
            fail(f"{path}: {e}")
    if isinstance(data, dict) and data.get("schema") == CORPUS_SCHEMA and "trace" in data and "case" not in data:
        try:
            return validate_entry(data, path), "trace corpus entry"
        except CorpusError as e:
            fail(str(e))
    if as_trace:
        fail(f"{path}: not a trace (a {TRACE_SCHEMA} object or a corpus entry with a trace)")
    return None


# -- judging ------------------------------------------------------------------------------------------------------


def verdict_json(v) -> dict:
    out = {"class": v.klass, "status": v.status, "first_bad_apply": v.first_bad_apply,
           "applies": [a.to_json() for a in v.applies]}
    crash = getattr(v, "crash", None)
    if crash:
        out.update(crash)
    return out


def judge_trace(trace, kind: str, isolate: bool = True) -> tuple[int, dict]:
    """check_trace on the selected subject, in an isolation worker unless isolate is False: (exit code, the JSON
    dryz check prints). A trace that kills or hangs the subject's process is class crash (exit 1)."""
    from .check import check_trace_in
    from .oracle.trace_model import check_trace
    from .subject.isolation import Worker
    lib = load_subject()
    if isolate:
        with Worker(lib.spec, lib) as w:
            v = check_trace_in(w, trace)
    else:
        v = check_trace(trace, lib)
    out = {"input": kind, "trace": trace.to_json(), "verdict": verdict_json(v), "subject": lib.identity}
    from .check import is_finding
    return (1 if is_finding(v.klass) else 0), out


def check_cmd(trace, kind: str, isolate: bool) -> None:
    rc, out = judge_trace(trace, kind, isolate)
    click.echo(json.dumps(out, indent=2))
    sys.exit(rc)


def explain_cmd(path: str, trace, kind: str, color: bool) -> None:
    """Per apply: the tokens the sampler holds, the equivalent single case and its verdict; the first apply that
    does not agree in full (dryz explain's table of that case)."""
    from .case import Case
    from .explain import explain as render
    from .output import subject_line
    rc, out = judge_trace(trace, kind)
    v = out["verdict"]
    ident = out.get("subject") or {}
    click.echo(f"dryz explain: {path} ({kind})")
    click.echo(f"trace     {trace.spelled()}")
    brk = f", breakers {list(trace.breakers)}" if trace.breakers else ""
    click.echo(f"config    alphabet {trace.alphabet}, penalty_last_n {trace.penalty_last_n}, allowed_length "
               f"{trace.allowed_length}, multiplier {trace.multiplier:g}, base {trace.base:g}{brk}")
    if v["class"] in ("crash", "memory"):
        from .output import crash_lines
        click.echo(crash_lines(v))
        sys.exit(rc)
    click.echo(f"subject   {subject_line(ident)}")
    first = v["first_bad_apply"]
    click.echo(f"class     {v['class']}" + ("" if first is None else f" (first apply that disagrees: {first})"))
    for a in v["applies"]:
        case = Case.from_json(a["case"])
        fresh = {True: "identical", False: "DIFFERS", None: "not run"}[a["fresh_equal"]]
        click.echo(f"apply {a['apply']} (event {a['event']}): holds {case.symbols!r:<12} class {a['class']:<14} "
                   f"fresh sampler {fresh}  equivalent case {case.dumps()}")
    shown = next((a for a in v["applies"] if a["class"] != "agree"), None)
    if shown is not None:
        av = dict(shown["verdict"], abi=ident.get("init_dry_abi", 7))
        click.echo(f"\napply {shown['apply']}, its equivalent case:")
        click.echo(render(Case.from_json(shown["case"]), av, subject_line(ident), color))
    sys.exit(rc)


def minimize_cmd(path: str, trace, kind: str, corpus_dir) -> None:
    """Shrink a trace that does not agree (events, tokens, arrays, configuration) to a shortest one that fails
    the same way (TraceVerdict.signature) on the same subject, and write it as a corpus entry."""
    from .check import fault
    from .corpus import USER_DIR, CorpusError, trace_entry_json, write_entry
    from .oracle.trace_model import check_trace
    from .shrink import flatten, reduce_trace, trace_signature_in
    t0 = time.perf_counter()
    rc, out = judge_trace(trace, kind)
    klass = out["verdict"]["class"]
    if klass in ("crash", "memory"):
        why = out["verdict"].get("summary") or out["verdict"]["detail"]
        fail(f"{path}: the trace crashes the library ({why}); minimizing a crashing trace is not supported "
             "(dryz check shows it)")
    if klass == "agree":
        fail(f"{path} (read as a {kind}): the trace agrees with the oracles; nothing to minimize")
    lib = load_subject()
    first = check_trace(trace, lib)
    ev, toks = trace.size()
    click.echo(f"minimizing {path} ({kind}): class {first.klass}, {ev} events, {toks} tokens")
    small, shortest, calls, stats = reduce_trace(trace, first.signature(), trace_signature_in(lib),
                                                 log=lambda m: say(f"  {m}"))
    from dataclasses import replace
    small = replace(small, note="")
    seconds = time.perf_counter() - t0
    v = check_trace(small, lib)
    passes = {name: {"runs": s.runs, "wins": s.wins, "calls": s.calls} for name, s in stats.items()}
    provenance = {"found_by": "minimize", "minimized_from": str(path), "input_kind": kind,
                  "original_events": ev, "original_tokens": toks, "predicate_calls": calls,
                  "one_token_events": len(flatten(small).events), "passes": passes,
                  "seconds": round(seconds, 2), "fault": fault()}
    data = trace_entry_json(small, v, expect=v.klass, shortest=shortest, provenance=provenance,
                            subject=lib.identity)
    try:
        written = write_entry(corpus_dir or USER_DIR, data)
    except CorpusError as e:
        fail(str(e))
    click.echo("passes    " + "  ".join(f"{n} {p['wins']}/{p['runs']} ({p['calls']} calls)"
                                         for n, p in passes.items()))
    click.echo(f"reproducer: {small.spelled()!r} ({len(small.events)} events, "
               f"{len(flatten(small).events)} with one token per accept), shortest: {shortest}, {calls} predicate "
               f"calls, {seconds:.1f} s")
    click.echo(f"written: {written}")
