"""The dryz command line. Errors are one line on stderr: exit 2 for usage or harness errors."""

from __future__ import annotations

import os
import sys

import click

from . import __version__, inputs

from .errors import EXIT_ERROR, EXIT_FINDING, EXIT_INTERRUPTED, EXIT_OK, DryzError
from .files import fail as _fail
from .inputs import (judge_case_file, judge_requests_file, judge_trace_file, load_case_file, load_requests_file,
                     load_subject, load_trace_file, on_vocab, quiet_mode, say, vocab_filter, with_runtime)
from .options import (BASE, CAUSE, CERTIFICATE, CHANGE, ENTRY, EXPECT_FILE, FITTED, FIX, INPUT, INPUT_FOLDER,
                      ISSUE_RESULT, KILL_ORDER, LIB, MATRIX_RELEASE, MODE, OPERATOR, OUTPUT, OUTPUT_FOLDER, PROPERTY,
                      RELEASE, REPORT_INPUT, RESUMED, SANITIZER, SCHEDULER, SHARD, SPACE_CONFIG, SUBJECT,
                      SUBJECT_OR_SERVER, TRIAGE, VOCAB, WITNESS, Bound, Duration, Group, Vocabulary, _max_alphabet,
                      _max_trace_events, _sanitizers, case_file_options, check_environment, meaning, old,
                      read_as_option, with_old_spellings)


def say_subject(lib) -> None:
    """The subject a command judges, named before its results."""
    from .subject.identity import subject_header  # on use: keeps start-up fast
    click.echo(subject_header(lib))


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dryz")
@click.option("--subject", "subject_spec", default=None, type=SUBJECT, metavar="KIND:ARG", envvar="DRYZ_SUBJECT",
              help="The subject under audit, for every command and every process it starts: libllama:PATH (a "
                   "libllama.so or its folder), server:PATH (a llama-server binary), llama-cpp-python: (the "
                   "installed binding), engine:NAME (mistralrs, exllamav2, aphrodite: another engine's DRY), "
                   "ik-llama:[PATH] (ik_llama.cpp's DRY: the installed ik-llama-cpp-python, or the fork's "
                   "libllama.so), cmd:COMMAND (your adapter, docs/adapters.md). [env: DRYZ_SUBJECT; default: llama-cpp-python's "
                   "libllama]")
@click.option("--lib", "lib_path", default=None, type=LIB, metavar="PATH", envvar="DRYZ_LIB",
              help=meaning("--lib", "Short for --subject libllama:PATH. [env: DRYZ_LIB]"))
@click.option("--declare", "declared", multiple=True, type=FIX, metavar="FIX",
              help="The subject (a patched llama.cpp) carries this fix dryz models (finite-penalty:saturate, "
                   "base-below-one:off, breaker-text:printed): declared-FIX where its output is the fix's.")
@click.option("-q", "--quiet", is_flag=True, help="No progress output (results and errors only), for scripts.")
@click.option("--no-build", is_flag=True, help="Refuse (exit 2) any build the command needs and the cache lacks, "
              "instead of making it (a build says first how long it is expected to take). [env: DRYZ_NO_BUILD=1]")
@click.pass_context
def cli(ctx, subject_spec, lib_path, declared, quiet, no_build):
    """Audit llama.cpp's DRY sampler against independent oracles."""
    check_environment(inputs.ENTRY_ARGV)
    for on, var in ((quiet, "DRYZ_QUIET"), (no_build, "DRYZ_NO_BUILD")):  # (and every process the command starts)
        os.environ.update({var: "1"} if on else {})
    inputs.COMMAND = ctx.invoked_subcommand or ""
    ctx.obj = inputs.selected(subject_spec, lib_path, declared)
    with_runtime(ctx.obj)


@cli.group()
def subject():
    """The library under audit: show it, or build one (a release, optionally patched)."""


@subject.command("show")
def subject_show():
    """Load the selected subject and print its identity as JSON (for a libllama: path, sha256, commit, init_dry ABI)
    and what it can be asked (capabilities)."""
    import json
    lib = load_subject()
    click.echo(json.dumps({**lib.identity, "capabilities": lib.caps.to_json()}, indent=2))


@subject.command("build")
@click.option("--release", "version", default=None, type=RELEASE, metavar="V",
              help=meaning("--release", "The one built. [default: the pinned one]"))
@old("--version", "--release", "version", type=RELEASE)
@click.option("--patch", "patch", default=None, type=INPUT, metavar="FILE.diff",
              help="A patch applied to vendor/llama.cpp (patch -p1) before building.")
@click.option("--build-jobs", "jobs", type=Bound(int, 1, 64), default=None,
              help="The compiler's parallel jobs. [default: all cores]")
