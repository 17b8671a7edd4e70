"""`dryz exhaustive --vocab`: every history over real tokens (dryz.enumerate.vocab_space), its selection and its
printing. Bad options are one line and exit 2 (files.fail)."""

from __future__ import annotations

from ..errors import EXIT_ERROR, EXIT_FINDING, EXIT_OK
from ..files import fail
from ..inputs import load_subject
from ..output import Progress, write_json
from ..config import space_config
from .. import inputs
from ..render import again, ending, vocab_certificate_text
from ..vocab_cases import BREAKER_PRESETS, load_vocab
from .selection import config_names
from .vocab_space import certificate, default_tokens

MAX_VOCAB_HISTORIES = 50_000_000     # histories in one in-process --vocab run


def exhaustive(vocab, tokens, breakers, max_length, configs, parameters, window_caps, json_path, progress, echo,
               trace_events=None) -> int:
    """`dryz exhaustive --vocab`: every history over real tokens (dryz.enumerate.vocab_space)."""
    if trace_events is not None:
        fail("--trace-events runs over the symbol vocabulary (not with --vocab)")
    lib = load_subject()
    v, ids, strings, specs, total_h = select_vocab_space(lib, vocab, tokens, breakers, max_length, configs,
                                                         parameters, window_caps)
    bar = Progress(total_h * len(specs), "histories", enabled=progress)
    result, results = certificate(lib, v, ids, max_length, specs, strings, bar)
    bar.close()
    if json_path:
        write_json(json_path, result)
    echo(vocab_certificate_text(result, results, v.pieces()))
    echo(f"verdict   {result['verdict']}")
    odd: dict = {}
    for r in results:
        for k, n in r.history_classes.items():
            odd[k] = odd.get(k, 0) + n
    histories = sum(r.histories for r in results)
    steps = [(f"{again(inputs.ENTRY_ARGV)} --json vocab.json", "the same run, its result kept")] if not json_path else []
    if result["verdict"] != "agree":
        steps.append(("dryz explain CASE.json --vocab " + str(vocab), "CASE.json: a case above, saved to a file, "
                                                                       "laid out"))
    echo(ending({"agree": histories - sum(odd.values()), **odd}, [f"{json_path} (the result)"] if json_path else [],
                steps, unit=f"{histories:,} histories in {len(results)} configurations"))
    if not any(r.off_by_one_flagged for r in results):
        echo("dryz: error: the off-by-one control flagged nothing: the harness is in doubt", err=True)
        return EXIT_ERROR
    return EXIT_OK if result["verdict"] == "agree" else EXIT_FINDING


def select_vocab_space(lib, vocab, tokens, breakers, max_length, configs, parameters, window_caps):
    """(vocabulary, token ids, breaker strings, specs, histories per configuration) for `exhaustive --vocab`."""
    v = load_vocab(vocab, lib)
    if tokens is None:
        ids = default_tokens(v)
    else:
        try:
            ids = [int(x) for x in tokens.split(",") if x.strip()]
        except ValueError:
            fail(f"--token must be a token id, got {tokens!r}")
        if not ids or len(set(ids)) != len(ids):
            fail("--token must name each token id once")
        bad = [t for t in ids if not 0 <= t < v.n_tokens]
        if bad:
            fail(f"--token {bad[0]} is outside the vocabulary {vocab} (ids 0..{v.n_tokens - 1})")
    strings = []
    for b in breakers or ("default",):
        strings += BREAKER_PRESETS[b] if b in BREAKER_PRESETS else [b.replace("\\n", "\n").replace("\\t", "\t")]
    strings = list(dict.fromkeys(strings))
    total_h = sum(len(ids) ** n for n in range(1, max_length + 1))
    names = config_names(configs, ["base", "window4"], parameters, window_caps, max_length)
    if total_h * len(names) > MAX_VOCAB_HISTORIES:
        fail(f"{total_h * len(names):,} histories is too many for one in-process run; lower --max-length or "
             "give fewer --token")
    specs = []
    for n in names:
        if n.split("/")[0] == "breaker":
            fail("--config breaker is the symbol space's; with --vocab the breakers are --breakers")
        try:
            specs.append(space_config(n, 64, max_length))
        except ValueError as e:
            fail(f"--config {n}: {e}")
    return v, ids, strings, specs, total_h
