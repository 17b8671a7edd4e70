"""One subject's row of the conformance matrix (`dryz properties`): every property's probes run on the subject (in an
isolation worker: a probe that kills the subject's process is class crash) and judged like any case; the causes of
its differences fitted (dryz.causes: the 1-minimal set of deviation models whose composition with llama.cpp's DRY
explains every answer bit for bit, the rest the residual); then per property a cell, judged after composing the
row's causes of the other properties:

  conforms        every probe judged agrees with llama.cpp composed with the other properties' causes
  declared        the differences left are deviations the subject declares (with the citation of its documentation)
  differs         a cause of this property explains them (a deviation model with the engine's source line; a class
                  the judge names itself: promise-*, served-*, memory), or nothing does (the residual)
  not expressible the subject can express none of the probes (a parameter or call it lacks): why
  not judged      every probe it answered raised or was refused, for another property's cause: why

A request sequence (the requests property) is sent to one fresh instance of the subject (Subject.run_sequence) and
each of its requests judged on its own, as llama.cpp's semantics make requests independent; the fit sees each
request with the prompts sent before it (dryz.causes.items). Each cause has a witness: its property's first probe
(shortest first) that needs it, with what llama.cpp and the subject gave (for a sequence: per request). A
campaign's witnesses (--witness) are judged too and attributed to the causes that explain them; one no cause
explains goes to the `other` column."""

from __future__ import annotations

import json
import pickle
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ..case import Case
from ..causes import answer_json, explains, fit, predicted_json
from ..corpus import crash_entry, entry_json, requests_entry, write_entry
from ..files import fail
from .. import inputs
from ..inputs import load_case_file, load_requests_file, load_subject, load_trace_file, say, selected_spec
from ..judge import judge_output, semantics
from ..oracle.deviations import BY_PATTERN, meaning, pattern
from ..output import write_bytes, write_json
from ..render import properties_ending, properties_text
from ..requests import Request, Requests
from ..requests_check import sequence_op
from ..subject.answers import Crash, Output, Refused, Unsupported
from ..subject.isolation import Worker
from ..trace import Trace
from ..trace_check import check_trace
from ..verdict import AGREE, MEMORY, ORACLE_DISAGREEMENT, crash_verdict, is_finding
from .properties import BY_NAME, OTHER, PROPERTIES

CHUNK = 64          # probes per call into the isolation worker
NOT_JUDGED = "not judged"
NOT_EXPRESSIBLE = "not expressible"
# Classes whose cause the judge names itself (the library's own promise, llama-server's request layer, a sanitizer
# report, the oracles): not fitted, the class is the cause.
NAMED = ("promise-", "served-", MEMORY, ORACLE_DISAGREEMENT)


def _named(klass: str) -> bool:
    return klass.startswith(NAMED[:2]) or klass in NAMED[2:]


def _answer_chunk(subject, probes: list) -> list:
    """Per probe, in the worker: ("answer", Output | Crash | Refused | Unrecoverable), ("trace", class, verdict
    JSON or None), ("sequence", an answer per request), or (NOT_JUDGED, why)."""
    res: list = [None] * len(probes)
    todo = []
    for i, p in enumerate(probes):
        if isinstance(p, Trace):
            v = check_trace(p, subject)
            res[i] = ("trace", v.klass, None if v.klass == AGREE else v.to_json())
            continue
        if isinstance(p, Requests):
            try:
                res[i] = ("sequence", sequence_op(subject, p))
            except Unsupported as e:  # no sequences, or a request it cannot express
                res[i] = (NOT_JUDGED, str(e))
            continue
        why = subject.caps.lacks(p)
        if why is not None:
            res[i] = (NOT_JUDGED, why)
        else:
            todo.append(i)
    for i, out in zip(todo, subject.run_batch([probes[i] for i in todo]) if todo else []):
        res[i] = ("answer", out)
    return res


def _run(worker: Worker, probes: list) -> list:
    """Every probe's answer from the worker; a chunk that kills it is asked again one probe at a time."""
    res = []
    for i in range(0, len(probes), CHUNK):
        chunk = probes[i:i + CHUNK]
        got = worker.call(_answer_chunk, chunk)
        if isinstance(got, Crash):
            got = []
            for p in chunk:
                one = worker.call(_answer_chunk, [p])
                got += [("answer", one)] if isinstance(one, Crash) else one
        res += got
    return res