@old("-j/--jobs", "--build-jobs", "jobs", type=Bound(int, 1, 64))
@click.option("--force", is_flag=True, help="Rebuild even when cached.")
@click.option("--server", is_flag=True,
              help="Build the llama-server executable instead (its own build directory); prints its path.")
@click.option("--sanitize", "sanitize", multiple=True, type=SANITIZER, metavar="NAME", callback=_sanitizers,
              help=meaning("--sanitize", "Give it once per sanitizer. libllama in its own work tree."))
@with_old_spellings
def subject_build(version, patch, jobs, force, server, sanitize):
    """Build libllama (the `llama` target only) into the cache and print the folder to pass to --lib
    (with --server: build llama-server and print the executable's path)."""
    from .subject.build import PINNED_VERSION, command  # on use: keeps start-up fast
    click.echo(str(command(version or PINNED_VERSION, patch, jobs, force, server, sanitize,
                           lambda m: click.echo(m, err=True))))


@cli.command()
@click.option("-k", "--alphabet", type=Bound(int, 1, _max_alphabet), default=3, show_default=True,
              help=meaning("--alphabet"))
@click.option("-n", "--max-length", type=Bound(int, 1), default=11, show_default=True, help=meaning("--max-length"))
@click.option("-c", "--config", "configs", multiple=True, type=SPACE_CONFIG, metavar="NAME",
              help="Configuration to run (base, window4, breaker, windowW); repeatable. Default: all three "
                   "(with --all-alphabets: base and window4).")
@click.option("--canonical/--no-canonical", default=True, show_default=True,
              help="Enumerate one history per equality pattern, with multiplicities (see PREREG.md).")
@click.option("--all-alphabets", is_flag=True, help="Every alphabet size at once (canonical; ignores -k).")
@click.option("--window-caps", is_flag=True, help="Add a configuration per window cap 1..N (penalty_last_n).")
@click.option("--parameters", is_flag=True,
              help="Add, per configuration, allowed_length 0..3 x (multiplier, base) in (1, 2), (0.8, 1.75), "
                   "(2, 1.1), (1, 1), judged bit-exactly against the output model (NAME/allowedA/mM/bB).")
@click.option("--scheduler", default=None, type=SCHEDULER, metavar="ADDRESS",
              help=meaning("--scheduler", "The space's slices."))
@click.option("--shard", default=None, type=SHARD, metavar="I/N",
              help="Run only shard I of N (combine with dryz merge).")
@click.option("--json", "json_path", default=None, type=OUTPUT, metavar="FILE",
              help=meaning("--json", "The certificate (interrupted: the partial result --resume continues)."))
@click.option("-j", "--jobs", "workers", type=Bound(int, 1), default=None,
              help=meaning("--jobs", "At most 4 per core. [default: all cores]"))
@old("--workers", "-j/--jobs", "workers", type=Bound(int, 1))
@click.option("--progress/--no-progress", default=True, help="Progress bar on stderr (after 1 s).")
@click.option("--resume", "resume_path", default=None, type=RESUMED, metavar="FILE",
              help="Continue an interrupted run (its partial result JSON); give the same space options.")
@click.option("--vocab", "vocab", default=None, type=VOCAB, metavar="NAME|PATH",
              help=meaning("--vocab", "Histories over its real tokens (--token), restart sequences from its "
                                      "breakers (--breakers); plain enumeration, in-process."))
@click.option("--token", "tokens", multiple=True, type=Bound(int, 0), metavar="ID",
              help="With --vocab: a token id histories are made of (every one a candidate); give it once per id. "
                   "[default: the first token of each of '\\n', ' the', ' cat', ':', 'the']")
@old("--tokens", "--token", "tokens", split=True)
@click.option("--breakers", "breakers", multiple=True, metavar="PRESET|STRING",
              help=meaning("--breakers", "With --vocab. [default: default]"))
@click.option("--trace-events", "trace_events", type=Bound(int, 1, _max_trace_events, "events"), default=None,
              metavar="N", help="Then run every trace of 1..N events (accept a/b, apply, reset, clone, free last; "
                                "four configurations) on the same library, judged after every apply (docs/traces.md).")
@old("--traces", "--trace-events", "trace_events", type=Bound(int, 1, _max_trace_events, "events"))
@with_old_spellings
def exhaustive(alphabet, max_length, configs, canonical, all_alphabets, window_caps, parameters, scheduler, shard,
               json_path, workers, progress, resume_path, vocab, tokens, breakers, trace_events):
    """Certify every history of length 1..N over k symbols, every symbol a candidate."""
    from .enumerate import command  # on use: keeps start-up fast
    sys.exit(command.exhaustive(alphabet, max_length, configs, canonical, all_alphabets, window_caps, parameters,
                                scheduler, shard, json_path, workers, progress, resume_path, vocab,
                                ",".join(map(str, tokens)) if tokens else None, breakers, trace_events, click.echo))


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=CERTIFICATE)
@click.option("--json", "json_path", required=True, type=OUTPUT, metavar="FILE",
              help=meaning("--json", "The merged certificate."))
