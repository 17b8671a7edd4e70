"""The formats of the files dryz reads, as code: each one's shape (its fields, their types, which are required),
what it is, who writes and who reads it, and a minimal example. Every reader validates a file against its format
before using it (`read`, `check`): a wrong shape is one line naming the file and the first field that is missing
or of the wrong type, exit 2. The reference page (docs/reference/file-formats.md) is generated from these
(dryz.docs), and tests/test_formats.py generates malformed files of every format from them (Hypothesis).

A shape says what a reader needs; the readers of a case, a trace and a corpus entry (Case.from_json,
Trace.from_json, corpus.validate_entry) then check what a shape cannot say (a history spelled as its symbols, a
class that exists, values in range)."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields as dc_fields

from .errors import DryzError


class FormatError(DryzError):
    """A file whose shape is not its format's: one line naming the file and what is missing or wrong."""


@dataclass(frozen=True)
class T:
    """The type of a value in a format: kind is string, integer, number, boolean, object (its `fields`), array
    (each item an `item`), map (an object of any keys, each value an `item`) or any. values: the allowed ones.
    nullable: null is allowed too. required: the field must be there (unless its sibling `unless` is: a name, or
    names separated by ` or `). closed: an object with no other fields."""
    kind: str
    meaning: str = ""
    required: bool = True
    fields: dict = field(default_factory=dict)
    item: "T | None" = None
    values: tuple = ()
    nullable: bool = False
    unless: str = ""
    closed: bool = False


def s(meaning="", **kw) -> T:
    return T("string", meaning, **kw)


def i(meaning="", **kw) -> T:
    return T("integer", meaning, **kw)


def n(meaning="", **kw) -> T:
    return T("number", meaning, **kw)


def b(meaning="", **kw) -> T:
    return T("boolean", meaning, **kw)


def obj(fields_: dict, meaning="", **kw) -> T:
    return T("object", meaning, fields=fields_, **kw)


def arr(item: T, meaning="", **kw) -> T:
    return T("array", meaning, item=item, **kw)


def mapping(item: T, meaning="", **kw) -> T:
    return T("map", meaning, item=item, **kw)


def anything(meaning="", **kw) -> T:
    return T("any", meaning, **kw)


def opt(t: T) -> T:
    """The same type, not required."""
    return T(t.kind, t.meaning, False, t.fields, t.item, t.values, t.nullable, t.unless, t.closed)


_JSON = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
         "object": "an object", "array": "an array", "map": "an object", "any": "anything"}


