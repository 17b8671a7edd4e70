"""Multi-token restart sequences: Step 1 as shipped against Step 1 as promised, enumerated.

`sweep` runs configurations with length-2 and length-3 breakers, a breaker contained in another, and
overlapping breakers over every history up to length N through the shipped library (subject.walker.walk, one
accept and one apply per history) and gives verdict counts per class, with the same classes check() gives.
`model_differences` is the library-free side the PREREG derivation is tested against; `admits_difference` is
the derivation's prediction for a breaker set (PREREG.md, "Step 1 as shipped and as promised").
On the second, merges vocabulary (symbol_vocab.merges_vocab_path): `merges_compare` checks the modelled head->tails map
against the library on every short history, `merges_promise_sweep` classifies its shipped/promised differences.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..verdict import AGREE, class_order
from ..check import check_batch, restart_promise_class
from ..config import config_of
from ..space import PlainSpace, histories
from ..oracle.restarts import restart_sequences
from ..oracle.promised import promised_lengths, promised_rep_limits, restart_divergence
from ..oracle.shipped import rep_limits, shipped_lengths
from ..symbols import from_symbols, to_symbols
from ..case import Case
from ..oracle.shipped import Config
from ..subject.symbol_vocab import merges_vocab_path
from ..subject.answers import SubjectCrashed

# (name, breakers) over the symbols a b c; the comment says what the derivation predicts.
CONFIGS = (
    ("pair-ab", ("ab",)),                    # one length-2 sequence: no difference possible
    ("triple-abc", ("abc",)),                # one length-3 sequence: none
    ("triple-aba", ("aba",)),                # self-overlapping: none (a single sequence never differs)
    ("contained-abc-b", ("abc", "b")),       # the documented pattern ('ni' in 'amniotic'): differs
    ("contained-aba-b", ("aba", "b")),       # differs
    ("contained-abb-b", ("abb", "b")),       # b inside abb, but the last b completes at the end: none
    ("contained-abc-b-c", ("abc", "b", "c")),  # c starts later than b and ends abc: none
    ("prefix-abc-ab", ("abc", "ab")),        # same head, the longest tail wins: none
    ("suffix-abc-bc", ("abc", "bc")),        # same end: none
    ("overlap-ab-bc", ("ab", "bc")),         # overlapping, neither contains the other: none
    ("overlap-ab-ba", ("ab", "ba")),         # none
    ("overlap-abc-ca", ("abc", "ca")),       # none
    ("pair-and-single-ab-c", ("ab", "c")),   # none
)


def admits_difference(breakers) -> bool:
    """The derivation's prediction over dryz's symbol vocabulary (one character per token, so a breaker
    string is its own restart sequence): some history makes Step 1 as shipped and as promised give different
    rep_limits iff some breaker b2 holds a breaker occurrence starting at an offset >= 1 such that, for the
    last such start q, no breaker starting at q ends where b2 ends."""
    bs = {b[:40] for b in breakers if b}
    for b2 in bs:
        starts = [q for q in range(1, len(b2)) if any(b2.startswith(b1, q) for b1 in bs)]
        if starts and b2[max(starts):] not in bs:
            return True
    return False


def admits_difference_seqs(seqs) -> bool:
    """The same prediction on (head, tail) pairs, for any vocabulary: some restart sequence, read as the
    whole window, is not the one the shipped scan stops at."""
    return any(restart_divergence(list((h,) + tuple(t)), seqs) is not None for h, t in seqs)


@dataclass
class ModelDifferences:
    """Library-free: histories whose shipped and promised rep_limits (and outputs) differ."""
    breakers: tuple
    rep_differs: list = field(default_factory=list)     # histories (symbols)
    output_differs: list = field(default_factory=list)  # histories (symbols), a subset of rep_differs


def model_differences(breakers, k: int = 3, max_len: int = 7, allowed_length: int = 1) -> ModelDifferences:
    cfg = config_of(1.0, 2.0, allowed_length, max(64, max_len), tuple(breakers))
    out = ModelDifferences(tuple(breakers))
    if not cfg.seqs:
        return out
    cands = np.arange(k, dtype=np.int64)
    for n in range(1, max_len + 1):
        H = histories(k, n, np.arange(k ** n, dtype=np.int64))
        rs, rp = rep_limits(H, cfg.seqs), promised_rep_limits(H, cfg.seqs)
        for r in np.nonzero(rs != rp)[0]:
            out.rep_differs.append(to_symbols(H[r]))
        if (rs != rp).any() and n > allowed_length:
            ps = shipped_lengths(H, cands, cfg)
            pp = promised_lengths(H, cands, cfg)
            for r in np.nonzero((ps.L != pp.L).any(axis=1) | (ps.penalized != pp.penalized).any(axis=1))[0]:
                out.output_differs.append(to_symbols(H[r]))
    return out


# -- through the library ----------------------------------------------------------------------------------


@dataclass
class SweepResult:
    name: str
    breakers: tuple
    histories: int = 0
    counts: dict = field(default_factory=dict)   # verdict class -> histories
    rep_only: int = 0        # rep_limits differ but the output does not (the promise is not observable)
    predicted: bool = False  # admits_difference(breakers)
    examples: dict = field(default_factory=dict)  # class -> first history (symbols)
    seconds: float = 0.0
    crash: str = ""  # the subject failed on a case (examples["crash"]): the rest of the sweep was not walked

    def add(self, klass: str, history: str, n: int = 1) -> None:
        self.counts[klass] = self.counts.get(klass, 0) + n
        self.examples.setdefault(klass, history)

    def to_json(self) -> dict:
        return {"name": self.name, "breakers": list(self.breakers), "histories": self.histories,
                "counts": dict(sorted(self.counts.items(), key=lambda kv: class_order(kv[0]))),
                "rep_only": self.rep_only, "predicted_to_differ": self.predicted,
                "examples": self.examples, "seconds": round(self.seconds, 3),
                **({"crash": self.crash} if self.crash else {})}


def sweep_config(lib, name: str, breakers, k: int = 3, max_len: int = 7, progress=None) -> SweepResult:
    """Every history of length 1..max_len over k symbols, every symbol a candidate (logit 0), multiplier 1,
    base 2, allowed_length 1, no window cut: one verdict class per history, as check() would give it."""
    last_n = max(64, max_len)
    cfg = config_of(1.0, 2.0, 1, last_n, tuple(breakers))
    multi = cfg.multi_token
    cands = np.arange(k, dtype=np.int64)
    res = SweepResult(name, tuple(breakers), predicted=admits_difference(breakers))
    t0 = time.perf_counter()

    def sink(n, m, H, logits, cands_):
        res.histories += len(H)
        if progress:
            progress(len(H))
        b = check_batch(cfg, H, cands, logits)
        classes = b.row_classes()
        agree = classes == AGREE
        if multi:
            res.rep_only += int((agree & b._restart_suspects()).sum())
        for klass in sorted(set(classes.tolist())):
            rows_k = np.nonzero(classes == klass)[0]
            res.add(klass, to_symbols(H[rows_k[0]]), len(rows_k))

    try:
        lib.walk(PlainSpace(k, max_len), max_len, (1.0, 2.0, 1, last_n, tuple(breakers)), sink)
    except SubjectCrashed as e:  # an out-of-process subject raised or died on a case: a finding, the walk ends
        res.add("crash", to_symbols(np.asarray(e.case.history)) if e.case is not None else "?")
        res.crash = e.crash.detail
    res.seconds = time.perf_counter() - t0
    return res


def sweep(lib, k: int = 3, max_len: int = 7, configs=CONFIGS, progress=None) -> list[SweepResult]:
    return [sweep_config(lib, name, b, k, max_len, progress) for name, b in configs]


def case_of(history: str, breakers, k: int = 3, max_len: int = 7):
    """The Case check() judges for one swept history (to cross-check the batch classes)."""
    return Case(history=tuple(from_symbols(history)), alphabet=k, penalty_last_n=max(64, max_len),
                breakers=tuple(breakers))




# -- the richer vocabulary (tokens a b c ab bc abc, real merges) ---------------------------------------------

def merges_vocab() -> str:
    """The merges vocabulary (tokens a b c ab bc abc, real merges) as a vocabulary spec: its GGUF path."""
    return str(merges_vocab_path())


MERGES_BREAKERS = (("bc",), ("abc",), ("ca",), ("b",), ("abcab",), ("abc", "abcab"), ("cab", "a"), ("bca",))


def merges_restart_sequences(lib, breakers) -> tuple:
    """The head->tails map, modelled from the merges vocabulary's texts with the library's tokenizer for tails
    (the tokenizer is not the subject)."""
    v = lib.vocabulary(merges_vocab())
    texts = [t.decode() for t in v.texts()]
    return tuple(restart_sequences(breakers, texts, lambda s: list(v.tokenize(s))))


@dataclass
class MergesResult:
    breakers: tuple
    seqs: tuple
    histories: int = 0
    mismatches: int = 0                                  # histories where the model's output != the library's
    distinguished: dict = field(default_factory=dict)    # entry -> histories where dropping it breaks the model
    examples: list = field(default_factory=list)


def merges_compare(lib, breakers, max_len: int = 5, variants=None) -> MergesResult:
    """Every history up to max_len over the merges vocabulary, every token a candidate, through the library with
    that vocabulary; the as-shipped model with the modelled map must match bit for bit. variants: extra
    name -> seqs maps (e.g. the map without one entry) whose disagreements with the library are counted."""
    v = merges_vocab()
    k = lib.vocabulary(v).n_tokens
    seqs = merges_restart_sequences(lib, breakers)
    last_n = max(64, max_len)
    cands = np.arange(k, dtype=np.int64)
    res = MergesResult(tuple(breakers), seqs)
    alt = {e: tuple(s for s in seqs if s != e) for e in seqs}
    alt.update(variants or {})
    res.distinguished = {e: 0 for e in alt}

    cfgs = {e: Config(1.0, 2.0, 1, last_n, sq) for e, sq in alt.items()}
    cfg = Config(1.0, 2.0, 1, last_n, seqs)

    def sink(n, m, H, logits, cands_):
        res.histories += len(H)
        bad = check_batch(cfg, H, cands, logits).codes.any(axis=1)
        res.mismatches += int(bad.sum())
        for r in np.nonzero(bad)[0][:5 - len(res.examples)]:
            res.examples.append(H[r].tolist())
        for e, c in cfgs.items():  # each entry of the map must be needed: without it the model is wrong
            res.distinguished[e] += int(check_batch(c, H, cands, logits).codes.any(axis=1).sum())

    lib.walk(PlainSpace(k, max_len), max_len, (1.0, 2.0, 1, last_n, tuple(breakers), v), sink)
    return res


def merges_promise_sweep(lib, sets, max_len: int = 5) -> list[dict]:
    """Library-free, on the merges vocabulary's modelled map (checked against the library by merges_compare):
    per breaker set, the histories up to max_len whose shipped and promised rep_limits differ, their classes
    (restart_promise_class), and the derivation's prediction (admits_difference_seqs)."""
    k = lib.vocabulary(merges_vocab()).n_tokens
    out = []
    for bs in sets:
        seqs = merges_restart_sequences(lib, bs)
        row = {"breakers": list(bs), "predicted": admits_difference_seqs(seqs), "rep_differs": 0, "classes": {}}
        for n in range(1, max_len + 1):
            H = histories(k, n, np.arange(k ** n, dtype=np.int64))
            for r in np.nonzero(rep_limits(H, seqs) != promised_rep_limits(H, seqs))[0]:
                row["rep_differs"] += 1
                c = restart_promise_class(H[r].tolist(), seqs)
                row["classes"][c] = row["classes"].get(c, 0) + 1
        out.append(row)
    return out
