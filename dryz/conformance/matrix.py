"""`dryz conformance`: every DRY in the field against llama.cpp's semantics, property by property.

Per subject (a row), every step is a dryz child on that subject (dryz.children), so an engine that crashes, hangs
or cannot be loaded costs its row, never the matrix: its identity and capabilities (`subject show`), the
campaigns (the gate's modes: the certificate space, as much of it as the subject can express; the restart sweep;
a fuzz campaign of --time seconds), then its row of properties (`dryz properties`), the campaigns' witnesses
attributed to the property whose deviation model reproduces them. Each differing cell's witness is minimized on
its subject (`dryz minimize`: proven shortest, or 1-minimal, said so) into WORKDIR/witnesses/<row>/.

Exit: 2 when a subject could not be had (its row says why: a missing engine package names its extra) or a step
could not conclude; else 1 when a cell differs (a finding: an undeclared difference, or a crash); else 0. Ctrl-C:
the step running is stopped with every process it started, the rows so far are written (the interrupted one with
the campaigns it finished, the rest "not run"), exit 130.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from ..children import run as run_child
from ..errors import DryzError
from ..files import fail
from ..gate.witnesses import minimized
from ..matrix import cell as campaign_cell
from ..output import table_out
from ..render import probe_line
from ..subject.build import PINNED_VERSION, build, describe, refuse_or_announce
from ..subject.identity import subject_line
from ..subject.registry import parse
from ..verdict import is_finding
from .properties import BY_NAME, OTHER, PROPERTIES

# The rows when none is given: llama.cpp's library, its server and its Python binding (the pinned release), and
# the engines dryz ships adapters for.
DEFAULT_ROWS = ("libllama:", "server", "llama-cpp-python:", "engine:mistralrs", "engine:exllamav2",
                "engine:aphrodite", "ik-llama:")
CAMPAIGNS = (("certificate", "certificate"), ("restarts", "restarts"), ("fuzz", "fuzz"))
MAX_LENGTH = 8  # the certificate campaign's longest history (the default space is 11; an engine answers ~100/s)
PROPERTIES_TIMEOUT = 3600
MINIMIZE_SECONDS = 300


def prepare(spec: str, log) -> str:
    """The subject spec a row runs: `server` is the pinned release's llama-server (built once, then cached)."""
    if spec == "server":
        return f"server:{build(PINNED_VERSION, None, log=log, server=True)}"
    parse(spec)
    return spec


def _row_name(spec: str) -> str:
    return re.sub(r"[^\w.-]+", "_", spec.strip(":")) or "subject"


def subject_row(spec: str, seconds: int, work: Path, log, max_length: int = MAX_LENGTH, names=()) -> dict:
    """A subject's row: its identity, its campaigns, its properties, each differing cell's witness minimized."""
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    p = run_child(spec, ["subject", "show"], 600, work)
    bad = p.failure(600)
    if bad or p.exit != 0:
        return {"spec": spec, "subject": spec, "error": bad or p.last_error() or "the subject could not be opened",
                "cells": {}, "campaigns": {}}
    ident = json.loads(p.stdout)
    caps = ident.pop("capabilities", None)
    name = label(ident)
    campaigns: dict = {}
    try:
        return _campaigns_and_properties(spec, name, ident, caps, campaigns, seconds, work, log, max_length, names,
                                         t0)
    except KeyboardInterrupt:  # the row as far as it got, said so (the step's child is stopped: dryz.children)
        return {"spec": spec, "subject": name, "identity": ident, "capabilities": caps, "cells": {},
                "campaigns": campaigns, "interrupted": True,
                "error": "interrupted (Ctrl-C) " + (f"after {', '.join(campaigns)}" if campaigns else
                                                    "before its first campaign ended"),
                "seconds": round(time.monotonic() - t0, 1)}


