"""The dryz command line. Errors are one line on stderr: exit 2 for usage or harness errors."""

from __future__ import annotations

import os
import sys

import click

from . import __version__, inputs

from .errors import EXIT_ERROR, EXIT_FINDING, EXIT_INTERRUPTED, EXIT_OK, DryzError
from .files import fail as _fail, writable as _writable
from .inputs import (load_case_file, load_subject, load_trace_file, on_vocab, quiet_mode, say, spelled, vocab_filter,
                     with_runtime)


def say_subject(lib) -> None:
    """The subject a command judges, named before its results."""
    from .subject.identity import subject_header  # on use: keeps start-up fast
    click.echo(subject_header(lib))


class Bound(click.ParamType):
    """An int or float option within lo..hi (hi None: at least lo; a function: its value, asked when an argument
    is read), refused while the arguments are parsed with one line: "--time must be in 10..86400 seconds, got 5"."""

    def __init__(self, kind, lo, hi=None, unit: str = "", hi_text: str | None = None):
        self.kind, self.lo, self.hi, self.unit, self.hi_text = kind, lo, hi, unit, hi_text
        self.name = "integer" if kind is int else "float"

    def convert(self, value, param, ctx):
        try:
            v = self.kind(value)
        except (TypeError, ValueError, OverflowError):
            self.fail(f"{value!r} is not a valid {self.name}", param, ctx)
        hi = self.hi() if callable(self.hi) else self.hi
        if not (self.lo <= v <= (hi if hi is not None else float("inf")) and v < float("inf")):
            where = f"in {self.lo}..{self.hi_text or hi}" if hi is not None else f"at least {self.lo}"
            got = v if self.kind is int else f"{v:.15g}"
            raise click.UsageError(f"{max(param.opts, key=len)} must be {where}{' ' + self.unit if self.unit else ''}, "
                                   f"got {got}")
        return v


def _max_alphabet() -> int:
    from .symbols import MAX_ALPHABET  # on use: keeps start-up fast
    return MAX_ALPHABET


def _max_trace_events() -> int:
    from .enumerate.selection import MAX_TRACE_EVENTS  # on use: keeps start-up fast (it loads the enumerator)
    return MAX_TRACE_EVENTS


def _sanitizers(ctx, param, value) -> tuple[str, ...]:
    """--sanitize address,undefined as the builder takes it, refused with one line while parsing."""
    from .subject.build import parse_sanitize  # on use: keeps start-up fast
    try:
        return parse_sanitize(value)
    except ValueError as e:
        raise click.UsageError(str(e))


def case_file_options(f):
    """--vocab and --trace, as every command that reads one case or trace file takes them."""
    f = click.option("--trace", "as_trace", is_flag=True,
                     help="The file is a trace (trace JSON and trace corpus entries are recognised without it; "
                          "a `dryz fuzz --traces` crash file or input read --as bytes needs it).")(f)
    f = click.option("--breakers", "breakers", default=None, type=click.Choice(["default", "dict", "random"]),
                     help="With --vocab, for a crash file (fuzz bytes): the breaker mode of the `dryz fuzz --vocab "
                          "NAME --breakers MODE` campaign that wrote it. [default: default]")(f)
    return click.option("--vocab", "vocab", default=None, metavar="NAME|PATH",
                        help="Run the case on this real vocabulary (a name such as llama-bpe: the "
                             "ggml-vocab-*.gguf files of the pinned sdist; or a GGUF path): its token ids are that "
                             "vocabulary's; a crash file (fuzz bytes) is decoded as `dryz fuzz --vocab` decodes "
                             "its inputs.")(f)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dryz")
@click.option("--subject", "subject_spec", default=None, metavar="KIND:ARG", envvar="DRYZ_SUBJECT",
              help="The subject under audit, for every command and every process it starts: libllama:PATH (a "
                   "libllama.so, or a folder holding it). [env: DRYZ_SUBJECT; default: llama-cpp-python's "
                   "libllama]")
@click.option("--lib", "lib_path", default=None, metavar="PATH", envvar="DRYZ_LIB",
              help="Short for --subject libllama:PATH. [env: DRYZ_LIB]")
