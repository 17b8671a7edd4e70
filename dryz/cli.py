"""The dryz command line. Errors are one line on stderr: exit 2 for usage or harness errors."""

from __future__ import annotations

import os
import sys

import click

from . import __version__, inputs
from .enumerate.selection import MAX_TRACE_EVENTS

from .inputs import (EXIT_ERROR, EXIT_FINDING, EXIT_OK, fail as _fail, load_case_file, load_subject, load_trace_file,
                     on_vocab, parse_json_file, quiet_mode, read as _read, say, spelled, vocab_filter, with_runtime)


def say_subject(lib) -> None:
    """The subject a command judges, named before its results."""
    from .output import subject_details
    click.echo(f"subject: {lib.label()}")
    for line in subject_details(lib.identity):
        click.echo(f"         {line}")


def _writable(path) -> None:
    """Refuse an output path before the work, not after it (a run's result must not be lost)."""
    from pathlib import Path
    if path is None:
        return
    parent = Path(path).resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        _fail(f"cannot write {path}: {e.strerror}")
    if not os.access(parent, os.W_OK) or Path(path).is_dir():
        _fail(f"cannot write {path}")


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
    from .subject.symbols import MAX_ALPHABET  # (imported when asked: the subject package loads numpy)
    return MAX_ALPHABET


def _sanitizers(ctx, param, value) -> tuple[str, ...]:
    """--sanitize address,undefined as the builder takes it, refused with one line while parsing."""
    from .subject.build import parse_sanitize
    try:
        return parse_sanitize(value)
    except ValueError as e:
        raise click.UsageError(str(e))


def case_file_options(f):
    """--vocab and --trace, as every command that reads one case or trace file takes them."""
    f = click.option("--trace", "as_trace", is_flag=True,
                     help="The file is a trace (trace JSON and trace corpus entries are recognised without it; "
                          "a `dryz fuzz --traces` crash file or input read --as bytes needs it).")(f)
    return click.option("--vocab", "vocab", default=None, metavar="NAME|PATH",
                        help="Run the case on this real vocabulary (a name such as llama-bpe: the "
                             "ggml-vocab-*.gguf files of the pinned sdist; or a GGUF path): its token ids are that "
                             "vocabulary's.")(f)


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
    from .subject.binding import SubjectError
    from .subject.registry import selected_spec
    try:
        ctx.obj = selected_spec(subject_spec, lib_path)
    except SubjectError as e:
        _fail(str(e))
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
    from .subject.build import PINNED_VERSION, BuildArgumentError, BuildError, build
    try:
        out = build(version or PINNED_VERSION, patch, jobs=jobs, log=lambda m: click.echo(m, err=True), force=force, server=server,
                    sanitize=sanitize)
    except BuildError as e:
        _fail(str(e) if isinstance(e, BuildArgumentError) else f"subject build: {e}")
    click.echo(str(out / "llama-server") if server else str(out))


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
@click.option("--traces", "trace_events", type=Bound(int, 1, MAX_TRACE_EVENTS, "events"), default=None, metavar="N",
              help="Then run every trace of 1..N events (accept a/b, apply, reset, clone, free last; four "
                   "configurations) on the same library, judged after every apply (docs/traces.md).")
