"""Witnesses: each failing mode's first finding minimized (`dryz minimize`, its result read from its --json) and
laid out by `dryz explain` (an excerpt, for people), within a time bound; each behaviour change explained on
both subjects; a subject's causes fitted (`dryz properties`). Every step is a dryz child (dryz.children)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..children import Child, run as run_child
from ..trace import Trace
from .changes import spell
from .result import GateResult


def excerpt(text: str, limit: int = 4) -> list[str]:
    """The lines of `dryz explain` that show a case: its class, the candidate table's header and the rows that
    differ (or the first rows), the restart line when there is one."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    out = [ln for ln in lines if ln.startswith("class ")][:1]
    head = next((i for i, ln in enumerate(lines) if ln.startswith("candidate")), None)
    if head is not None:
        rows = [ln for ln in lines[head + 1:] if not ln.startswith("(")]
        bad = [ln for ln in rows if "DIFFERS" in ln]
        out += [lines[head]] + (bad or rows)[:limit - len(out) - 1]
    else:
        out += [ln for ln in lines if ln not in out and not ln.startswith(("subject", "dryz explain"))][:limit - 1]
    return out[:limit]


PROPERTIES_TIMEOUT = 3600  # seconds `dryz properties` may take on a subject (an engine: minutes)


def properties(spec, work: Path, names, witnesses, log, tag: str, fitted=()) -> tuple[dict | None, str]:
    """`dryz properties` on the subject (its causes fitted, from `fitted` first; a cell per property; the witnesses
    attributed): (result, "") or (None, why not). The gate of an engine's patch and `dryz audit` run it."""
    child, out = properties_child(spec, work, names, witnesses, tag, fitted)
    return properties_result(child.wait(PROPERTIES_TIMEOUT), out)


def properties_child(spec, work: Path, names, witnesses, tag: str, fitted=()) -> tuple[Child, Path]:
    """`dryz properties` started on the subject (its output in WORK/properties-TAG.out, .err): (the child, where
    its result goes)."""
    out = work / f"properties-{tag}.json"
    out.unlink(missing_ok=True)
    args = ["properties", "--json", str(out), "--answers", str(work / "answers.pickle")] + \
        [x for w in witnesses for x in ("--witness", w)] + [x for n in names for x in ("--property", n)] + \
        [x for m in fitted for x in ("--fitted", m)]  # (the answers kept: a second run asks no probe again)
    return Child(spec, args, work, work / f"properties-{tag}.out", work / f"properties-{tag}.err"), out


def properties_result(done, out: Path) -> tuple[dict | None, str]:
    """A properties child's result (properties_child): (result, "") or (None, why not)."""
    if not out.exists():
        return None, done.failure(PROPERTIES_TIMEOUT) or done.last_error() or "no result"
    return json.loads(out.read_text()), ""


def minimized(spec: str, args: list, seconds: float, work: Path, out: Path) -> tuple[str | None, str]:
    """(the written corpus entry, shortest) of `dryz minimize ARGS --json OUT`, or (None, why not)."""
    out.unlink(missing_ok=True)
    done = run_child(spec, args + ["--json", str(out)], seconds, work)
    if done.exit == 0 and out.exists():
        d = json.loads(out.read_text())
        return d["written"], d["shortest"]
    why = f"no result within {seconds:.0f} s" if done.timed_out else done.last_error()[:100]
    return None, f"not minimized ({why})"


def witnesses(res: GateResult, work: Path, spec: str, seconds: float) -> None:
    """Minimize each failing mode's first finding and explain it, within `seconds` in all; then explain each
    behaviour change on both subjects."""
    deadline = time.monotonic() + seconds
    todo = [m.findings[0] for m in res.modes if m.findings and m.findings[0].witness]
    out_dir = work / "witnesses"
    done: dict = {}  # the same input (several certificates stop at one history): minimized and explained once
    for i, f in enumerate(todo):
        left = deadline - time.monotonic()
        key = (f.mode == "fuzz-traces", Path(f.witness).read_bytes() if Path(f.witness).is_file() else f.witness)
        if key in done:
            g = done[key]
            f.minimized, f.shortest, f.spelled, f.explain = g.minimized, g.shortest, g.spelled, g.explain
            continue
        done[key] = f
        if f.mode == "differential" or f.mode == "replay":  # already minimized (a corpus entry)
            f.minimized, f.shortest = f.witness, f.shortest or "as recorded"
        elif left > 3:
            per = max(left / (len(todo) - i), min(left, 15.0))  # a short witness shrinks in seconds
            args = ["minimize", f.witness, "--corpus", str(out_dir)] + f.reader
            if f.mode == "fuzz-traces":
                args.append("--trace")
            f.minimized, f.shortest = minimized(spec, args, per, work, work / f"minimize-{i}.json")
        else:
            f.shortest = "not minimized (no time left)"
        path = f.minimized or f.witness
        f.spelled = f.spelled or _spell_file(path)
        p = run_child(spec, ["explain", "--no-color", path] + (["--trace"] if f.mode == "fuzz-traces" and
                                                              not f.minimized else []) +
                      ([] if f.minimized else f.reader), 120, work)
        if not p.timed_out:
            f.explain = excerpt(p.stdout)
    base = res.base.get("spec") if res.base else None
    for c in res.changes:
        if not c.witness or not Path(c.witness).exists():
            continue
        p = run_child(spec, ["explain", "--no-color", c.witness], 120, work)
        lines = [f"new:  {ln}" for ln in excerpt(p.stdout, 3)[1:]] if not p.timed_out else []
        if base:
            q = run_child(base, ["explain", "--no-color", c.witness], 120, work)
            if not q.timed_out:
                lines += [f"base: {ln}" for ln in excerpt(q.stdout, 3)[1:]]
        c.explain = lines


def _spell_file(path: str) -> str:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return Path(path).name
    if data.get("schema") == "dryz.corpus/1":
        if "trace" in data:
            return f"trace `{Trace.from_json(data['trace']).spelled()}`"
        data = data["case"]
    if data.get("schema") == "dryz.trace/1":
        return f"trace `{Trace.from_json(data).spelled()}`"
    try:
        return spell(data)
    except Exception:  # noqa: BLE001
        return Path(path).name
