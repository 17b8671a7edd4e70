"""What the commands share about their inputs: the subject the command line selected (opened once per command,
kept in its click context), progress messages, and one case or trace from a file (Case or trace JSON, corpus
entry, or a crash file decoded as its campaign decoded it; a case on --vocab). The command line and the modes'
command modules import it; bad input is one line, exit 2 (dryz.files.fail)."""

from __future__ import annotations

import os
import sys

import click

from .files import fail, is_fuzz_artifact, parse_json_file, read


def selected_spec() -> str:
    """The subject spec the command line selected (--subject, --lib, or their environment variables)."""
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    if root is not None and isinstance(root.obj, str):
        return root.obj
    from .subject.registry import selected_spec as from_env  # on use: start-up
    return from_env()


def load_subject():
    """The subject the command line selected, opened once per command (kept in the command's context) and
    passed down from there; one that cannot be had is one line and exit 2."""
    from .subject import SubjectError, open_subject  # on use: start-up
    ctx = click.get_current_context(silent=True)
    meta = ctx.find_root().meta if ctx is not None else {}
    if "dryz.subject" not in meta:
        try:
            meta["dryz.subject"] = open_subject(selected_spec())
        except SubjectError as e:
            fail(f"subject: {e}")
        if ctx is not None:
            ctx.find_root().call_on_close(meta["dryz.subject"].close)
    return meta["dryz.subject"]


def quiet_mode() -> bool:
    from .output import quiet  # on use: keeps start-up fast (the command line imports this module)
    return quiet()


def say(msg: str) -> None:
    """A progress message (step logs of matrix, minimize, fuzz): on stdout, silenced by --quiet."""
    if not quiet_mode():
        click.echo(msg)


# -- one case from a file (check, explain, minimize) ------------------------------------------------------


def load_case_file(path: str, read_as: str = "auto", vocab=None, breakers=None):
    """A Case from a Case JSON, a corpus entry, or a libFuzzer crash file (the fuzz harness's decoder).

    Bytes are decoded as the harness decodes them only with read_as="bytes", or in auto mode for a file named as
    libFuzzer names its crash files (crash-SHA1 and the like: files.is_fuzz_artifact). Any other file is JSON: a
    parse, encoding (UTF-16, say) or schema error is one line saying where, never a silent fallback to fuzz
    bytes. With vocab, bytes are a `dryz fuzz --vocab VOCAB --breaker-sets BREAKERS` input and decode as that
    campaign's harness decoded them (not as the symbol decoder's case moved onto the vocabulary: another case);
    breakers is for such bytes only."""

    from .case import Case, CaseError  # on use: keeps start-up fast (the command line imports this module)
    from .corpus import CORPUS_SCHEMA, CorpusError, validate_entry  # on use: start-up
    from .decode import CAMPAIGN_BREAKERS as BREAKERS, CAMPAIGN_VOCAB as VOCAB, input_decoder  # on use: start-up
    raw = read(path)
    if read_as == "bytes" or (read_as == "auto" and is_fuzz_artifact(path)):
        # DRYZ_FUZZ_VOCAB and _BREAKERS (set in a campaign's own processes): that campaign's, where --vocab and
        # --decode-breakers do not say otherwise
        vocab = vocab or VOCAB
        if breakers is not None and vocab is None:
            fail("--decode-breakers reads a `dryz fuzz --vocab` crash file: give its --vocab too")
        try:
            decode = input_decoder(load_subject(), vocab, breakers or (BREAKERS if vocab == VOCAB else "default"))
            return decode(raw), "fuzz input"
        except CaseError as e:
            fail(f"{path}: decodes to an invalid case: {e}")
    if breakers is not None:
        fail(f"{path}: --decode-breakers is for a `dryz fuzz --vocab` crash file (fuzz bytes); a case names its "
             "breakers")
    data = parse_json_file(path, raw)
    if vocab is not None:
        data = json_on_vocab(data, vocab)
    if isinstance(data, dict) and data.get("schema") == CORPUS_SCHEMA:
        try:
            return validate_entry(data, path), "corpus entry"
        except CorpusError as e:
            fail(str(e))
    if isinstance(data, dict) and "schema" in data and data["schema"] != "dryz.case/1":
        fail(f"{path}: unknown schema {data['schema']!r} (this dryz reads dryz.case/1 and {CORPUS_SCHEMA})")
    from .formats import check_as  # on use: keeps start-up fast
    check_as(data, "case", path)
    try:
        return Case.from_json(data), "case JSON"
    except CaseError as e:
        fail(f"{path}: {e}")