def _kind_of(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def fits(v, t: T) -> bool:
    """The value is of the type's kind (its own fields aside)."""
    k = _kind_of(v)
    if k == "null":
        return t.nullable or t.kind == "any"
    return t.kind == "any" or k == t.kind or (t.kind == "number" and k == "integer") or \
        (t.kind == "map" and k == "object")


def problem(v, t: T, where: str = "") -> str | None:
    """The first way the value is not of the type (a field's path in it, what is wrong), or None."""
    name = f"field {where!r}" if where else "the file"
    if not fits(v, t):
        return f"{name} is {_JSON.get(_kind_of(v), 'null')}, not {_JSON[t.kind]}"
    if v is None:
        return None
    if t.values and v not in t.values:
        return f"{name} is {str(v)[:40]!r}, not " + \
            (repr(t.values[0]) if len(t.values) == 1 else "one of " + ", ".join(map(repr, t.values)))
    if t.kind == "object":
        for key, ft in t.fields.items():
            path = f"{where}.{key}" if where else key
            if key not in v:
                if ft.required and not (ft.unless and any(u in v for u in ft.unless.split(" or "))):
                    return f"missing field {path!r}"
                continue
            p = problem(v[key], ft, path)
            if p:
                return p
        if t.closed:
            extra = sorted(set(v) - set(t.fields))
            if extra:
                return f"unknown field {(where + '.' if where else '') + extra[0]!r}"
    elif t.kind == "array" and t.item is not None:
        for j, x in enumerate(v):
            p = problem(x, t.item, f"{where}[{j}]")
            if p:
                return p
    elif t.kind == "map" and t.item is not None:
        for key, x in v.items():
            p = problem(x, t.item, f"{where}.{key}" if where else key)
            if p:
                return p
    return None


@dataclass(frozen=True)
class Format:
    """A format dryz reads: `name` (what a message calls it), `heading` (the page's), the value of its tag field
    (`schema` or `tool`) when it has one, who writes and who reads it, the shape, an example (a minimal valid
    document), and text for the page."""
    key: str
    name: str
    heading: str
    shape: T
    example: object
    written_by: str
    read_by: tuple
    about: str = ""
    tag: tuple = ()  # (field, value): what names the format inside the file


def check(data, fmt: "Format | str", where) -> object:
    """The data, if its shape is the format's; FormatError (one line: the file, what is missing or wrong)."""
    f = FORMATS[fmt] if isinstance(fmt, str) else fmt
    if f.tag and isinstance(data, dict) and f.tag[0] in data and data[f.tag[0]] != f.tag[1]:
        raise FormatError(f"{where}: not {f.name}: its {f.tag[0]} is {data[f.tag[0]]!r}, not {f.tag[1]!r}")
    p = problem(data, f.shape)
    if p:
        raise FormatError(f"{where}: not {f.name}: {p}")
    return data


def read(path, fmt: "Format | str"):
    """A file's JSON checked against its format (files.read and parse_json_file: one line where it is no JSON)."""
    from .files import parse_json_file, read as read_bytes  # on use: keeps start-up fast
    return check(parse_json_file(str(path), read_bytes(str(path))), fmt, path)


# -- the shapes -----------------------------------------------------------------------------------------------------

DRY = {  # the DRY parameters of a case and a trace (dryz.params.DryParams)
    "penalty_last_n": i("the window: how many of the latest tokens DRY looks at (-1: the whole context)"),
    "breakers": opt(arr(s(), "breaker strings, as a user gives them to `llama_sampler_init_dry`")),
    "multiplier": opt(n("DRY's multiplier (rounded to the float32 llama.cpp receives; `as_written` keeps what was "
                        "written)")),
    "base": opt(n("DRY's base (as multiplier)")),
    "allowed_length": opt(i("the repeat length DRY allows before it penalizes")),
    "n_ctx_train": opt(i("the 8-argument `init_dry`'s training context (default 4096)")),
    "note": opt(s("free text")),
}
CASE = obj({
    "schema": opt(s("`dryz.case/1` (may be left out)", values=("dryz.case/1",))),
    "history": arr(i(), "token ids, oldest first"),
    "history_symbols": opt(s("the same as symbols `a`, `b`, ... (the symbol vocabulary only; written, not needed)")),
    "alphabet": i("how many symbols are candidates (every one, unless `candidates` says); a real vocabulary's size"),
    **DRY,
    "candidates": opt(arr(arr(anything()), "an explicit candidate array, `[id, logit]` pairs in array order "
                                           "(`\"-inf\"` for -inf)", nullable=True)),
    "sorted": opt(b("the candidate array's sorted flag")),
    "as_written": opt(mapping(n(), "multiplier and base as first written, where not a float32")),
    "vocab": opt(s("a real vocabulary (a name such as `llama-bpe`, or a GGUF path)", nullable=True)),
    "vocab_sha256": opt(s("that vocabulary's sha256", nullable=True)),
})
TRACE = obj({
    "schema": s("`dryz.trace/1`", values=("dryz.trace/1",)),
    "alphabet": i("how many symbols are candidates"),
    **DRY,
    "events": arr(anything(), "accept, apply, reset, clone and free on one sampler, in order "
                              "([traces](../traces.md#events))"),
    "spelled": opt(s("the events in their compact form (written, not needed)")),
})
REQUESTS = obj({
    "schema": s("`dryz.requests/1`", values=("dryz.requests/1",)),
    "requests": arr(obj(CASE.fields), "the requests, in the order they are sent to one fresh instance: each a "
                                      "`dryz.case/1` object"),
    "note": opt(s("free text")),
})
SUBJECT = obj({"kind": opt(s()), "spec": opt(s()), "libllama_sha256": opt(s(nullable=True)),
               "init_dry_abi": opt(i(nullable=True))},
              "what was judged: `kind`, `spec`, `libllama_path`, `libllama_sha256`, `llama_cpp_commit`, "
              "`init_dry_abi` and its evidence, the vocabulary, the distribution")
CORPUS = obj({
    "schema": s("`dryz.corpus/1`", values=("dryz.corpus/1",)),
    "expect": s("its expected class, compared on replay with the verdict's `class`"),
    "class": opt(s("the class it had when it was written")),
    "shortest": s("how short it is: `proven`, `1-minimal` or `not-minimized`"),
    "case": obj(CASE.fields, "the case (a `dryz.case/1` object)", unless="trace or requests"),
    "trace": opt(obj(TRACE.fields, "or the trace (a `dryz.trace/1` object)")),
    "requests": opt(obj(REQUESTS.fields, "or the request sequence (a `dryz.requests/1` object)")),
    "history_symbols": opt(s("the history as symbols")),
    "candidates": opt(arr(obj({}), "per candidate the initial, expected and observed logit and L")),
    "subject": opt(obj(SUBJECT.fields, "the subject it was found on")),
    "provenance": opt(obj({}, "what made it")),
    "note": opt(s("free text")),
    "separates": opt(obj({}, "two subjects' outputs (`dryz matrix`, `compare`)")),
    "sanitizer": opt(obj({}, "a `memory` entry's sanitizer report and frames")),
    "http": opt(obj({}, "a `served-*` witness's request and response")),
    "reference_divergence": opt(s("a class against the reference design")),
})

CONFIG = obj({
    "name": s("the configuration (base, window4, breaker, windowW, NAME/allowedA/mM/bB)"),
    "penalty_last_n": i(), "breakers": arr(s()), "cases": i(), "histories": i(), "mismatches": i(),
    "oracle_disagreements": i(), "penalized_cases": i(), "max_L": i(), "off_by_one_flagged": i(),
    "multiplier": opt(n()), "base": opt(n()), "allowed_length": opt(i()),
    "L_histogram": opt(mapping(i())), "cases_by_length": opt(mapping(i())),
    "examples": opt(arr(obj({"kind": s(), "case": obj(CASE.fields)}))), "seconds": opt(n()),
})
CONTROLS = obj({
    "periodic": obj({"passed": b(), "oracles_passed": opt(b()), "findings": opt(arr(obj({"kind": s(),
                                                                                         "case": obj({})})))}),
    "abi_confirmation": opt(obj({"passed": b(), "observed_logit": opt(n(nullable=True))}, nullable=True)),
    "off_by_one": obj({"flagged": i(), "passed": b()}),
    "multiplier_zero": obj({"cases": i(), "nonzero_deltas": i(), "passed": b()}),
}, "`periodic`, `abi_confirmation`, `off_by_one`, `multiplier_zero`: each control's result")
CERTIFICATE = obj({
    "tool": s("`dryz exhaustive`", values=("dryz exhaustive",)),
    "verdict": s("`certified`, `mismatch`, `crash`, `void`, `partial` (one `--shard`) or `interrupted`",
                 values=("certified", "mismatch", "crash", "void", "partial", "interrupted")),
    "subject": obj(SUBJECT.fields, SUBJECT.meaning),
    "space": obj({"alphabet": anything("the number of symbols, or `all`"), "min_length": i(), "max_length": i(),
                  "enumeration": s(values=("canonical", "plain"))},
                 "the alphabet, symbols, lengths, candidates, enumeration (canonical or plain), configurations, "
                 "expected case count"),
    "configs": arr(CONFIG, "per configuration: its parameters, cases, histories, mismatches, oracle disagreements, "
                           "penalized cases, max L, the off-by-one control's count, histograms by length and L, "
                           "examples, seconds, and the canonical counts"),
    "totals": obj({"cases": i(), "mismatches": i(), "oracle_disagreements": i()},
                  "cases, mismatches and oracle disagreements over all configurations"),
    "canonical_totals": opt(obj({}, "canonical histories, cases, mismatches and fresh-symbol violations")),
    "controls": opt(CONTROLS),
    "checks": opt(mapping(b(), "the harness's self-checks (the controls' oracles, covered counts, per-configuration "
                               "canonical checks)")),
    "shard": opt(obj({"index": i(), "count": i(), "tasks": arr(i()), "total_tasks": i(), "slicing": i()},
                     "with `--shard I/N`: which slices this shard ran (`dryz merge` joins them)")),
    "interrupted": opt(obj({}, "an interrupted run's state (`--resume` continues it)")),
    "environment": opt(obj({}, "Python, platform, dryz's version, cores, workers")),
    "python": opt(s("the interpreter's version")),
    "started": opt(s("when the run started (UTC)")),
    "wall_seconds": opt(n("its wall time")),
})

FINDING = obj({"klass": s(), "file": s(), "reproduces": b()}, closed=False)
FUZZ = obj({
    "execs": i("inputs run"), "seconds": n("the campaign's wall time"), "cov": i("coverage (edges)"),
    "ft": i("features"), "corpus": i("inputs kept"),
    "findings": arr(FINDING, "per crash file: its class, whether it reproduces in a clean process, its file"),
    "interrupted": opt(b("stopped by Ctrl-C: the summary is partial")),
    "native": opt(b("native coverage of an instrumented libllama too")),
    "fault": opt(s("a planted fault (a positive control)", nullable=True)),
    "slow": opt(arr(anything(), "slow-unit files whose re-check is no new finding")),
    "subject": opt(obj(SUBJECT.fields, SUBJECT.meaning)),
    "target": opt(s("`cases` or `traces`")),
})

CELL = obj({"verdict": s(), "text": s(), "exit": T("integer", nullable=True), "counts": opt(mapping(i()))})
MATRIX_ROW = obj({
    "subject": s("the row's subject"), "error": opt(s("why the subject could not be had (no cells)")),
    "cells": mapping(CELL, "per mode (certificate, replay, parameters, window_caps, restarts, fuzz) its verdict, "
                           "exit, time and text"),
    "commit": T("any", unless="error"), "abi": T("any", unless="error"), "crashes": i(unless="error"),
    "seconds": n(unless="error"),
})
MATRIX = obj({
    "tool": s("`dryz matrix`", values=("dryz matrix",)),
    "reference": s("the subject the others are compared with", nullable=True),
    "rows": arr(MATRIX_ROW, "a row per subject"),
    "differences": arr(obj({"between": arr(s()), "class": s(), "history": s(), "shortest": s(),
                            "case": obj({"allowed_length": i(), "breakers": arr(s()), "penalty_last_n": i()}),
                            "reference": obj({}), "other": obj({})}),
                       "each kind of difference from the reference, minimized: its witness"),
    "fuzz_seconds": i("each subject's fuzz campaign"), "wall_seconds": n("the run's wall time"),
})

CONFORMANCE = obj({
    "tool": s("`dryz conformance`", values=("dryz conformance",)),
    "rows": arr(obj({"subject": s(), "spec": s(unless="error"), "error": opt(s()),
                     "cells": mapping(obj({"status": s()}), "per property its cell: conforms, declared, differs or "
                                                            "not expressible, and its witness"),
                     "campaigns": opt(mapping(obj({"text": s()})))}), "a row per subject"),
    "properties": arr(obj({"name": s(), "title": s()}), "the columns: each property's name and title"),
    "fuzz_seconds": i("each subject's fuzz campaign"), "wall_seconds": n("the run's wall time"),
    "max_length": opt(i("the certificate campaign's longest history")),
})

KILL_MATRIX = obj({
    "schema": s("`dryz.kill-matrix/1`", values=("dryz.kill-matrix/1",)),
    "version": opt(s("the release whose mutants these are")), "source": opt(s("the run it was made from")),
    "median_seconds_to_kill": mapping(n(nullable=True), "per mode, its median seconds to kill"),
    "killed_by": mapping(arr(s()), "per mutant, the modes that killed it"),
})
MUTATE_RESULT = obj({"summary": obj({"kill_matrix": KILL_MATRIX}, "the run's summary, its kill matrix in it")})
TRIAGE = obj({
    "schema": s("`dryz.mutate-triage/1`", values=("dryz.mutate-triage/1",)),
    "version": opt(s("the release")), "note": opt(s("free text")),
    "mutants": mapping(obj({"verdict": s(values=("equivalent", "gap")), "reason": s()}),
                       "per surviving mutant: `equivalent` (no input can tell it from the pristine source) or `gap`, "
                       "and the reason"),
})
CHANGES = arr(s(), "one change class a line, `#` starts a comment")


def _gate_shape() -> T:
    """The gate's result, from the dataclasses its reader builds (dryz.gate.result.from_json): every field without
    a default is required, and a mode, a finding and a change have no other fields."""
    from .gate.result import Change, Finding, GateResult, ModeResult  # on use: the gate is a mode, loaded late

    def of(cls, nested=None) -> dict:
        out = {}
        for f in dc_fields(cls):
            ann = str(f.type).replace(" ", "")
            kind = {"str": "string", "bool": "boolean", "int": "integer", "float": "number", "list": "array",
                    "dict": "object"}.get(ann.split("|")[0], "any")
            t = T(kind, nullable="None" in ann)
            if nested and f.name in nested:
                t = nested[f.name]
            required = f.default is MISSING and f.default_factory is MISSING
            out[f.name] = t if required else opt(t)
        return out
    finding = T("object", fields=of(Finding), closed=True)
    mode = T("object", fields=of(ModeResult, {"findings": opt(arr(finding))}), closed=True)
    change = T("object", fields=of(Change), closed=True)
    gate = of(GateResult, {"modes": arr(mode, "per mode: its verdict, exit, seconds, text, findings with their "
                                              "witnesses"),
                           "changes": opt(arr(change, "the behaviour changes against the base, each with its "
                                                      "witness and whether it was declared"))})
    gate["tool"] = s("`dryz gate`", values=("dryz gate",))
    gate["verdict"] = s("`pass`, `fail`, `error` or `interrupted`")
    gate["subject"] = opt(obj(SUBJECT.fields, SUBJECT.meaning))
    return obj(gate)


EXAMPLE_CASE = {"schema": "dryz.case/1", "history": [0, 1, 2, 2, 1, 2], "history_symbols": "abccbc", "alphabet": 3,
                "penalty_last_n": 64, "breakers": ["c"], "multiplier": 1.0, "base": 2.0, "allowed_length": 1}
EXAMPLE_TRACE = {"schema": "dryz.trace/1", "alphabet": 2, "penalty_last_n": 4,
                 "events": [["accept", [0, 0]], ["apply", None]]}
EXAMPLE_REQUESTS = {"schema": "dryz.requests/1", "requests": [
    {"history": [0], "alphabet": 1, "penalty_last_n": 64}, {"history": [0, 0], "alphabet": 1, "penalty_last_n": 64}]}
EXAMPLE_CORPUS = {
    "schema": "dryz.corpus/1", "expect": "agree", "class": "agree", "shortest": "proven", "history_symbols": "aa",
    "case": {"schema": "dryz.case/1", "history": [0, 0], "history_symbols": "aa", "alphabet": 1,
             "penalty_last_n": 64, "breakers": [], "multiplier": 1.0, "base": 2.0, "allowed_length": 1},
    "subject": {"llama_cpp_python": "0.3.36"}, "provenance": {"made_by": "an example"}}
_SUBJECT_EX = {"kind": "libllama", "spec": "libllama:", "libllama_sha256": "0" * 64, "init_dry_abi": 7}
EXAMPLE_CERTIFICATE = {
    "tool": "dryz exhaustive", "verdict": "certified", "subject": _SUBJECT_EX,
    "space": {"alphabet": 1, "min_length": 1, "max_length": 1, "enumeration": "plain"},
    "configs": [{"name": "base", "penalty_last_n": 64, "breakers": [], "cases": 1, "histories": 1, "mismatches": 0,
                 "oracle_disagreements": 0, "penalized_cases": 0, "max_L": 0, "off_by_one_flagged": 0}],
    "totals": {"cases": 1, "mismatches": 0, "oracle_disagreements": 0}}
EXAMPLE_FUZZ = {"execs": 1000, "seconds": 10.0, "cov": 200, "ft": 150, "corpus": 20, "findings": [],
                "interrupted": False}
EXAMPLE_MATRIX = {"tool": "dryz matrix", "reference": "llama-cpp-python 0.3.36", "fuzz_seconds": 60,
                  "wall_seconds": 1.0, "differences": [],
                  "rows": [{"subject": "llama-cpp-python 0.3.16", "error": "could not be built or fetched",
                            "cells": {}}]}
EXAMPLE_GATE = {"tool": "dryz gate", "verdict": "pass", "exit": 0, "budget": 10.0, "lanes": 1, "seconds": 3.0,
                "modes": [{"name": "replay", "verdict": "pass", "exit": 0, "seconds": 3.0, "given": None,
                           "text": "52/52 as expected", "command": ["dryz", "replay"]}]}
EXAMPLE_CONFORMANCE = {"tool": "dryz conformance", "fuzz_seconds": 60, "wall_seconds": 1.0,
                       "properties": [{"name": "repeats", "title": "repeat lengths"}],
                       "rows": [{"subject": "engine:aphrodite", "error": "cannot be had", "cells": {}}]}
EXAMPLE_KILL_MATRIX = {"schema": "dryz.kill-matrix/1", "version": "0.3.36", "source": "an example",
                       "median_seconds_to_kill": {"certificate": 2.0}, "killed_by": {"negate-apply-00000000":
                                                                                    ["certificate"]}}
EXAMPLE_TRIAGE = {"schema": "dryz.mutate-triage/1", "version": "0.3.36",
                  "mutants": {"negate-apply-00000000": {"verdict": "gap", "reason": "an example"}}}

FORMATS: dict[str, Format] = {f.key: f for f in (
    Format("case", "a case (dryz.case/1)", "A case: `dryz.case/1`", CASE, EXAMPLE_CASE, "you, `dryz minimize`",
           ("dryz check", "dryz explain", "dryz minimize", "dryz properties --witness"),
           "One DRY call: a fresh sampler, a history accepted, one apply (`dryz/case.py`).",
           ("schema", "dryz.case/1")),
    Format("trace", "a trace (dryz.trace/1)", "A trace: `dryz.trace/1`", TRACE, EXAMPLE_TRACE,
           "you, `dryz minimize`", ("dryz check", "dryz explain", "dryz minimize", "dryz properties --witness"),
           "A DRY configuration as in a case, plus `events`: accept, apply, reset, clone and free on one sampler, "
           "judged after every apply (`dryz/trace.py`).", ("schema", "dryz.trace/1")),
    Format("requests", "a request sequence (dryz.requests/1)", "A request sequence: `dryz.requests/1`", REQUESTS,
           EXAMPLE_REQUESTS, "you, `dryz minimize`", ("dryz check", "dryz explain", "dryz minimize",
                                                       "dryz properties --witness"),
           "Cases sent in order to one fresh instance of an engine (a subject that runs sequences: an adapter that "
           "declares `sequences`), each request judged on its own as llama.cpp's semantics make requests "
           "independent (`dryz/requests.py`).", ("schema", "dryz.requests/1")),
    Format("corpus", "a corpus entry (dryz.corpus/1)", "A corpus entry: `dryz.corpus/1`", CORPUS, EXAMPLE_CORPUS,
           "`dryz minimize`, the gate, the matrix, `dryz mutate`, `dryz compare`",
           ("dryz replay", "dryz check", "dryz explain", "dryz minimize", "dryz export", "dryz report"),
           "A witness: the case (or `trace`, or `requests`), its expected class, how short it is, the subject it was "
           "found on and "
           "its provenance (`dryz/corpus.py`). The project's corpus, `corpus/`, has `seeds/`, `findings/` "
           "([every entry](../corpus-findings.md)), `traces/` and `engines/`; it ships inside the wheel, so an "
           "installed dryz replays it. `dryz export` writes an entry as a test; an entry one form cannot express "
           "is refused naming the form that can.", ("schema", "dryz.corpus/1")),
    Format("certificate", "a dryz exhaustive result", "A certificate: `dryz exhaustive --json`", CERTIFICATE,
           EXAMPLE_CERTIFICATE, "`dryz exhaustive --json` (`results/main.json` by default), `dryz merge`",
           ("dryz report", "dryz merge (its `--shard` results)", "dryz exhaustive --resume (an interrupted one)"),
           "With `--trace-events N` the certificate also holds the trace space's counts and witnesses.",
           ("tool", "dryz exhaustive")),
    Format("fuzz", "a fuzz campaign's summary", "A fuzz campaign: `dryz fuzz --json`, `WORKDIR/summary.json`",
           FUZZ, EXAMPLE_FUZZ, "`dryz fuzz` (`--json`, and `summary.json` in its work folder)",
           ("dryz report (the work folder)",),
           "`dryz report` reads a campaign's work folder: its `summary.json` and libFuzzer's log (`libfuzzer.log`)."),
    Format("matrix", "a dryz matrix result", "A version matrix: `dryz matrix --json`", MATRIX, EXAMPLE_MATRIX,
           "`dryz matrix --json`", ("dryz report",), "", ("tool", "dryz matrix")),
    Format("gate", "a dryz gate result", "A gate: `dryz gate --json`, `WORKDIR/gate.json`", T("object"),
           EXAMPLE_GATE, "`dryz gate` (`--json`, and `gate.json` in its work folder)", ("dryz report",),
           "Its shape is the gate's own result (`dryz/gate/result.py`): a mode, a finding and a change have no "
           "other fields.", ("tool", "dryz gate")),
    Format("conformance", "a dryz conformance result", "A conformance matrix: `dryz conformance --json`",
           CONFORMANCE, EXAMPLE_CONFORMANCE, "`dryz conformance --json`", ("dryz report",), "",
           ("tool", "dryz conformance")),
    Format("kill-matrix", "a kill matrix (dryz.kill-matrix/1)", "A kill matrix: `dryz.kill-matrix/1`",
           KILL_MATRIX, EXAMPLE_KILL_MATRIX, "`dryz mutate` (in its `--json`, `summary.kill_matrix`), shipped per "
           "release (`dryz/mutate/kill-matrix-VERSION.json`)", ("dryz mutate --kill-order",),
           "`--kill-order` also reads an earlier run's `--json`, whose `summary.kill_matrix` is one.",
           ("schema", "dryz.kill-matrix/1")),
    Format("triage", "a mutant triage (dryz.mutate-triage/1)", "A mutant triage: `dryz.mutate-triage/1`", TRIAGE,
           EXAMPLE_TRIAGE, "you (shipped per release: `dryz/mutate/triage-VERSION.json`)", ("dryz mutate --triage",),
           "", ("schema", "dryz.mutate-triage/1")),
)}


def shape(key: str) -> T:
    """A format's shape (the gate's made from its dataclasses on first use)."""
    return _gate_shape() if key == "gate" else FORMATS[key].shape


def check_as(data, key: str, where) -> object:
    f = FORMATS[key]
    if key == "gate":
        f = Format(f.key, f.name, f.heading, _gate_shape(), f.example, f.written_by, f.read_by, f.about, f.tag)
    return check(data, f, where)


def read_as(key: str):
    """A reader of one format, for an option's type (dryz.options.Input(read=...)): the path's JSON, checked."""
    def read_file(path):
        from .files import parse_json_file, read as read_bytes  # on use: keeps start-up fast
        return check_as(parse_json_file(str(path), read_bytes(str(path))), key, path)
    return read_file


def kill_order_file(path):
    """--kill-order FILE: a kill matrix, or an earlier `dryz mutate --json` (its summary's kill matrix)."""
    from .files import parse_json_file, read as read_bytes  # on use: keeps start-up fast
    data = parse_json_file(str(path), read_bytes(str(path)))
    if isinstance(data, dict) and "summary" in data:
        check(data, Format("mutate", "a dryz mutate result", "", MUTATE_RESULT, None, "", ()), path)
        return data["summary"]["kill_matrix"]
    return check_as(data, "kill-matrix", path)


def report_input(path) -> None:
    """dryz report's input: a campaign's work folder (its summary checked), a corpus folder, or a result JSON of
    dryz exhaustive, matrix, gate or conformance (by its `tool`), checked against its format."""
    from pathlib import Path
    from .files import parse_json_file, read as read_bytes  # on use: keeps start-up fast
    p = Path(path)
    if p.is_dir():
        if (p / "summary.json").exists():
            read_as("fuzz")(p / "summary.json")
        return
    data = parse_json_file(str(path), read_bytes(str(path)))
    tool = data.get("tool") if isinstance(data, dict) else None
    by_tool = {f.tag[1]: k for k, f in FORMATS.items() if f.tag and f.tag[0] == "tool"}
    if not isinstance(tool, str) or tool not in by_tool:
        raise FormatError(f"{path}: not a result of dryz exhaustive, matrix, gate or conformance (tool {tool!r})")
    if tool == "dryz exhaustive" and data.get("mode") == "vocab":
        raise FormatError(f"{path}: a dryz exhaustive --vocab result, which dryz report does not render (it renders "
                          "certificates of the symbol space)")
    check_as(data, by_tool[tool], path)


def case_or_trace(path) -> None:
    """A file read as a case, a trace or a corpus entry (by its schema), or a libFuzzer crash file (fuzz bytes,
    read by name): a JSON one checked against its format."""
    from .files import is_fuzz_artifact, parse_json_file, read as read_bytes  # on use: keeps start-up fast
    if is_fuzz_artifact(str(path)):
        return
    data = parse_json_file(str(path), read_bytes(str(path)))
    schema = data.get("schema") if isinstance(data, dict) else None
    check_as(data, {"dryz.corpus/1": "corpus", "dryz.trace/1": "trace", "dryz.requests/1": "requests"}
             .get(str(schema), "case"), path)


def entry_file(path) -> None:
    """dryz export's input: a corpus entry (a case or a trace is said to be one, not an entry)."""
    from .files import parse_json_file, read as read_bytes  # on use: keeps start-up fast
    data = parse_json_file(str(path), read_bytes(str(path)))
    if isinstance(data, dict) and data.get("schema") in (None, "dryz.case/1", "dryz.trace/1", "dryz.requests/1") and \
            ("history" in data or "events" in data or "requests" in data):
        what = "a trace" if "events" in data else "a request sequence" if "requests" in data else "a case"
        raise FormatError(f"{path}: {what}, not a corpus entry: export writes an entry as a test (`dryz minimize` "
                          "makes an entry of a failing one)")
    check_as(data, "corpus", path)
