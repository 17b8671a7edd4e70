"""The corpus: one small, human-readable JSON file per reproducer or seed, each with its expected verdict.

Replay re-runs every entry through check() and compares the verdict's class with the entry's `expect`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .case import Case, CaseError, json_number
from .check import model_logits
from .errors import DryzError
from .files import wide_text
from .judge import check_in
from .oracle.reference import divergences, reference_output
from .oracle.deviations import REQUEST_LAYER, is_declared_class, replays_as
# A served-* witness (dryz/oracle/served.py) also holds `http`: the /completion request and llama-server's
# response; replay checks the response against the served model without a server.
from .oracle.served import CLASSES as SERVED_CLASSES, replay_http, validate_http, witness_cases, witness_http
from .subject.answers import Unsupported
from .subject.isolation import Worker
from .subject.server import ServerDied, ServerError
from .symbols import SYMBOLS, symbol_bytes
from .requests import Requests, RequestsError
from .requests_check import check_requests_in
from .trace import Trace, TraceError
from .trace_check import check_trace_in
from .verdict import AGREE, CLASSES, HARNESS_ERROR, is_finding
from .vocab_cases import history_text, pieces_for_people

CORPUS_SCHEMA = "dryz.corpus/1"
SHORTEST = ("proven", "1-minimal", "not-minimized")
KNOWN_CLASSES = CLASSES
_SYMBOL_TEXTS = symbol_bytes()

def _project_dir() -> Path:
    """The project's own corpus: `corpus/` at the top of a checkout (and of an editable install); in an
    installed wheel the same files as package data, `dryz/project_corpus/` (pyproject.toml maps it)."""
    here = Path(__file__).resolve().parent
    for d in (here / "project_corpus", here.parent / "corpus"):
        if (d / "findings").is_dir():
            return d
    return here.parent / "corpus"


# Replayed by default; what a user's command writes goes to ./corpus (the working directory), never here.
PROJECT_DIR = _project_dir()
DEFAULT_DIR = PROJECT_DIR
ENGINES_DIR = PROJECT_DIR / "engines"  # other engines' witnesses: `dryz --subject engine:NAME replay corpus/engines/NAME`
USER_DIR = Path("reproducers")  # dryz minimize without --corpus (never the project's corpus/)


class CorpusError(ValueError, DryzError):
    pass


@dataclass
class Entry:
    path: Path | None
    case: Case | None  # None for a trace entry
    expect: str
    data: dict  # the whole JSON object as stored
    trace: object = None  # a trace entry's Trace (dryz/trace.py); its `case` is None
    requests: object = None  # a request sequence entry's Requests (dryz/requests.py); its `case` is None


def crash_entry(case: Case, shortest: str, provenance: dict, identity: dict, sanitizer: dict | None = None) -> dict:
    """The stored form of a case on which the library crashed (no verdict to record: the process died); with a
    sanitizer report (subject.sanitizer.died), class memory and the report's summary and first frames."""
    klass = "memory" if sanitizer else "crash"
    extra = {"sanitizer": {k: sanitizer[k] for k in ("sanitizer", "kind", "summary", "frames")}} if sanitizer \
        else {}
    return {"schema": CORPUS_SCHEMA, "expect": klass, "class": klass, "shortest": shortest,
            **_history_spelling(case), "note": "", "case": case.to_json(), **extra,
            "subject": subject_json(identity), "provenance": provenance}


def entry_json(case: Case, verdict, *, expect: str, shortest: str, provenance: dict, subject: dict,
               note: str = "") -> dict:
    """The stored form: the case, what the library did and what the oracle expected, per candidate."""
    if shortest not in SHORTEST:
        raise ValueError(f"shortest must be one of {SHORTEST}")
    per_candidate = []
    label = _labels(case)
    at = lambda xs, i: xs[i] if i < len(xs) else None  # noqa: E731 (a refusal has no logits: None)
    num = lambda x: None if x is None else json_number(x)  # noqa: E731
    for i, cid in enumerate(verdict.candidates):
        row = {"id": cid, **label(cid),
               "initial_logit": json_number(case.initial_logits()[i]),
               "expected_logit": num(at(verdict.expected_logits, i)),
               "observed_logit": num(at(verdict.observed_logits, i)),
               "oracle_L": at(verdict.oracle_L, i)}
        if verdict.library_L is not None:
            row["library_L"] = verdict.library_L[i]
        per_candidate.append(row)
    return {
        "schema": CORPUS_SCHEMA,
        "expect": expect,
        "class": verdict.klass,
        "shortest": shortest,
        **_history_spelling(case),
        "note": note,
        "case": case.to_json(),
        "verdict": {"status": verdict.status, "detail": verdict.detail,
                    "expected_sorted": verdict.expected_sorted, "observed_sorted": verdict.observed_sorted,
                    "broken_promises": verdict.broken_promises, "differing": verdict.differing},
        "candidates": per_candidate,
        "subject": subject_json(subject),
        "provenance": provenance,
    }