def _campaigns_and_properties(spec, name, ident, caps, campaigns, seconds, work, log, max_length, names, t0):
    for key, mode in CAMPAIGNS:
        log(f"  {name}: {key}")
        extra = ("-n", str(max_length)) if mode == "certificate" else ()
        campaigns[key] = campaign_cell(spec, mode, work, seconds, caps, extra)
        log(f"  {name}: {key}: {campaigns[key]['text']} ({campaigns[key]['seconds']} s)")
    found = [f["witness"] for c in campaigns.values() for f in c["findings"] if f.get("witness")]
    out = work / "properties.json"
    out.unlink(missing_ok=True)
    log(f"  {name}: properties")
    args = ["properties", "--json", str(out), "--corpus", str(work / "witnesses")] + \
        [x for w in found for x in ("--witness", w)] + [x for n in names for x in ("--property", n)]
    done = run_child(spec, args, PROPERTIES_TIMEOUT, work)
    if not out.exists():
        why = done.failure(PROPERTIES_TIMEOUT) or done.last_error() or "no result"
        return {"spec": spec, "subject": name, "identity": ident, "error": f"dryz properties: {why}", "cells": {},
                "campaigns": campaigns}
    props = json.loads(out.read_text())
    cells = props["cells"]
    for key, c in cells.items():
        w = c.get("witness")
        if c["status"] != "differs" or not w:
            continue
        src = w.get("file")
        if src is None:  # a probe: written as a Case (or trace) file, then minimized on the subject
            src = str(work / "probes" / f"{key}.json")
            Path(src).parent.mkdir(exist_ok=True)
            Path(src).write_text(json.dumps(w["probe"]) + "\n")
        log(f"  {name}: minimizing the {key} witness")
        w["minimized"], w["shortest"] = minimized(spec, ["minimize", src, "--corpus", str(work / "witnesses")],
                                                  MINIMIZE_SECONDS, work, work / f"minimize-{key}.json")
        w["source"] = src
    return {"spec": spec, "subject": name, "identity": ident, "capabilities": caps, "cells": cells,
            "campaigns": campaigns, "witnesses": props.get("witnesses", []),
            "seconds": round(time.monotonic() - t0, 1)}


def label(ident: dict) -> str:
    """A row's name: an engine and its version, else the subject's line."""
    if ident.get("engine"):
        return f"{ident['engine']} {str(ident.get('engine_version') or '').split(' (')[0]}".strip()
    return subject_line(ident)


def run_conformance(specs: list[str], seconds: int, work: Path, log, max_length: int = MAX_LENGTH,
                    names=()) -> dict:
    t0 = time.monotonic()
    rows: list = []
    for spec in specs:
        if rows and rows[-1].get("interrupted"):
            rows.append({"spec": spec, "subject": spec, "error": "not run (interrupted)", "cells": {},
                         "campaigns": {}, "interrupted": True})
            continue
        log(f"{spec}: preparing")
        try:
            ready = prepare(spec, lambda m: log(f"  {m}"))
        except KeyboardInterrupt:
            rows.append({"spec": spec, "subject": spec, "error": "interrupted (Ctrl-C) while it was prepared",
                         "cells": {}, "campaigns": {}, "interrupted": True})
            continue
        except Exception as e:  # noqa: BLE001 (a subject that cannot be had costs its row)
            rows.append({"spec": spec, "subject": spec, "error": f"cannot be prepared: {e}", "cells": {},
                         "campaigns": {}})
            continue
        rows.append(subject_row(ready, seconds, work / _row_name(ready if spec != "server" else "server"), log,
                                max_length, names))
        log(f"{spec}: " + (rows[-1].get("error") or ", ".join(f"{k} {c['status']}" for k, c in rows[-1]["cells"]
                                                              .items() if c["status"] != "conforms") or
                           "every property conforms"))
    return {"tool": "dryz conformance", "rows": rows, "fuzz_seconds": seconds, "max_length": max_length,
            "interrupted": any(r.get("interrupted") for r in rows),
            "properties": [{"name": p.name, "title": p.title, "what": p.what} for p in PROPERTIES
                           if not names or p.name in names],
            "wall_seconds": round(time.monotonic() - t0, 1)}


# -- the matrix as text ------------------------------------------------------------------------------------------


