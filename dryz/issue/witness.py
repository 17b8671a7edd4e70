"""The witnesses an issue report is made from: one per cause, each with what the report says of it.

A witness is a corpus entry or a minimized conformance witness (`dryz minimize --cause` keeps the cause it shows,
the fitted causes and the subject's answer), or a cause of a subject's row (a `dryz properties` or `dryz
conformance` result: each cell's causes, their minimized witness where conformance made one, else their first
probe). The engine's source lines and documentation are the subject's identity's (an adapter's hello: `sources`,
`citations`), as the entry or the result recorded them.

An entry that does not name its cause (one minimized by its class) is fitted alone (dryz.causes.fit on its one
answer, the subject's declared deviations tried first): its report says so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..case import Case
from ..causes import answer_json, answer_of, explains, fit
from ..corpus import load_entry
from ..errors import DryzError
from ..oracle.deviations import BY_PATTERN, DeviationError, meaning, parse, pattern
from ..subject.answers import Crash, Output

LLAMA_KINDS = ("libllama", "llama-cpp-python", "server")


class IssueError(ValueError, DryzError):
    """What an issue report cannot be made from (one line)."""


@dataclass
class Witness:
    """One cause and the input that shows it, with everything its report says."""
    cause: str                 # a deviation model, the judge's class (crash), or "unexplained CLASS"
    kind: str                  # observed | declared | class | residual
    identity: dict             # the subject: engine, engine_version, label, spec, sources, citations
    case: Case | None = None   # the input (a case; a request sequence's request that differs) ...
    trace: object = None       # ... or a trace (a class cause: traces are not fitted)
    requests: object = None    # the request sequence (dryz.requests.Requests) whose request `index` is `case`
    index: int = 0
    answer: object = None      # what the engine answered the case: Output, Crash or Refused
    causes: tuple = ()         # the fitted causes the witness was kept with
    shortest: str = ""         # proven | 1-minimal | not minimized
    source: str = ""           # the file (or result) it came from
    probes: int = 0            # how many of the row's probes need the cause (a result's count; 0: not known)
    prop: str = ""             # the property whose cell names the cause
    fitted_alone: bool = False  # the cause was fitted on this one answer (an entry that does not name it)
    detail: str = ""           # a class cause's verdict detail (what the engine did)
    extra: dict = field(default_factory=dict)

    @property
    def engine(self) -> str:
        return str(self.identity.get("engine") or self.identity.get("kind") or "the engine")

    @property
    def version(self) -> str:
        return str(self.identity.get("engine_version") or "").split(" (")[0]

    @property
    def probe(self):
        """The input as the causes read it: the case, or the request with the prompts sent before it."""
        if self.requests is None:
            return self.case
        from ..requests import Request  # on use: a request sequence witness
        return Request(self.requests, self.index)

    @property
    def earlier(self) -> tuple:
        """The requests sent before the witness's one to the same instance (cases; none for a single case)."""
        return tuple(self.requests.requests[:self.index]) if self.requests is not None else ()

    @property
    def model(self) -> bool:
        """The cause is a deviation model (else the judge's class or the residual)."""
        return self.kind in ("observed", "declared")

    @property
    def meaning(self) -> str:
        """The model's meaning with its number (match-cap:12: "a repeat counts at most 12 tokens")."""
        if not self.model:
            return ""
        return meaning(self.cause)

    @property
    def source_line(self) -> str:
        src = self.identity.get("sources") or {}
        return src.get(self.cause) or (src.get(pattern(self.cause)) if self.model else None) or ""

    @property
    def cited(self) -> str:
        return (self.identity.get("citations") or {}).get(self.cause, "")

    def slug(self) -> str:
        """A file name for its report: the engine and the cause."""
        return re.sub(r"[^\w.-]+", "-", f"{self.engine}-{self.cause}").strip("-").lower()


def _refuse_llama(identity: dict, where: str) -> None:
    if identity.get("kind") in LLAMA_KINDS or not identity.get("engine"):
        raise IssueError(f"{where}: recorded on {identity.get('kind') or 'a subject'} "
                         f"{identity.get('spec', '')}: an issue report is for another engine's DRY (engine:NAME, "
                         "ik-llama:); a llama.cpp finding is exported --as test-sampling, pytest or c")