def exhaustive(alphabet, max_length, configs, canonical, all_alphabets, window_caps, parameters, scheduler, shard,
               json_path, workers, progress, resume_path, vocab, tokens, breakers, trace_events):
    """Certify every history of length 1..N over k symbols, every symbol a candidate."""
    _writable(json_path)
    from .enumerate.selection import validate_traces_option
    validate_traces_option(trace_events, shard, resume_path)
    if vocab is not None:
        if trace_events is not None:
            _fail("--traces runs over the symbol vocabulary (not with --vocab)")
        return exhaustive_vocab(vocab, tokens, breakers, max_length, configs, parameters, window_caps, json_path,
                                progress)
    if tokens is not None or breakers:
        _fail("--tokens and --breakers go with --vocab")
    from .check import HarnessError
    from .enumerate.dask_exec import SchedulerError
    from .enumerate.selection import executor, select_space
    from .subject.binding import ArrayChanged
    sel = select_space(alphabet, max_length, configs, canonical, all_alphabets, window_caps, parameters, shard)
    workers, client = executor(scheduler, workers)
    resume = None
    if resume_path is not None:
        resume = parse_json_file(resume_path, _read(resume_path))
        if not isinstance(resume, dict) or resume.get("tool") != "dryz exhaustive":
            _fail(f"--resume {resume_path}: not a dryz exhaustive result")
    from .enumerate.exhaustive import ExhaustiveInterrupted, ResumeError, run_exhaustive
    lib = load_subject()
    try:
        result = run_exhaustive(lib, sel.alphabet, max_length, sel.specs, json_path, progress, workers, canonical,
                                sel.shard, scheduler=client, resume=resume)
    except ResumeError as e:
        _fail(str(e))
    except ExhaustiveInterrupted as e:
        it = e.result["interrupted"]
        click.echo(f"dryz exhaustive: INTERRUPTED after {len(it['done_tasks'])} of {it['total_tasks']} slices; "
                   f"partial result (not a certificate) in {json_path}; continue with the same command and "
                   f"--resume {json_path}", err=True)
        sys.exit(130)
    except (KeyError, TypeError, ValueError) as e:
        if resume is None:
            raise
        _fail(f"--resume {resume_path}: not a partial result this dryz can continue ({e})")
    except HarnessError as e:
        _fail(f"harness error: {e}")
    except SchedulerError as e:  # a Dask cluster that cannot run this subject: its one-line reason
        _fail(str(e))
    except ArrayChanged as e:
        click.echo(f"dryz exhaustive: MISMATCH: {e} (a finding: DRY only changes logits)")
        sys.exit(EXIT_FINDING)
    finally:
        if client is not None:
            client.close()
    if trace_events is not None:
        from .enumerate.selection import TRACE_ALPHABET
        from .enumerate.traces import TraceSpaceInterrupted, add_to_certificate
        from .output import write_json
        try:
            result = add_to_certificate(result, trace_events, load_subject(), TRACE_ALPHABET)
        except TraceSpaceInterrupted:  # the history space's certificate is marked interrupted, not a certificate
            write_json(json_path, result)
            click.echo(f"dryz exhaustive: INTERRUPTED in the trace space; {json_path} is marked interrupted (not a "
                       "certificate)", err=True)
            sys.exit(130)
        except ValueError as e:
            _fail(str(e))
        write_json(json_path, result)
    _print_certificate(result, json_path)


def exhaustive_vocab(vocab, tokens, breakers, max_length, configs, parameters, window_caps, json_path, progress):
    """`dryz exhaustive --vocab`: every history over real tokens (dryz.enumerate.vocab_space)."""
    from .enumerate.selection import select_vocab_space
    from .enumerate.vocab_space import certificate
    from .output import Progress, write_json
    lib = load_subject()
    v, ids, strings, specs, total_h = select_vocab_space(lib, vocab, tokens, breakers, max_length, configs,
                                                         parameters, window_caps)
    bar = Progress(total_h * len(specs), "histories", enabled=progress)
    result, results = certificate(lib, v, ids, max_length, specs, strings, bar)
    bar.close()
    write_json(json_path, result)
    from .output import vocab_certificate_text
    click.echo(vocab_certificate_text(result, results, v.pieces()))
    click.echo(f"verdict   {result['verdict']}\nresults   {json_path}")
    if not any(r.off_by_one_flagged for r in results):
        click.echo("dryz: error: the off-by-one control flagged nothing: the harness is in doubt", err=True)
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_OK if result["verdict"] == "agree" else EXIT_FINDING)


