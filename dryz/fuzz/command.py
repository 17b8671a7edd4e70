"""`dryz fuzz`, everything but option parsing: cli.py parses the arguments and calls `run` with `echo`
(click.echo); it returns the exit code (dryz.fuzz.campaign.exit_code). Bad input raises: one line, exit 2."""

from __future__ import annotations

import os
from pathlib import Path

from ..files import fail
from ..inputs import load_subject, say, selected_spec
from ..case import Case
from ..output import write_json
from ..render import abi_confirmation_text, fuzz_summary_text
from ..subject.identity import subject_header
from ..subject.libllama import pip_library
from ..vocab_cases import load_vocab
from .campaign import Campaign, confirmation_control, exit_code


def explained_control(confirmation: dict, causes: tuple, lib) -> bool:
    """A failed ABI confirmation control whose answer the fitted causes explain (dryz.causes, as the campaign's
    inputs are judged with them): marked explained, its finding dropped. A crash is left a finding."""
    from ..causes import answer_of, explains  # on use: a campaign with fitted causes
    if confirmation["observed_logit"] == "crash":
        return False
    case = Case.from_json(confirmation["case"])
    answer = answer_of(case, {"logits": [confirmation["observed_logit"]]})
    if not explains(case, answer, tuple(causes), bool(lib.caps.sorted_flag), lib.abi):
        return False
    confirmation.update(explained_by=list(causes), findings=[])
    return True


def run(seconds, jobs, workdir, artifacts, native, fault, json_path, vocab, breakers, sampler, traces, recheck,
        libfuzzer_flags, echo, causes=()) -> int:
    if traces and vocab is not None:
        fail("--traces fuzzes traces over the symbol vocabulary (not with --vocab)")
    for f in libfuzzer_flags:
        if not f.startswith("-"):
            fail(f"unexpected argument {f!r} (libFuzzer flags start with '-')")
    lib = load_subject()
    if native:
        if lib.kind != "libllama" or lib.path != pip_library():
            fail("--native fuzzes an instrumented libllama built from the pinned sdist, not the selected subject; "
                 "run without --native to audit it")
    work = Path(workdir).resolve()  # libFuzzer runs with the work dir as its cwd: paths must be absolute
    camp = Campaign(seconds=seconds, jobs=jobs or os.cpu_count() or 1, workdir=work,
                    artifacts=Path(artifacts).resolve() if artifacts else work / "artifacts",
                    native=native, fault=fault, extra=list(libfuzzer_flags), vocab=vocab, breakers=breakers,
                    target="traces" if traces else "cases", subject=lib, recheck_limit=recheck, causes=causes)
    camp.log = say
    if vocab is not None:
        load_vocab(vocab, lib)  # one line and exit 2 when it cannot be had, before libFuzzer starts
        os.environ["DRYZ_VOCAB_SAMPLER"] = sampler  # the jobs inherit it (LibLlama.reuse_samplers)
    echo(subject_header(lib))
    confirmation = None
    if vocab is None:  # the ABI confirmation case, judged as `dryz check` judges it; it also seeds the campaign
        confirmation = confirmation_control(lib)
        if not confirmation["oracles_passed"]:
            say(f"control: {abi_confirmation_text(confirmation)}")
            fail("the oracles miss the ABI confirmation case's logit -1: the harness is in doubt")
        if causes and confirmation["findings"]:
            explained_control(confirmation, causes, lib)
        say(f"control: {abi_confirmation_text(confirmation)}")
        for ex in confirmation["findings"]:
            echo(f"finding: {ex['kind']} (ABI confirmation control): {Case.from_json(ex['case']).dumps()}")
    try:
        summary = camp.run()
    except SystemExit as e:  # the native build reports a missing toolchain this way
        fail(f"native build unavailable (exit {e.code}); run without --native for Python coverage only")
    camp.complete(summary, confirmation, sampler)  # the subject and vocabulary, which the text names too
    write_json(work / "summary.json", summary)  # beside the log: what dryz report reads
    if json_path:
        write_json(json_path, summary)
    echo(fuzz_summary_text(summary, traces, seconds, camp.hard_limit(), work, selected_spec(), json_path))
    rc, why = exit_code(summary, confirmation, seconds)
    if why:
        echo(why, err=True)
    return rc