def merge(paths, json_path):
    """Combine `dryz exhaustive --shard` results into one certificate (refuses shards that do not fit)."""
    from .enumerate import command  # on use: keeps start-up fast
    sys.exit(command.merge(paths, json_path, click.echo))


# -- single cases, minimizer, corpus ---------------------------------------------------------------------


@cli.command()
@click.argument("path", type=INPUT)
@read_as_option
@click.option("--color/--no-color", default=None, help="Highlight matches with terminal colours. [default: on a tty]")
@case_file_options
@with_old_spellings
def explain(path, read_as, color, vocab, breakers, as_trace):
    """One case as a table: the window with positions, the restart sequence that set rep_limit, per candidate
    the matched suffix, L by each oracle and by the library, the expected and observed logit. (dryz check gives
    the same verdict as JSON, for machines.)"""
    from .explain_command import command  # on use: keeps start-up fast
    sys.exit(command(path, read_as, color if color is not None else sys.stdout.isatty(), vocab, breakers, as_trace,
                     click.echo))


@cli.command("check")
@click.argument("path", type=INPUT)
@read_as_option
@click.option("--isolate/--no-isolate", default=True, show_default=True,
              help=meaning("--isolate", "Without it, a case that crashes the library takes dryz down with it."))
@case_file_options
@with_old_spellings
def check_cmd(path, read_as, isolate, vocab, breakers, as_trace):
    """Judge one case (Case JSON, corpus entry or crash file), trace or request sequence; print the verdict as
    JSON."""
    import json

    s = None if as_trace else load_requests_file(path, read_as)
    t = None if s is not None else load_trace_file(path, read_as, as_trace, breakers)
    if s is not None:
        rc, out = judge_requests_file(*s, isolate)
    elif t is not None:
        rc, out = judge_trace_file(*t, isolate)
    else:
        case, kind = load_case_file(path, read_as, vocab, breakers)
        rc, out = judge_case_file(on_vocab(case, vocab), kind, isolate)
    click.echo(json.dumps(out, indent=2))
    sys.exit(rc)


@cli.command()
@click.argument("path", type=INPUT)
@read_as_option
@click.option("--corpus", "corpus_dir", default="reproducers", type=OUTPUT_FOLDER, metavar="DIR",
              help=meaning("--corpus", "The reproducer (a relative folder is in the working directory)."))
@click.option("--isolate/--no-isolate", default=None,
              help=meaning("--isolate", "[default: only when the input crashes it]"))
@click.option("--json", "json_path", default=None, type=OUTPUT, metavar="FILE",
              help=meaning("--json", "The entry written, how short (proven or why not), the predicate calls."))
@click.option("--cause", default=None, type=CAUSE, metavar="MODEL", help=meaning("--cause"))
@click.option("--fitted", "causes", multiple=True, type=FITTED, metavar="MODEL", help=meaning("--fitted"))
@case_file_options
@with_old_spellings
def minimize(path, read_as, corpus_dir, isolate, json_path, vocab, breakers, as_trace, cause, causes):
    """Shrink a failing case or trace (crash file, Case JSON, trace JSON or corpus entry) to a shortest reproducer
    in ./reproducers (or --corpus)."""
    from .shrink_command import command  # on use: keeps start-up fast
    command(path, read_as, corpus_dir, isolate, json_path, vocab, breakers, as_trace, click.echo, cause, causes)


@cli.command("export")
@click.argument("entry", required=False, type=ENTRY)
@click.option("--as", "form", type=click.Choice(["test-sampling", "pytest", "c", "issue"]), required=True,
              help=meaning("--as", "test-sampling (a test_dry call), pytest (on llama-cpp-python), c (against "
                                   "llama.h), or issue (another engine's difference as its maintainers' report)."))
@click.option("--output", default=None, type=OUTPUT, metavar="FILE", help="Write it to this file. [default: stdout]")
@click.option("--reports", default=None, type=OUTPUT_FOLDER, metavar="DIR", help="--as issue: the reports and their "
              "scripts go here; without ENTRY, one per cause of the selected subject (--subject engine:NAME).")
@click.option("--result", default=None, type=ISSUE_RESULT, metavar="FILE", help="--as issue without ENTRY: the "
              "causes from this properties or conformance result (--json). [default: the subject is run now]")
@click.option("--workdir", default=None, type=OUTPUT_FOLDER, metavar="FOLDER", help=meaning(
    "--workdir", "--as issue, the subject run now: its properties and minimized witnesses. [default: a temporary one]"))