def _print_certificate(result, json_path):
    from .output import certificate_report
    click.echo(certificate_report(result, json_path))
    if result["verdict"] == "void":
        failed = ", ".join(k for k, ok in result["checks"].items() if not ok)
        click.echo(f"dryz: error: the harness is in doubt, the run is void: failed {failed}", err=True)
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDING if result["verdict"] in ("mismatch", "crash") else EXIT_OK)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "json_path", required=True, help="Where to write the merged certificate.")
def merge(paths, json_path):
    """Combine `dryz exhaustive --shard` results into one certificate (refuses shards that do not fit)."""
    _writable(json_path)

    from .enumerate.certificate import MergeError, merge as merge_results
    from .output import write_json
    data = []
    for p in paths:
        d = parse_json_file(p, _read(p))
        if not isinstance(d, dict):
            _fail(f"{p}: not a dryz exhaustive --shard result (a JSON object)")
        data.append(d)
    try:
        result = merge_results(data, list(paths))
    except MergeError as e:
        _fail(str(e))
    except (KeyError, TypeError) as e:
        _fail(f"a shard result lacks a field ({e}); not a dryz exhaustive --shard result")
    write_json(json_path, result)
    _print_certificate(result, json_path)


# -- single cases, minimizer, corpus ---------------------------------------------------------------------


def judge(case, kind: str, isolate: bool = True) -> tuple[int, dict]:
    """(exit code, what dryz check prints) of a case on the selected subject."""
    from .check import case_report, is_finding
    out = case_report(case, kind, load_subject(), isolate)
    return (EXIT_FINDING if is_finding(out["verdict"]["class"]) else EXIT_OK), out


def judge_trace_json(trace, kind: str, isolate: bool = True) -> tuple[int, dict]:
    """(exit code, what dryz check prints) of a trace on the selected subject."""
    from .check import is_finding
    from .trace_check import trace_report
    out = trace_report(trace, kind, load_subject(), isolate)
    return (EXIT_FINDING if is_finding(out["verdict"]["class"]) else EXIT_OK), out


@cli.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--as", "read_as", type=click.Choice(["auto", "json", "bytes"]), default="auto", show_default=True,
              help="How to read the file (as dryz check reads it).")
@click.option("--color/--no-color", default=None, help="Highlight matches with terminal colours. [default: on a tty]")
@case_file_options
def explain(path, read_as, color, vocab, as_trace):
    """One case as a table: the window with positions, the restart sequence that set rep_limit, per candidate
    the matched suffix, L by each oracle and by the library, the expected and observed logit. (dryz check gives
    the same verdict as JSON, for machines.)"""
    from .explain import explain as render
    from .output import subject_line, trace_explain_text
    color = color if color is not None else sys.stdout.isatty()
    t = load_trace_file(path, read_as, as_trace)
    if t is not None:
        rc, out = judge_trace_json(*t)
        click.echo(trace_explain_text(path, t[1], t[0], out["verdict"], out.get("subject") or {}, color))
        sys.exit(rc)
    case, kind = load_case_file(path, read_as, vocab)
    case = on_vocab(case, vocab)
    rc, out = judge(case, kind)
    v = out["verdict"]
    ident = out.get("subject") or {}
    if v["class"] in ("crash", "memory"):
        from .output import crash_lines
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
def check_cmd(path, read_as, isolate, vocab, as_trace):
    """Judge one case (Case JSON, corpus entry or crash file); print the verdict as JSON."""
    import json

    t = load_trace_file(path, read_as, as_trace)
    if t is not None:
        rc, out = judge_trace_json(*t, isolate)
    else:
        case, kind = load_case_file(path, read_as, vocab)
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
@case_file_options
def minimize(path, read_as, corpus_dir, isolate, vocab, as_trace):
    """Shrink a failing case or trace (crash file, Case JSON, trace JSON or corpus entry) to a shortest reproducer
    in ./corpus."""
    from .shrink import NothingToMinimize, minimize_case, minimize_trace_input
    t = load_trace_file(path, read_as, as_trace)
    log = (lambda msg: say(f"  {msg}"))
    try:
        if t is not None:
            trace, kind = t
            lib = load_subject()
            ev, toks = trace.size()
            m = minimize_trace_input(trace, lib, log, announce=lambda shown: click.echo(
                f"minimizing {path} ({kind}): class {shown}, {ev} events, {toks} tokens"))
        else:
            case, kind = load_case_file(path, read_as, vocab)
            case = on_vocab(case, vocab)
            lib = load_subject()
            m = minimize_case(case, lib, isolate, log=log, announce=lambda shown, iso: click.echo(
                f"minimizing {path} ({kind}): class {shown}, {len(case.history)} tokens{', isolated' if iso else ''}"))
    except NothingToMinimize as e:
        _fail(f"{path} (read as a {kind}): {e}")
    from .corpus import USER_DIR, CorpusError, write_entry
    try:
        written = write_entry(corpus_dir or USER_DIR, m.entry(str(path), kind, lib.identity))
    except CorpusError as e:
        _fail(str(e))
    if t is not None:
        from .output import minimized_trace_text
        click.echo(minimized_trace_text(m))
    else:
        click.echo(f"reproducer: {len(m.case.history)} tokens {spelled(m.case)!r}, shortest: {m.shortest}, "
                   f"{m.calls} predicate calls, {m.seconds:.1f} s")
    click.echo(f"written: {written}")