class Judged:
    """One probe judged: its case, the subject's answer, its class (or why it is not judged)."""

    def __init__(self, case, answer, klass: str, verdict=None, why: str = "", answers=None):
        self.case, self.answer, self.klass, self.verdict, self.why = case, answer, klass, verdict, why
        self.answers = answers  # a request of a sequence: every request of it judged (Judged)

    @property
    def judged(self) -> bool:
        return self.klass != NOT_JUDGED

    @property
    def fitted(self) -> bool:
        """Its answer goes into the fit: a case the subject answered whose class the judge does not name itself."""
        return self.judged and isinstance(self.case, (Case, Request)) and not _named(self.klass)


def _judge(sem, probe, r) -> list[Judged]:
    """The probe's answer judged: one Judged, or one per request of a sequence (each judged on its own)."""
    if isinstance(probe, Requests):
        if r[0] == NOT_JUDGED:
            return [Judged(item, None, NOT_JUDGED, why=r[1]) for item in probe.items()]
        answers = r[1] if r[0] == "sequence" else [r[1]] * len(probe)  # a worker that died on the sequence
        js = [_judge_one(sem, item, item.case, out) for item, out in zip(probe.items(), answers)]
        for j in js:
            j.answers = js  # every request's answer and class, for the witness
        return js
    if r[0] == NOT_JUDGED:
        return [Judged(probe, None, NOT_JUDGED, why=r[1])]
    if r[0] == "trace":
        return [Judged(probe, None, r[1], r[2])]
    if isinstance(probe, Trace) and isinstance(r[1], Crash):  # the worker died on the trace: class crash
        c = r[1]
        return [Judged(probe, None, "crash", {"class": "crash", "status": "crash", "detail": c.detail,
                                              "signal": c.signal})]
    return [_judge_one(sem, probe, probe, r[1])]


def _judge_one(sem, probe, case: Case, out) -> Judged:
    try:
        v = crash_verdict(case, out) if isinstance(out, Crash) else judge_output(case, sem, out)
    except Unsupported as e:
        return Judged(probe, out, NOT_JUDGED, why=str(e))
    return Judged(probe, out, v.klass, v)


def _cause(j: Judged, fitted: tuple, own: tuple, sorted_flag: bool, abi: int):
    """What makes probe j differ in its property's cell: None (it agrees, or another property's cause explains
    it), or ((kind, name), ...): a model of this property (kind model), the judge's own class (kind class), or
    nothing fitted (kind residual, named by its class)."""
    if not j.judged or j.klass == AGREE or not (is_finding(j.klass) or j.klass.startswith("declared-")):
        return None
    if _named(j.klass) or not isinstance(j.case, (Case, Request)):
        return (("class", j.klass),)
    if not explains(j.case, j.answer, fitted, sorted_flag, abi):
        return (("residual", j.klass),)
    rest = tuple(m for m in fitted if m not in own)
    if explains(j.case, j.answer, rest, sorted_flag, abi):
        return None
    needed = tuple(m for m in own if not explains(j.case, j.answer, tuple(x for x in fitted if x != m),
                                                  sorted_flag, abi))
    return tuple(("model", m) for m in (needed or own))


def _fits_witness(j: Judged, name: str, kind: str) -> bool:
    """A probe that can stand as this cause's witness: one the subject answered, for a model of what DRY leaves
    (not a raise or refusal another cause makes)."""
    if kind != "model" or BY_PATTERN[pattern(name)].kind in ("raise", "refusal"):
        return True
    return isinstance(j.answer, Output)


def _witness(j: Judged, abi: int, without: tuple | None = None) -> dict:
    """A probe as a cause's witness: the probe, its class, what llama.cpp gave, what llama.cpp composed with the
    row's other causes gave (`without`: the causes but this one, where that differs from llama.cpp alone), and what
    the subject gave; a request of a sequence: the sequence, which request, and those three for every request)."""
    if isinstance(j.case, Request):
        w = {"class": j.klass, "probe": j.case.sequence.to_json(), "request": j.case.index + 1}
        w.update(_values(j.case, j.answer, abi, without))
        w["per_request"] = [{"class": x.klass, **_values(x.case, x.answer, abi, without)} for x in j.answers or []]
    else:
        w = {"class": j.klass, "probe": j.case.to_json()}
        if isinstance(j.case, Case):
            w.update(_values(j.case, j.answer, abi, without))
    if j.verdict is not None:
        w["verdict"] = j.verdict if isinstance(j.verdict, dict) else j.verdict.to_json()
    return w