def _answer(e, case: Case):
    """The engine's answer an entry records: its `answer` (dryz minimize --cause), else its observed logits or its
    crash."""
    d = e.data
    if d.get("answer"):
        return answer_of(case, d["answer"])
    if e.expect in ("crash", "memory"):
        return Crash(d.get("verdict", {}).get("detail", "") or d.get("detail", ""), "exception")
    rows = d.get("candidates") or []
    if rows and all("observed_logit" in r for r in rows):
        logits = np.array([float(r["observed_logit"]) for r in rows], dtype=np.float32)
        return Output(tuple(case.ids), logits, None, len(logits))
    raise IssueError(f"{e.path}: the entry records no answer of the engine (no observed logits, no crash)")


def _request(e) -> tuple:
    """A request sequence entry's (Request, answer): its first request the engine answered otherwise than llama.cpp
    (the requests before it are what the instance had answered)."""
    from ..requests import Request  # on use: a request sequence witness
    per = e.data.get("per_request") or []
    k = next((i for i, r in enumerate(per) if r.get("class") not in (None, "agree")), None)
    if k is None or k >= len(e.requests) or not (per[k].get("subject") or {}):
        raise IssueError(f"{e.path}: the entry records no request the engine answered otherwise than llama.cpp")
    r = Request(e.requests, k)
    return r, answer_of(r, per[k]["subject"])


def _entry_witness(e, **kw) -> Witness:
    """A witness of an entry's input: a trace, a request sequence's differing request, or a case."""
    detail = (e.data.get("verdict") or {}).get("detail", "")
    if e.trace is not None:
        return Witness(trace=e.trace, detail=detail, **kw)
    if e.requests is not None:
        r, answer = _request(e)
        return Witness(case=r.case, requests=e.requests, index=r.index, answer=answer, detail=detail, **kw)
    return Witness(case=e.case, answer=_answer(e, e.case), detail=detail, **kw)


def from_entry(path: str) -> Witness:
    """The witness an entry is: its cause (the one it was minimized for, else fitted on its one answer)."""
    e = load_entry(Path(path))
    ident = dict(e.data.get("subject") or {})
    _refuse_llama(ident, str(path))
    prov = e.data.get("provenance") or {}
    if e.trace is not None:
        return _entry_witness(e, cause=e.expect, kind="class", identity=ident, shortest=e.data.get("shortest", ""),
                              source=str(path))
    if e.case is not None and e.case.vocab is not None:
        raise IssueError(f"{path}: a case on a real vocabulary ({e.case.vocab}): the reports reproduce dryz's "
                         "symbol vocabulary with the engine alone")
    w = _entry_witness(e, cause="", kind="", identity=ident, shortest=e.data.get("shortest", ""), source=str(path))
    case, answer = w.probe, w.answer
    declared = tuple(ident.get("deviations") or ())
    cause, causes = prov.get("cause"), tuple(prov.get("causes") or ())
    if cause and cause != "unexplained":
        w.cause, w.causes = cause, causes
    else:
        if explains(case, answer, ()):
            raise IssueError(f"{path}: the engine's answer is what llama.cpp gives: nothing to report")
        f = fit([(case, answer)], start=declared)
        w.causes, w.fitted_alone = f.models, True
        needed = [m for m in f.models if not explains(case, answer, tuple(x for x in f.models if x != m))]
        w.cause = needed[0] if needed and not f.residual else ""
        if not w.cause:
            w.cause, w.kind = f"unexplained {e.expect}", "residual"
            return w
    try:
        parse(w.cause)
    except DeviationError:
        raise IssueError(f"{path}: its cause {w.cause!r} is not a model dryz has") from None
    w.kind = "declared" if w.cause in (ident.get("citations") or {}) or w.cause in declared else "observed"
    return w


