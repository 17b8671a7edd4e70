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

from ..case import Case
from ..causes import predicted_json
from ..children import run as run_child
from ..errors import DryzError
from ..files import fail
from ..gate.witnesses import minimized
from ..matrix import cell as campaign_cell
from ..output import table_out
from ..subject.build import PINNED_VERSION, build, describe, refuse_or_announce
from ..subject.identity import subject_line
from ..subject.registry import parse
from . import page
from .properties import BY_NAME, PROPERTIES

# The rows when none is given: llama.cpp's library, its server and its Python binding (the pinned release), and
# the engines dryz ships adapters for (mistral.rs twice: its prefix cache off, and on as users run it).
DEFAULT_ROWS = ("libllama:", "server", "llama-cpp-python:", "engine:mistralrs", "engine:mistralrs-cached",
                "engine:exllamav2", "engine:aphrodite", "ik-llama:")
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


def _properties(spec, work: Path, names, witnesses, log, tag: str) -> tuple[dict | None, str]:
    """`dryz properties` on the subject (its causes fitted, a cell per property, the witnesses attributed):
    (result, "") or (None, why not)."""
    out = work / f"properties-{tag}.json"
    out.unlink(missing_ok=True)
    args = ["properties", "--json", str(out)] + [x for w in witnesses for x in ("--witness", w)] + \
        [x for n in names for x in ("--property", n)]
    done = run_child(spec, args, PROPERTIES_TIMEOUT, work)
    if not out.exists():
        return None, done.failure(PROPERTIES_TIMEOUT) or done.last_error() or "no result"
    return json.loads(out.read_text()), ""


def subject_row(spec: str, seconds: int, work: Path, log, max_length: int = MAX_LENGTH, names=()) -> dict:
    """A subject's row: its identity, its causes fitted from the properties' probes, its campaigns, the campaigns'
    witnesses attributed (the properties again, with them), each cause's witness minimized keeping its cause."""
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
        return _row(spec, name, ident, caps, campaigns, seconds, work, log, max_length, names, t0)
    except KeyboardInterrupt:  # the row as far as it got, said so (the step's child is stopped: dryz.children)
        return {"spec": spec, "subject": name, "identity": ident, "capabilities": caps, "cells": {},
                "campaigns": campaigns, "interrupted": True,
                "error": "interrupted (Ctrl-C) " + (f"after {', '.join(campaigns)}" if campaigns else
                                                    "before its first campaign ended"),
                "seconds": round(time.monotonic() - t0, 1)}


def _row(spec, name, ident, caps, campaigns, seconds, work, log, max_length, names, t0):
    log(f"  {name}: properties (the causes fitted)")
    props, why = _properties(spec, work, names, [], log, "probes")
    if props is None:
        return {"spec": spec, "subject": name, "identity": ident, "error": f"dryz properties: {why}", "cells": {},
                "campaigns": campaigns}
    fitted = props["fit"]["models"]
    log(f"  {name}: llama.cpp with {' + '.join(fitted) or 'nothing'}, residual {props['fit']['residual']:,}")
    for key, mode in CAMPAIGNS:
        log(f"  {name}: {key}")
        extra = ("-n", str(max_length)) if mode == "certificate" else ()
        campaigns[key] = campaign_cell(spec, mode, work, seconds, caps, extra)
        log(f"  {name}: {key}: {campaigns[key]['text']} ({campaigns[key]['seconds']} s)")
    found = [f["witness"] for c in campaigns.values() for f in c["findings"] if f.get("witness")]
    if found:  # the campaigns' witnesses judged and attributed (the causes fitted again with them)
        log(f"  {name}: properties again, with the campaigns' {len(found)} witness(es)")
        again, why = _properties(spec, work, names, found, log, "witnesses")
        if again is None:
            return {"spec": spec, "subject": name, "identity": ident, "error": f"dryz properties: {why}",
                    "cells": props["cells"], "campaigns": campaigns}
        props = again
    fitted = props["fit"]["models"]
    for key, c in props["cells"].items():
        for cause in c.get("causes", []):
            _minimize(spec, work, key, cause, fitted, name, log, ident.get("init_dry_abi", 7))
    return {"spec": spec, "subject": name, "identity": ident, "capabilities": caps, "cells": props["cells"],
            "fit": props["fit"], "campaigns": campaigns, "witnesses": props.get("witnesses", []),
            "seconds": round(time.monotonic() - t0, 1)}