def json_on_vocab(data, vocab):
    """--vocab on a Case JSON (or a corpus entry's case) that names no vocabulary: its ids are read as that
    vocabulary's (vocab and alphabet, its size, set before the case is validated; history_symbols dropped)."""
    if not isinstance(data, dict):
        return data
    inner = data.get("case") if data.get("schema") == "dryz.corpus/1" else data
    if not isinstance(inner, dict) or inner.get("vocab") is not None:
        return data
    from .vocab_cases import load_vocab  # on use: keeps start-up fast (the command line imports this module)
    v = load_vocab(vocab, load_subject())
    name = v.ref.name if "/" not in str(vocab) and not str(vocab).endswith(".gguf") else str(v.ref.path)
    inner = {k: x for k, x in inner.items() if k != "history_symbols"}
    inner.update(vocab=name, vocab_sha256=v.ref.sha256, alphabet=v.n_tokens)
    if data.get("schema") == "dryz.corpus/1":
        return {**{k: x for k, x in data.items() if k != "history_symbols"}, "case": inner}
    return inner


def on_vocab(case, vocab):
    """The case on --vocab (vocab, its sha256 and size filled), or a case that names a vocabulary with its
    sha256 filled; unchanged for the symbol vocabulary. A vocabulary that cannot be had: one line, exit 2."""
    if vocab is None and case.vocab is None:
        return case
    from .vocab_cases import resolved, with_vocab  # on use: keeps start-up fast (the command line imports this module)
    lib = load_subject()
    return with_vocab(case, vocab, lib) if vocab is not None else resolved(case, lib)


def vocab_filter(vocab, lib):
    """replay --vocab: keeps the entries whose case is on that vocabulary (same sha256)."""
    from .vocab_cases import load_vocab, vocab_of  # on use: keeps start-up fast (the command line imports this module)
    sha = load_vocab(vocab, lib).ref.sha256
    return lambda e: e.case.vocab is not None and vocab_of(e.case, lib).ref.sha256 == sha


def spelled(case) -> str:
    from .vocab_cases import history_text  # on use: keeps start-up fast (the command line imports this module)
    return history_text(case)


def load_trace_file(path: str, read_as: str = "auto", as_trace: bool = False, breakers=None):
    """(Trace, kind) when the file is a trace (trace JSON, a trace corpus entry, or with as_trace fuzz bytes for
    decode_trace), else None (the file is for the Case reader). as_trace: anything else is an error. breakers
    (--decode-breakers, for a vocabulary campaign's crash file): never with a trace."""
    t = _load_trace_file(path, read_as, as_trace)
    if t is not None and breakers is not None:
        fail(f"{path}: --decode-breakers is for a `dryz fuzz --vocab` crash file; traces are on the symbol "
             "vocabulary")
    return t


def _load_trace_file(path: str, read_as: str, as_trace: bool):
    from .trace import TRACE_SCHEMA, Trace, TraceError  # on use: start-up
    raw = read(path)
    # Fuzz bytes only with --as bytes or for a libFuzzer crash file's name; anything else is JSON (bad JSON, or
    # JSON in another encoding, is one line from parse_json_file, never bytes by default).
    if read_as == "bytes" or (read_as == "auto" and is_fuzz_artifact(path)):
        if not as_trace:
            return None  # a case fuzz input: the Case reader decodes it
        from .decode.traces import decode_trace  # on use: keeps start-up fast (the command line imports this module)
        try:
            return decode_trace(raw), "trace fuzz input"
        except TraceError as e:
            fail(f"{path}: decodes to an invalid trace: {e}")
    got = _read_json_kind(path, parse_json_file(path, raw), "trace", TRACE_SCHEMA, Trace.from_json, TraceError,
                          ("trace JSON", "trace corpus entry"))
    if got is not None:
        return got
    if as_trace:
        fail(f"{path}: not a trace (a {TRACE_SCHEMA} object or a corpus entry with a trace)")
    return None


def load_requests_file(path: str, read_as: str = "auto"):
    """(Requests, kind) when the file is a request sequence (dryz.requests/1 JSON, or a corpus entry holding one),
    else None (the file is for the trace or Case reader)."""
    if read_as == "bytes" or (read_as == "auto" and is_fuzz_artifact(path)):
        return None
    from .requests import REQUESTS_SCHEMA, Requests, RequestsError  # on use: start-up
    return _read_json_kind(path, parse_json_file(path, read(path)), "requests", REQUESTS_SCHEMA, Requests.from_json,
                           RequestsError, ("request sequence", "request sequence corpus entry"))


