"""`dryz explain CASE`: one case as a person reads it — the window with positions, the restart sequence that set
rep_limit, and per candidate the matched suffix in the history, L by each oracle and by the library, the expected
and observed logit, and where they differ. The verdict is check()'s (run in a child process, as `dryz check`
runs it); this module only lays it out.
"""

from __future__ import annotations

import math

from .case import Case
from .subject.symbols import SYMBOLS


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
    from .vocab_cases import vocab_of
    pieces = vocab_of(case).pieces()

    def lab(t: int) -> str:
        p = pieces[t].decode("utf-8", errors="replace") if 0 <= t < len(pieces) else "?"
        p = repr(p)[1:-1]
        return f"{p[:10]}#{t}"
    return lab, 18


def explain(case: Case, verdict: dict, subject_line: str, color: bool = False) -> str:
    from .config import case_config
    from .oracle.shipped import rep_limits
    from .oracle.promised import restart_occurrences
    import numpy as np

    hi = (lambda s: f"\x1b[7m{s}\x1b[0m") if color else (lambda s: f"[{s}]")
    bold = (lambda s: f"\x1b[1m{s}\x1b[0m") if color else (lambda s: s)
    nxt = (lambda s: f"\x1b[1;4m{s}\x1b[0m") if color else (lambda s: f"<{s}>")
    abi = verdict.get("abi", 7)
    cfg = case_config(case, abi)
    lab, cw = _labeler(case)
    h = list(case.history)
    w_len = cfg.window_length(len(h))
    window = h[len(h) - w_len:] if w_len else []
    lines = [bold(f"class {verdict['class']}") + f"  ({verdict.get('detail') or 'the library agrees with both oracles'})",
             f"subject     {subject_line}",
             f"parameters  multiplier {case.multiplier:g}  base {case.base:g}  allowed_length {case.allowed_length}  "
             f"penalty_last_n {case.penalty_last_n}  breakers {list(case.breakers)}"
             + (f"  n_ctx_train {case.n_ctx_train}" if abi == 8 else ""),
             f"history     {len(h)} tokens; window: the last {w_len}"
             + ("" if cfg.enabled else " (DRY is off for these parameters)")]
    if window:
        cells = [f"{i - len(window):>{cw}}" for i in range(len(window))]
        lines.append("position   " + "".join(cells))
        lines.append("token      " + "".join(f"{lab(t):>{cw}}" for t in window))
        W = np.array([window], dtype=np.int64)
        if cfg.seqs:
            rep = int(rep_limits(W, cfg.seqs)[0])
            occ = [o for o in restart_occurrences(window, cfg.seqs) if o[0] - o[1] == rep]
            if occ:
                i, k, seq = min(occ)
                lines.append(f"restart     {''.join(lab(t) for t in seq)!r} with its head at {-1 - i} sets "
                             f"rep_limit {rep} (the {rep} token(s) after it)")
            else:
                lines.append(f"restart     no restart sequence completes in the window: rep_limit {rep}")
        if cfg.text is not None and cfg.text.breakers:
            from .oracle.promise_text import promised_rep_limit
            t = cfg.text
            prom, occ = promised_rep_limit(window, t.pieces, t.breakers)
            text = b"".join(t.pieces[x] for x in window).decode("utf-8", errors="replace")
            lines.append(f"text        {text!r} (the tokens' pieces, as a client prints them)")
            lines.append(f"            the text promises rep_limit {min(prom, len(window))}" + (
                f": breaker {occ[0].decode('utf-8', errors='replace')!r} spans tokens {occ[1] - len(window)}.."
                f"{occ[2] - len(window)}" if occ else ": no breaker occurs in it"))
    lines.append("")
    lines.append(f"{'candidate':<10} {'L(A)':>5} {'L(B)':>5} {'L(lib)':>6} {'expected':>12} {'observed':>12}  "
                 "where the repeat is")
    lib_L = verdict.get("library_L") or [None] * len(verdict["candidates"])
    differing = {d["id"] for d in verdict.get("differing", [])}
    quiet = 0
    many = len(verdict["candidates"]) > 12
    for i, z in enumerate(verdict["candidates"]):
        a, b = verdict["oracle_L"][i], verdict["oracle_B_L"][i]
        exp, obs = verdict["expected_logits"][i], verdict["observed_logits"][i]
        if many and not (a or b or lib_L[i] or z in differing or exp != obs or exp != 0):
            quiet += 1
            continue
        where = ""
        if a and window:
            js = matched_at(window, z, a)
            if js:
                j = js[-1]
                toks = [lab(t) for t in window]
                shown = " ".join(toks[:j - a]) + (" " if j - a else "") + hi(" ".join(toks[j - a:j])) + " " + \
                    nxt(toks[j]) + (" " + " ".join(toks[j + 1:]) if j + 1 < len(toks) else "")
                where = f"{shown}   (at {j - len(window)})"
        mark = "  <- DIFFERS" if z in differing else ""
        lines.append(f"{lab(z):<10} {a:>5} {b:>5} {'-' if lib_L[i] is None else lib_L[i]:>6} {_fmt(exp):>12} "
                     f"{_fmt(obs):>12}  {where}{mark}")
    if quiet:
        lines.append(f"({quiet} more candidates: L 0 by both oracles and the library, logit unchanged)")
    lines.append("(the repeat: [the suffix it repeats] <the candidate's earlier occurrence>, at its position)")
    if verdict.get("broken_promises"):
        lines.append("")
        lines.append("broken promises: " + ", ".join(verdict["broken_promises"]))
    if verdict.get("expected_sorted") is not None and verdict.get("expected_sorted") != verdict.get("observed_sorted"):
        lines.append(f"sorted flag: expected {verdict['expected_sorted']}, observed {verdict['observed_sorted']}"
                     "  <- DIFFERS")
    return "\n".join(lines)


def _fmt(x) -> str:
    if isinstance(x, str):
        return x
    return f"{x:g}" if math.isfinite(x) else ("-inf" if x < 0 else "inf")