def shown(c: dict | None) -> str:
    if c is None:
        return ""
    st = c["status"]
    if st == "conforms":
        return f"conforms ({c['judged']:,})"
    if st == "declared":
        return "declared: " + "; ".join(f"{d['name']} ({d['cited']})" for d in c.get("declared", []))
    if st == "not expressible":
        return "not expressible: " + "; ".join(c.get("not_judged", {}))[:120]
    w = c.get("witness") or {}
    bad = sum(n for k, n in c.get("classes", {}).items() if is_finding(k))
    what = w.get("class", "") + (f" ({bad:,} of {c['judged']:,})" if c.get("judged") else "")
    if w.get("explained_by"):
        what += f" = llama.cpp with {w['explained_by']}"
    return f"**differs**: {what}" + (f" [{w['shortest']}]" if w.get("shortest") else "")


def columns(result: dict) -> list[tuple[str, str]]:
    cols = [(p["name"], p["title"]) for p in result["properties"]]
    if any(OTHER in r["cells"] for r in result["rows"]):
        cols.append((OTHER, "other differences"))
    return cols


def markdown(result: dict) -> str:
    cols = columns(result)
    lines = ["| subject | " + " | ".join(t for _, t in cols) + " |", "|---|" + "---|" * len(cols)]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['subject']} | {r['error']} |" + " |" * (len(cols) - 1))
            continue
        lines.append(f"| {r['subject']} | " + " | ".join(shown(r["cells"].get(k)) for k, _ in cols) + " |")
    lines += ["", "| subject | " + " | ".join(k for k, _ in CAMPAIGNS) + " |", "|---|" + "---|" * len(CAMPAIGNS)]
    for r in result["rows"]:
        if r.get("campaigns"):
            lines.append(f"| {r['subject']} | " + " | ".join(r["campaigns"][k]["text"] for k, _ in CAMPAIGNS
                                                            if k in r["campaigns"]) + " |")
    ws = [(r, k, c["witness"]) for r in result["rows"] for k, c in r["cells"].items() if c.get("witness")]
    if ws:
        lines += ["", "| subject | property | first probe that differs | class | minimized | shortest | replay |",
                  "|---|---|---|---|---|---|---|"]
        for r, k, w in ws:
            path = w.get("minimized") or w.get("source") or w.get("file")
            probe = f"`{probe_line(w['probe'])}`" if "history" in (w.get("probe") or {}) else \
                Path(w.get("file") or "").name
            lines.append(f"| {r['subject']} | {k} | {probe} | {w['class']} | `{_spell(w)}` | {w.get('shortest', '')} | "
                         f"`dryz --subject {r['spec']} check {path}` |")
    return "\n".join(lines) + "\n"


def _spell(w: dict) -> str:
    """The witness in one line: the minimized entry's case when there is one, else the probe."""
    c = w.get("probe") or {}
    if w.get("minimized") and Path(w["minimized"]).is_file():
        c = json.loads(Path(w["minimized"]).read_text()).get("case", c)
    if "history" not in c:
        return Path(w.get("file") or w.get("source") or "").name
    return probe_line(c)


def exit_code(result: dict) -> int:
    """130 when interrupted (the rows say how far each got), else 2, 1 or 0 as the module docstring says."""
    rows = result["rows"]
    if result.get("interrupted"):
        return 130
    if any("error" in r for r in rows) or any(c.get("verdict") == "error" for r in rows
                                              for c in r.get("campaigns", {}).values()):
        return 2
    found = any(c["status"] == "differs" for r in rows for c in r["cells"].values()) or any(
        c.get("exit") == 1 or c.get("failed") for r in rows for c in r.get("campaigns", {}).values())
    return 1 if found else 0


def command(rows, seconds: int, max_length: int, names, workdir, json_path, md_path, log, echo) -> int:
    specs = list(rows) or list(DEFAULT_ROWS)
    for s in specs:
        if s != "server":
            try:
                parse(s)
            except DryzError as e:  # the same refusal, named by the option it came from
                fail(str(e).replace(f"--subject {s!r}", f"--row {s!r}", 1))
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        fail(f"--property {unknown[0]!r}: not a property (properties: {', '.join(BY_NAME)})")
    refuse_or_announce([describe(PINNED_VERSION, server=True)] if "server" in specs else [], log)
    result = run_conformance(specs, seconds, Path(workdir).resolve(), log, max_length, names)
    table_out(result, markdown(result), json_path, md_path, echo)
    return exit_code(result)