@click.option("-q", "--quiet", is_flag=True, help="No progress output (results and errors only), for scripts.")
@click.pass_context
def cli(ctx, subject_spec, lib_path, quiet):
    """Audit llama.cpp's DRY sampler against independent oracles."""
    if quiet:
        os.environ["DRYZ_QUIET"] = "1"
    from .subject.registry import selected_spec  # on use: keeps start-up fast
    inputs.COMMAND = ctx.invoked_subcommand or ""
    ctx.obj = selected_spec(subject_spec, lib_path)
    with_runtime(ctx.obj)


@cli.group()
def subject():
    """The library under audit: show it, or build one (a release, optionally patched)."""


@subject.command("show")
def subject_show():
    """Load the selected library and print its identity as JSON (path, sha256, commit, init_dry ABI)."""
    import json
    lib = load_subject()
    click.echo(json.dumps(lib.identity, indent=2))


@subject.command("build")
@click.option("--version", "version", default=None, metavar="V",
              help="llama-cpp-python sdist version whose vendored llama.cpp is built. [default: the pinned one]")
@click.option("--patch", "patch", default=None, type=click.Path(dir_okay=False), metavar="FILE.diff",
              help="A patch applied to vendor/llama.cpp (patch -p1) before building.")
@click.option("-j", "--jobs", type=Bound(int, 1, 64), default=None, help="Build jobs. [default: all cores]")
@click.option("--force", is_flag=True, help="Rebuild even when cached.")
@click.option("--server", is_flag=True,
              help="Build the llama-server executable instead (its own build directory); prints its path.")
@click.option("--sanitize", "sanitize", default=None, metavar="address,undefined", callback=_sanitizers,
              help="Build libllama with clang's AddressSanitizer and/or UndefinedBehaviorSanitizer (its own work "
                   "tree; every dryz process on it preloads the runtime).")
def subject_build(version, patch, jobs, force, server, sanitize):
    """Build libllama (the `llama` target only) into the cache and print the folder to pass to --lib
    (with --server: build llama-server and print the executable's path)."""
    from .subject.build import PINNED_VERSION, command  # on use: keeps start-up fast
    click.echo(str(command(version or PINNED_VERSION, patch, jobs, force, server, sanitize,
                           lambda m: click.echo(m, err=True))))


@cli.command()
@click.option("-k", "--alphabet", type=Bound(int, 1, _max_alphabet), default=3, show_default=True,
              help="Number of symbols.")
@click.option("-n", "--max-length", type=Bound(int, 1), default=11, show_default=True, help="Longest history.")
@click.option("-c", "--config", "configs", multiple=True, metavar="NAME",
              help="Configuration to run (base, window4, breaker, windowW); repeatable. Default: all three "
                   "(with --all-alphabets: base and window4).")
@click.option("--canonical/--no-canonical", default=True, show_default=True,
              help="Enumerate one history per equality pattern, with multiplicities (see PREREG.md).")
@click.option("--all-alphabets", is_flag=True, help="Every alphabet size at once (canonical; ignores -k).")
@click.option("--window-caps", is_flag=True, help="Add a configuration per window cap 1..N (penalty_last_n).")
@click.option("--parameters", is_flag=True,
              help="Add, per configuration, allowed_length 0..3 x (multiplier, base) in (1, 2), (0.8, 1.75), "
                   "(2, 1.1), (1, 1), judged bit-exactly against the output model (NAME/allowedA/mM/bB).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Run the slices on a Dask scheduler (pip install 'dryz[dask]') instead of local processes.")
@click.option("--shard", default=None, metavar="I/N", help="Run only shard I of N (combine with dryz merge).")
@click.option("--json", "json_path", default="results/main.json", show_default=True,
              help="Where to write the results JSON.")
@click.option("-j", "--workers", type=int, default=None,
              help="Processes to run in parallel.  [default: all cores]")
@click.option("--progress/--no-progress", default=True, help="Progress bar on stderr (after 1 s).")
@click.option("--resume", "resume_path", default=None, type=click.Path(dir_okay=False),
              help="Continue an interrupted run (its partial result JSON); give the same space options.")
@click.option("--vocab", "vocab", default=None, metavar="NAME|PATH",
              help="Histories over real tokens of this vocabulary (--tokens), restart sequences from its "
                   "breakers (--breakers); plain enumeration, in-process.")
@click.option("--tokens", "tokens", default=None, metavar="ID,ID,...",
              help="With --vocab: the token ids histories are made of (every one a candidate). [default: the "
                   "first token of each of '\\n', ' the', ' cat', ':', 'the']")
