"""One subject's row of the conformance matrix (`dryz properties`): every property's probes run on the subject and
judged like any case, in an isolation worker (a probe that kills the subject's process is class crash, the rest
judged); per property a cell: conforms, declared (the difference is a deviation the subject declares, with its
citation), differs (the first differing probe: shortest first, the witness), or not expressible (the subject can
run none of them: why). Witnesses from elsewhere (a campaign's) are judged too and attributed to the property
whose deviation model reproduces them bit for bit, else to `other`."""

from __future__ import annotations

import time
from dataclasses import replace
from types import SimpleNamespace
from pathlib import Path

from ..case import Case
from ..config import Semantics
from ..corpus import crash_entry, entry_json, write_entry
from ..judge import judge_output, semantics
from ..subject.answers import Crash, Unsupported
from ..subject.isolation import Worker
from ..files import fail
from .. import inputs
from ..inputs import load_case_file, load_subject, load_trace_file, say, selected_spec
from ..output import write_json
from ..render import properties_ending, properties_text
from ..trace import Trace
from ..trace_check import check_trace
from ..verdict import AGREE, crash_verdict, is_finding
from .properties import BY_NAME, OTHER, PROPERTIES

CHUNK = 64          # probes per call into the isolation worker
NUMBERED = {"match-cap:N": range(1, 65), "occurrence-cap:N": range(1, 17), "early-exit:N": range(1, 17)}


def _models(explains) -> list[str]:
    out = []
    for m in explains:
        out += [m.replace(":N", f":{n}") for n in NUMBERED[m]] if m in NUMBERED else [m]
    return out


def attribute(case: Case, sem: Semantics, out) -> str | None:
    """The deviation model (of any property) that makes llama.cpp's semantics give this output bit for bit, or
    None: what the difference is, named."""
    for p in PROPERTIES:
        for m in _models(p.explains):
            try:
                v = judge_output(case, replace(sem, deviations=(m,)), out)
            except Exception:  # noqa: BLE001 (a model that cannot take this case does not explain it)
                continue
            if v.klass == f"declared-{m}":
                return m
    return None


def property_of(model: str | None) -> str:
    """The property a deviation model belongs to (OTHER when none explains the difference)."""
    if model is None:
        return OTHER
    generic = model.split(":")[0] + ":N" if model.split(":")[-1].isdigit() else model
    return next((p.name for p in PROPERTIES if generic in p.explains or model in p.explains), OTHER)


def _judge_chunk(subject, probes: list) -> list:
    """(class, verdict JSON or None, explained-by) per probe, or ("not judged", why); runs in the worker."""
    sem = semantics(subject)
    res: list = [None] * len(probes)
    todo = []
    for i, p in enumerate(probes):
        if isinstance(p, Trace):
            v = check_trace(p, subject)
            res[i] = (v.klass, None if v.klass == AGREE else v.to_json(), None)
            continue
        why = subject.caps.lacks(p)
        if why is not None:
            res[i] = ("not judged", why)
        else:
            todo.append(i)
    outs = subject.run_batch([probes[i] for i in todo]) if todo else []
    for i, out in zip(todo, outs):
        case = probes[i]
        try:
            v = judge_output(case, sem, out) if not isinstance(out, Crash) else crash_verdict(case, out)
        except Unsupported as e:
            res[i] = ("not judged", str(e))
            continue
        model = attribute(case, sem, out) if is_finding(v.klass) and not isinstance(out, Crash) else None
        res[i] = (v.klass, None if v.klass == AGREE else v.to_json(), model)
    return res


def _run(worker: Worker, probes: list) -> list:
    """Every probe judged in the worker; a chunk that kills it is judged again one probe at a time."""
    res = []
    for i in range(0, len(probes), CHUNK):
        chunk = probes[i:i + CHUNK]
        got = worker.call(_judge_chunk, chunk)
        if isinstance(got, Crash):
            got = []
            for p in chunk:
                one = worker.call(_judge_chunk, [p])
                if isinstance(one, Crash):
                    v = crash_verdict(p, one) if isinstance(p, Case) else None
                    one = [(v.klass if v else "crash", v.to_json() if v else {"detail": one.detail}, None)]
                got += one
        res += got
    return res


def cell(prop, results: list, probes: list, citations: dict, seconds: float) -> dict:
    """A property's cell from its probes' results."""
    classes: dict = {}
    not_judged: dict = {}
    found = []  # (rank, index, witness): this property's own model first, then any difference, then a crash
    declared = set()
    own = {m.split(":")[0] for m in prop.explains}
    for i, (p, r) in enumerate(zip(probes, results)):
        if r[0] == "not judged":
            not_judged[r[1]] = not_judged.get(r[1], 0) + 1
            continue
        klass, v, model = r
        classes[klass] = classes.get(klass, 0) + 1
        if klass.startswith("declared-"):
            declared.add(klass[len("declared-"):])
        if is_finding(klass):
            rank = 0 if model and model.split(":")[0] in own else 2 if klass in ("crash", "memory") else 1
            if not any(f[0] <= rank for f in found):
                found.append((rank, i, {"class": klass, "probe": p.to_json(), "verdict": v, "explained_by": model}))
    witness = min(found, key=lambda f: (f[0], f[1]))[2] if found else None
    judged = sum(classes.values())
    if witness is not None:
        status = "differs"
    elif declared:
        status = "declared"
    elif judged:
        status = "conforms"
    else:
        status = "not expressible"
    out = {"property": prop.name, "title": prop.title, "status": status, "probes": len(probes), "judged": judged,
           "classes": dict(sorted(classes.items())), "seconds": round(seconds, 2)}
    if not_judged:
        out["not_judged"] = not_judged
    if declared:
        out["declared"] = [{"name": d, "cited": citations.get(d, "")} for d in sorted(declared)]
    if witness is not None:
        out["witness"] = witness
    return out


