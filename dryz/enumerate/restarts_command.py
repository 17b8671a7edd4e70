"""`dryz restarts`, everything but option parsing: multi-token restart sequences over the symbol vocabulary
(dryz.enumerate.restarts) or, with --vocab, on real vocabularies (dryz.enumerate.vocab_restarts). Returns the exit
code; bad input is one line, exit 2 (files.fail)."""

from __future__ import annotations

from ..errors import EXIT_FINDING, EXIT_OK
from ..files import fail
from ..inputs import load_subject
from ..output import Progress, write_json
from .. import inputs
from ..render import again, ending, restarts_text
from ..subject.identity import subject_header
from ..subject.vendored_vocabs import resolve_vocab, VocabUnavailable
from ..verdict import is_finding
from .restarts import CONFIGS, sweep
from .vocab_restarts import run, summary_text, vocab_names


def restarts(alphabet, max_length, json_path, vocabs, check, seconds, echo) -> int:
    """Multi-token restart sequences through the library, verdict counts per class (dryz.enumerate.restarts);
    with --vocab, the construction probes and the text promise on real vocabularies."""
    if vocabs:
        return restarts_vocab(vocabs, check, seconds, json_path, echo)
    if seconds is not None or check != "both":
        fail("--check and --time go with --vocab")
    total = len(CONFIGS) * sum(alphabet ** n for n in range(1, max_length + 1))
    echo(subject_header(lib := load_subject()))
    bar = Progress(total, "histories")
    results = sweep(lib, k=alphabet, max_len=max_length, configs=CONFIGS, progress=bar)
    bar.close()
    echo(restarts_text(results))
    if json_path:
        write_json(json_path, {"alphabet": alphabet, "max_length": max_length,
                               "configs": [r.to_json() for r in results]})
    classes: dict = {}
    for r in results:
        for k, n in r.to_json()["counts"].items():
            classes[k] = classes.get(k, 0) + n
    steps = [] if json_path else [(f"{again(inputs.ENTRY_ARGV)} --json restarts.json",
                                   "the same sweep, its counts and each class's first history kept")]
    steps.append(("dryz restarts --vocab all", "restart sequences on the pinned sdist's 19 real vocabularies"))
    echo(ending(classes, [f"{json_path} (the counts)"] if json_path else [], steps,
                unit=f"{sum(r.histories for r in results):,} histories in {len(results)} configurations"))
    return EXIT_FINDING if any(is_finding(k) for r in results for k in r.counts) else EXIT_OK


def restarts_vocab(vocabs, check, seconds, json_path, echo) -> int:
    """`dryz restarts --vocab`: the work is dryz.enumerate.vocab_restarts.run."""
    lib = load_subject()
    try:
        names = vocab_names(vocabs)
        for n in names:
            resolve_vocab(n)
    except VocabUnavailable as e:
        fail(f"--vocab: {e}")
    echo(f"dryz restarts --vocab: {', '.join(names)}")
    echo(subject_header(lib))
    result = run(lib, names, ("construction", "promise") if check == "both" else (check,), seconds, log=echo)
    echo(summary_text(result))
    if json_path:
        write_json(json_path, result)
    classes: dict = {}
    for f in result["findings"]:
        classes[f["klass"]] = classes.get(f["klass"], 0) + 1
    steps = [] if json_path else [(f"{again(inputs.ENTRY_ARGV)} --json restarts.json",
                                   "the same run, every finding's case kept")]
    if result["findings"]:
        steps.append(("dryz explain CASE.json", "CASE.json: a finding's case above, saved to a file, laid out"))
    echo(ending(classes, [f"{json_path} (every probe's result)"] if json_path else [], steps, unit="findings"))
    return EXIT_FINDING if result["findings"] else EXIT_OK