@cli.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--vocab", "vocab", default=None, metavar="NAME|PATH",
              help="Replay only the entries on this vocabulary (every entry always runs on its own).")
def replay(directory, vocab):
    """Re-run every corpus entry through check() on the selected subject; exit 1 if any verdict changed.
    Default: the project's own corpus (shipped inside the package)."""
    from .corpus import DEFAULT_DIR, CorpusError, replay as replay_dir
    d = directory or str(DEFAULT_DIR)
    lib = load_subject()
    here = lib.identity
    say_subject(lib)

    try:
        rows = replay_dir(d, lib, select=vocab_filter(vocab, lib) if vocab else None)
    except CorpusError as e:
        _fail(str(e))
    from .output import replay_text
    click.echo(replay_text(rows, here))
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
                   "text, dryz.fuzz.decode_vocab) instead of the symbol vocabulary.")
@click.option("--breakers", "breakers", type=click.Choice(["default", "dict", "random"]), default="default",
              show_default=True, help="With --vocab: llama.cpp's four defaults, a dictionary of real-world "
                                      "breaker sets, or random sets.")
@click.option("--sampler", "sampler", type=click.Choice(["clone", "reset"]), default="clone", show_default=True,
              help="With --vocab: each case on a llama_sampler_clone of its configuration's initialized sampler, "
                   "or on that sampler after llama_sampler_reset (faster: a DRY clone copies the processed breakers).")
@click.option("--traces", "traces", is_flag=True,
              help="Fuzz traces (bytes -> dryz.fuzz.traces.decode_trace -> check_trace) instead of single cases.")
@click.option("--recheck", "recheck", type=Bound(int, 1), default=None, metavar="N",
              help="Re-check at most N crash files (the smallest) in a clean process; the others are kept and "
                   "listed as not re-checked. [default: all]")