SUBJECT_KEYS = ("kind", "spec", "label", "llama_cpp_python", "libllama_sha256", "libllama_path", "llama_cpp_commit",
                "init_dry_abi", "built_by_dryz", "engine", "engine_version", "deviations",
                # an engine's documentation and source lines (its adapter's), and a patch: an issue report's
                "citations", "sources", "patch")


def subject_json(identity: dict) -> dict:
    """What a corpus entry records of the subject it was made on (None fields left out)."""
    return {k: identity[k] for k in SUBJECT_KEYS if identity.get(k) is not None}


def _history_spelling(case: Case) -> dict:
    """history_symbols for the symbol vocabulary; for a real one, history_text (the tokens' pieces as a client
    prints them: for people, not checked on load)."""
    if case.vocab is None:
        return {"history_symbols": case.symbols}
    return {"history_text": history_text(case)}


def _labels(case: Case):
    """Per candidate: its symbol, or for a real vocabulary its piece."""
    if case.vocab is None:
        return lambda cid: {"symbol": _sym(cid)}
    pieces = pieces_for_people(case)
    return lambda cid: {"piece": pieces[cid].decode("utf-8", errors="replace")}


def _sym(cid: int) -> str:
    return SYMBOLS[cid] if 0 <= cid < len(SYMBOLS) else "?"


def reference_witness_entry(case: Case, klass: str, verdict, shortest: str, provenance: dict, subject: dict,
                            note: str = "") -> dict:
    """A corpus entry for a reference-design divergence witness (dryz.oracle.reference): expect = its check()
    class (agree), plus reference_divergence and the reference design's own output per candidate."""
    data = entry_json(case, verdict, expect=verdict.klass, shortest=shortest, provenance=provenance,
                      subject=subject, note=note)
    ref = reference_output(case)
    data["reference_divergence"] = klass
    data["reference"] = {
        "design": "text-generation-webui DRYLogitsProcessor (dryz.oracle.reference)",
        "error": ref.error,
        "divergences": divergences(case, verdict),
        "per_candidate": [
            {"id": cid, "L": ref.L[i], "penalized": ref.penalized[i],
             "logit": None if ref.logits is None else json_number(float(ref.logits[i]))}
            for i, cid in enumerate(case.candidate_ids())],
    }
    return data


def file_name(data: dict) -> str:
    if "requests" in data and "case" not in data:
        digest = hashlib.sha256(json.dumps(data["requests"], sort_keys=True).encode()).hexdigest()[:10]
        return f"{data['expect']}-requests-{digest}.json"
    if "trace" in data and "case" not in data:
        digest = hashlib.sha256(json.dumps(data["trace"], sort_keys=True).encode()).hexdigest()[:10]
        return f"{data['expect']}-trace-{digest}.json"
    digest = hashlib.sha256(json.dumps(data["case"], sort_keys=True).encode()).hexdigest()[:10]
    sep = (data.get("separates") or {}).get("class")  # a witness of a difference between two subjects
    return f"{data['expect']}-{sep + '-' if sep else ''}{digest}.json"


def write_entry(directory: Path, data: dict) -> Path:
    """Atomic: a temp file in the same directory, then rename, so a corpus never holds half an entry.
    A reproducer made under an injected fault is refused by the project's own corpus."""
    validate_entry(data, "<new entry>")
    directory = Path(directory)
    fault = (data.get("provenance") or {}).get("fault")
    if fault and directory.resolve() == PROJECT_DIR:
        raise CorpusError(f"a reproducer made under DRYZ_FAULT={fault} does not belong in the project corpus "
                          f"({PROJECT_DIR}); give --corpus DIR")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file_name(data)
    tmp = directory / f".{path.name}.tmp{os.getpid()}"
    tmp.write_text(dumps_readable(data))
    os.replace(tmp, path)
    return path


_FLAT_LIST = re.compile(r"\[\s*([^\[\]{}\"]*(?:\"[^\"]*\"[^\[\]{}\"]*)*)\s*\]")