@click.option("--breakers", "breakers", multiple=True, metavar="PRESET|STRING",
              help="With --vocab: a breaker string (\\n and \\t read as newline and tab), or a preset: default "
                   "(llama.cpp's \\n : \" *) or none; repeatable. [default: default]")
@click.option("--traces", "trace_events", type=Bound(int, 1, _max_trace_events, "events"), default=None, metavar="N",
              help="Then run every trace of 1..N events (accept a/b, apply, reset, clone, free last; four "
                   "configurations) on the same library, judged after every apply (docs/traces.md).")
def exhaustive(alphabet, max_length, configs, canonical, all_alphabets, window_caps, parameters, scheduler, shard,
               json_path, workers, progress, resume_path, vocab, tokens, breakers, trace_events):
    """Certify every history of length 1..N over k symbols, every symbol a candidate."""
    _writable(json_path)
    from .enumerate import command  # on use: keeps start-up fast
    sys.exit(command.exhaustive(alphabet, max_length, configs, canonical, all_alphabets, window_caps, parameters,
                                scheduler, shard, json_path, workers, progress, resume_path, vocab, tokens, breakers,
                                trace_events, click.echo))


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "json_path", required=True, help="Where to write the merged certificate.")
def merge(paths, json_path):
    """Combine `dryz exhaustive --shard` results into one certificate (refuses shards that do not fit)."""
    _writable(json_path)
    from .enumerate import command  # on use: keeps start-up fast
    sys.exit(command.merge(paths, json_path, click.echo))


# -- single cases, minimizer, corpus ---------------------------------------------------------------------


def judge(case, kind: str, isolate: bool = True) -> tuple[int, dict]:
    """(exit code, what dryz check prints) of a case on the selected subject."""
    from .judge import case_report  # on use: keeps start-up fast
    from .verdict import is_finding  # on use: keeps start-up fast
    out = case_report(case, kind, load_subject(), isolate)
    return (EXIT_FINDING if is_finding(out["verdict"]["class"]) else EXIT_OK), out


def judge_trace_json(trace, kind: str, isolate: bool = True) -> tuple[int, dict]:
    """(exit code, what dryz check prints) of a trace on the selected subject."""
    from .verdict import is_finding  # on use: keeps start-up fast
    from .trace_check import trace_report  # on use: keeps start-up fast
    out = trace_report(trace, kind, load_subject(), isolate)
    return (EXIT_FINDING if is_finding(out["verdict"]["class"]) else EXIT_OK), out


@cli.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--as", "read_as", type=click.Choice(["auto", "json", "bytes"]), default="auto", show_default=True,
              help="How to read the file (as dryz check reads it).")
@click.option("--color/--no-color", default=None, help="Highlight matches with terminal colours. [default: on a tty]")
@case_file_options
def explain(path, read_as, color, vocab, breakers, as_trace):
    """One case as a table: the window with positions, the restart sequence that set rep_limit, per candidate
    the matched suffix, L by each oracle and by the library, the expected and observed logit. (dryz check gives
    the same verdict as JSON, for machines.)"""
    from .explain import explain as render  # on use: keeps start-up fast
    from .render import trace_explain_text  # on use: keeps start-up fast
    from .subject.identity import subject_line  # on use: keeps start-up fast
    color = color if color is not None else sys.stdout.isatty()
    t = load_trace_file(path, read_as, as_trace, breakers)
    if t is not None:
        rc, out = judge_trace_json(*t)
        click.echo(trace_explain_text(path, t[1], t[0], out["verdict"], out.get("subject") or {}, color))
        sys.exit(rc)
    case, kind = load_case_file(path, read_as, vocab, breakers)
    case = on_vocab(case, vocab)
    rc, out = judge(case, kind)
    v = out["verdict"]
    ident = out.get("subject") or {}
    if v["class"] in ("crash", "memory"):
        from .render import crash_lines  # on use: keeps start-up fast
        click.echo(crash_lines(v))
        sys.exit(rc)
    v["abi"] = ident.get("init_dry_abi", 7)
    click.echo(f"dryz explain: {path} ({kind})")
    click.echo(render(case, v, subject_line(ident), color, lib=load_subject() if case.vocab is not None else None))
    sys.exit(rc)