def _values(probe, answer, abi: int, without: tuple | None) -> dict:
    """What llama.cpp gave for a probe, what it gave composed with the other causes (where that differs), what the
    subject gave."""
    w = {"llama.cpp": predicted_json(probe, (), abi)}
    if without:
        other = predicted_json(probe, without, abi)
        if other != w["llama.cpp"]:
            w["without"] = other
    w["subject"] = answer_json(answer)
    return w


def describe(name: str, kind: str, citations: dict, sources: dict) -> dict:
    """A cause as the cell names it: the model (its meaning, whether the subject declares it and where its
    documentation says so, the engine's source line) or the class."""
    if kind == "model":
        d = {"name": name, "kind": "declared" if name in citations else "observed",
             "meaning": meaning(name)}
        if name in citations:
            d["cited"] = citations[name]
        src = sources.get(name) or sources.get(pattern(name))
        if src:
            d["source"] = src
        return d
    if kind == "class":
        return {"name": name, "kind": "class"}
    return {"name": f"unexplained {name}", "kind": "residual", "class": name}


def cell(prop, judged: list, fitted: tuple, citations: dict, sources: dict, sorted_flag: bool, abi: int,
         seconds: float) -> dict:
    """A property's cell from its probes judged, after composing the row's other causes."""
    own = tuple(m for m in fitted if pattern(m) in prop.explains)
    classes: dict = {}
    not_judged: dict = {}
    causes: dict = {}
    answered = 0
    for j in judged:
        if not j.judged:
            not_judged[j.why] = not_judged.get(j.why, 0) + 1
            continue
        classes[j.klass] = classes.get(j.klass, 0) + 1
        answered += isinstance(j.answer, Output) or isinstance(j.case, Trace)
        for kind, name in _cause(j, fitted, own, sorted_flag, abi) or ():
            rest = tuple(m for m in fitted if m != name)
            c = causes.setdefault((kind, name), {**describe(name, kind, citations, sources), "probes": 0})
            c["probes"] += 1
            # its witness: the first probe that needs it and can show it (_fits_witness), else the first
            if "witness" not in c or (c.get("_unfit") and _fits_witness(j, name, kind)):
                c["witness"] = _witness(j, abi, rest if kind == "model" else None)
                c["_unfit"] = not _fits_witness(j, name, kind)
    n = sum(classes.values())
    kinds = {c["kind"] for c in causes.values()}
    if not n:
        status = NOT_EXPRESSIBLE
    elif kinds - {"declared"}:
        status = "differs"
    elif kinds:
        status = "declared"
    elif not answered:  # every probe raised or was refused, for another property's cause
        status = NOT_JUDGED
        not_judged["every probe judged raised or was refused: another property's cause"] = n
    else:
        status = "conforms"
    out = {"property": prop.name, "title": prop.title, "status": status, "probes": len(judged), "judged": n,
           "answered": answered, "classes": dict(sorted(classes.items())), "seconds": round(seconds, 2)}
    if not_judged:
        out["not_judged"] = not_judged
    if causes:
        for c in causes.values():
            c.pop("_unfit", None)
        out["causes"] = sorted(causes.values(), key=lambda c: (c["kind"] == "declared", -c["probes"]))
    return out


def _read_witness(path: str):
    """A witness file (Case JSON, trace JSON, request sequence, corpus entry or crash file) as a Case, a Trace or
    Requests, read as `dryz check` reads it."""
    s = load_requests_file(path)
    if s is not None:
        return s[0]
    t = load_trace_file(path)
    return t[0] if t is not None else load_case_file(path)[0]