def export_cmd(entry, form, output, reports, result, workdir):
    """A corpus entry as a test in its target's own style, its expected values from the oracles (what a form cannot
    express is refused naming the next form); --as issue: another engine's difference as a bug report."""
    from .issue.command import command  # on use: keeps start-up fast
    sys.exit(command(entry, form, output, reports, result, workdir, inputs.selected_spec(),
                     lambda m: None if quiet_mode() else click.echo(m, err=True), click.echo))


@cli.command()
@click.argument("directory", required=False, type=INPUT_FOLDER)
@click.option("--vocab", "vocab", default=None, type=VOCAB, metavar="NAME|PATH",
              help=meaning("--vocab", "Replay only the entries on it (every entry always runs on its own)."))
@click.option("--json", "json_path", default=None, type=OUTPUT, metavar="FILE",
              help=meaning("--json", "Every entry's status and the totals."))
def replay(directory, vocab, json_path):
    """Re-run every corpus entry through check() on the selected subject; exit 1 if any verdict changed.
    Default: the project's own corpus (shipped inside the package)."""
    from .corpus import DEFAULT_DIR, replay as replay_dir, replay_json, replay_text  # on use: keeps start-up fast
    from .output import write_json  # on use: keeps start-up fast
    from .render import replay_ending  # on use: keeps start-up fast
    lib = load_subject()
    say_subject(lib)
    directory = directory or str(DEFAULT_DIR)
    rows = replay_dir(directory, lib, select=vocab_filter(vocab, lib) if vocab else None)
    if not rows:  # CI pointed at the wrong folder must not pass
        _fail(f"{directory}: no corpus entry to replay" + (f" on vocabulary {vocab}" if vocab else ""))
    if json_path:
        write_json(json_path, replay_json(rows, directory, lib.identity))
    click.echo(replay_text(rows, lib.identity) + "\n" + replay_ending(rows, json_path, inputs.selected_spec()))
    if all(r.not_judged for r in rows):  # nothing judged is no pass
        _fail(f"the subject can express none of the {len(rows)} entries of {directory}")
    bad = [r for r in rows if not r.ok]
    if any(r.error for r in rows):
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDING if bad else EXIT_OK)


@cli.command()
@click.option("-t", "--time", "seconds", type=Duration(1, whole=True), default=60, show_default=True,
              help=meaning("--time", "The campaign; the re-check of its crash files follows."))
@click.option("-j", "--jobs", type=Bound(int, 1), default=None,
              help=meaning("--jobs", "libFuzzer's -fork jobs. [default: all cores]"))
@click.option("--workdir", default="fuzz-work", type=OUTPUT_FOLDER, show_default=True,
              help=meaning("--workdir", "The corpus it keeps, "
              "its crash files and libFuzzer's log."))
@click.option("--artifacts", default=None, type=OUTPUT_FOLDER, metavar="DIR",
              help="Where crash files go. [default: WORKDIR/artifacts]")
@click.option("--native/--no-native", default=False, help="Also collect coverage of an instrumented libllama (needs clang).")
@click.option("--fault", type=click.Choice(["off-by-one", "abort", "slow"]), default=None, envvar="DRYZ_FAULT",
              help="Positive control: judge against a deliberately wrong reference.")
@click.option("--json", "json_path", default=None, type=OUTPUT, metavar="FILE",
              help=meaning("--json", "The campaign's summary."))
@click.option("--vocab", "vocab", default=None, type=VOCAB, metavar="NAME|PATH",
              help=meaning("--vocab", "Fuzz cases over it (token ids over its full range, histories from tokenized "
                                      "text, dryz.decode.vocab) instead of the symbol vocabulary."))
@click.option("--breaker-sets", "breakers", type=click.Choice(["default", "dict", "random"]), default="default",
              show_default=True, help="With --vocab: the breaker sets the cases draw from: llama.cpp's four "
                                      "defaults, a dictionary of real-world breaker sets, or random sets.")
@old("--breakers", "--breaker-sets", "breakers", type=click.Choice(["default", "dict", "random"]))
@click.option("--sampler", "sampler", type=click.Choice(["clone", "reset"]), default="clone", show_default=True,
              envvar="DRYZ_VOCAB_SAMPLER",
              help="With --vocab: each case on a llama_sampler_clone of its configuration's initialized sampler, "
                   "or on that sampler after llama_sampler_reset (faster: a DRY clone copies the processed breakers).")
@click.option("--traces", "traces", is_flag=True,
              help=meaning("--traces", "Bytes -> dryz.decode.traces.decode_trace -> check_trace."))
@click.option("--recheck", "recheck", type=Bound(int, 1), default=None, metavar="N",
              help="Re-check at most N crash files (the smallest) in a clean process; the others are kept and "
                   "listed as not re-checked. [default: all]")
