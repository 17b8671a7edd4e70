"""`dryz explain CASE`: one case as a person reads it — the window with positions, the restart sequence that set
rep_limit, and per candidate the matched suffix in the history, L by each oracle and by the library, the expected
and observed logit, and where they differ. The verdict is check()'s (run in a child process, as `dryz check`
runs it); this module only lays it out, within a terminal's width (100 columns off one): a window too long for
one line shows runs of equal tokens as `a×128` and only the stretches around the repeats, the restart and the
window's end, the rest counted as `…n…`.
"""

from __future__ import annotations

import math

from .case import Case
from .symbols import SYMBOLS
from .config import case_config
from .oracle import MATCH_LENGTHS, verdict_keys
from .oracle.promise_text import promised_rep_limit
from .oracle.promised import restart_occurrences
from .oracle.shipped import rep_limits
from .subject.identity import subject_line
from .vocab_cases import pieces_for_people, vocab_of


def _sym(t: int) -> str:
    return SYMBOLS[t] if 0 <= t < len(SYMBOLS) else "?"


def matched_at(window: list[int], z: int, L: int) -> list[int]:
    """Window positions j holding z whose L preceding tokens equal the window's last L tokens (where emitting z
    repeats them): the places an L the verdict reports comes from. Checks a given L, computes none."""
    w = len(window)
    return [j for j in range(max(L, 1), w) if window[j] == z and window[j - L:j] == window[w - L:]]


def _labeler(case: Case):
    """(token -> label, column width): a symbol, or for a real vocabulary the token's piece (as printed, escaped,
    at most 10 characters) with its id."""
    if case.vocab is None:
        return _sym, 4
    pieces = pieces_for_people(case)

    def lab(t: int) -> str:
        p = pieces[t].decode("utf-8", errors="replace") if 0 <= t < len(pieces) else "?"
        p = repr(p)[1:-1]
        return f"{p[:10]}#{t}"
    return lab, 18


# -- long windows: run-length runs, the window around what matters, lines within a terminal's width ----------------

WIDTH = 100   # columns, off a terminal (on one: the terminal's own width)
RUN = 3       # a run of this many equal tokens or more is one cell, `a×128`
AROUND = 3    # tokens kept on each side of a position that matters (the repeat's ends, the restart, the end)
PREFIX = 11   # "position   ", "token      ": the table's label column


def runs(tokens: list) -> list[tuple[int, int]]:
    """(start, length) of each run of equal tokens, in order."""
    out = []
    for i, t in enumerate(tokens):
        if out and tokens[out[-1][0]] == t:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((i, 1))
    return out


def run_length(labels: list[str], keep=None) -> list[tuple[int, str]]:
    """(first index, text) cells for the labels: a run of RUN or more equal labels is one cell `x×n`; with `keep`
    (a bool per index), the runs with no kept index are one `…n…` cell per gap (n labels not shown)."""
    cells, gap = [], 0
    for start, n in runs(labels):
        if keep is not None and not any(keep[start:start + n]):
            gap += n
            continue
        if gap:
            cells.append((-1, f"…{gap}…"))
            gap = 0
        if n >= RUN:
            cells.append((start, f"{labels[start]}×{n}"))
        else:
            cells.extend((start + k, labels[start]) for k in range(n))
    if gap:
        cells.append((-1, f"…{gap}…"))
    return cells