@cli.command("check")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--as", "read_as", type=click.Choice(["auto", "json", "bytes"]), default="auto", show_default=True,
              help="How to read the file: auto (a libFuzzer crash-* file as fuzz bytes, anything else as "
                   "UTF-8 JSON), json, or bytes (a fuzz input, decoded as the harness decodes it).")
@click.option("--isolate/--no-isolate", default=True, show_default=True,
              help="Run the case in a child process, so a case that crashes the library is reported as class "
                   "crash (exit 1) instead of taking dryz down with it.")
@case_file_options
def check_cmd(path, read_as, isolate, vocab, breakers, as_trace):
    """Judge one case (Case JSON, corpus entry or crash file); print the verdict as JSON."""
    import json

    t = load_trace_file(path, read_as, as_trace, breakers)
    if t is not None:
        rc, out = judge_trace_json(*t, isolate)
    else:
        case, kind = load_case_file(path, read_as, vocab, breakers)
        rc, out = judge(on_vocab(case, vocab), kind, isolate)
    click.echo(json.dumps(out, indent=2))
    sys.exit(rc)


@cli.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--as", "read_as", type=click.Choice(["auto", "json", "bytes"]), default="auto", show_default=True,
              help="How to read the file (as dryz check reads it).")
@click.option("--corpus", "corpus_dir", default=None,
              help="Where to store the reproducer. [default: ./corpus, in the working directory]")
@click.option("--isolate/--no-isolate", default=None,
              help="Evaluate every candidate in a subprocess. [default: only when the input crashes]")
@click.option("--json", "json_path", default=None,
              help="Write the result here: the entry written, how short (proven or why not), the predicate calls.")
@case_file_options
def minimize(path, read_as, corpus_dir, isolate, json_path, vocab, breakers, as_trace):
    """Shrink a failing case or trace (crash file, Case JSON, trace JSON or corpus entry) to a shortest reproducer
    in ./corpus."""
    _writable(json_path)
    from .shrink import NothingToMinimize, minimize_case, minimize_trace_input  # on use: keeps start-up fast
    t = load_trace_file(path, read_as, as_trace, breakers)
    log = (lambda msg: say(f"  {msg}"))
    try:
        if t is not None:
            trace, kind = t
            lib = load_subject()
            ev, toks = trace.size()
            m = minimize_trace_input(trace, lib, log, announce=lambda shown: click.echo(
                f"minimizing {path} ({kind}): class {shown}, {ev} events, {toks} tokens"))
        else:
            case, kind = load_case_file(path, read_as, vocab, breakers)
            case = on_vocab(case, vocab)
            lib = load_subject()
            m = minimize_case(case, lib, isolate, log=log, announce=lambda shown, iso: click.echo(
                f"minimizing {path} ({kind}): class {shown}, {len(case.history)} tokens{', isolated' if iso else ''}"))
    except NothingToMinimize as e:
        _fail(f"{path} (read as a {kind}): {e}")
    from .corpus import USER_DIR, write_entry  # on use: keeps start-up fast
    entry = m.entry(str(path), kind, lib.identity)
    written = write_entry(corpus_dir or USER_DIR, entry)
    if json_path:
        from .output import write_json  # on use: keeps start-up fast
        write_json(json_path, {"tool": "dryz minimize", "input": str(path), "kind": kind, "class": entry["expect"],
                               "written": str(written), "shortest": m.shortest, "predicate_calls": m.calls,
                               "seconds": round(m.seconds, 2), "subject": lib.identity})
    if t is not None:
        from .render import minimized_trace_text  # on use: keeps start-up fast
        click.echo(minimized_trace_text(m))
    else:
        click.echo(f"reproducer: {len(m.case.history)} tokens {spelled(m.case)!r}, shortest: {m.shortest}, "
                   f"{m.calls} predicate calls, {m.seconds:.1f} s")
    click.echo(f"written: {written}")


@cli.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--vocab", "vocab", default=None, metavar="NAME|PATH",
              help="Replay only the entries on this vocabulary (every entry always runs on its own).")