@click.option("--fitted", "causes", multiple=True, type=FITTED, metavar="MODEL", help=meaning("--fitted"))
@click.argument("libfuzzer_flags", nargs=-1, type=click.UNPROCESSED)
@with_old_spellings
def fuzz(seconds, jobs, workdir, artifacts, native, fault, json_path, vocab, breakers, sampler, traces, recheck,
         causes, libfuzzer_flags):
    """Coverage-guided campaign (atheris + libFuzzer); flags after `--` go to libFuzzer."""
    from .fuzz import command  # on use: keeps start-up fast
    sys.exit(command.run(seconds, jobs, workdir, artifacts, native, fault, json_path, vocab, breakers, sampler,
                         traces, recheck, libfuzzer_flags, click.echo, tuple(causes)))


@cli.command()
@click.option("-k", "--alphabet", type=Bound(int, 3, 8, hi_text="8 (the configurations use a, b, c)"), default=3,
              show_default=True, help=meaning("--alphabet"))
@click.option("-n", "--max-length", type=Bound(int, 1, 10), default=7, show_default=True,
              help=meaning("--max-length"))
@click.option("--json", "json_path", default=None, type=OUTPUT, metavar="FILE",
              help=meaning("--json", "The per-class counts."))
@click.option("--vocab", "vocabs", multiple=True, type=Vocabulary(every="all"), metavar="NAME|PATH|all",
              help=meaning("--vocab", "Instead: the restart sequences init_dry builds on it, probed against an "
                                      "independent model, and the text promise (dryz.enumerate.vocab_restarts); "
                                      "give it once per vocabulary (all: the pinned sdist's 19)."))
@click.option("--check", "check", type=click.Choice(["construction", "promise", "both"]), default="both",
              show_default=True, help="With --vocab: the construction probes, the text promise, or both.")
@click.option("-t", "--time", "seconds", type=Duration(1, 86400), default=None,
              help=meaning("--time", "With --vocab: no probe starts after it (the result says what was covered)."))
def restarts(alphabet, max_length, json_path, vocabs, check, seconds):
    """Multi-token restart sequences (length-2/3, contained, overlapping breakers): every history up to N
    through the library, verdict counts per class. Exit 1 on a mismatch or an undocumented class.
    With --vocab: restart sequences on real vocabularies (construction probes and the text promise)."""
    from .enumerate import restarts_command  # on use: keeps start-up fast
    sys.exit(restarts_command.restarts(alphabet, max_length, json_path, vocabs, check, seconds, click.echo))


@cli.command()
@click.option("--release", "releases", multiple=True, type=MATRIX_RELEASE, metavar="V",
              help=meaning("--release", "A row; give it once per release; xllamacpp[==V] for the xllamacpp wheel, "
                                        "none for no release (only --with). [default: 0.3.16, 0.3.34, 0.3.35, "
                                        "0.3.36, xllamacpp]"))
@old("--versions", "--release", "releases", split=True)
@click.option("--time-per-subject", "seconds", type=Duration(1, 86400, whole=True), default=60, show_default=True,
              help=meaning("--time-per-subject"))
@old("-t/--time", "--time-per-subject", "seconds", type=Duration(1, 86400, whole=True))
@click.option("--random", "random_cases", type=Bound(int, 0, 1_000_000, hi_text="1,000,000"), default=2000,
              show_default=True, help=meaning("--random", "The campaigns' kept inputs too."))
@click.option("--workdir", default="matrix-work", type=OUTPUT_FOLDER, show_default=True,
              help=meaning("--workdir", "A folder per subject."))
@click.option("--corpus", "corpus_dir", default=None, type=OUTPUT_FOLDER, metavar="DIR",
              help=meaning("--corpus", "Each behaviour that differs between a subject and the pinned release. "
                                       "[default: WORKDIR/witnesses]"))
@click.option("--json", "json_path", default=None, type=OUTPUT, metavar="FILE", help=meaning("--json", "The matrix."))
@click.option("--markdown", "md_path", default=None, type=OUTPUT, metavar="FILE",
              help=meaning("--markdown", "The table (also printed)."))
@click.option("--with", "extra", multiple=True, type=SUBJECT, metavar="KIND:ARG",
              help="Also a subject of any kind, e.g. llama-cpp-python:, server:PATH or cmd:\"python a.py\"; give "
                   "it once per subject.")
@with_old_spellings
def matrix(releases, seconds, random_cases, workdir, corpus_dir, json_path, md_path, extra):
    """Every release side by side: build or fetch each subject, run the certificate, replay, --parameters,
    --window-caps, the restart sweep and a fuzz campaign on it, and minimize every behaviour that differs
    between a subject and the pinned release to a witness naming both. Exit 1 when any subject has a finding or
    differs, 2 when a subject could not be had or a cell could not run."""
    from pathlib import Path

    from .matrix import command  # on use: keeps start-up fast
    versions = "" if "none" in releases or (releases == ("",)) else ",".join(releases) if releases else None
    sys.exit(command(versions, seconds, random_cases, workdir, corpus_dir or str(Path(workdir) / "witnesses"),
                     json_path, md_path, extra, say, click.echo))


