"""`dryz exhaustive` over the symbol vocabulary and `dryz merge`, everything but option parsing: cli.py parses the
arguments and calls these with `echo` (click.echo: stdout, or stderr with err=True); each returns the exit code.
Bad input raises (dryz.files.fail, or a DryzError): one line, exit 2. `exhaustive --vocab` is vocab_command's and
`dryz restarts` restarts_command's: this module loads only what the main job needs (tests/test_startup.py)."""

from __future__ import annotations

from .. import inputs
from ..errors import EXIT_ERROR, EXIT_FINDING, EXIT_OK
from ..files import fail, parse_json_file, read
from ..inputs import load_subject, selected_spec
from ..output import write_json
from ..render import certificate_report
from .certificate import merge as merge_results
from .exhaustive import ExhaustiveInterrupted, ResumeError, run_exhaustive
from .selection import executor, select_space, TRACE_ALPHABET, validate_traces_option


# Where an interrupted `dryz exhaustive` without --json leaves its state (the partial result --resume continues).
INTERRUPTED = "exhaustive-interrupted.json"


def exhaustive(alphabet, max_length, configs, canonical, all_alphabets, window_caps, parameters, scheduler, shard,
               json_path, workers, progress, resume_path, vocab, tokens, breakers, trace_events, echo) -> int:
    """Certify every history of length 1..N over k symbols (or over real tokens with --vocab: vocab_command),
    every symbol a candidate; with --trace-events, the trace space after it."""
    validate_traces_option(trace_events, shard, resume_path)
    if vocab is not None:
        from .vocab_command import exhaustive as over_vocab  # on use: only --vocab loads the vocabulary modules
        return over_vocab(vocab, tokens, breakers, max_length, configs, parameters, window_caps, json_path, progress,
                          echo, trace_events)
    if tokens or breakers:
        fail("--token and --breakers go with --vocab")
    sel = select_space(alphabet, max_length, configs, canonical, all_alphabets, window_caps, parameters, shard)
    workers, client = executor(scheduler, workers)
    resume = None
    if resume_path is not None:
        resume = parse_json_file(resume_path, read(resume_path))
        if not isinstance(resume, dict) or resume.get("tool") != "dryz exhaustive":
            fail(f"--resume {resume_path}: not a dryz exhaustive result")
    lib = load_subject()
    partial = json_path or INTERRUPTED  # where an interrupted run's state goes, --json or not
    try:
        result = run_exhaustive(lib, sel.alphabet, max_length, sel.specs, json_path, progress, workers, canonical,
                                sel.shard, scheduler=client, resume=resume, partial_path=partial)
    except ExhaustiveInterrupted as e:
        it = e.result["interrupted"]
        echo(f"dryz exhaustive: INTERRUPTED after {len(it['done_tasks'])} of {it['total_tasks']} slices; partial "
             f"result (not a certificate) in {partial}; continue with the same command and --resume {partial}",
             err=True)
        return 130
    except ResumeError:  # (a ValueError that says it itself)
        raise
    except (KeyError, TypeError, ValueError) as e:  # a CaseError of a resumed example too: say where it came from
        if resume is None:
            raise
        fail(f"--resume {resume_path}: not a partial result this dryz can continue ({e})")
    finally:
        if client is not None:
            client.close()
    if trace_events is not None:
        from .traces import add_to_certificate, TraceSpaceInterrupted  # on use: only --trace-events loads them
        try:
            result = add_to_certificate(result, trace_events, load_subject(), TRACE_ALPHABET)
        except TraceSpaceInterrupted:  # the history space's certificate is marked interrupted, not a certificate
            write_json(partial, result)
            echo(f"dryz exhaustive: INTERRUPTED in the trace space; {partial} is marked interrupted (not a "
                 "certificate)", err=True)
            return 130
        except ValueError as e:
            fail(str(e))
        if json_path:
            write_json(json_path, result)
    return certificate_exit(result, json_path, echo)


def certificate_exit(result, json_path, echo) -> int:
    """Print a certificate's report; its exit code (a void one: the harness in doubt, with the failed checks)."""
    echo(certificate_report(result, json_path, selected_spec(), inputs.ENTRY_ARGV))
    if result["verdict"] == "void":
        failed = ", ".join(k for k, ok in result["checks"].items() if not ok)
        echo(f"dryz: error: the harness is in doubt, the run is void: failed {failed}", err=True)
        return EXIT_ERROR
    return EXIT_FINDING if result["verdict"] in ("mismatch", "crash") else EXIT_OK


def merge(paths, json_path, echo) -> int:
    """Combine `dryz exhaustive --shard` results into one certificate (refuses shards that do not fit)."""
    data = []
    for p in paths:
        d = parse_json_file(p, read(p))
        if not isinstance(d, dict):
            fail(f"{p}: not a dryz exhaustive --shard result (a JSON object)")
        data.append(d)
    try:
        result = merge_results(data, list(paths))
    except (KeyError, TypeError) as e:
        fail(f"a shard result lacks a field ({e}); not a dryz exhaustive --shard result")
    write_json(json_path, result)
    return certificate_exit(result, json_path, echo)