@click.option("--json", "json_path", default=None, help="Write every entry's status and the totals here.")
def replay(directory, vocab, json_path):
    """Re-run every corpus entry through check() on the selected subject; exit 1 if any verdict changed.
    Default: the project's own corpus (shipped inside the package)."""
    _writable(json_path)
    from .corpus import DEFAULT_DIR, replay as replay_dir, replay_json  # on use: keeps start-up fast
    from .output import write_json  # on use: keeps start-up fast
    from .render import replay_text  # on use: keeps start-up fast
    lib = load_subject()
    say_subject(lib)
    directory = directory or str(DEFAULT_DIR)
    rows = replay_dir(directory, lib, select=vocab_filter(vocab, lib) if vocab else None)
    click.echo(replay_text(rows, lib.identity))
    if json_path:
        write_json(json_path, replay_json(rows, directory, lib.identity))
    bad = [r for r in rows if not r.ok]
    if any(r.error for r in rows):
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDING if bad else EXIT_OK)


@cli.command()
@click.option("-t", "--time", "seconds", type=Bound(int, 1, unit="second"), default=60, show_default=True,
              help="Time budget, seconds.")
@click.option("-j", "--jobs", type=Bound(int, 1), default=None, help="Parallel fuzzing jobs (libFuzzer -fork). [default: all cores]")
@click.option("--workdir", default="fuzz-work", show_default=True, help="Working corpus and log directory.")
@click.option("--artifacts", default=None, help="Where crash files go. [default: WORKDIR/artifacts]")
@click.option("--native/--no-native", default=False, help="Also collect coverage of an instrumented libllama (needs clang).")
@click.option("--fault", type=click.Choice(["off-by-one", "abort", "slow"]), default=None,
              help="Positive control: judge against a deliberately wrong reference.")
@click.option("--json", "json_path", default=None, help="Write the campaign summary here.")
@click.option("--vocab", "vocab", default=None, metavar="NAME|PATH",
              help="Fuzz cases over this real vocabulary (token ids over its full range, histories from tokenized "
                   "text, dryz.decode.vocab) instead of the symbol vocabulary.")
@click.option("--breakers", "breakers", type=click.Choice(["default", "dict", "random"]), default="default",
              show_default=True, help="With --vocab: llama.cpp's four defaults, a dictionary of real-world "
                                      "breaker sets, or random sets.")
@click.option("--sampler", "sampler", type=click.Choice(["clone", "reset"]), default="clone", show_default=True,
              help="With --vocab: each case on a llama_sampler_clone of its configuration's initialized sampler, "
                   "or on that sampler after llama_sampler_reset (faster: a DRY clone copies the processed breakers).")
@click.option("--traces", "traces", is_flag=True,
              help="Fuzz traces (bytes -> dryz.decode.traces.decode_trace -> check_trace) instead of single cases.")
@click.option("--recheck", "recheck", type=Bound(int, 1), default=None, metavar="N",
              help="Re-check at most N crash files (the smallest) in a clean process; the others are kept and "
                   "listed as not re-checked. [default: all]")
@click.argument("libfuzzer_flags", nargs=-1, type=click.UNPROCESSED)
def fuzz(seconds, jobs, workdir, artifacts, native, fault, json_path, vocab, breakers, sampler, traces, recheck,
         libfuzzer_flags):
    """Coverage-guided campaign (atheris + libFuzzer); flags after `--` go to libFuzzer."""
    _writable(json_path)
    from .fuzz import command  # on use: keeps start-up fast
    sys.exit(command.run(seconds, jobs, workdir, artifacts, native, fault, json_path, vocab, breakers, sampler,
                         traces, recheck, libfuzzer_flags, click.echo))


@cli.command()
@click.option("-k", "--alphabet", type=Bound(int, 3, 8, hi_text="8 (the configurations use a, b, c)"), default=3,
              show_default=True, help="Number of symbols.")
@click.option("-n", "--max-length", type=Bound(int, 1, 10), default=7, show_default=True, help="Longest history.")
@click.option("--json", "json_path", default=None, help="Write the per-class counts here.")
@click.option("--vocab", "vocabs", multiple=True, metavar="NAME|PATH|all",
              help="Instead: the restart sequences init_dry builds on this real vocabulary (repeatable; all: the "
                   "pinned sdist's 19), probed against an independent model, and the text promise "
                   "(dryz.enumerate.vocab_restarts).")
@click.option("--check", "check", type=click.Choice(["construction", "promise", "both"]), default="both",
              show_default=True, help="With --vocab: the construction probes, the text promise, or both.")
@click.option("-t", "--time", "seconds", type=Bound(float, 1, 86400, "seconds"), default=None,
              help="With --vocab: start no probe after this many seconds (the result says what was covered).")