@cli.command()
@click.option("--row", "rows", multiple=True, type=SUBJECT_OR_SERVER, metavar="KIND:ARG",
              help="A row: a subject of any kind, or `server` (the pinned release's llama-server, built once); give "
                   "it once per row. [default: llama.cpp's library, server and binding, and every engine dryz ships]")
@click.option("--time-per-subject", "seconds", type=Duration(1, 86400, whole=True), default=60, show_default=True,
              help=meaning("--time-per-subject"))
@click.option("--property", "names", multiple=True, type=PROPERTY, metavar="NAME", help=meaning("--property"))
@click.option("-n", "--max-length", type=Bound(int, 1, 11), default=8, show_default=True,
              help=meaning("--max-length", "The certificate campaign's (the default space, over 3 symbols)."))
@click.option("--workdir", default="conformance-work", type=OUTPUT_FOLDER, show_default=True,
              help=meaning("--workdir", "A folder per subject; its minimized witnesses in WORKDIR/SUBJECT/witnesses."))
@click.option("--json", "json_path", default=None, type=OUTPUT, metavar="FILE",
              help=meaning("--json", "The matrix (dryz report makes its HTML page)."))
@click.option("--markdown", "md_path", default=None, type=OUTPUT, metavar="FILE",
              help=meaning("--markdown", "The tables (also printed)."))
def conformance(rows, names, seconds, max_length, workdir, json_path, md_path):
    """Every DRY in the field, property by property: per subject its campaigns (the certificate space it can
    express, the restart sweep, a fuzz campaign) and its properties (dryz properties), each differing cell's
    witness minimized. Exit 1 when a cell differs, 2 when a subject could not be had."""
    from .conformance.matrix import command  # on use: keeps start-up fast
    sys.exit(command(rows, seconds, max_length, names, workdir, json_path, md_path, say, click.echo))


@cli.command()
@click.option("-t", "--time", "seconds", type=Duration(30, 86400, whole=True), default=240, show_default=True,
              help=meaning("--time", "All of it: the campaign has what the steps before it leave."))
@click.option("--property", "names", multiple=True, type=PROPERTY, metavar="NAME", help=meaning("--property"))
@click.option("--workdir", default="audit-work", type=OUTPUT_FOLDER, show_default=True, help=meaning("--workdir"))
@click.option("--json", "json_path", default=None, type=OUTPUT, metavar="FILE", help=meaning("--json"))
@click.option("--markdown", "md_path", default=None, type=OUTPUT, metavar="FILE", help=meaning("--markdown"))
def audit(seconds, names, workdir, json_path, md_path):
    """Is DRY correct in the selected subject, and what differs: one verdict, each difference with its cause."""
    from .conformance.audit import command  # on use: keeps start-up fast
    sys.exit(command(inputs.selected_spec(), seconds, names, workdir, json_path, md_path, say, click.echo))


@cli.command()
@click.option("--property", "names", multiple=True, type=PROPERTY, metavar="NAME", help=meaning("--property"))
@click.option("--witness", "witnesses", multiple=True, type=WITNESS, metavar="FILE",
              help="Also judge this case, trace or crash file and name the property its difference belongs to; "
                   "give it once per file.")
@click.option("--json", "json_path", default=None, type=OUTPUT, metavar="FILE", help=meaning("--json", "Every cell."))
@click.option("--corpus", "corpus_dir", default=None, type=OUTPUT_FOLDER, metavar="DIR",
              help=meaning("--corpus", "Each differing property's first probe. [default: none written]"))
@click.option("--fitted", "causes", multiple=True, type=FITTED, metavar="MODEL", help=meaning("--fitted"))
@click.option("--answers", default=None, type=OUTPUT, metavar="FILE", help="Keep the subject's answers in this file "
              "and take those it holds for this subject instead of asking again (dryz's own format).")
def properties(names, witnesses, json_path, corpus_dir, causes, answers):
    """Every semantic property of llama.cpp's DRY asked with its probes; the causes of what differs, fitted; a cell
    per property (conforms, declared, differs for a cause, not expressible, not judged). Exit 1: a cell differs."""
    from .conformance.row import command  # on use: keeps start-up fast
    sys.exit(command(names, witnesses, json_path, corpus_dir, click.echo, tuple(causes), answers))


@cli.command()
@click.option("--base", "base", required=True, type=BASE, metavar="VERSION|KIND:ARG|PATH", help=meaning("--base"))
@click.option("--kept", "kept", multiple=True, type=INPUT_FOLDER, metavar="DIR",
              help="A fuzz campaign's kept inputs (its WORKDIR/corpus) to compare on too; give it once per folder.")
