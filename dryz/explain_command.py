"""`dryz explain`, everything but option parsing: read the input (a case, a trace or a request sequence), judge it
on the selected subject and lay it out as a table (dryz.explain); a crash says how the subject died."""

from __future__ import annotations

from .explain import crash_lines, explain as render, requests_explain_text, trace_explain_text
from .inputs import (judge_case_file, judge_requests_file, judge_trace_file, load_case_file, load_requests_file,
                     load_subject, load_trace_file, on_vocab)
from .subject.identity import subject_line


def command(path, read_as, color: bool, vocab, breakers, as_trace, echo) -> int:
    """Print the explanation; the verdict's exit code."""
    s = None if as_trace else load_requests_file(path, read_as)
    if s is not None:
        rc, out = judge_requests_file(*s)
        echo(requests_explain_text(path, s[1], s[0], out["verdict"], out.get("subject") or {}, color))
        return rc
    t = load_trace_file(path, read_as, as_trace, breakers)
    if t is not None:
        rc, out = judge_trace_file(*t)
        echo(trace_explain_text(path, t[1], t[0], out["verdict"], out.get("subject") or {}, color))
        return rc
    case, kind = load_case_file(path, read_as, vocab, breakers)
    case = on_vocab(case, vocab)
    rc, out = judge_case_file(case, kind)
    v = out["verdict"]
    ident = out.get("subject") or {}
    if v["class"] in ("crash", "memory"):
        echo(crash_lines(v))
        return rc
    v["abi"] = ident.get("init_dry_abi", 7)
    echo(f"dryz explain: {path} ({kind})")
    echo(render(case, v, subject_line(ident), color, lib=load_subject() if case.vocab is not None else None))
    return rc