def restarts(alphabet, max_length, json_path, vocabs, check, seconds):
    """Multi-token restart sequences (length-2/3, contained, overlapping breakers): every history up to N
    through the library, verdict counts per class. Exit 1 on a mismatch or an undocumented class.
    With --vocab: restart sequences on real vocabularies (construction probes and the text promise)."""
    _writable(json_path)
    from .enumerate import command  # on use: keeps start-up fast
    sys.exit(command.restarts(alphabet, max_length, json_path, vocabs, check, seconds, click.echo))


@cli.command()
@click.option("--versions", default=None, metavar="LIST",
              help="Comma-separated subjects: llama-cpp-python versions and/or xllamacpp[==V]. "
                   "[default: 0.3.16,0.3.34,0.3.35,0.3.36,xllamacpp]")
@click.option("-t", "--time", "seconds", type=Bound(int, 1, 86400, "seconds"), default=60, show_default=True,
              help="Fuzz campaign per subject, seconds.")
@click.option("--random", "random_cases", type=Bound(int, 0, 1_000_000, hi_text="1,000,000"), default=2000,
              show_default=True,
              help="Random fuzz-decoder cases in the differential comparison (besides edge cases, the corpus and "
                   "the campaigns' kept inputs).")
@click.option("--workdir", default="matrix-work", show_default=True, help="Per-subject results and campaigns.")
@click.option("--corpus", "corpus_dir", default="corpus", show_default=True,
              help="Where the minimized witnesses of differences are written.")
@click.option("--json", "json_path", default=None, help="Write the matrix as JSON here.")
@click.option("--markdown", "md_path", default=None, help="Write the Markdown table here (also printed).")
@click.option("--with", "extra", multiple=True, metavar="KIND:ARG",
              help="Also a subject of any kind, e.g. llama-cpp-python:, server:PATH or cmd:\"python a.py\" "
                   "(repeatable); with --versions '' only these.")
def matrix(versions, seconds, random_cases, workdir, corpus_dir, json_path, md_path, extra):
    """Every release side by side: build or fetch each subject, run the certificate, replay, --parameters,
    --window-caps, the restart sweep and a fuzz campaign on it, and minimize every behaviour that differs
    between a subject and the pinned release to a witness naming both. Exit 1 when any subject has a finding or
    differs, 2 when a subject could not be had or a cell could not run."""
    from .matrix import command  # on use: keeps start-up fast
    _writable(json_path)
    _writable(md_path)
    sys.exit(command(versions, seconds, random_cases, workdir, corpus_dir, json_path, md_path, extra, say, click.echo))


@cli.command()
@click.option("--base", "base", required=True, metavar="PATH",
              help="The subject to compare against: a llama-cpp-python release (built), a subject KIND:ARG, or a "
                   "libllama.so or its folder.")
@click.option("--kept", "kept", multiple=True, type=click.Path(file_okay=False), metavar="DIR",
              help="A fuzz campaign's kept inputs (its WORKDIR/corpus) to compare on too; repeatable.")
@click.option("--random", "random_cases", type=Bound(int, 0, 1_000_000, hi_text="1,000,000"), default=2000,
              show_default=True, help="Random fuzz-decoder cases besides edge cases, the corpus and the kept inputs.")
@click.option("-t", "--time", "seconds", type=Bound(float, 1, 86400, "seconds"), default=600, show_default=True,
              help="Start no random or kept case after this many seconds (the edge cases and the corpus are "
                   "always compared in full; the witnesses are minimized after).")
@click.option("--corpus", "corpus_dir", default=None, help="Write each minimized witness here as a corpus entry.")
@click.option("--json", "json_path", default=None, help="Write the differences as JSON here.")
def compare(base, kept, random_cases, seconds, corpus_dir, json_path):
    """The selected subject (NEW) against BASE, case by case, as dryz matrix compares releases (edge cases, the
    corpus, random and kept inputs), each kind of difference minimized to a witness. Exit 1 when they differ."""
    from .inputs import selected_spec  # on use: keeps start-up fast
    from .compare import compare_command  # on use: keeps start-up fast
    _writable(json_path)
    sys.exit(compare_command(base, selected_spec(), kept, random_cases, seconds, corpus_dir, json_path, say,
                             click.echo))