class Answers:
    """The answers a subject gave to probes, kept in a file between two runs on the same subject (an audit's
    properties, then its properties with the campaign's witnesses: the probes are not asked twice). The file is
    dryz's own (pickled, with the subject's identity: another subject's answers are never read)."""

    def __init__(self, path, ident: dict):
        self.path, self.key = (Path(path) if path else None), json.dumps(ident, sort_keys=True, default=str)
        self.kept: dict = {}
        if self.path is not None and self.path.is_file():
            try:
                key, kept = pickle.loads(self.path.read_bytes())
            except Exception:  # noqa: BLE001 (a file that is not ours, or from another version: asked again)
                key, kept = None, {}
            if key == self.key:
                self.kept = kept

    def run(self, worker, probes: list) -> list:
        """Every probe's result (_run's), the kept ones not asked again."""
        keys = [json.dumps(p.to_json(), sort_keys=True) for p in probes]
        todo = [i for i, k in enumerate(keys) if k not in self.kept]
        for i, r in zip(todo, _run(worker, [probes[i] for i in todo]) if todo else []):
            self.kept[keys[i]] = r
        return [self.kept[k] for k in keys]

    def save(self) -> None:
        if self.path is not None:
            write_bytes(self.path, pickle.dumps((self.key, self.kept)))


def row(lib, names=None, witnesses=(), log=lambda m: None, fitted=(), answers=None) -> dict:
    """The subject's row: its causes fitted, a cell per property (all, or those named), the witnesses attributed.
    answers: a file of the subject's answers kept between runs (Answers)."""
    ident = lib.identity
    kept = Answers(answers, ident)
    citations = dict(ident.get("citations") or {})
    sources = dict(ident.get("sources") or {})
    sem = semantics(lib)
    calls = set(lib.caps.calls)
    sorted_flag = bool(lib.caps.sorted_flag)
    t0 = time.monotonic()
    props = [p for p in PROPERTIES if not names or p.name in names]
    judged: dict = {}
    seconds: dict = {}
    with Worker(lib.spec, lib, timeout=None) as w:
        for prop in props:
            t = time.monotonic()
            if prop.traces and not {"reset", "clone", "free"} <= calls:
                missing = ", ".join(sorted({"reset", "clone", "free"} - calls))
                judged[prop.name] = [Judged(None, None, NOT_JUDGED, why=f"the subject does not expose {missing}")]
            else:
                probes = prop.probes()
                judged[prop.name] = [j for p, r in zip(probes, kept.run(w, probes)) for j in _judge(sem, p, r)]
            seconds[prop.name] = time.monotonic() - t
            log(f"{prop.name}: {sum(j.judged for j in judged[prop.name]):,} judged")
        found = []
        for path in witnesses:
            probe = _read_witness(path)
            found += [(str(path), j) for j in _judge(sem, probe, _run(w, [probe])[0])]
    kept.save()
    pairs = [(j.case, j.answer) for js in judged.values() for j in js if j.fitted] + \
        [(j.case, j.answer) for _, j in found if j.fitted]
    t = time.monotonic()
    f = fit(pairs, sorted_flag, start=tuple(fitted) + tuple(c for c in citations if c not in fitted), abi=lib.abi,
            log=lambda m: log(f"  {m}"))
    log(f"causes: {', '.join(f.models) or 'none'}; residual {len(f.residual):,} of {f.judged:,} answers "
        f"({time.monotonic() - t:.1f} s)")
    cells = {p.name: cell(p, judged[p.name], f.models, citations, sources, sorted_flag, lib.abi, seconds[p.name])
             for p in props}
    attributed = []
    for path, j in found:  # a campaign's witness: the causes that explain it, or the residual (other)
        a = {"witness": path, "class": j.klass}
        if not j.judged:
            a.update(klass=NOT_JUDGED, why=j.why)
        elif is_finding(j.klass) or j.klass.startswith("declared-"):
            needed = _cause(j, f.models, f.models, sorted_flag, lib.abi) or ()
            a["causes"] = [name for _, name in needed]
            for kind, name in needed:  # each cause it needs: in its property's cell, this witness its own
                p = _property_of(name, kind)
                c = cells.setdefault(p or OTHER, _other_cell())
                c.setdefault("campaign_witnesses", []).append(a)
                if kind == "residual":
                    entry = {"name": f"unexplained {j.klass}", "kind": "residual", "class": j.klass}
                elif kind == "class":
                    entry = {"name": name, "kind": "class"}
                else:
                    entry = describe(name, kind, citations, sources)
                have = next((x for x in c.setdefault("causes", []) if x["name"] == entry["name"]), None)
                if have is None:
                    have = {**entry, "probes": 0, "witness": {"class": j.klass, "file": path}}
                    c["causes"].append(have)
                have["campaign"] = have.get("campaign", 0) + 1
                if have["kind"] != "declared":
                    c["status"] = "differs"
                elif c["status"] == "conforms":
                    c["status"] = "declared"
        attributed.append(a)
    return {"tool": "dryz properties", "subject": ident, "cells": cells, "witnesses": attributed,
            "fit": {"models": list(f.models), "declared": [m for m in f.models if m in citations],
                    "observed": [m for m in f.models if m not in citations],
                    "declared_not_fitted": [m for m in citations if m not in f.models],
                    "residual": len(f.residual), "answers": f.judged, "llama.cpp": f.llama},
            "seconds": round(time.monotonic() - t0, 1)}