@click.option("--random", "random_cases", type=Bound(int, 0, 1_000_000, hi_text="1,000,000"), default=2000,
              show_default=True, help=meaning("--random"))
@click.option("-t", "--time", "seconds", type=Duration(1, 86400), default=600, show_default=True,
              help=meaning("--time", "No random or kept case starts after it (the edge cases and the corpus are "
                                     "always compared in full; the witnesses are minimized after)."))
@click.option("--corpus", "corpus_dir", default=None, type=OUTPUT_FOLDER, metavar="DIR", help=meaning("--corpus"))
@click.option("--json", "json_path", default=None, type=OUTPUT, metavar="FILE",
              help=meaning("--json", "The differences."))
def compare(base, kept, random_cases, seconds, corpus_dir, json_path):
    """The selected subject (NEW) against BASE, case by case, as dryz matrix compares releases (edge cases, the
    corpus, random and kept inputs), each kind of difference minimized to a witness. Exit 1 when they differ."""
    from .inputs import selected_spec  # on use: keeps start-up fast
    from .compare import compare_command  # on use: keeps start-up fast
    sys.exit(compare_command(base, selected_spec(), kept, random_cases, seconds, corpus_dir, json_path, say,
                             click.echo))


@cli.command()
@click.option("--release", "version", default=None, type=RELEASE, metavar="V",
              help=meaning("--release", "Whose DRY code is mutated. [default: the pinned one]"))
@old("--version", "--release", "version", type=RELEASE)
@click.option("--workdir", default="mutate-work", type=OUTPUT_FOLDER, show_default=True,
              help=meaning("--workdir", "Per-mutant results (a run resumes from here) and the plan."))
@click.option("--sample", "n", type=Bound(int, 1), default=None, metavar="N",
              help="A deterministic sample of N mutants, stratified by function and operator. [default: every mutant]")
@click.option("--operator", "operators", multiple=True, type=OPERATOR, metavar="NAME",
              help="Only this operator's mutants; give it once per operator.")
@old("--operators", "--operator", "operators", split=True, item=OPERATOR)
@click.option("--id", "ids", multiple=True, metavar="ID", help="Only this mutant; give it once per mutant.")
@old("--ids", "--id", "ids", split=True)
@click.option("--mode", "mode_names", multiple=True, type=MODE, metavar="NAME",
              help=meaning("--mode", "Only these kill. [default: all but the differential]"))
@old("--modes", "--mode", "mode_names", split=True, item=MODE)
@click.option("--time-per-mutant", "seconds", type=Duration(10, 86400), default=120,
              show_default=True, help="Wall-clock seconds of the gate on each mutant (dryz gate --time).")
@old("-t/--time", "--time-per-mutant", "seconds", type=Duration(10, 86400))
@click.option("--lanes", type=click.IntRange(1, 2), default=2, show_default=True, help=meaning("--lanes"))
@click.option("--first-kill", is_flag=True,
              help="Cancel a mutant's other modes at its first kill (faster; the kill matrix shows the first killer).")
@click.option("--kill-order", default=None, type=KILL_ORDER, metavar="FILE|gate",
              help="Each lane's modes kill-first, as this kill "
              "matrix orders them (or an earlier run's --json), or `gate`. [default: the release's, if shipped]")
@click.option("--scheduler", default=None, type=SCHEDULER, metavar="ADDRESS",
              help=meaning("--scheduler", "The mutants as tasks (each worker builds its mutants)."))
@click.option("--no-upstream", is_flag=True, help="Do not run llama.cpp's test-sampling (the baseline).")
@click.option("--keep-builds", is_flag=True, help="Keep each mutant's libllama in the subject cache.")
@click.option("--triage", "triage_path", default=None, type=TRIAGE, metavar="FILE",
              help="Survivor triage (equivalent or gap, with the reason). [default: the release's, shipped]")
@click.option("--json", "json_path", default=None, type=OUTPUT, metavar="FILE",
              help=meaning("--json", "The summary and every result."))
@click.option("--markdown", "md_path", default=None, type=OUTPUT, metavar="FILE",
              help=meaning("--markdown", "The score, kill matrix and survivors."))
@click.option("--list", "list_only", is_flag=True, help="Print the selected mutants as JSON lines and exit.")
@click.option("--sanitize", "sanitize", multiple=True, type=SANITIZER, metavar="NAME", callback=_sanitizers,
              help=meaning("--sanitize", "Every mutant and the pristine control; a report kills as memory."))
@click.option("--test-set", "test_set", default=None, type=OUTPUT_FOLDER, metavar="DIR",
              help="Then the fewest test_dry vectors that kill what dryz kills and test-sampling misses: a patch to "
                   "tests/test-sampling.cpp in DIR, scored.")