@cli.command()
@click.option("--version", "version", default=None, metavar="V", help="llama-cpp-python sdist whose DRY code is "
              "mutated. [default: the pinned one]")
@click.option("--workdir", default="mutate-work", show_default=True,
              help="Per-mutant results (a run resumes from here) and the plan.")
@click.option("--sample", "n", type=Bound(int, 1), default=None, metavar="N",
              help="A deterministic sample of N mutants, stratified by function and operator. [default: every mutant]")
@click.option("--operators", default=None, metavar="LIST", help="Only these operators (comma-separated).")
@click.option("--ids", default=None, metavar="LIST", help="Only these mutant ids (comma-separated).")
@click.option("--modes", "mode_names", default=None, metavar="LIST",
              help="Only these of the gate's modes (comma-separated). [default: all but the differential]")
@click.option("-t", "--time", "seconds", type=Bound(float, 10, 86400, "seconds"), default=120, show_default=True,
              help="The gate's budget per mutant, seconds (dryz gate --time).")
@click.option("--lanes", type=click.IntRange(1, 2), default=2, show_default=True,
              help="The gate's lanes (modes run side by side).")
@click.option("--first-kill", is_flag=True,
              help="Cancel a mutant's other modes at its first kill (faster; the kill matrix shows the first killer).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Run the mutants as tasks on this Dask scheduler (each worker builds its mutants).")
@click.option("--no-upstream", is_flag=True, help="Do not run llama.cpp's test-sampling (the baseline).")
@click.option("--keep-builds", is_flag=True, help="Keep each mutant's libllama in the subject cache.")
@click.option("--triage", "triage_path", default=None, metavar="FILE",
              help="Survivor triage (equivalent or gap, with the reason). [default: the version's, shipped]")
@click.option("--json", "json_path", default=None, help="Write the summary and every result here.")
@click.option("--markdown", "md_path", default=None, help="Write the report (score, kill matrix, survivors) here.")
@click.option("--list", "list_only", is_flag=True, help="Print the selected mutants as JSON lines and exit.")
@click.option("--sanitize", "sanitize", default=None, metavar="address,undefined", callback=_sanitizers,
              help="Build every mutant (and the pristine control) with these sanitizers: a report kills as memory.")
def mutate(version, workdir, n, operators, ids, mode_names, seconds, lanes, first_kill, scheduler, no_upstream,
           keep_builds, triage_path, json_path, md_path, list_only, sanitize):
    """The audit's own mutation score: mechanical mutants of DRY's source, each built and run through the gate's
    modes and llama.cpp's test-sampling; the kill matrix, the survivors and the score (exit 1 when a survivor is
    not shown equivalent)."""
    from pathlib import Path

    from .mutate.command import main as run_mutate  # on use: keeps start-up fast
    from .subject.build import PINNED_VERSION  # on use: keeps start-up fast
    _writable(json_path)
    _writable(md_path)
    split = (lambda s: [x.strip() for x in s.split(",") if x.strip()] if s else None)
    sys.exit(run_mutate(version or PINNED_VERSION, Path(workdir), n, split(operators), split(ids), split(mode_names),
                        seconds, scheduler, not no_upstream, keep_builds, triage_path, json_path, md_path,
                        list_only, echo=click.echo, log=lambda m: None if quiet_mode() else click.echo(m, err=True),
                        sanitize=sanitize, lanes=lanes, first_kill=first_kill))


@cli.command("gate")
@click.option("--lib", "gate_lib", default=None, metavar="PATH",
              help="The subject (a libllama.so or its folder). [default: the global --lib, DRYZ_LIB, or the pip build]")
@click.option("--base", default=None, metavar="VERSION|PATH",
              help="Also compare the subject with this base: a llama-cpp-python release (built by dryz subject "
                   "build, outside the budget) or a libllama path.")
@click.option("-t", "--time", "seconds", type=Bound(float, 10, 86400, "seconds"), default=300, show_default=True,
              help="The budget, seconds of wall on two lanes (README: how it is split).")
@click.option("--expect-change", "expect", multiple=True, metavar="CLASS",
              help="A behaviour change the subject means to make against the base (e.g. semantic-change@window=-1, "
                   "or crash for every crash change); repeatable.")
@click.option("--expect-file", "expect_file", default=None, type=click.Path(dir_okay=False),
              help="Declared change classes, one per line (# comments).")
