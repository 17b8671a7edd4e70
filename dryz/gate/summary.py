"""The gate's summary for a pull request (Markdown, at most 60 lines: the verdict and why, the subject and the
base, every mode's verdict and result, each mode's first finding with its minimized witness and explain excerpt,
the behaviour changes against the base), and what `dryz report` reads besides the gate's JSON."""

from __future__ import annotations

from pathlib import Path

from ..subject.identity import subject_line
from .result import GateResult


def markdown(res: GateResult, limit: int = 60) -> str:
    """The summary to paste into a pull request (at most `limit` lines)."""
    nf = len(res.findings)
    und = [c for c in res.changes if not c.declared]
    head = {"pass": "PASS", "fail": "FAIL", "error": "ERROR (the harness could not conclude)",
            "interrupted": "INTERRUPTED (partial)"}[res.verdict]
    why = [f"{nf} finding(s)"] + ([f"{len(und)} undeclared change(s)"] if res.changes or res.declared else []) + \
          ([f"{len(res.declared_unseen)} declared change(s) not seen"] if res.declared_unseen else [])
    s = res.subject or {}
    lines = [f"### dryz gate: {head} — {', '.join(why)}", "",
             f"- subject: {subject_line(s)}, sha256 `{_sha(s)}`"]
    if res.base:
        lines.append(f"- base: {subject_line(res.base)}, sha256 `{_sha(res.base)}`")
    lines.append(f"- budget `--time {res.budget:g}` on {res.lanes} lane(s): {res.seconds:.0f} s wall "
                 f"(witnesses {res.witness_seconds:.0f} s)")
    lines += ["", "| mode | verdict | time | result |", "|---|---|---|---|"]
    for m in res.modes:
        t = f"{m.seconds:.0f} s" + (f" (of {m.given:.0f})" if m.given else "")
        lines.append(f"| {m.name} | {m.verdict} | {t} | {m.text.replace('|', '/')} |")
    tail: list[str] = []
    if res.findings:
        tail += ["", "**Findings** (each mode's first, minimized; `dryz explain` excerpt)"]
        shown: dict = {}
        for m in res.modes:
            for f in m.findings[:1]:
                where = f.minimized or f.witness or ""
                if where and where in shown and shown[where][1] == f.klass:  # one witness, one class: said once
                    tail.append(f"- **{f.mode}** `{f.klass}`: the same witness as **{shown[where][0]}**")
                    continue
                shown.setdefault(where, (f.mode, f.klass))
                tail.append(f"- **{f.mode}** `{f.klass}`: {f.spelled or f.detail} (shortest: {f.shortest or '?'}; "
                            f"`{Path(where).name}`)")
                if f.explain:
                    tail += ["  ```"] + [f"  {ln}" for ln in f.explain] + ["  ```"]
    if res.changes or res.declared_unseen:
        tail += ["", "**Behaviour changes against the base** (declare with `--expect-change CLASS`)", "",
                 "| class | declared | witness | base | new |", "|---|---|---|---|---|"]
        for c in res.changes:
            tail.append(f"| `{c.klass}` | {'yes' if c.declared else '**no**'} | {c.spelled} ({c.shortest}) | "
                        f"{c.base.replace('|', '/')} | {c.new.replace('|', '/')} |")
        for dcl in res.declared_unseen:
            tail.append(f"| `{dcl}` | declared, **not seen** | | | |")
        ex = [c for c in res.changes if c.explain]
        if ex:
            tail += ["", "```"]
            for c in ex:
                tail += [f"{c.klass}:"] + c.explain
            tail += ["```"]
    room = limit - len(lines)
    if len(tail) > room:
        tail = tail[:room - 1] + [f"(… {len(tail) - room + 1} more lines: see the HTML report and the JSON)"]
    return "\n".join(lines + tail) + "\n"


def report_inputs(res: GateResult) -> list[str]:
    """What `dryz report` reads besides the gate's JSON: the certificates, the campaigns, the witnesses."""
    work = Path(res.work)
    out = [str(work / f"{n}.json") for n in ("certificate", "parameters", "window-caps", "traces")
           if (work / f"{n}.json").exists()]
    out += [str(work / n) for n in ("fuzz", "fuzz-traces", "fuzz-vocab-dict", "fuzz-vocab-random")
            if (work / n / "summary.json").exists()]
    out += [str(work / n) for n in ("witnesses", "changes") if (work / n).is_dir() and any((work / n).rglob("*.json"))]
    return out


def _sha(identity: dict) -> str:
    """The subject's code's sha256, short: a llama-server's binary and libraries (its server code is in a library
    of its own, not in the libllama beside it), else the libllama's, else a patched engine's patch's."""
    return (identity.get("code_sha256") or identity.get("sha256") or identity.get("libllama_sha256")
            or (identity.get("patch") or {}).get("sha256") or "?")[:16]
