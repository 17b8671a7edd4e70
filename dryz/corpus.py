"""The corpus: one small, human-readable JSON file per reproducer or seed, each with its expected verdict.

Replay re-runs every entry through check() and compares the verdict's class with the entry's `expect`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .case import Case, CaseError
from .check import CLASSES

CORPUS_SCHEMA = "dryz.corpus/1"
SHORTEST = ("proven", "1-minimal", "not-minimized")
KNOWN_CLASSES = CLASSES

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
USER_DIR = Path("corpus")


class CorpusError(ValueError):
    pass


@dataclass
class Entry:
    path: Path | None
    case: Case | None  # None for a trace entry
    expect: str
    data: dict  # the whole JSON object as stored
    trace: object = None  # a trace entry's Trace (dryz/trace.py); its `case` is None


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
    for i, cid in enumerate(verdict.candidates):
        row = {"id": cid, **label(cid),
               "initial_logit": _num(case.initial_logits()[i]),
               "expected_logit": _num(verdict.expected_logits[i]),
               "observed_logit": _num(verdict.observed_logits[i]),
               "oracle_L": verdict.oracle_L[i]}
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


SUBJECT_KEYS = ("llama_cpp_python", "libllama_sha256", "libllama_path", "llama_cpp_commit", "init_dry_abi",
                "built_by_dryz")


def subject_json(identity: dict) -> dict:
    """What a corpus entry records of the subject it was made on (None fields left out)."""
    return {k: identity[k] for k in SUBJECT_KEYS if identity.get(k) is not None}


def _history_spelling(case: Case) -> dict:
    """history_symbols for the symbol vocabulary; for a real one, history_text (the tokens' pieces as a client
    prints them: for people, not checked on load)."""
    if case.vocab is None:
        return {"history_symbols": case.symbols}
    from .vocabcase import history_text
    return {"history_text": history_text(case)}


def _labels(case: Case):
    """Per candidate: its symbol, or for a real vocabulary its piece."""
    if case.vocab is None:
        return lambda cid: {"symbol": _sym(cid)}
    from .vocabcase import vocab_of
    pieces = vocab_of(case).pieces()
    return lambda cid: {"piece": pieces[cid].decode("utf-8", errors="replace")}


def _sym(cid: int) -> str:
    from .subject.symbols import SYMBOLS
    return SYMBOLS[cid] if 0 <= cid < len(SYMBOLS) else "?"


def _num(x: float):
    import math
    return x if math.isfinite(x) else ("-inf" if x < 0 else ("inf" if x > 0 else "nan"))


def file_name(data: dict) -> str:
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
    if not isinstance(data, dict):
        raise CorpusError(f"{where}: a corpus entry must be a JSON object")
    schema = data.get("schema")
    if schema != CORPUS_SCHEMA:
        raise CorpusError(f"{where}: schema {schema!r} is not {CORPUS_SCHEMA!r}")
    if "trace" in data and "case" not in data:
        return validate_trace_entry(data, where)
    _entry_head(data, where, "case")
    try:
        case = Case.from_json(data["case"])
    except CaseError as e:
        raise CorpusError(f"{where}: case: {e}") from None
    if "history_symbols" in data and data["history_symbols"] != case.symbols:
        raise CorpusError(f"{where}: history_symbols {data['history_symbols']!r} does not match the case")
    return case


def _entry_head(data: dict, where: str, body: str) -> None:
    """The fields every entry has: its body ("case" or "trace"), expect (a known class) and shortest."""
    for key in ("expect", body, "shortest"):
        if key not in data:
            raise CorpusError(f"{where}: missing field {key!r}")
    if data["expect"] not in KNOWN_CLASSES and not str(data["expect"]).startswith("promise-"):
        raise CorpusError(f"{where}: expect {data['expect']!r} is not a known class ({', '.join(KNOWN_CLASSES)})")
    if data["shortest"] not in SHORTEST:
        raise CorpusError(f"{where}: shortest {data['shortest']!r} is not one of {', '.join(SHORTEST)}")


# -- trace entries --------------------------------------------------------------------------------------------
#
# A trace entry is a dryz.corpus/1 object with a `trace` (a dryz.trace/1 object) where a case entry has its
# `case`: expect (the trace's class, TraceVerdict.klass), shortest, note, spelled (the trace's compact form),
# per apply the equivalent case and its class, subject, provenance. Case entries are unchanged.

TRACE_ENTRY_FIELDS = {"schema", "expect", "class", "shortest", "note", "spelled", "trace", "verdict", "applies",
                      "subject", "provenance"}


def validate_trace_entry(data: dict, where: str):
    from .trace import Trace, TraceError
    extra = sorted(set(data) - TRACE_ENTRY_FIELDS)
    if extra:
        raise CorpusError(f"{where}: unknown field(s) of a trace entry: {', '.join(extra)}")
    _entry_head(data, where, "trace")
    try:
        trace = Trace.from_json(data["trace"])
    except TraceError as e:
        raise CorpusError(f"{where}: trace: {e}") from None
    if "spelled" in data and data["spelled"] != trace.spelled():
        raise CorpusError(f"{where}: spelled {data['spelled']!r} does not match the trace")
    return trace


def trace_entry_json(trace, verdict, *, expect: str, shortest: str, provenance: dict, subject: dict,
                     note: str = "") -> dict:
    """The stored form of a trace: the trace, its class, and per apply the equivalent case and its class."""
    if shortest not in SHORTEST:
        raise ValueError(f"shortest must be one of {SHORTEST}")
    return {"schema": CORPUS_SCHEMA, "expect": expect, "class": verdict.klass, "shortest": shortest, "note": note,
            "spelled": trace.spelled(), "trace": trace.to_json(),
            "verdict": {"status": verdict.status, "first_bad_apply": verdict.first_bad_apply},
            "applies": [{"apply": a.index, "event": a.event, "class": a.klass, "fresh_equal": a.fresh_equal,
                         "history_symbols": a.case.symbols} for a in verdict.applies],
            "subject": subject_json(subject), "provenance": provenance}


def load_entry(path: Path) -> Entry:
    try:
        data = json.loads(Path(path).read_bytes().decode("utf-8"))
    except json.JSONDecodeError as e:
        raise CorpusError(f"{path}: not valid JSON ({e.msg}, line {e.lineno} column {e.colno})") from None
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}: not UTF-8 (byte {e.start})") from None
    except RecursionError:
        raise CorpusError(f"{path}: JSON nested too deeply") from None
    except OSError as e:
        raise CorpusError(f"{path}: cannot read ({e.strerror})") from None
    except ValueError as e:  # e.g. an integer of more than 4,300 digits
        raise CorpusError(f"{path}: not usable JSON ({e})") from None
    case = validate_entry(data, str(path))
    if not isinstance(case, Case):  # a trace entry
        return Entry(Path(path), None, data["expect"], data, trace=case)
    return Entry(Path(path), case, data["expect"], data)


def entries(directory: Path) -> list[Path]:
    directory = Path(directory)
    if not directory.is_dir():
        raise CorpusError(f"{directory}: not a directory")
    return sorted(p for p in directory.rglob("*.json") if not p.name.startswith("."))


@dataclass
class ReplayRow:
    path: Path
    expect: str
    got: str | None
    error: str = ""
    subject: dict | None = None  # what the entry says it was recorded on

    @property
    def ok(self) -> bool:
        return not self.error and self.got == self.expect


def replay(directory: Path, check_fn=None, trace_fn=None, select=None) -> list[ReplayRow]:
    """Every entry through check_fn(case, expect) -> class (default: check()), every trace entry through
    trace_fn(trace, expect) -> class (default: check_trace()); a changed verdict in either direction is a
    failure. select(entry) -> bool: only the case entries it keeps (dryz replay --vocab; traces are over the
    symbol vocabulary)."""
    from .check import check
    check_fn = check_fn or (lambda case, expect: check(case).klass)
    if trace_fn is None:
        def trace_fn(trace, expect):
            from .oracle.trace_model import check_trace
            return check_trace(trace).klass
    rows = []
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
            rows.append(ReplayRow(p, e.expect, None, f"made under DRYZ_FAULT={fault}: replay it with that fault "
                                                     "set, or remove it"))
            continue
        got = trace_fn(e.trace, e.expect) if e.trace is not None else check_fn(e.case, e.expect)
        rows.append(ReplayRow(p, e.expect, got, subject=e.data.get("subject")))
    return rows