def squeeze(labels: list[str], budget: int) -> str:
    """The labels joined by spaces, run-length where that helps, the middle elided to fit `budget` columns."""
    cells = [t for _, t in run_length(labels)]
    text = " ".join(cells)
    if len(text) <= budget or len(cells) <= 2:
        return text
    keep = max(1, (budget - 8) // 2)
    head, tail = [], []
    while cells and len(" ".join(head + [cells[0]])) <= keep:
        head.append(cells.pop(0))
    while cells and len(" ".join([cells[-1]] + tail)) <= keep:
        tail.insert(0, cells.pop())
    hidden = sum(int(c.split("×")[1]) if "×" in c else 1 for c in cells)
    return " ".join(head + [f"…{hidden}…"] + tail) if cells else " ".join(head + tail)


def window_rows(labels: list[str], points: list[int], cw: int, width: int) -> list[str]:
    """The position/token table of a window too long for one line: the positions within AROUND of each point
    (window indices that matter), runs of equal tokens as `a×n`, elided stretches as `…n…`, wrapped to width."""
    w = len(labels)
    keep = [False] * w
    for q in points:
        for j in range(max(0, q - AROUND), min(w, q + AROUND + 1)):
            keep[j] = True
    cells = []
    for start, text in run_length(labels, keep):
        pos = "" if start < 0 else str(start - w)
        cells.append((pos, text, max(cw, len(pos) + 1, len(text) + 1)))
    rows, line = [], []
    for c in cells:
        if line and PREFIX + sum(x[2] for x in line) + c[2] > width:
            rows.append(line)
            line = []
        line.append(c)
    rows.append(line)
    out = []
    for i, line in enumerate(rows):
        out.append(("position   " if i == 0 else " " * PREFIX) + "".join(f"{p:>{n}}" for p, _, n in line))
        out.append(("token      " if i == 0 else " " * PREFIX) + "".join(f"{t:>{n}}" for _, t, n in line))
    return out


def wrap(line: str, width: int, indent: int = 12) -> list[str]:
    """A header line wrapped at spaces to width, continuation lines indented."""
    import textwrap
    if len(line) <= width:
        return [line]
    return textwrap.wrap(line, width, subsequent_indent=" " * indent, break_long_words=False,
                         break_on_hyphens=False) or [line]


def terminal_width() -> int:
    """The terminal's width when stdout is one (at least 60 columns), else WIDTH."""
    import shutil
    import sys
    if not sys.stdout.isatty():
        return WIDTH
    return max(60, shutil.get_terminal_size((WIDTH, 24)).columns)


def explain(case: Case, verdict: dict, subject_line: str, color: bool = False, width: int | None = None,
            lib=None) -> str:
    """The table of one case. lib: the subject whose vocabulary gives a vocab case's restart sequences (the one
    that judged it)."""
    import numpy as np

    width = width or terminal_width()
    hi = (lambda s: f"\x1b[7m{s}\x1b[0m") if color else (lambda s: f"[{s}]")
    bold = (lambda s: f"\x1b[1m{s}\x1b[0m") if color else (lambda s: s)
    nxt = (lambda s: f"\x1b[1;4m{s}\x1b[0m") if color else (lambda s: f"<{s}>")
    abi = verdict.get("abi", 7)
    cfg = case_config(case, abi, lib.caps.deviations if lib is not None else (),
                      vocab_of(case, lib) if case.vocab is not None else None)
    lab, cw = _labeler(case)
    h = list(case.history)
    w_len = cfg.window_length(len(h))
    window = h[len(h) - w_len:] if w_len else []
    head = [f"class {verdict['class']}  ({verdict.get('detail') or 'the library agrees with both oracles'})",
            f"subject     {subject_line}",
            f"parameters  multiplier {case.multiplier:g}  base {case.base:g}  allowed_length {case.allowed_length}  "
            f"penalty_last_n {case.penalty_last_n}  breakers {list(case.breakers)}"
            + (f"  n_ctx_train {case.n_ctx_train}" if abi == 8 else "")]
    lines = [bold(ln) if i == 0 and j == 0 else ln for i, x in enumerate(head) for j, ln in enumerate(wrap(x, width))]
    summary = squeeze([lab(t) for t in h], 40) if PREFIX + len(h) * (cw // 2 + 1) > width else ""
    lines += wrap(f"history     {len(h)} tokens{f' ({summary})' if summary else ''}; window: the last {w_len}"
                  + ("" if cfg.enabled else " (DRY is off for these parameters)"), width)
    keys = verdict_keys()  # every registered oracle's L, the primary first
    lib_L = verdict.get("library_L") or [None] * len(verdict["candidates"])
    differing = {d["id"] for d in verdict.get("differing", [])}
    many = len(verdict["candidates"]) > 12
    shown = [i for i, z in enumerate(verdict["candidates"]) if not many or (
        any(verdict[k][i] for k in keys) or lib_L[i] or z in differing
        or verdict["expected_logits"][i] != verdict["observed_logits"][i] or verdict["expected_logits"][i] != 0)]
    long = bool(window) and PREFIX + len(window) * cw > width
    points = [len(window) - 1]  # the window's end: the suffix every repeat repeats
    restart = []
    if window:
        W = np.array([window], dtype=np.int64)
        if cfg.seqs:
            rep = int(rep_limits(W, cfg.seqs)[0])
            occ = [o for o in restart_occurrences(window, cfg.seqs) if o[0] - o[1] == rep]
            if occ:
                i, k, seq = min(occ)
                points.append(len(window) - 1 - i)
                restart.append(f"restart     {''.join(lab(t) for t in seq)!r} with its head at {-1 - i} sets "
                               f"rep_limit {rep} (the {rep} token(s) after it)")
            else:
                restart.append(f"restart     no restart sequence completes in the window: rep_limit {rep}")
        for i in shown:
            a = verdict["oracle_L"][i]
            js = matched_at(window, verdict["candidates"][i], a) if a else []
            if js:
                points += [js[-1], js[-1] - a]
        if not long:
            lines.append("position   " + "".join(f"{i - len(window):>{cw}}" for i in range(len(window))))
            lines.append("token      " + "".join(f"{lab(t):>{cw}}" for t in window))
        else:
            lines += window_rows([lab(t) for t in window], points, cw, width)
            lines += wrap(" " * PREFIX + "(x×n: n x's in a row, at the first one's position; …n…: n tokens not "
                          "shown)", width, PREFIX + 1)
        lines += restart
        if cfg.text is not None and cfg.text.breakers:
            t = cfg.text
            prom, occ = promised_rep_limit(window, t.pieces, t.breakers)
            text = repr(b"".join(t.pieces[x] for x in window).decode("utf-8", errors="replace"))
            room = max(20, width - 60)
            if len(text) > room:  # the text's end, where the repeats and breakers that matter are
                text = "…" + text[-room:]
            lines.append(f"text        {text} (the tokens' pieces, as a client prints them)")
            lines.append(f"            the text promises rep_limit {min(prom, len(window))}" + (
                f": breaker {occ[0].decode('utf-8', errors='replace')!r} spans tokens {occ[1] - len(window)}.."
                f"{occ[2] - len(window)}" if occ else ": no breaker occurs in it"))
    lines.append("")
    lines.append(f"{'candidate':<10} " + " ".join(f"{f'L({n})':>5}" for n, _ in MATCH_LENGTHS)
                 + f" {'L(lib)':>6} {'expected':>12} {'observed':>12}  where the repeat is")
    quiet = len(verdict["candidates"]) - len(shown)
    initial = dict(zip(case._ids, case._logits))
    single = {h for h, t in cfg.seqs if not t} if isinstance(cfg.seqs, (tuple, list)) else set()
    for i in shown:
        z = verdict["candidates"][i]
        a = verdict["oracle_L"][i]
        exp, obs = verdict["expected_logits"][i], verdict["observed_logits"][i]
        mark = "  <- DIFFERS" if z in differing else ""
        row = (f"{lab(z):<10} " + " ".join(f"{verdict[k][i]:>5}" for k in keys)
               + f" {'-' if lib_L[i] is None else lib_L[i]:>6} {_fmt(exp):>12} {_fmt(obs):>12}  ")
        js = matched_at(window, z, a) if a and window else []
        why = rule_of(window, z, a, case.allowed_length, exp != initial.get(z, 0.0), z in single, lab)
        if not js:
            lines.append(row + why + mark)
            continue
        j = js[-1]
        toks = [lab(t) for t in window]
        parts = (toks[:j - a], toks[j - a:j], toks[j], toks[j + 1:])
        at = f"   (at {j - len(window)})"
        full = _where(parts, (lambda x: x), (lambda x: x))
        at += f"; {why}" if why else ""
        if len(row) + len(full) + len(at) + len(mark) <= width or not long:
            lines.append(row + _where(parts, hi, nxt) + at + mark)
            continue
        # a long window: the repeat run-length, its surroundings elided; on its own line when the row is full
        fit = _compact_where(parts, width - len(row) - len(at) - len(mark))
        if fit is not None:
            lines.append(row + _where(fit, hi, nxt) + at + mark)
        else:
            lines.append(row.rstrip() + mark)
            lead = " " * PREFIX + "repeat "
            fit = _compact_where(parts, width - len(lead) - len(at), force=True)
            lines.append(lead + _where(fit, hi, nxt) + at)
    if quiet:
        lines += wrap(f"({quiet} more candidates: L 0 by both oracles and the library, logit unchanged)", width, 1)
    lines += wrap("(the repeat: [the suffix it repeats] <the candidate's earlier occurrence>, at its position)",
                  width, 1)
    if cfg.enabled:
        lines += wrap(rule_line(case, bool(single)), width, 12)
    if verdict.get("broken_promises"):
        lines.append("")
        lines.append("broken promises: " + ", ".join(verdict["broken_promises"]))
    if verdict.get("expected_sorted") is not None and verdict.get("observed_sorted") is not None and \
            verdict.get("expected_sorted") != verdict.get("observed_sorted"):  # (None: the subject reports no flag)
        lines.append(f"sorted flag: expected {verdict['expected_sorted']}, observed {verdict['observed_sorted']}"
                     "  <- DIFFERS")
    return "\n".join(lines)


def rule_of(window: list[int], z: int, L: int, allowed: int, penalized: bool, breaker: bool, lab) -> str:
    """Why a candidate's logit is what the oracles say, in words, from the verdict's L and whether the expected
    logit moved (the oracles' own figures: this computes no L and no penalty): a penalty at L 0 (allowed_length 0
    penalizes every token after the window's first), a single-token breaker (never penalized). (The oracles give
    L only where it reaches allowed_length: a shorter repeat is L 0, unpenalized.)"""
    if penalized and L == 0:
        at = [j for j in range(1, len(window)) if window[j] == z]
        where = f"{lab(z)} at {at[-1] - len(window)}: " if at else ""
        return f"{where}allowed_length 0 penalizes every token after the window's first (L 0)"
    if not penalized and breaker and L >= allowed and (L or allowed == 0) and z in window[1:]:
        return "a single-token breaker: never penalized"
    return ""


def rule_line(case: Case, breakers: bool) -> str:
    """The rule every penalty of the table comes from, with this case's parameters (Steps 3 and 4 of
    llama_sampler_dry_apply)."""
    A = case.allowed_length
    text = (f"rule        penalty {case.multiplier:g}*{case.base:g}^(L-{A}), i.e. multiplier*base^(L-allowed_length), "
            "where L >= allowed_length; L: the longest suffix of the window the candidate would repeat, capped by "
            "rep_limit (the exponent capped, as Step 4 means to keep the penalty finite)")
    if A == 0:
        text += "; allowed_length 0: every token after the window's first is penalized, at L 0 or more"
    if breakers:
        text += "; never a single-token breaker"
    return text


def _compact_where(parts, budget: int, force: bool = False):
    """The parts of a repeat's line shortened to fit `budget` columns: up to two tokens of context on each side
    (the rest as `…n…`), the repeat run-length and, if need be, its middle elided (less context first, so that the
    repeat keeps its first tokens). None when no such form fits the budget; with force, the shortest form."""
    before, rep, cand, after = parts
    fits = []
    for ctx in (2, 1, 0):
        b = ([f"…{len(before) - ctx}…"] if len(before) > ctx else []) + (before[len(before) - ctx:] if ctx else [])
        f = (after[:ctx] if ctx else []) + ([f"…{len(after) - ctx}…"] if len(after) > ctx else [])
        room = budget - len(_where((b, [], cand, f), str, str)) - 1
        r = squeeze(rep, max(room, 12))
        out = (b, [r], cand, f)
        if len(_where(out, str, str)) <= budget:
            if not r.startswith("…") or len(rep) == 0:  # the repeat's first token shown
                return out
            fits.append(out)
    if not force:
        return None
    return fits[0] if fits else out


def _where(parts, hi, nxt) -> str:
    """before [repeat] <candidate> after, each a list of token labels (hi, nxt: how the repeat and the candidate
    are marked)."""
    before, rep, cand, after = parts
    return " ".join(before) + (" " if before else "") + hi(" ".join(rep)) + " " + nxt(cand) + \
        (" " + " ".join(after) if after else "")


def _fmt(x) -> str:
    if isinstance(x, str):
        return x
    return f"{x:g}" if math.isfinite(x) else ("-inf" if x < 0 else "inf")


def crash_lines(v: dict) -> str:
    """dryz explain of a verdict of class crash or memory: the detail (a sanitizer report's summary) and the
    subject's last words (a report's first frames, not the tail of its shadow-byte legend)."""
    tail = "\n".join(f"  #{i} {f}" for i, f in enumerate(v["frames"])) if v.get("frames") else v.get("stderr", "")
    return f"class {v['class']}: {v.get('summary') or v['detail']}\n{tail}"


def trace_explain_text(path: str, kind: str, trace, v: dict, ident: dict, color: bool) -> str:
    """dryz explain of a trace: per apply, the tokens the sampler holds, the equivalent single case and its
    verdict; then dryz explain's table of the first apply that does not agree in full."""
    brk = f", breakers {list(trace.breakers)}" if trace.breakers else ""
    lines = [f"dryz explain: {path} ({kind})", f"trace     {trace.spelled()}",
             f"config    alphabet {trace.alphabet}, penalty_last_n {trace.penalty_last_n}, allowed_length "
             f"{trace.allowed_length}, multiplier {trace.multiplier:g}, base {trace.base:g}{brk}"]
    if v["class"] in ("crash", "memory"):
        return "\n".join(lines + [crash_lines(v)])
    first = v["first_bad_apply"]
    lines += [f"subject   {subject_line(ident)}",
              f"class     {v['class']}" + ("" if first is None else f" (first apply that disagrees: {first})")]
    for a in v["applies"]:
        case = Case.from_json(a["case"])
        fresh = {True: "identical", False: "DIFFERS", None: "not run"}[a["fresh_equal"]]
        lines.append(f"apply {a['apply']} (event {a['event']}): holds {case.symbols!r:<12} class {a['class']:<14} "
                     f"fresh sampler {fresh}  equivalent case {case.dumps()}")
    shown = next((a for a in v["applies"] if a["class"] != "agree"), None)
    if shown is not None:
        av = dict(shown["verdict"], abi=ident.get("init_dry_abi", 7))
        lines += [f"\napply {shown['apply']}, its equivalent case:",
                  explain(Case.from_json(shown["case"]), av, subject_line(ident), color)]
    return "\n".join(lines)


def requests_explain_text(path: str, kind: str, requests, v: dict, ident: dict, color: bool) -> str:
    """dryz explain of a request sequence: per request (sent in turn to one fresh instance, each judged on its own)
    its history and class; then dryz explain's table of every request that does not agree."""
    lines = [f"dryz explain: {path} ({kind})", f"requests  {requests.spelled()}",
             "          (sent in turn to one fresh instance; each judged on its own: llama.cpp's requests are "
             "independent)", f"subject   {subject_line(ident)}", f"class     {v['class']}"]
    shown = []
    config = lambda c: (f"alphabet {c.alphabet}, penalty_last_n {c.penalty_last_n}, allowed_length "  # noqa: E731
                        f"{c.allowed_length}, multiplier {c.multiplier:g}, base {c.base:g}"
                        + (f", breakers {list(c.breakers)}" if c.breakers else "")
                        + (f", candidates {list(c.candidates)}" if c.candidates is not None else ""))
    one = len({config(c) for c in requests.requests}) == 1
    for r, case in zip(v["requests"], requests.requests):
        what = r.get("class") or f"not judged: {r['not_judged']}"
        lines.append(f"request {r['request']}: {case.symbols!r:<14} class {what}" + ("" if one else
                                                                                    f"  ({config(case)})"))
        if r.get("class") not in (None, "agree"):
            shown.append((r, case))
    if one:
        lines.append(f"config    {config(requests.requests[0])} (every request)")
    for r, case in shown:
        lines.append(f"\nrequest {r['request']}:")
        lines.append(crash_lines(r) if r["class"] in ("crash", "memory") else
                     explain(case, dict(r, abi=ident.get("init_dry_abi", 7)), subject_line(ident), color))
    return "\n".join(lines)
