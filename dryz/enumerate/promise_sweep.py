"""The text-level promise against the library, over real vocabularies: histories made the way a model emits
text (the built-in texts tokenized, and histories spelled from the vocabulary), each window's rep_limit observed
on the library (vocab_probes.SubjectProbe) and judged by oracle/promise_text.classify; every class keeps a
shortest witness. `promise_sweep` is what bench/vocab_breakers.py --promise runs."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..oracle.promise_text import (PROMISE_SETS, TEXTS, WINDOW, classify, complete_restarts, occurrences,  # noqa: F401
                                   promised_rep_limit, shipped_scan, spans)
from ..oracle.restarts_vocab import MAX_CHAR_LEN, MAX_SEQ_LEN, TextIndex, restart_model  # noqa: F401
from ..enumerate.vocab_probes import _fillers, SubjectProbe
from ..subject.answers import Unsupported
from ..vocab_cases import construction, load_vocab


@dataclass
class Witness:
    cls: str
    text: str
    breaker_set: str
    breakers: list
    window: tuple
    info: dict


@dataclass
class PromiseResult:
    vocab: str
    counts: dict = field(default_factory=dict)     # class -> windows from the texts
    vocab_counts: dict = field(default_factory=dict)  # class -> vocabulary-wide histories (spelled_histories)
    witnesses: dict = field(default_factory=dict)  # class -> shortest Witness
    sets_done: int = 0     # breaker sets swept in full (all of them unless a deadline cut the sweep)
    complete: bool = True
    not_judged: dict = field(default_factory=dict)  # why the subject could not express a window -> how many


def windows_of(ids, pieces, breakers):
    """Windows (start, end) ending 0..3 tokens after each place a breaker ends, and every 7th position."""
    ends = set(range(7, len(ids) + 1, 7))
    text = b"".join(pieces[t] for t in ids)
    cum = spans(pieces, ids)
    for b in breakers:
        bb = b.encode()
        for p in occurrences(text, bb):
            k = int(np.searchsorted(cum, p + len(bb) - 1, side="right"))
            ends.update(range(k + 1, min(k + 5, len(ids) + 1)))
    return [(max(0, e - WINDOW), e) for e in sorted(ends) if e >= 1]


def observe(probe, window, z) -> int:
    """The library's rep_limit for the window, clipped to len(window), from L_z in X z X."""
    hist = list(window) + [z] + list(window)
    logits = probe.run(hist, (z,))
    pen = -float(logits[0])
    if pen == 0.0:
        return -1  # z not penalized: impossible for a non-head z after X (harness error)
    m, e = np.frexp(pen)
    if m != 0.5:
        return -2
    return min(int(e) - 1, len(window))


def spelled_histories(model, pieces, breakers, tokenize_special):
    """Histories a model can emit, from the vocabulary itself: every restart sequence spelled out (head then
    tail: a phantom if its pieces hold no breaker), every token whose piece holds a breaker (in-token), and
    every breaker as the vocabulary tokenizes it (template markers parsed as special tokens)."""
    out = []
    for h, ts in model.seqs.items():
        for t in ts:
            out.append((h, *t))
    enc = [b.encode() for b in breakers]
    for tok, p in enumerate(pieces):
        if any(b in p for b in enc):
            out.append((tok,))
    for b in breakers:
        ids = tuple(tokenize_special(b))
        if ids:
            out.append(ids)
    return sorted(set(out))


def promise_sweep(vocab_spec, lib, sets=PROMISE_SETS, texts=TEXTS, spelled=True, deadline=None) -> PromiseResult:
    """deadline (time.monotonic()): no window is observed after it (sets_done, complete say what ran)."""
    import time

    def late() -> bool:
        return deadline is not None and time.monotonic() > deadline
    vocab = load_vocab(vocab_spec, lib)
    index, tokenize = construction(vocab, lib.caps.deviations)  # init_dry's, or a fix the subject declares
    pieces = vocab.pieces()
    res = PromiseResult(vocab.ref.name)
    tokenized = [(name, vocab.tokenize(t, parse_special=True)) for name, t in texts]
    for set_name, breakers in sets:
        if late():
            res.complete = False
            break
        model = restart_model(breakers, index, tokenize)
        tails = {x for ts in model.seqs.values() for t in ts for x in t}
        probe = SubjectProbe(lib, vocab, breakers)
        for text_name, ids in tokenized:
            for f in _fillers(index, model.seqs, tails, 6):
                if f not in ids:
                    z = f
                    break
            for s, e in windows_of(ids, pieces, breakers):
                if late():
                    res.complete = False
                    return res
                window = tuple(ids[s:e])
                try:
                    obs = observe(probe, window, z)
                except Unsupported as why:  # not judged: counted, with why
                    res.not_judged[str(why)] = res.not_judged.get(str(why), 0) + 1
                    continue
                cls, info = classify(window, pieces, index.texts, breakers, model, obs, tokenize)
                res.counts[cls] = res.counts.get(cls, 0) + 1
                if cls == "agree":
                    continue
                window, info = shrink(probe, window, z, pieces, index.texts, breakers, model, cls, info,
                                      tokenize)
                old = res.witnesses.get(cls)
                if old is None or len(window) < len(old.window):
                    res.witnesses[cls] = Witness(cls, text_name, set_name, list(breakers), window, info)
        if spelled:
            z = _fillers(index, model.seqs, tails, 1)[0]
            for window in spelled_histories(model, pieces, breakers,
                                            lambda b: vocab.tokenize(b, parse_special=True)):
                if z in window:
                    continue
                if late():
                    res.complete = False
                    return res
                try:
                    obs = observe(probe, window, z)
                except Unsupported as why:
                    res.not_judged[str(why)] = res.not_judged.get(str(why), 0) + 1
                    continue
                cls, info = classify(window, pieces, index.texts, breakers, model, obs, tokenize)
                res.vocab_counts[cls] = res.vocab_counts.get(cls, 0) + 1
                if cls == "agree":
                    continue
                old = res.witnesses.get(cls)
                if old is None or len(window) < len(old.window):
                    res.witnesses[cls] = Witness(cls, "(vocabulary)", set_name, list(breakers), window, info)
        res.sets_done += 1
    return res


def shrink(probe, window, z, pieces, texts_of, breakers, model, cls, info, tokenize=None):
    """Drop leading tokens while the window keeps its class."""
    while len(window) > 1:
        w2 = window[1:]
        try:
            obs = observe(probe, w2, z)
        except Unsupported:  # the subject cannot express the shorter window: keep this one
            break
        c2, i2 = classify(w2, pieces, texts_of, breakers, model, obs, tokenize)
        if c2 != cls:
            break
        window, info = w2, i2
    return window, info


def reclassify(lib, vocab, witness: Witness) -> str:
    """The class the witness gets when run again (on a fresh sampler)."""
    index, tokenize = construction(vocab, lib.caps.deviations)
    model = restart_model(witness.breakers, index, tokenize)
    tails = {x for ts in model.seqs.values() for t in ts for x in t}
    z = next(f for f in _fillers(index, model.seqs, tails, 6) if f not in witness.window)
    obs = observe(SubjectProbe(lib, vocab, witness.breakers), witness.window, z)
    return classify(witness.window, vocab.pieces(), index.texts, witness.breakers, model, obs, tokenize)[0]