def dumps_readable(data: dict) -> str:
    """Indented JSON with lists of scalars on one line (a history reads as one line, not one per token)."""
    text = json.dumps(data, indent=2)
    return _FLAT_LIST.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]"
                          if m.group(1).strip() else "[]", text) + "\n"


def validate_entry(data, where: str) -> Case:
    from .formats import FormatError, check_as  # on use (the format's shape first, then what a shape cannot say)
    if not isinstance(data, dict):
        raise CorpusError(f"{where}: a corpus entry must be a JSON object")
    schema = data.get("schema")
    if schema != CORPUS_SCHEMA:
        raise CorpusError(f"{where}: schema {schema!r} is not {CORPUS_SCHEMA!r}")
    try:
        check_as(data, "corpus", where)
    except FormatError as e:
        raise CorpusError(str(e)) from None
    if "trace" in data and "case" not in data:
        return validate_trace_entry(data, where)
    if "requests" in data and "case" not in data:
        return validate_requests_entry(data, where)
    _entry_head(data, where, "case")
    try:
        case = Case.from_json(data["case"])
    except CaseError as e:
        raise CorpusError(f"{where}: case: {e}") from None
    if "history_symbols" in data and data["history_symbols"] != case.symbols:
        raise CorpusError(f"{where}: history_symbols {data['history_symbols']!r} does not match the case")
    if "http" in data:  # a served-* witness: the HTTP request sent to llama-server and its response
        try:
            validate_http(data["http"], where)
        except ValueError as e:
            raise CorpusError(str(e)) from None
    return case


def _entry_head(data: dict, where: str, body: str) -> None:
    """The fields every entry has: its body ("case" or "trace"), expect (a known class) and shortest."""
    for key in ("expect", body, "shortest"):
        if key not in data:
            raise CorpusError(f"{where}: missing field {key!r}")
    if data["expect"] not in KNOWN_CLASSES and not str(data["expect"]).startswith("promise-") \
            and data["expect"] not in SERVED_CLASSES and not is_declared_class(str(data["expect"])):
        raise CorpusError(f"{where}: expect {data['expect']!r} is not a known class ({', '.join(KNOWN_CLASSES)})")
    if data["shortest"] not in SHORTEST:
        raise CorpusError(f"{where}: shortest {data['shortest']!r} is not one of {', '.join(SHORTEST)}")


# -- trace entries --------------------------------------------------------------------------------------------
#
# A trace entry is a dryz.corpus/1 object with a `trace` (a dryz.trace/1 object) where a case entry has its
# `case`: expect (the trace's class, TraceVerdict.klass), shortest, note, spelled (the trace's compact form),
# per apply the equivalent case and its class, subject, provenance. Case entries are unchanged.

TRACE_ENTRY_FIELDS = {"schema", "expect", "class", "shortest", "note", "spelled", "trace", "verdict", "applies",
                      "sanitizer", "subject", "provenance"}


def validate_trace_entry(data: dict, where: str):
    return _validate_body(data, where, "trace", TRACE_ENTRY_FIELDS, Trace.from_json, TraceError, "a trace entry")


def _validate_body(data: dict, where: str, body: str, fields: set, read, error, what: str):
    """A trace or request sequence entry: its fields, its head, its body read (read: from JSON, raising error), the
    body's spelling."""
    extra = sorted(set(data) - fields)
    if extra:
        raise CorpusError(f"{where}: unknown field(s) of {what}: {', '.join(extra)}")
    _entry_head(data, where, body)
    try:
        out = read(data[body])
    except error as e:
        raise CorpusError(f"{where}: {body}: {e}") from None
    if "spelled" in data and data["spelled"] != out.spelled():
        raise CorpusError(f"{where}: spelled {data['spelled']!r} does not match the {body}")
    return out


