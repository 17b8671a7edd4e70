"""`dryz minimize`, everything but option parsing: read the input (a case, a trace or a request sequence), shrink it
on the selected subject (dryz.shrink), write the reproducer as a corpus entry, say what was written and how short it
is."""

from __future__ import annotations

import os
import shlex

from .corpus import USER_DIR, write_entry
from .files import fail
from .inputs import (load_case_file, load_requests_file, load_subject, load_trace_file, on_vocab, say, selected_spec,
                     spelled)
from .output import write_json
from .render import dryz_on, ending, here
from .shrink import (UNEXPLAINED, NothingToMinimize, flatten, minimize_case, minimize_cause, minimize_requests,
                     minimize_trace_input)


def cause_option(cause, fitted) -> tuple | None:
    """(cause, fitted) from --cause and --fitted (each name checked as it was parsed); None without --cause."""
    fitted = tuple(fitted)
    if cause is None:
        if fitted:
            fail("--fitted: only with --cause (the cause to keep)")
        return None
    if cause != UNEXPLAINED and cause not in fitted:
        fail(f"--cause {cause!r}: one of the --fitted causes ({', '.join(fitted) or 'none given'}) or {UNEXPLAINED}")
    return cause, fitted


def command(path, read_as, corpus_dir, isolate, json_path, vocab, breakers, as_trace, echo, cause=None,
            fitted=()) -> None:
    kept = cause_option(cause, fitted)
    s = None if as_trace else load_requests_file(path, read_as)
    if s is not None:
        return _requests(path, s, corpus_dir, json_path, echo, kept)
    t = load_trace_file(path, read_as, as_trace, breakers)
    if t is not None and kept is not None:
        fail("--cause: causes are fitted on cases, not traces")
    log = (lambda msg: say(f"  {msg}"))
    kind = t[1] if t is not None else read_as
    try:
        if t is not None:
            trace, kind = t
            lib = load_subject()
            ev, toks = trace.size()
            m = minimize_trace_input(trace, lib, log, announce=lambda shown: echo(
                f"minimizing {path} ({kind}): class {shown}, {ev} events, {toks} tokens"))
        else:
            case, kind = load_case_file(path, read_as, vocab, breakers)
            case = on_vocab(case, vocab)
            lib = load_subject()
            say_start = (lambda shown, iso: echo(f"minimizing {path} ({kind}): class {shown}, {len(case.history)} "
                                                 f"tokens{', isolated' if iso else ''}"
                                                 + (f", keeping the cause {kept[0]}" if kept else "")))
            if kept is not None:
                m = minimize_cause(case, kept[0], kept[1], lib, log=log, announce=say_start)
            else:
                m = minimize_case(case, lib, isolate, log=log, announce=say_start)
    except NothingToMinimize as e:
        fail(f"{path} (read as a {kind}): {e}")
    entry, written = _written(m, path, kind, lib, corpus_dir, json_path)
    if t is not None:
        echo(minimized_trace_text(m))
    else:
        echo(f"reproducer: {len(m.case.history)} tokens {spelled(m.case)!r}, shortest: {m.shortest}, "
             f"{m.calls} predicate calls, {m.seconds:.1f} s")
        for why, n in getattr(m, "not_judged", {}).items():  # shortest among the cases this subject expresses
            echo(f"not judged: {n} candidate(s): {why}")
    on = dryz_on(selected_spec(), os.environ.get("DRYZ_FAULT"))
    entry_path = shlex.quote(here(written))
    form = "pytest" if t is not None or getattr(m, "case", None) is not None and m.case.vocab is not None \
        else "test-sampling"
    steps = [(f"{on} explain {entry_path}", "the reproducer laid out: L by each oracle and by the subject"),
             *(() if os.environ.get("DRYZ_FAULT") else
               ((f"dryz export {entry_path} --as {form}", "the reproducer as a test in its target's own style"),)),
             (f"{on} replay {shlex.quote(here(written.parent))}", "every reproducer of that folder judged again")]
    echo(ending({entry["expect"]: 1}, [f"{here(written)} (the reproducer, a corpus entry)"]
                + ([f"{here(json_path)} (how it was shrunk)"] if json_path else []), steps))


def _written(m, path, kind, lib, corpus_dir, json_path):
    """The reproducer written as a corpus entry (and how it was shrunk, with --json): (entry, its path)."""
    entry = m.entry(str(path), kind, lib.identity)
    written = write_entry(corpus_dir or USER_DIR, entry)
    if json_path:
        write_json(json_path, {"tool": "dryz minimize", "input": str(path), "kind": kind, "class": entry["expect"],
                               "written": str(written), "shortest": m.shortest, "predicate_calls": m.calls,
                               "seconds": round(m.seconds, 2), "subject": lib.identity,
                               "not_judged": getattr(m, "not_judged", {})})
    return entry, written


def _requests(path, s, corpus_dir, json_path, echo, kept) -> None:
    """A request sequence shrunk (keeping its failure, or the cause --cause names), written as a corpus entry."""
    seq, kind = s
    lib = load_subject()
    why = lib.runs_sequences()
    if why is not None:
        fail(f"{path}: the request sequence cannot be run: {why}")
    try:
        m = minimize_requests(seq, lib, *(kept or (None, ())), log=lambda msg: say(f"  {msg}"),
                              announce=lambda shown, iso: echo(
                                  f"minimizing {path} ({kind}): class {shown}, {len(seq)} requests, {seq.tokens()} "
                                  "tokens" + (f", keeping the cause {kept[0]}" if kept else "")))
    except NothingToMinimize as e:
        fail(f"{path} (read as a {kind}): {e}")
    entry, written = _written(m, path, kind, lib, corpus_dir, json_path)
    echo(f"reproducer: {len(m.requests)} requests {m.requests.spelled()!r} ({m.requests.tokens()} tokens), shortest: "
         f"{m.shortest}, {m.calls} predicate calls, {m.seconds:.1f} s")
    for i, (c, r) in enumerate(zip(m.requests.requests, entry["per_request"]), 1):
        echo(f"  request {i} {c.symbols!r}: {r['class']}; " + "; ".join(
            f"{k} {r[k].get('logits', r[k])}" for k in ("llama.cpp", "subject")))
    entry_path = shlex.quote(here(written))
    on = dryz_on(selected_spec(), os.environ.get("DRYZ_FAULT"))
    echo(ending({entry["expect"]: 1}, [f"{here(written)} (the reproducer, a corpus entry)"]
                + ([f"{here(json_path)} (how it was shrunk)"] if json_path else []),
                [(f"{on} explain {entry_path}", "the reproducer laid out: each request and its verdict"),
                 (f"{on} replay {shlex.quote(here(written.parent))}", "every reproducer of that folder judged again")]))


def minimized_trace_text(m) -> str:
    """What `dryz minimize` prints for a shrunk trace (shrink.MinimizedTrace): the passes and the reproducer."""
    return ("passes    " + "  ".join(f"{n} {p['wins']}/{p['runs']} ({p['calls']} calls)" for n, p in m.passes.items())
            + f"\nreproducer: {m.trace.spelled()!r} ({len(m.trace.events)} events, {len(flatten(m.trace).events)} "
            f"with one token per accept), shortest: {m.shortest}, {m.calls} predicate calls, {m.seconds:.1f} s")