@with_old_spellings
def mutate(version, workdir, n, operators, ids, mode_names, seconds, lanes, first_kill, kill_order, scheduler,
           no_upstream, keep_builds, triage_path, json_path, md_path, list_only, sanitize, test_set):
    """The audit's own mutation score: mechanical mutants of DRY's source, each built and run through the gate's
    modes and llama.cpp's test-sampling; the kill matrix, the survivors and the score (exit 1 when a survivor is
    not shown equivalent)."""
    from pathlib import Path

    from .mutate.command import main as run_mutate  # on use: keeps start-up fast
    from .subject.build import PINNED_VERSION  # on use: keeps start-up fast
    split = (lambda s: list(s) if s else None)
    sys.exit(run_mutate(version or PINNED_VERSION, Path(workdir), n, split(operators), split(ids), split(mode_names),
                        seconds, scheduler, not no_upstream, keep_builds, triage_path, json_path, md_path,
                        list_only, echo=click.echo, log=lambda m: None if quiet_mode() else click.echo(m, err=True),
                        sanitize=sanitize, lanes=lanes, first_kill=first_kill, kill_order=kill_order,
                        test_set=Path(test_set) if test_set else None))


@cli.command("gate")
@click.option("--lib", "gate_lib", default=None, type=LIB, metavar="PATH",
              help=meaning("--lib", "[default: the global --subject or --lib, DRYZ_SUBJECT, DRYZ_LIB, or the pip "
                                    "build]"))
@click.option("--base", default=None, type=BASE, metavar="VERSION|KIND:ARG|PATH",
              help=meaning("--base", "Its behaviour changes are listed (a release is built outside the budget)."))
@click.option("-t", "--time", "seconds", type=Duration(10, 86400), default=300, show_default=True,
              help=meaning("--time", "The budget of each of two lanes (docs: how it is split)."))
@click.option("--expect-change", "expect", multiple=True, type=CHANGE, metavar="CLASS",
              help="A behaviour change the subject means to make against the base (e.g. semantic-change@window=-1, "
                   "or crash for every crash change; on an engine's patch, a cause it removes, e.g. "
                   "raises-window:20); give it once per class.")
@click.option("--expect-file", "expect_file", default=None, type=EXPECT_FILE, metavar="FILE",
              help="Declared change classes, one per line (# comments).")
@click.option("--workdir", default="gate-work", type=OUTPUT_FOLDER, show_default=True,
              help=meaning("--workdir", "Every mode's results, campaigns, witnesses."))
@click.option("--mode", "modes", multiple=True, type=MODE, metavar="NAME", help=meaning("--mode", "Only these run."))
@click.option("--lanes", type=click.IntRange(1, 2), default=2, show_default=True, help=meaning("--lanes"))
@click.option("--markdown", "md_path", default=None, type=OUTPUT, metavar="FILE",
              help=meaning("--markdown", "The summary for a pull request (also printed)."))
@click.option("--html", "html_path", default=None, type=OUTPUT, metavar="FILE",
              help=meaning("--html", "The report (dryz report) over every mode's results."))
@click.option("--json", "json_path", default=None, type=OUTPUT, metavar="FILE",
              help=meaning("--json", "The gate's result."))
def gate_cmd(gate_lib, base, seconds, expect, expect_file, workdir, modes, lanes, md_path, html_path, json_path):
    """Every audit mode on the subject within a budget, and with --base what it does differently from the
    base: exit 0 clean, 1 a finding or an undeclared change (or a declared one not seen), 2 the harness."""
    from pathlib import Path

    from .gate.command import command  # on use: keeps start-up fast
    from .gate.summary import report_inputs  # on use: keeps start-up fast
    from .inputs import selected_spec  # on use: keeps start-up fast
    from .report import command as write_report  # on use: keeps start-up fast
    res = command(gate_lib, selected_spec(), seconds, base, expect, expect_file, workdir, modes, lanes, md_path,
                  json_path, lambda m: None if quiet_mode() else click.echo(m, err=True), click.echo)
    if html_path:
        write_report([str(Path(res.work) / "gate.json")] + report_inputs(res), html_path, None)
    sys.exit(res.exit)


@cli.command()
@click.argument("inputs", nargs=-1, required=True, type=REPORT_INPUT)
@click.option("--html", "html_path", default=None, type=OUTPUT, metavar="FILE", help=meaning("--html"))
@click.option("--markdown", "md_path", default=None, type=OUTPUT, metavar="FILE",
              help=meaning("--markdown", "Without --html and --markdown, the Markdown is printed."))
def report(inputs, html_path, md_path):
    """One self-contained HTML page (and Markdown) from certificate JSONs, fuzz campaign work directories,
    matrix JSONs and corpus directories: the subject, the space, controls, counts, L histograms and penalty
    plots, coverage and exec/s over time, findings by class with their witnesses."""
    from .report import command  # on use: keeps start-up fast
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
