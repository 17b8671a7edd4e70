"""Fuzz inputs as what they mean: bytes -> Case over the symbol vocabulary (cases.py), bytes -> Case over a real
vocabulary (vocab.py), bytes -> Trace (traces.py). The same bytes always decode to the same case or trace, so
a crash file is its case: the fuzz harness, `dryz check|explain|minimize` reading a crash file, and the
comparisons' random cases decode through these and nothing else. They judge nothing and run no subject (a
real vocabulary's decoder asks the subject for the vocabulary's tokenizer)."""

from __future__ import annotations

import os

from .cases import decode
from .vocab import decoder

# `dryz fuzz --vocab NAME --breaker-sets MODE` sets these for its jobs (and the re-checks of their crash files): the
# inputs of that campaign decode to cases over that real vocabulary.
CAMPAIGN_VOCAB = os.environ.get("DRYZ_FUZZ_VOCAB") or None
CAMPAIGN_BREAKERS = os.environ.get("DRYZ_FUZZ_BREAKERS") or "default"


def input_decoder(subject, vocab=CAMPAIGN_VOCAB, breakers=CAMPAIGN_BREAKERS):
    """The decoder of a campaign's case inputs: the symbol one, or (vocab: a NAME or PATH) that vocabulary's
    with the breaker mode `breakers`, its vocabulary as the subject gives it."""
    if vocab is None:
        return decode
    return decoder(vocab, breakers, subject).decode