def _property_of(name: str, kind: str) -> str | None:
    if kind != "model":
        return None
    return next((p.name for p in PROPERTIES if pattern(name) in p.explains), None)


def _other_cell() -> dict:
    return {"property": OTHER, "title": "other differences", "status": "conforms", "probes": 0, "judged": 0,
            "answered": 0, "classes": {}, "seconds": 0.0}


def write_witnesses(result: dict, directory) -> list[str]:
    """Each cause's witness probe as a corpus entry (its property's first probe that needs it, shortest first: not
    minimized here; `dryz minimize --cause` shrinks it keeping the cause)."""
    written = []
    ident = result["subject"]
    for key, c in result["cells"].items():
        for cause in c.get("causes", []):
            w = cause.get("witness") or {}
            note = f"property {key}: the first probe that shows {cause['name']}"
            prov = {"tool": "dryz properties", "property": key, "cause": cause["name"]}
            if "requests" in w.get("probe", {}):  # a request sequence: its class is its first request's finding
                seq = Requests.from_json(w["probe"])
                klass = next((r["class"] for r in w["per_request"] if is_finding(r["class"])), AGREE)
                entry = requests_entry(seq, klass, "not-minimized", prov, ident, w["per_request"], note)
                cause["written"] = str(write_entry(Path(directory), entry))
                written.append(cause["written"])
                continue
            if "probe" not in w or "history" not in w["probe"]:
                continue
            case = Case.from_json(w["probe"])
            v = w.get("verdict") or {}
            if w["class"] in ("crash", "memory") or "expected_logits" not in v:
                entry = crash_entry(case, "not-minimized", prov, ident)
                entry["note"] = note
                if w.get("subject"):
                    entry["answer"] = w["subject"]
            else:
                entry = entry_json(case, SimpleNamespace(klass=v["class"], **v), expect=w["class"],
                                   shortest="not-minimized", provenance=prov, subject=ident, note=note)
            cause["written"] = str(write_entry(Path(directory), entry))
            written.append(cause["written"])
    return written


def exit_code(result: dict) -> int:
    """1 when a cell differs, 2 when the subject could express none of the probes, else 0."""
    cells = result["cells"].values()
    if any(c["status"] == "differs" for c in cells):
        return 1
    return 0 if any(c["judged"] for c in cells) else 2


def command(names, witnesses, json_path, corpus_dir, echo, fitted=(), answers=None) -> int:
    """`dryz properties` past its options: the selected subject's row, printed (and written as JSON)."""
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        fail(f"--property {unknown[0]!r}: not a property (properties: {', '.join(BY_NAME)})")
    for w in witnesses:
        if not Path(w).is_file():
            fail(f"--witness {w}: no such file")
    lib = load_subject()
    result = row(lib, set(names), witnesses, log=say, fitted=fitted, answers=answers)
    if corpus_dir:
        result["written"] = write_witnesses(result, corpus_dir)
    echo(properties_text(result))
    if json_path:
        write_json(json_path, result)
    echo(properties_ending(result, json_path, selected_spec(), inputs.ENTRY_ARGV))
    return exit_code(result)