def trace_entry_json(trace, verdict, *, expect: str, shortest: str, provenance: dict, subject: dict,
                     note: str = "") -> dict:
    """The stored form of a trace: the trace, its class, and per apply the equivalent case and its class; for a
    trace the library died on (no apply judged), how it died, and for class memory the sanitizer report's kind,
    summary and first frames (as a case's crash_entry keeps them)."""
    if shortest not in SHORTEST:
        raise ValueError(f"shortest must be one of {SHORTEST}")
    crash = getattr(verdict, "crash", None) or {}
    died = {"signal": crash.get("signal"), "detail": crash.get("summary") or crash.get("detail")} if crash else {}
    extra = {"sanitizer": {k: crash[k] for k in ("sanitizer", "kind", "summary", "frames")}} \
        if crash.get("sanitizer") else {}
    return {"schema": CORPUS_SCHEMA, "expect": expect, "class": verdict.klass, "shortest": shortest, "note": note,
            "spelled": trace.spelled(), "trace": trace.to_json(),
            "verdict": {"status": verdict.status, "first_bad_apply": verdict.first_bad_apply, **died},
            "applies": [{"apply": a.index, "event": a.event, "class": a.klass, "fresh_equal": a.fresh_equal,
                         "history_symbols": a.case.symbols} for a in verdict.applies], **extra,
            "subject": subject_json(subject), "provenance": provenance}


# -- request sequence entries ----------------------------------------------------------------------------------
#
# A request sequence entry is a dryz.corpus/1 object with `requests` (a dryz.requests/1 object) where a case entry
# has its `case`: expect (the sequence's class: its first request's class that is a finding), shortest, spelled,
# the verdict per request, per request what llama.cpp gives and what the subject answered (`per_request`),
# subject, provenance.

REQUESTS_ENTRY_FIELDS = {"schema", "expect", "class", "shortest", "note", "spelled", "requests", "verdict",
                         "per_request", "subject", "provenance"}


def validate_requests_entry(data: dict, where: str):
    return _validate_body(data, where, "requests", REQUESTS_ENTRY_FIELDS, Requests.from_json, RequestsError,
                          "a request sequence entry")


def requests_entry(s, klass: str, shortest: str, provenance: dict, subject: dict, per_request: list, note: str = "",
                   verdict: dict | None = None) -> dict:
    """The stored form of a request sequence: the sequence, its class, per request what llama.cpp and the subject
    gave (and its class), and the verdict per request where it was judged here."""
    if shortest not in SHORTEST:
        raise ValueError(f"shortest must be one of {SHORTEST}")
    return {"schema": CORPUS_SCHEMA, "expect": klass, "class": klass, "shortest": shortest, "note": note,
            "spelled": s.spelled(), "requests": s.to_json(), **({"verdict": verdict} if verdict else {}),
            "per_request": per_request, "subject": subject_json(subject), "provenance": provenance}


def load_entry(path: Path) -> Entry:
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise CorpusError(f"{path}: cannot read ({e.strerror})") from None
    if wide_text(raw):
        raise CorpusError(f"{path}: {wide_text(raw)} text, not UTF-8 (JSON is UTF-8 text)")
    try:
        data = json.loads(raw.decode("utf-8"))
    except json.JSONDecodeError as e:
        raise CorpusError(f"{path}: not valid JSON ({e.msg}, line {e.lineno} column {e.colno})") from None
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}: not UTF-8 (byte {e.start})") from None
    except RecursionError:
        raise CorpusError(f"{path}: JSON nested too deeply") from None
    except ValueError as e:  # e.g. an integer of more than 4,300 digits
        raise CorpusError(f"{path}: not usable JSON ({e})") from None
    case = validate_entry(data, str(path))
    if isinstance(case, Requests):  # a request sequence entry
        return Entry(Path(path), None, data["expect"], data, requests=case)
    if not isinstance(case, Case):  # a trace entry
        return Entry(Path(path), None, data["expect"], data, trace=case)
    return Entry(Path(path), case, data["expect"], data)