@click.argument("libfuzzer_flags", nargs=-1, type=click.UNPROCESSED)
def fuzz(seconds, jobs, workdir, artifacts, native, fault, json_path, vocab, breakers, sampler, traces, recheck,
         libfuzzer_flags):
    """Coverage-guided campaign (atheris + libFuzzer); flags after `--` go to libFuzzer."""
    _writable(json_path)
    from pathlib import Path

    from .fuzz.campaign import Campaign, CampaignError
    from .output import write_json
    if traces and vocab is not None:
        _fail("--traces fuzzes traces over the symbol vocabulary (not with --vocab)")
    if jobs is None:
        jobs = os.cpu_count() or 1
    lib = load_subject()
    if native:
        from .subject.libllama import pip_library
        if lib.kind != "libllama" or lib.path != pip_library():
            _fail("--native fuzzes an instrumented libllama built from the pinned sdist, not the selected subject; "
                  "run without --native to audit it")
    for f in libfuzzer_flags:
        if not f.startswith("-"):
            _fail(f"unexpected argument {f!r} (libFuzzer flags start with '-')")
    work = Path(workdir).resolve()  # libFuzzer runs with the work dir as its cwd: paths must be absolute
    camp = Campaign(seconds=seconds, jobs=jobs, workdir=work,
                    artifacts=Path(artifacts).resolve() if artifacts else work / "artifacts",
                    native=native, fault=fault, extra=list(libfuzzer_flags), vocab=vocab, breakers=breakers,
                    target="traces" if traces else "cases", subject=lib, recheck_limit=recheck)
    camp.log = say
    if vocab is not None:
        from .vocab_cases import load_vocab
        load_vocab(vocab, lib)  # one line and exit 2 when it cannot be had, before libFuzzer starts
        os.environ["DRYZ_VOCAB_SAMPLER"] = sampler  # the jobs inherit it (LibLlama.reuse_samplers)
    say_subject(lib)
    confirmation = None
    if vocab is None:  # the ABI confirmation case, judged as `dryz check` judges it; it also seeds the campaign
        from .fuzz.campaign import confirmation_control
        from .output import abi_confirmation_text
        confirmation = confirmation_control(lib)
        say(f"control: {abi_confirmation_text(confirmation)}")
        if not confirmation["oracles_passed"]:
            _fail("the oracles miss the ABI confirmation case's logit -1: the harness is in doubt")
        from .case import Case
        for ex in confirmation["findings"]:
            click.echo(f"finding: {ex['kind']} (ABI confirmation control): {Case.from_json(ex['case']).dumps()}")
    try:
        summary = camp.run()
    except CampaignError as e:
        _fail(str(e))
    except SystemExit as e:  # the native build reports a missing toolchain this way
        _fail(f"native build unavailable (exit {e.code}); run without --native for Python coverage only")
    except Exception as e:
        from .fuzz.native import NativeBuildError
        if isinstance(e, NativeBuildError):
            _fail(f"native build: {e}")
        raise
    from .output import fuzz_summary_text
    click.echo(fuzz_summary_text(summary, traces, seconds, camp.hard_limit()))
    camp.complete(summary, confirmation, sampler)
    write_json(work / "summary.json", summary)  # beside the log: what dryz report reads
    if json_path:
        write_json(json_path, summary)
    from .fuzz.campaign import exit_code
    rc, why = exit_code(summary, confirmation, seconds)
    if why:
        click.echo(why, err=True)
    sys.exit(rc)


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
    if vocabs:
        return restarts_vocab(vocabs, check, seconds, json_path)
    if seconds is not None or check != "both":
        _fail("--check and --time go with --vocab")
    from .output import write_json
    from .enumerate.restarts import CONFIGS, sweep
    from .check import is_finding
    from .output import Progress, restarts_text
    total = len(CONFIGS) * sum(alphabet ** n for n in range(1, max_length + 1))
    say_subject(lib := load_subject())
    bar = Progress(total, "histories")
    results = sweep(lib, k=alphabet, max_len=max_length, configs=CONFIGS, progress=bar)
    bar.close()
    click.echo(restarts_text(results))
    bad = any(is_finding(k) for r in results for k in r.counts)
    if json_path:
        write_json(json_path, {"alphabet": alphabet, "max_length": max_length,
                               "configs": [r.to_json() for r in results]})
    sys.exit(EXIT_FINDING if bad else EXIT_OK)