def _read_witness(path: str):
    """A witness file (Case JSON, trace JSON, corpus entry or crash file) as a Case or a Trace, read as `dryz
    check` reads it."""
    t = load_trace_file(path)
    return t[0] if t is not None else load_case_file(path)[0]


def row(lib, names=None, witnesses=(), log=lambda m: None) -> dict:
    """The subject's row: a cell per property (all, or those named), then the witnesses attributed."""
    ident = lib.identity
    citations = dict(ident.get("citations") or {})
    calls = set(lib.caps.calls)
    cells = {}
    t0 = time.monotonic()
    with Worker(lib.spec, lib, timeout=None) as w:
        for prop in PROPERTIES:
            if names and prop.name not in names:
                continue
            t = time.monotonic()
            if prop.traces and not {"reset", "clone", "free"} <= calls:
                missing = ", ".join(sorted({"reset", "clone", "free"} - calls))
                cells[prop.name] = {"property": prop.name, "title": prop.title, "status": "not expressible",
                                    "probes": 0, "judged": 0, "classes": {}, "seconds": 0.0,
                                    "not_judged": {f"the subject does not expose {missing}": 1}}
                continue
            probes = prop.probes()
            cells[prop.name] = cell(prop, _run(w, probes), probes, citations, time.monotonic() - t)
            log(f"{prop.name}: {cells[prop.name]['status']} ({cells[prop.name]['judged']:,} judged)")
        attributed = []
        for path in witnesses:
            r = _run(w, [_read_witness(path)])[0]
            if r[0] == "not judged":
                attributed.append({"witness": str(path), "class": "not judged", "why": r[1], "property": None})
                continue
            klass, _, model = r
            attributed.append({"witness": str(path), "class": klass, "explained_by": model,
                               "property": property_of(model) if is_finding(klass) else None})
    for a in attributed:  # a campaign's difference makes its property's cell differ (its own witness kept)
        p = a["property"]
        if p is None:
            continue
        c = cells.setdefault(p, {"property": p, "title": BY_NAME[p].title if p in BY_NAME else "other differences",
                                 "status": "conforms", "probes": 0, "judged": 0, "classes": {}, "seconds": 0.0})
        c.setdefault("campaign_witnesses", []).append(a)
        if c["status"] != "differs":
            c["status"] = "differs"
            c["witness"] = {"class": a["class"], "file": a["witness"], "explained_by": a["explained_by"]}
    return {"tool": "dryz properties", "subject": ident, "cells": cells, "witnesses": attributed,
            "seconds": round(time.monotonic() - t0, 1)}


def write_witnesses(result: dict, directory) -> list[str]:
    """Each differing cell's probe as a corpus entry (the first probe of the property's space that differs, shortest
    first: not minimized here; `dryz minimize` shrinks it further, possibly out of the property)."""
    written = []
    ident = result["subject"]
    for key, c in result["cells"].items():
        w = c.get("witness")
        if c["status"] != "differs" or not w or "probe" not in w or "history" not in w["probe"]:
            continue
        case = Case.from_json(w["probe"])
        note = f"the first probe of property {key} that differs" + (
            f"; equals llama.cpp with {w['explained_by']}" if w.get("explained_by") else "")
        prov = {"tool": "dryz properties", "property": key}
        if w["class"] in ("crash", "memory") or not w.get("verdict") or "expected_logits" not in w["verdict"]:
            entry = crash_entry(case, "not-minimized", prov, ident)
            entry["note"] = note
        else:
            v = SimpleNamespace(klass=w["verdict"]["class"], **w["verdict"])
            entry = entry_json(case, v, expect=w["class"], shortest="not-minimized", provenance=prov,
                               subject=ident, note=note)
        written.append(str(write_entry(Path(directory), entry)))
    return written


def exit_code(result: dict) -> int:
    """1 when a cell differs, 2 when the subject could express none of the probes, else 0."""
    cells = result["cells"].values()
    if any(c["status"] == "differs" for c in cells):
        return 1
    return 0 if any(c["judged"] for c in cells) else 2


def command(names, witnesses, json_path, corpus_dir, echo) -> int:
    """`dryz properties` past its options: the selected subject's row, printed (and written as JSON)."""
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        fail(f"--property {unknown[0]!r}: not a property (properties: {', '.join(BY_NAME)})")
    for w in witnesses:
        if not Path(w).is_file():
            fail(f"--witness {w}: no such file")
    lib = load_subject()
    result = row(lib, set(names), witnesses, log=say)
    if corpus_dir:
        result["written"] = write_witnesses(result, corpus_dir)
    echo(properties_text(result))
    if json_path:
        write_json(json_path, result)
    echo(properties_ending(result, json_path, selected_spec(), inputs.ENTRY_ARGV))
    return exit_code(result)