def _minimize(spec, work: Path, key: str, cause: dict, fitted, name, log, abi: int = 7) -> None:
    """A cause's witness minimized on its subject, keeping the cause (dryz minimize --cause): a witness of this
    cause that no other fitted cause explains. A class the judge names (promise-*, served-*) keeps its class."""
    w = cause.get("witness") or {}
    src = w.get("file")
    tag = re.sub(r"[^\w.-]+", "_", f"{key}-{cause['name']}")
    if src is None and {"history", "requests"} & set(w.get("probe") or {}):  # a probe: a Case (or sequence) file
        src = str(work / "probes" / f"{tag}.json")
        Path(src).parent.mkdir(exist_ok=True)
        Path(src).write_text(json.dumps(w["probe"]) + "\n")
    if src is None:
        return
    args = ["minimize", src, "--corpus", str(work / "witnesses")]
    fit_args = [x for m in fitted for x in ("--fitted", m)]
    if cause["kind"] in ("observed", "declared"):
        args += ["--cause", cause["name"]] + fit_args
    elif cause["kind"] == "residual" and fitted:
        args += ["--cause", "unexplained"] + fit_args
    log(f"  {name}: minimizing the witness of {cause['name']} ({key})")
    w["minimized"], w["shortest"] = minimized(spec, args, MINIMIZE_SECONDS, work, work / f"minimize-{tag}.json")
    w["source"] = src
    if w["minimized"]:
        entry = json.loads(Path(w["minimized"]).read_text())
        if "requests" in entry:  # a request sequence: per request what llama.cpp, the other causes and it gave
            w["minimized_case"] = entry["requests"]
            w["minimized_values"] = _sequence_values(entry, cause, fitted, abi)
            return
        w["minimized_case"] = entry.get("case")
        if entry.get("answer") and entry.get("case"):  # what llama.cpp, the other causes and the subject give
            case = Case.from_json(entry["case"])
            rest = tuple(m for m in fitted if m != cause["name"])
            vals = {"probe": entry["case"], "llama.cpp": predicted_json(case, (), abi), "subject": entry["answer"]}
            other = predicted_json(case, rest, abi) if cause["kind"] in ("observed", "declared") else None
            if other is not None and other != vals["llama.cpp"]:
                vals["without"] = other
            w["minimized_values"] = vals


def _sequence_values(entry: dict, cause: dict, fitted, abi: int) -> dict:
    """A minimized request sequence's values: per request what llama.cpp gives, what it gives with the other
    fitted causes (where that differs) and what the subject answered; the request that shows the cause first."""
    from ..requests import Requests  # on use: a sequence witness only
    seq = Requests.from_json(entry["requests"])
    rest = tuple(m for m in fitted if m != cause["name"]) if cause["kind"] in ("observed", "declared") else ()
    per = []
    for item, got in zip(seq.items(), entry["per_request"]):
        v = {"llama.cpp": predicted_json(item, (), abi), "subject": got["subject"]}
        other = predicted_json(item, rest, abi) if rest else None
        if other is not None and other != v["llama.cpp"]:
            v["without"] = other
        per.append(v)
    shown = next((i for i, r in enumerate(entry["verdict"]["requests"]) if r.get("class") not in (None, "agree")),
                 len(per) - 1)
    return {"probe": entry["requests"], "request": shown + 1, **per[shown], "per_request": per}


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