def restarts_vocab(vocabs, check, seconds, json_path):
    """`dryz restarts --vocab`: the work is dryz.enumerate.vocab_restarts.run; this parses and prints."""
    from .enumerate.vocab_restarts import run, summary_text, vocab_names
    from .output import write_json
    from .subject.vendored_vocabs import VocabUnavailable
    lib = load_subject()
    from .subject.vendored_vocabs import resolve_vocab
    try:
        names = vocab_names(vocabs)
        for n in names:
            resolve_vocab(n)
    except VocabUnavailable as e:
        _fail(f"--vocab: {e}")
    click.echo(f"dryz restarts --vocab: {', '.join(names)}")
    say_subject(lib)
    checks = ("construction", "promise") if check == "both" else (check,)
    try:
        result = run(lib, names, checks, seconds, log=click.echo)
    except VocabUnavailable as e:
        _fail(str(e))
    click.echo(summary_text(result))
    if json_path:
        write_json(json_path, result)
        click.echo(f"results   {json_path}")
    sys.exit(EXIT_FINDING if result["findings"] else EXIT_OK)


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
    from pathlib import Path

    from .matrix import DEFAULT_VERSIONS, MatrixError, Spec, markdown, parse_versions, run_matrix
    from .output import write_json
    from .subject.registry import SubjectError, parse
    _writable(json_path)
    _writable(md_path)
    try:
        specs = parse_versions(versions if versions is not None else ",".join(DEFAULT_VERSIONS)) if (
            versions != "" or not extra) else []
        for x in extra:
            parse(x)
            specs.append(Spec("subject", x))
    except (MatrixError, SubjectError) as e:
        _fail(str(e))
    result = run_matrix(specs, seconds, Path(workdir).resolve(), Path(corpus_dir), say, random_cases)
    table = markdown(result)
    click.echo(table)
    if json_path:
        write_json(json_path, result)
    if md_path:
        Path(md_path).write_text(table)
    from .matrix import exit_code
    sys.exit(exit_code(result))


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
    from pathlib import Path

    from .gate import GateError, resolve_base
    from .inputs import selected_spec
    from .matrix import MatrixError, compare_pair
    from .output import write_json
    _writable(json_path)
    try:
        base_lib, new_lib = resolve_base(base, say), selected_spec()
    except GateError as e:
        _fail(str(e))
    try:
        r = compare_pair(base_lib, new_lib, [Path(k) for k in kept], random_cases, seconds, Path.cwd(),
                         Path(corpus_dir) if corpus_dir else None, say)
    except MatrixError as e:
        _fail(str(e))
    click.echo(f"new       {r['new']['subject']}\n          {r['new']['spec']}\nbase      {r['base']['subject']}\n"
               f"          {r['base']['spec']}")
    from .output import compare_text
    click.echo(compare_text(r))
    if json_path:
        write_json(json_path, r)
    if r["counts"].get("error"):
        _fail(f"{r['counts']['error']} case(s) could not be judged on one side: the harness is in doubt")
    sys.exit(EXIT_FINDING if r["differences"] else EXIT_OK)


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

    from .enumerate.dask_exec import SchedulerError
    from .mutate.command import main as run_mutate
    from .mutate.runner import MutateError
    from .subject.build import PINNED_VERSION, BuildError
    _writable(json_path)
    _writable(md_path)
    split = (lambda s: [x.strip() for x in s.split(",") if x.strip()] if s else None)
    try:
        rc = run_mutate(version or PINNED_VERSION, Path(workdir), n, split(operators), split(ids), split(mode_names),
                        seconds, scheduler, not no_upstream, keep_builds, triage_path, json_path, md_path,
                        list_only, echo=click.echo,
                        log=lambda m: None if quiet_mode() else click.echo(m, err=True), sanitize=sanitize,
                        lanes=lanes, first_kill=first_kill)
    except (MutateError, BuildError, SchedulerError) as e:
        _fail(str(e))
    sys.exit(rc)


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

    from . import gate as g
    from .inputs import selected_spec
    from .output import write_json
    from .subject.binding import SubjectError, resolve
    for p in (md_path, html_path, json_path):
        _writable(p)
    try:
        declared = g.declared_changes(expect, expect_file)
    except g.GateError as e:
        _fail(str(e))
    try:
        subject = f"libllama:{resolve(gate_lib)}" if gate_lib else selected_spec()
    except SubjectError as e:
        _fail(f"subject: {e}")
    try:
        res = g.gate(["--subject", subject], seconds, base, declared, Path(workdir), list(modes) or None, lanes,
                     log=lambda m: None if quiet_mode() else click.echo(m, err=True))  # stdout: the summary
    except g.GateError as e:
        _fail(str(e))
    md = g.markdown(res)
    data = res.to_json()
    write_json(Path(res.work) / "gate.json", data)
    if json_path:
        write_json(json_path, data)
    if md_path:
        Path(md_path).write_text(md)
    if html_path:
        from .report import build_report
        page, _ = build_report([str(Path(res.work) / "gate.json")] + g.report_inputs(res))
        Path(html_path).write_text(page)
    click.echo(md, nl=False)
    sys.exit(res.exit)