def rows_of(result: dict, spec: str) -> dict:
    """The subject's row of a `dryz properties` or `dryz conformance` result: {"subject": identity, "cells",
    "fit"}; IssueError when it has none for the spec."""
    if result.get("tool") == "dryz properties":
        row = {"identity": result["subject"], "cells": result["cells"], "fit": result.get("fit") or {}}
    elif result.get("tool") == "dryz conformance":
        mine = [r for r in result["rows"] if r.get("spec") == spec or (r.get("identity") or {}).get("spec") == spec]
        if not mine:
            raise IssueError(f"the result has no row for {spec} (its rows: "
                             + ", ".join(str(r.get("spec")) for r in result["rows"]) + ")")
        r = mine[0]
        if r.get("error") and not r.get("cells"):
            raise IssueError(f"the result's row for {spec} has no cells: {r['error']}")
        row = {"identity": r.get("identity") or {}, "cells": r["cells"], "fit": r.get("fit") or {}}
    else:
        raise IssueError("not a dryz properties or dryz conformance result (its tool: "
                         f"{result.get('tool')!r})")
    got = (row["identity"] or {}).get("spec")
    if got and got != spec:
        raise IssueError(f"the result is for {got}, not the selected subject {spec}")
    return row


def from_row(row: dict, where: str) -> list[Witness]:
    """One witness per cause of the row (a cause named by several cells once: its first cell's), its minimized
    witness where conformance made one, else its first probe."""
    ident = dict(row["identity"] or {})
    _refuse_llama(ident, where)
    fitted = tuple(row["fit"].get("models") or ())
    out: dict = {}
    for key, c in row["cells"].items():
        for cause in c.get("causes", []):
            name = cause["name"]
            if name in out:
                out[name].probes += cause.get("probes", 0)
                continue
            w = _cause_witness(cause, ident, fitted, where)
            if w is None:
                continue
            w.prop = c.get("title", key)
            out[name] = w
    return list(out.values())


def _cause_witness(cause: dict, ident: dict, fitted: tuple, where: str) -> Witness | None:
    w = cause.get("witness") or {}
    kind = cause["kind"]
    name = cause["name"]
    if w.get("minimized") and Path(w["minimized"]).is_file():
        e = load_entry(Path(w["minimized"]))
        return _entry_witness(e, cause=name, kind=kind, identity=ident, causes=() if e.trace is not None else fitted,
                              shortest=w.get("shortest") or e.data.get("shortest", ""), source=w["minimized"],
                              probes=cause.get("probes", 0))
    probe = w.get("probe")
    if not probe:
        return None
    if "events" in probe:
        from ..trace import Trace  # on use: a trace witness
        return Witness(name, kind, ident, trace=Trace.from_json(probe), shortest="not minimized (the first probe)",
                       source=where, probes=cause.get("probes", 0),
                       detail=(w.get("verdict") or {}).get("detail", ""))
    if not w.get("subject"):
        return None
    if "requests" in probe:  # a request sequence: its request `request` (1-based) differs
        from ..requests import Request, Requests  # on use: a request sequence witness
        r = Request(Requests.from_json(probe), int(w.get("request") or 1) - 1)
        return Witness(name, kind, ident, case=r.case, requests=r.sequence, index=r.index,
                       answer=answer_of(r, w["subject"]), causes=fitted,
                       shortest="not minimized (the first probe that needs it)", source=where,
                       probes=cause.get("probes", 0), detail=(w.get("verdict") or {}).get("detail", ""))
    case = Case.from_json(probe)
    return Witness(name, kind, ident, case=case, answer=answer_of(case, w["subject"]), causes=fitted,
                   shortest="not minimized (the first probe that needs it)", source=where,
                   probes=cause.get("probes", 0), detail=(w.get("verdict") or {}).get("detail", ""))


def read_result(path: str) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise IssueError(f"{path}: not a readable JSON result ({e})") from None


def answer_words(w: Witness) -> dict:
    """The engine's answer as the report and the script record it (answer_json)."""
    return answer_json(w.answer) if w.answer is not None else {"crash": w.detail}


KIND_WORDS = {"observed": "observed (a finding)", "declared": "declared by the engine's documentation",
              "class": "the judge's class", "residual": "unexplained (no model dryz has)"}
RAISE = ("raise",)  # model kinds whose witness is a raise


def raises(w: Witness) -> bool:
    return w.model and BY_PATTERN[pattern(w.cause)].kind in RAISE