def _read_json_kind(path: str, data, key: str, schema: str, from_json, error, kinds: tuple):
    """(the object, its kind) when the JSON is of the schema (checked against its format `key`, then read) or a
    corpus entry holding one under `key` (and no case); else None. A file that is not valid: one line, exit 2."""
    from .corpus import CORPUS_SCHEMA, CorpusError, validate_entry  # on use: start-up
    if isinstance(data, dict) and data.get("schema") == schema:
        from .formats import check_as  # on use: keeps start-up fast
        check_as(data, key, path)
        try:
            return from_json(data), kinds[0]
        except error as e:
            fail(f"{path}: {e}")
    if isinstance(data, dict) and data.get("schema") == CORPUS_SCHEMA and key in data and "case" not in data:
        try:
            return validate_entry(data, path), kinds[1]
        except CorpusError as e:
            fail(str(e))
    return None


ENTRY_ARGV = None  # main()'s arguments: set when dryz runs as a program, so it may re-execute itself
COMMAND = ""  # the command that runs (cli's group sets it), for what main() prints


def selected(subject: str | None, lib: str | None, declared=()) -> str:
    """The spec the command line selects (--subject, --lib, the environment, the default), declaring the fixes
    --declare names, which are checked before anything runs: one line and exit 2 for one the subject's kind may
    not declare or dryz does not model (a subject that cannot be selected fails when it is loaded)."""
    from .subject.binding import SubjectError  # on use: keeps start-up fast (the command line imports this module)
    from .subject.registry import check_declared, parse, selected_spec, subject_class, with_declared  # on use (same)
    spec = with_declared(selected_spec(subject, lib), declared)
    if declared:
        try:
            kind, _ = parse(spec)
            check_declared(kind, subject_class(kind), declared)
        except SubjectError as e:
            fail(str(e))
    return spec


def with_runtime(spec: str) -> None:
    """A subject whose code must be started with something in the process's environment (a libllama built
    with --sanitize: its sanitizer runtime preloaded; registry.runtime_env) loads only into a process started
    so: dryz re-executes itself with it. The processes it starts get it through registry.child_env."""
    from .subject.binding import SubjectError  # on use: keeps start-up fast (the command line imports this module)
    from .subject.registry import runtime_env  # on use: keeps start-up fast (the command line imports this module)
    try:
        env = runtime_env(spec)
    except SubjectError as e:
        fail(str(e))
    if not env or all(os.environ.get(k) == v for k, v in env.items()):
        return
    if ENTRY_ARGV is None:
        fail(f"the subject {spec} must be started with " + " ".join(f"{k}={v}" for k, v in env.items()))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "dryz", *ENTRY_ARGV], {**os.environ, **env})


# -- one input judged (check, explain) ----------------------------------------------------------------------


def judge_case_file(case, kind: str, isolate: bool = True) -> tuple[int, dict]:
    """(exit code, what dryz check prints) of a case on the selected subject."""
    from .errors import EXIT_FINDING, EXIT_OK  # on use: keeps start-up fast
    from .judge import case_report  # on use: keeps start-up fast
    from .verdict import is_finding  # on use: keeps start-up fast
    out = case_report(case, kind, load_subject(), isolate)
    return (EXIT_FINDING if is_finding(out["verdict"]["class"]) else EXIT_OK), out


def judge_requests_file(requests, kind: str, isolate: bool = True) -> tuple[int, dict]:
    """(exit code, what dryz check prints) of a request sequence on the selected subject; one the subject cannot
    run is one line, exit 2."""
    from .errors import EXIT_FINDING, EXIT_OK  # on use: keeps start-up fast
    from .requests_check import requests_report  # on use: keeps start-up fast
    from .subject.answers import Unsupported  # on use: keeps start-up fast
    from .verdict import is_finding  # on use: keeps start-up fast
    try:
        out = requests_report(requests, kind, load_subject(), isolate)
    except Unsupported as e:
        fail(f"the request sequence cannot be run: {e}")
    return (EXIT_FINDING if is_finding(out["verdict"]["class"]) else EXIT_OK), out


def judge_trace_file(trace, kind: str, isolate: bool = True) -> tuple[int, dict]:
    """(exit code, what dryz check prints) of a trace on the selected subject."""
    from .errors import EXIT_FINDING, EXIT_OK  # on use: keeps start-up fast
    from .trace_check import trace_report  # on use: keeps start-up fast
    from .verdict import is_finding  # on use: keeps start-up fast
    out = trace_report(trace, kind, load_subject(), isolate)
    return (EXIT_FINDING if is_finding(out["verdict"]["class"]) else EXIT_OK), out