def entries(directory: Path) -> list[Path]:
    """Every entry file below the directory; in the project's corpus, not the engines' witnesses (corpus/engines:
    their expectations are their engines' verdicts, replayed on them: dryz --subject engine:NAME replay ...)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CorpusError(f"{directory}: not a directory")
    project = directory.resolve() == PROJECT_DIR.resolve()
    return sorted(p for p in directory.rglob("*.json") if not p.name.startswith(".")
                  and not (project and ENGINES_DIR in p.parents))


@dataclass
class ReplayRow:
    path: Path
    expect: str
    got: str | None
    error: str = ""
    subject: dict | None = None  # what the entry says it was recorded on
    not_judged: str = ""         # why the subject cannot express the entry (its capabilities): counted, not judged

    @property
    def fixed(self) -> bool:
        """The entry's finding is gone as a fix the subject declares says it must be: its class is that fix's
        declared-<fix> (dryz.oracle.deviations.FIXES, replays_as), given only where the output equals the fix's
        model."""
        return bool(self.got) and replays_as(self.got, self.expect)

    @property
    def served(self) -> bool:
        """On a subject with a request layer (llama-server): the entry's class, recorded on a library (not a
        served-* witness, whose class must stay its own), is now a served-* class, which the served model gives
        only where the answer is exactly what it predicts for the entry's request (a documented difference of the
        layer, with its own witness in the corpus)."""
        return bool(self.got) and self.got in SERVED_CLASSES and self.expect not in SERVED_CLASSES

    @property
    def ok(self) -> bool:
        """As expected, as served, fixed as declared, or not judged (neither a failure nor a pass of the
        entry)."""
        return not self.error and (self.got == self.expect or self.served or self.fixed or bool(self.not_judged))

    @property
    def status(self) -> str:
        """as expected | as served | fixed as declared | changed | invalid | not judged"""
        return "invalid" if self.error else "not judged" if self.not_judged else \
            "as expected" if self.got == self.expect else "as served" if self.served else \
            "fixed as declared" if self.fixed else "changed"

    def to_json(self) -> dict:
        return {"path": str(self.path), "status": self.status, "expect": self.expect, "got": self.got,
                **({"error": self.error} if self.error else {}),
                **({"not_judged": self.not_judged} if self.not_judged else {}),
                **({"recorded_on": self.subject} if self.subject else {})}


def replay_totals(rows: list[ReplayRow]) -> dict:
    """replayed, as expected, served (llama-server's served-* classes), fixed (as the subject declares), changed,
    invalid, not judged (with the reasons, counted)."""
    why: dict = {}
    for r in rows:
        if r.not_judged:
            why[r.not_judged] = why.get(r.not_judged, 0) + 1
    return {"replayed": len(rows), "as_expected": sum(r.status == "as expected" for r in rows),
            "served": sum(r.status == "as served" for r in rows),
            "fixed": sum(r.status == "fixed as declared" for r in rows),
            "changed": sum(r.status == "changed" for r in rows), "invalid": sum(r.status == "invalid" for r in rows),
            "not_judged": sum(why.values()), "not_judged_why": why}


def replay_json(rows: list[ReplayRow], directory, identity: dict) -> dict:
    """What `dryz replay --json` writes: the subject, every entry's status, the totals."""
    return {"tool": "dryz replay", "subject": identity, "directory": str(directory),
            "entries": [r.to_json() for r in rows], "totals": replay_totals(rows)}


def replay(directory: Path, subject, select=None) -> list[ReplayRow]:
    """Every entry judged on the subject, each in its isolation worker (an entry that kills the subject, a
    crash witness replayed on an old release, is class crash and the replay goes on); a changed verdict in
    either direction is a failure. select(entry) -> bool: only the case entries it keeps (dryz replay --vocab;
    traces are over the symbol vocabulary). An entry the subject cannot express (its capabilities: a sorted
    candidate array, a trace's reset and clone, penalties it cannot read back) is not judged: counted, with why."""
    rows = []
    with Worker(subject.spec, subject) as w:
        for p in entries(directory):
            try:
                e = load_entry(p)
            except CorpusError as err:
                rows.append(ReplayRow(p, "?", None, str(err)))
                continue
            if select is not None and (e.case is None or not select(e)):
                continue
            fault = (e.data.get("provenance") or {}).get("fault")
            if fault and os.environ.get("DRYZ_FAULT") != fault:
                rows.append(ReplayRow(p, e.expect, None, f"made under DRYZ_FAULT={fault}: replay it with that "
                                                         "fault set, or remove it"))
                continue
            try:
                if "http" in e.data:  # a served-* witness: the stored HTTP request and response
                    got = _replay_http(e, subject)
                elif e.requests is not None:  # a request sequence, on one fresh instance of the subject
                    got = check_requests_in(w, subject, e.requests).klass
                else:
                    got = check_trace_in(w, e.trace).klass if e.trace is not None else check_in(w, e.case).klass
            except Unsupported as why:  # the subject cannot express it: not judged, never guessed
                rows.append(ReplayRow(p, e.expect, None, subject=e.data.get("subject"), not_judged=str(why)))
                continue
            except (CaseError, ValueError) as err:  # dryz could not judge it on this subject
                rows.append(ReplayRow(p, e.expect, None, f"the harness could not judge the entry: {err}"))
                continue
            rows.append(ReplayRow(p, e.expect, got, subject=e.data.get("subject")))
    return rows


def _replay_http(e: Entry, subject) -> str:
    """A served-* witness's class: on a llama-server subject, its stored request sent again (the server's answer
    judged by the served model, with the fixes of its request layer it declares); on any other, the stored
    response against the served model (pure: the witness still shows what llama-server's request layer does)."""
    http = e.data["http"]
    resend = getattr(subject, "resend", None)
    fixes = ()
    if resend is not None:
        fixes = tuple(d for d in subject.declared if d in REQUEST_LAYER)
        try:
            http = resend(e.case, http)
        except ServerDied as err:
            return f"crash ({err})"
    return replay_http(e.case, http, model_logits, _SYMBOL_TEXTS if e.case.vocab is None else None, fixes)[0]


def served_witness_entries(subject) -> list[dict]:
    """Each served-* witness sent to the server: the corpus entry (dryz.corpus/1 plus `http`) holding the
    request and the response (its `timings` dropped), checked by the served model before it is returned."""
    out = []
    for klass, case, req, note in witness_cases(symbol_bytes()):
        status, body = subject.send(req, case)
        if isinstance(body, dict):
            body = {k: v for k, v in body.items() if k != "timings"}
        http = witness_http(req, status, body)
        got, detail = replay_http(case, http, model_logits, symbol_bytes())
        if got != klass:
            raise ServerError(f"witness {klass}: the server's answer is {got} ({detail})")
        ident = subject.identity
        out.append({"schema": CORPUS_SCHEMA, "expect": klass, "class": klass, "shortest": "1-minimal",
                    "history_symbols": case.symbols, "note": note, "case": case.to_json(), "http": http,
                    "subject": {**subject_json(ident), "server_path": ident["path"],
                                "server_sha256": ident["sha256"], "server_version": ident["version"]},
                    "provenance": {"made_by": "dryz.corpus.served_witness_entries", "detail": detail}})
    return out


@lru_cache(maxsize=None)
def known_classes() -> frozenset[str]:
    """The classes a campaign does not report as new: every class the corpus documents (an entry whose expect
    is not agree; the corpus DRYZ_CORPUS names, else the project's) and every class that is not a finding
    (verdict.is_finding: agree, the source's documented limitations, declared deviations)."""
    d = os.environ.get("DRYZ_CORPUS", str(DEFAULT_DIR))
    out = {k for k in CLASSES if not is_finding(k) and k != HARNESS_ERROR}  # (never a verdict: a void run)
    try:
        for p in entries(d):
            try:
                e = load_entry(p)
            except CorpusError:
                continue
            if e.expect != AGREE:
                out.add(e.expect)
    except CorpusError:
        pass
    return frozenset(out)


def replay_text(rows, here: dict) -> str:
    """What `dryz replay` prints: one line per entry (ok, served: llama-server's request layer made the entry a
    served-* class as the served model predicts, fixed: the finding gone as a fix the subject declares says, CHANGED with where it was recorded, INVALID, SKIPPED: not judged, the subject cannot express it), then
    the counts, and why entries were not judged."""
    lines = []
    for r in rows:
        made_on = (r.subject or {}).get("libllama_sha256")
        where = "" if not made_on or made_on == here.get("libllama_sha256") else \
            f" (recorded on libllama {made_on[:12]}, {(r.subject or {}).get('llama_cpp_python') or '?'})"
        if r.error:
            lines.append(f"INVALID {r.path}: {r.error}")
        elif r.not_judged:
            lines.append(f"SKIPPED {r.path.name}: not judged ({r.not_judged})")
        elif r.served:
            lines.append(f"served  {r.path.name}: {r.expect}, now {r.got} (the request layer, as modelled)")
        elif r.fixed:
            lines.append(f"fixed   {r.path.name}: {r.expect}, now {r.got}")
        elif r.ok:
            lines.append(f"ok      {r.path.name}: {r.expect}")
        else:
            lines.append(f"CHANGED {r.path}: expected {r.expect}, now {r.got}{where}")
    t = replay_totals(rows)
    lines.append(f"replayed {t['replayed']} entries: {t['as_expected']} as expected, "
                 + (f"{t['served']} as served, " if t["served"] else "")
                 + (f"{t['fixed']} fixed as declared, " if t["fixed"] else "") + f"{t['changed']} changed, "
                 f"{t['invalid']} invalid" + (f", {t['not_judged']} not judged" if t["not_judged"] else ""))
    lines += [f"  not judged: {n} x {why}" for why, n in t["not_judged_why"].items()]
    return "\n".join(lines)
