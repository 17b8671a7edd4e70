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

import re
import time
from pathlib import Path

from ..errors import DryzError
from ..files import fail
from ..output import table_out
from ..subject.build import PINNED_VERSION, build, describe, refuse_or_announce
from ..subject.registry import parse
from . import page
from .audit import MAX_LENGTH, subject_row
from .properties import BY_NAME, PROPERTIES

# The rows when none is given: llama.cpp's library, its server and its Python binding (the pinned release), and
# the engines dryz ships adapters for (mistral.rs twice: its prefix cache off, and on as users run it).
DEFAULT_ROWS = ("libllama:", "server", "llama-cpp-python:", "engine:mistralrs", "engine:mistralrs-cached",
                "engine:exllamav2", "engine:aphrodite", "engine:aphrodite-python", "ik-llama:")


def prepare(spec: str, log) -> str:
    """The subject spec a row runs: `server` is the pinned release's llama-server (built once, then cached)."""
    if spec == "server":
        return f"server:{build(PINNED_VERSION, None, log=log, server=True)}"
    parse(spec)
    return spec


def _row_name(spec: str) -> str:
    return re.sub(r"[^\w.-]+", "_", spec.strip(":")) or "subject"


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


def text(result: dict) -> str:
    """What `dryz conformance` prints: the grid (properties down, subjects across, short labels) and each row's
    causes."""
    rows = result["rows"]
    cols = page.columns(result)
    width = 24
    head = f"{'property':<34}" + "".join(f"{page.short_name(r)[:width - 1]:<{width}}" for r in rows)
    lines = [head]
    for key, title in cols:
        cells = [page.cell_label(r.get("cells", {}).get(key))[0] if r.get("cells") else "not run" for r in rows]
        lines.append(f"{title[:33]:<34}" + "".join(f"{c[:width - 1]:<{width}}" for c in cells))
    lines.append("")
    for r in rows:
        lines.append(page.fitted_line(r).replace("**", "").replace("`", "") if r.get("fit") else
                     f"{page.short_name(r)}: {r.get('error', '')}")
    return "\n".join(lines) + "\n"


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
    table_out(result, text(result), json_path, None, echo)
    if md_path:
        Path(md_path).write_text(page.markdown(result))
    return exit_code(result)