@click.option("--workdir", default="gate-work", show_default=True, help="Every mode's results, campaigns, witnesses.")
@click.option("--mode", "modes", multiple=True, metavar="NAME", help="Run only these modes (repeatable).")
@click.option("--lanes", type=click.IntRange(1, 2), default=2, show_default=True,
              help="Modes run side by side.")
@click.option("--markdown", "md_path", default=None, help="Write the summary (for a pull request) here.")
@click.option("--html", "html_path", default=None, help="Write the HTML report (dryz report) here.")
@click.option("--json", "json_path", default=None, help="Write the gate's result as JSON here.")
def gate_cmd(gate_lib, base, seconds, expect, expect_file, workdir, modes, lanes, md_path, html_path, json_path):
    """Every audit mode on the subject within a budget, and with --base what it does differently from the
    base: exit 0 clean, 1 a finding or an undeclared change (or a declared one not seen), 2 the harness."""
    from pathlib import Path

    from .gate.command import command  # on use: keeps start-up fast
    from .gate.summary import report_inputs  # on use: keeps start-up fast
    from .inputs import selected_spec  # on use: keeps start-up fast
    from .report import command as write_report  # on use: keeps start-up fast
    for p in (md_path, html_path, json_path):
        _writable(p)
    res = command(gate_lib, selected_spec(), seconds, base, expect, expect_file, workdir, modes, lanes, md_path,
                  json_path, lambda m: None if quiet_mode() else click.echo(m, err=True), click.echo)
    if html_path:
        write_report([str(Path(res.work) / "gate.json")] + report_inputs(res), html_path, None)
    sys.exit(res.exit)


@cli.command()
@click.argument("inputs", nargs=-1, required=True)
@click.option("--html", "html_path", default="report.html", show_default=True, help="The page to write.")
@click.option("--markdown", "md_path", default=None, help="Also write the Markdown form here.")
def report(inputs, html_path, md_path):
    """One self-contained HTML page (and Markdown) from certificate JSONs, fuzz campaign work directories,
    matrix JSONs and corpus directories: the subject, the space, controls, counts, L histograms and penalty
    plots, coverage and exec/s over time, findings by class with their witnesses."""
    from .report import command  # on use: keeps start-up fast
    _writable(html_path)
    _writable(md_path)
    click.echo(command(inputs, html_path, md_path))


def main(argv=None):
    """Entry point: click's usage errors become one-line messages with exit 2."""
    inputs.ENTRY_ARGV = list(sys.argv[1:] if argv is None else argv)
    from .output import ClosedPipeSafe  # on use: keeps start-up fast
    if not isinstance(sys.stdout, ClosedPipeSafe):
        sys.stdout = ClosedPipeSafe(sys.stdout)
    try:
        cli.main(args=argv, prog_name="dryz", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        click.echo(f"dryz: error: {e.format_message()}", err=True)
        sys.exit(EXIT_ERROR)
    except DryzError as e:  # the one error channel: bad input, a subject that cannot be had, the harness in doubt
        from .subject.binding import ArrayChanged  # on use: keeps start-up fast
        if isinstance(e, ArrayChanged):  # the library's doing: DRY only changes logits
            click.echo(f"dryz {inputs.COMMAND}: MISMATCH: {e} (a finding: DRY only changes logits)")
            sys.exit(EXIT_FINDING)
        click.echo(f"dryz: error: {e.line()}", err=True)
        sys.exit(EXIT_ERROR)
    except click.exceptions.Abort:  # click turns Ctrl-C (KeyboardInterrupt) into Abort
        click.echo("dryz: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:  # the reader went away (dryz check ... | head): not a finding
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        sys.exit(EXIT_OK)
    except KeyboardInterrupt:
        click.echo("dryz: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except OSError as e:  # a path that cannot be read or written: say which, without a traceback
        where = f" {e.filename}" if e.filename else ""
        click.echo(f"dryz: error: {e.strerror or e}:{where}", err=True)
        sys.exit(EXIT_ERROR)
    except Exception as e:
        # Anything else is dryz's own failure: the harness is in doubt (exit 2), never a finding (exit 1).
        import traceback
        traceback.print_exc()
        click.echo(f"dryz: internal error ({type(e).__name__}: {e}); the harness is in doubt", err=True)
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_OK)


if __name__ == "__main__":
    main()