@cli.command()
@click.argument("inputs", nargs=-1, required=True)
@click.option("--html", "html_path", default="report.html", show_default=True, help="The page to write.")
@click.option("--markdown", "md_path", default=None, help="Also write the Markdown form here.")
def report(inputs, html_path, md_path):
    """One self-contained HTML page (and Markdown) from certificate JSONs, fuzz campaign work directories,
    matrix JSONs and corpus directories: the subject, the space, controls, counts, L histograms and penalty
    plots, coverage and exec/s over time, findings by class with their witnesses."""
    from pathlib import Path

    from .report import ReportError, build_report
    _writable(html_path)
    _writable(md_path)
    for i in inputs:
        if not Path(i).exists():
            _fail(f"{i}: no such file or directory")
    try:
        page, md = build_report(list(inputs))
    except ReportError as e:
        _fail(str(e))
    except (KeyError, TypeError, ValueError) as e:
        _fail(f"an input lacks what its kind must have ({type(e).__name__}: {e}); not written by this dryz?")
    Path(html_path).write_text(page)
    if md_path:
        Path(md_path).write_text(md)
    click.echo(f"written: {html_path}" + (f", {md_path}" if md_path else ""))


def main(argv=None):
    """Entry point: click's usage errors become one-line messages with exit 2."""
    inputs.ENTRY_ARGV = list(sys.argv[1:] if argv is None else argv)
    from .output import ClosedPipeSafe
    if not isinstance(sys.stdout, ClosedPipeSafe):
        sys.stdout = ClosedPipeSafe(sys.stdout)
    try:
        cli.main(args=argv, prog_name="dryz", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        click.echo(f"dryz: error: {e.format_message()}", err=True)
        sys.exit(EXIT_ERROR)
    except click.exceptions.Abort:  # click turns Ctrl-C (KeyboardInterrupt) into Abort
        click.echo("dryz: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:  # the reader went away (dryz check ... | head): not a finding
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        sys.exit(EXIT_OK)
    except KeyboardInterrupt:
        click.echo("dryz: interrupted", err=True)
        sys.exit(130)
    except OSError as e:  # a path that cannot be read or written: say which, without a traceback
        where = f" {e.filename}" if e.filename else ""
        click.echo(f"dryz: error: {e.strerror or e}:{where}", err=True)
        sys.exit(EXIT_ERROR)
    except Exception as e:  # bad input found deep in a command (a Case out of range, an unusable subject)
        from .case import CaseError
        from .corpus import CorpusError
        from .subject import SubjectError
        from .subject.protocol import Unsupported
        if isinstance(e, (CaseError, CorpusError, SubjectError, Unsupported)):
            click.echo(f"dryz: error: {e}", err=True)
            sys.exit(EXIT_ERROR)
        # Anything else is dryz's own failure: the harness is in doubt (exit 2), never a finding (exit 1).
        import traceback
        traceback.print_exc()
        click.echo(f"dryz: internal error ({type(e).__name__}: {e}); the harness is in doubt", err=True)
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_OK)


if __name__ == "__main__":
    main()
