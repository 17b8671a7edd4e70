"""`dryz exhaustive --vocab NAME`: every history of length 1..N over a chosen set of a real vocabulary's tokens,
every chosen token a candidate, walked through the library (dryz.subject.walker: the tree's token ids are the
vocabulary's) and judged with check_batch, with the restart sequences init_dry builds from the real vocabulary
and breakers (restart_model, dryz.vocab_cases) and the text-level promise. Plain enumeration only: the canonical
trees rest on symbols being interchangeable, which real tokens with breakers are not.

Not a certificate of the symbol space (no periodic or multiplier-zero control): a count of every history per
configuration and class, with examples as Case JSON on the vocabulary.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..case import Case
from ..check import check_batch
from ..verdict import is_finding
from ..config import vocab_config
from .run import ConfigResult
from ..output import environment
from ..vocab_cases import vocab_of

# Default token texts: the first token of each as the vocabulary tokenizes it. "\n" and ":" are default breakers
# (single-token ones on most vocabularies), " the" and " cat" words with a space, "the" one without.
DEFAULT_TOKEN_TEXTS = ("\n", " the", " cat", ":", "the")


def default_tokens(v) -> list[int]:
    """Per DEFAULT_TOKEN_TEXTS, the token of its tokenization whose piece is the text itself (else the last one:
    an SPM vocabulary tokenizes "\n" as its space prefix, then the newline)."""
    out = []
    pieces = v.pieces()
    for text in DEFAULT_TOKEN_TEXTS:
        ids = v.tokenize(text)
        if not ids:
            continue
        t = next((i for i in ids if pieces[i] == text.encode()), ids[-1])
        if t not in out:
            out.append(int(t))
    return out


@dataclass
class TokenSpace:
    """Every history over `tokens` (real ids), every token a candidate: PlainSpace with the vocabulary's ids."""
    tokens: tuple
    max_len: int
    labels: int = 0

    @property
    def radix(self) -> int:
        return len(self.tokens)

    def cands(self, m: int) -> tuple[int, ...]:
        return tuple(self.tokens)

    def children(self, m: int):
        return [(i, t, 0) for i, t in enumerate(self.tokens)]


@dataclass(frozen=True)
class VocabSpec:
    """A configuration of the real-vocabulary space as enumerate.run.ConfigResult reads one: its name, the
    Case every history is made from (history empty), and how a history becomes a Case."""
    name: str
    proto: Case

    def case(self, alphabet, history) -> Case:
        return self.proto.with_history(tuple(int(t) for t in history))

    @property
    def invertible(self) -> bool:
        return False  # judged bit-exactly (the candidates are real token ids)

    def to_json(self) -> dict:
        c = self.proto
        return {"name": self.name, "penalty_last_n": c.penalty_last_n, "breakers": list(c.breakers),
                "multiplier": c.multiplier, "base": c.base, "allowed_length": c.allowed_length,
                "vocab": c.vocab, "vocab_sha256": c.vocab_sha256, "comparison": "bits"}


def run_vocab_space(lib, v, tokens, max_len: int, specs, breakers, progress=None) -> list[ConfigResult]:
    """Every history over `tokens` up to max_len, for each SpaceConfig in specs (its window and parameters; the
    breakers are `breakers`, strings of the real vocabulary)."""
    space = TokenSpace(tuple(int(t) for t in tokens), max_len)
    out = []
    for spec in specs:
        proto = Case(history=(), alphabet=v.n_tokens, penalty_last_n=spec.penalty_last_n, breakers=tuple(breakers),
                     multiplier=spec.multiplier, base=spec.base, allowed_length=spec.allowed_length,
                     candidates=tuple((t, 0.0) for t in space.tokens), vocab=v.ref.name, vocab_sha256=v.ref.sha256)
        cfg = vocab_config(proto, lib.abi, vocab_of(proto, lib))
        res = ConfigResult(VocabSpec(spec.name, proto))  # the one weighted tally (every weight 1)
        t0 = time.perf_counter()

        def sink(n, m, H, logits, cands, res=res, cfg=cfg):
            res.tally(n, check_batch(cfg, H, np.asarray(cands, dtype=np.int64), logits),
                      np.ones(len(cands), dtype=object))
            if progress:
                progress(len(H))

        lib.walk(space, max_len, (spec.multiplier, spec.base, spec.allowed_length, spec.penalty_last_n,
                                  tuple(breakers), str(v.ref.path)), sink)
        res.seconds = time.perf_counter() - t0
        out.append(res)
    return out


def verdict(results) -> str:
    """mismatch (the library differs from the model), finding (a broken promise), or agree."""
    if any(r.mismatches or r.oracle_disagreements for r in results):
        return "mismatch"
    if any(is_finding(k) for r in results for k in r.history_classes):
        return "finding"
    return "agree"


def certificate(lib, v, ids, max_length, specs, strings, progress=None) -> tuple[dict, list]:
    """(the result JSON of `dryz exhaustive --vocab`, the per-configuration results)."""
    t0 = time.perf_counter()
    results = run_vocab_space(lib, v, ids, max_length, specs, strings, progress=progress)
    pieces = v.pieces()
    result = {"tool": "dryz exhaustive", "mode": "vocab", "verdict": verdict(results), "subject": lib.identity,
              "vocab": {"name": v.ref.name, "path": str(v.ref.path), "sha256": v.ref.sha256, "size": v.n_tokens},
              "tokens": [{"id": t, "piece": pieces[t].decode("utf-8", errors="replace")} for t in ids],
              "breakers": strings, "max_length": max_length, "configs": [r.to_json() for r in results],
              "environment": environment(), "wall_seconds": round(time.perf_counter() - t0, 3)}
    return result, results
