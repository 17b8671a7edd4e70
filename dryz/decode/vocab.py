"""Bytes -> Case over a real vocabulary: the decoder of `dryz fuzz --vocab NAME`.

Histories come from text a model could emit: built-in snippets (prose, markdown, code, chat transcripts with
their template markers parsed as special tokens, non-ASCII; dryz.oracle.promise_text.TEXTS plus a few more),
tokenized once with the vocabulary, then cut and mutated (a token replaced by any id of the full range or by a
snippet's token, a block repeated, a block inserted), or raw ids over the full range, or a block, a gap and the
block again. At most MAX_VOCAB_HISTORY tokens, one apply. Candidates: the history's distinct tokens (a subset,
in input order) plus ids from the full range and the breakers' head tokens, logits as the symbol decoder
draws them.

Parameters and breaker sets come from small pools: the library's sampler is initialized once per (vocabulary,
parameters, breakers) and cloned per case (LibLlama.prototype: init_dry processes the breakers over the
whole vocabulary, 30-80 ms), so a campaign meets a bounded number of configurations. Breakers (--breaker-sets):
  default  llama.cpp's four defaults \\n : " *
  dict     one of DICT_SETS, real-world breakers (chat template markers, markdown, code, non-ASCII, a breaker
           past 40 bytes, contained and nested ones)
  random   one of RANDOM_SET_COUNT sets drawn once (seed 0) from the dictionary's strings, random ASCII and
           random Unicode strings, and pieces of the vocabulary's own tokens
Valid by construction (tests/test_vocab_cases.py validates the decoder's output), so not validated per input.
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np

from ..case import Case, CaseError, f32
from ..oracle.promise_text import TEXTS
from ..vocab_cases import DEFAULT_BREAKERS, load_vocab

from .cases import LOGIT_BOUND, TYPICAL_FLOATS

MAX_VOCAB_HISTORY = 256
MAX_CANDIDATES = 64
BREAKER_MODES = ("default", "dict", "random")

EXTRA_TEXTS = (
    ("json", '{"name": "x", "items": [1, 2, 3], "nested": {"a": "b: c", "d": "*e*"}}\n'
             '{"name": "x", "items": [1, 2, 3], "nested": {"a": "b: c", "d": "*e*"}}\n'),
    ("dialogue", "User: hi\nAssistant: hello!\nUser: how are you?\nAssistant: fine: thanks.\nUser: hi\n"),
    ("repeat", "I think that I think that I think that we should go. We should go: now.\n"),
    ("mistral", "[INST] Tell me a joke. [/INST] Why did the chicken cross the road?</s>[INST] Another. [/INST]"),
)
SNIPPETS = tuple(TEXTS) + EXTRA_TEXTS

DICT_SETS = (
    DEFAULT_BREAKERS,
    ("<|im_end|>", "<|im_start|>", "\n"),
    ("<|eot_id|>", "<|start_header_id|>", "\n\n"),
    ("### Instruction:", "### Response:", "\n"),
    ("<end_of_turn>", "<start_of_turn>"),
    ("[INST]", "[/INST]", "</s>"),
    (" the", " and", "\n\n"),
    ("User:", "Assistant:", ":"),
    ("```", "#", "*", "-"),
    ("—", "。", "🙂", "é"),
    ("=" * 41, "The quick brown fox jumps over the lazy d"),
    ("ab", "abc", "ni", "amniotic"),
    ("### Instruction:", "Instruction"),
    ("{", "}", "\"", ","),
)
RANDOM_SET_COUNT = 8
# float32 values (the Case holds what init_dry's float parameter receives; a decoded Case is not validated).
PARAM_MULTIPLIERS = tuple(f32(x) for x in (1.0, 0.8, 2.0))
PARAM_BASES = tuple(f32(x) for x in (2.0, 1.75, 1.1))
PARAM_ALLOWED = (1, 2, 0, 3)
PARAM_LAST_N = (64, 256, 16, 1024, 3, 0)
# With several breaker sets (dict, random): 8 parameter sets, so the samplers (sets x 8: 120 for dict, 72 for
# random) stay within LibLlama.PROTOTYPES; with the product of the pools above every sampler was initialized
# again and again (37 exec/s). Window 0 comes with allowed_length 0 (since 2026-12-04): DRY is off, so apply
# must leave even the sorted flag alone, which an apply that ran (allowed_length 0 lets it) would clear (dryz
# mutate's const-init-a5daed88, init reading a window of 0 as 1, survived every mode before).
PARAM_SETS = tuple((f32(m), f32(b), a, n) for m, b, a, n in (
    (1.0, 2.0, 1, 64), (1.0, 2.0, 2, 256), (0.8, 1.75, 2, 64), (2.0, 1.1, 0, 16), (1.0, 1.75, 3, 1024),
    (1.0, 2.0, 1, 3), (0.8, 2.0, 0, 0), (2.0, 1.75, 0, 256)))


def random_sets(texts, seed: int = 0) -> tuple:
    """RANDOM_SET_COUNT breaker sets drawn once: dictionary strings, random ASCII, random Unicode, and pieces
    of the vocabulary's tokens (texts: bytes per token)."""
    rng = random.Random(seed)
    words = sorted({b for s in DICT_SETS for b in s})
    out = []
    for _ in range(RANDOM_SET_COUNT):
        s = []
        for _ in range(rng.randint(1, 4)):
            kind = rng.randrange(4)
            if kind == 0:
                s.append(rng.choice(words))
            elif kind == 1:
                s.append("".join(chr(rng.randint(32, 126)) for _ in range(rng.randint(1, 6))))
            elif kind == 2:
                s.append("".join(chr(rng.choice((rng.randint(0xA0, 0x2FF), rng.randint(0x3000, 0x30FF),
                                                 rng.randint(0x1F600, 0x1F64F), 10, 32)))
                                 for _ in range(rng.randint(1, 4))))
            else:
                t = texts[rng.randrange(len(texts))].decode("utf-8", errors="ignore").replace("\0", "")
                s.append(t[:12] or " ")
        out.append(tuple(dict.fromkeys(s)))
    return tuple(out)


class VocabDecoder:
    def __init__(self, spec, breakers: str, lib):
        if breakers not in BREAKER_MODES:
            raise CaseError(f"--breaker-sets must be one of {', '.join(BREAKER_MODES)}, got {breakers!r}")
        v = load_vocab(spec, lib)
        self.v, self.n = v, v.n_tokens
        self.name = v.ref.name if "/" not in str(spec) and not str(spec).endswith(".gguf") else str(v.ref.path)
        self.sha = v.ref.sha256
        self.snippets = [np.array(v.tokenize(t, parse_special=True), dtype=np.int64) for _, t in SNIPPETS]
        self.snippets = [s for s in self.snippets if len(s)] or [np.zeros(1, dtype=np.int64)]
        self.pool = np.unique(np.concatenate(self.snippets))  # every token the snippets hold
        self.snippet_lists, self.pool_list = [s.tolist() for s in self.snippets], self.pool.tolist()
        if breakers == "default":
            self.sets = (DEFAULT_BREAKERS,)
        elif breakers == "dict":
            self.sets = DICT_SETS + ((),)
        else:
            self.sets = random_sets(v.texts()) + (DEFAULT_BREAKERS,)
        # Per breaker set: the tokens of each breaker (heads and tails the candidates and mutations can use).
        self.breaker_tokens = [np.array(sorted({t for b in s for t in v.tokenize(b.encode())} |
                                               {t for b in s for t in v.tokenize(b, parse_special=True)}),
                                        dtype=np.int64) for s in self.sets]

    def configurations(self):
        """Every (multiplier, base, allowed_length, penalty_last_n, breakers) decode() can give."""
        for breakers in self.sets:
            if len(self.sets) == 1:
                params = [(m, b, a, n) for m in PARAM_MULTIPLIERS for b in PARAM_BASES for a in PARAM_ALLOWED
                          for n in PARAM_LAST_N]
            else:
                params = PARAM_SETS
            for m, b, a, n in params:
                yield m, b, a, n, breakers

    def warm(self, judge) -> int:
        """judge(case) on one short case of every configuration: its sampler, restart sequences and text model
        made before fuzzing (what the first inputs of each configuration would do). Returns how many."""
        n = 0
        h = tuple(int(t) for t in self.snippets[0][:4])
        cands = tuple((t, 0.0) for t in sorted(set(h)))
        for m, b, a, last_n, breakers in self.configurations():
            judge(Case(history=h, alphabet=self.n, penalty_last_n=last_n, breakers=breakers, multiplier=m, base=b,
                       allowed_length=a, candidates=cands, vocab=self.name, vocab_sha256=self.sha,
                       skip_validation=True))
            n += 1
        return n

    def decode(self, data: bytes) -> Case:
        if data[:1] == b"{":
            try:
                c = Case.loads(data.decode("utf-8"))
                # A seed on this vocabulary only: a mutated name ("llama-ebp") is read as bytes, like any input
                if c.vocab == self.name and c.vocab_sha256 in (None, self.sha) and c.alphabet == self.n:
                    return c if c.vocab_sha256 else replace(c, vocab_sha256=self.sha)
            except (UnicodeDecodeError, CaseError):
                pass
        import atheris
        fdp = atheris.FuzzedDataProvider(data)
        rng = fdp.ConsumeIntInRange
        si = rng(0, len(self.sets) - 1)
        breakers = self.sets[si]
        if len(self.sets) == 1:  # one breaker set: every combination of the pools (216 samplers)
            multiplier = PARAM_MULTIPLIERS[rng(0, len(PARAM_MULTIPLIERS) - 1)]
            base = PARAM_BASES[rng(0, len(PARAM_BASES) - 1)]
            allowed = PARAM_ALLOWED[rng(0, len(PARAM_ALLOWED) - 1)]
            last_n = PARAM_LAST_N[rng(0, len(PARAM_LAST_N) - 1)]
        else:  # several: PARAM_SETS only, so every (breakers, parameters) sampler stays cached
            multiplier, base, allowed, last_n = PARAM_SETS[rng(0, len(PARAM_SETS) - 1)]
        history = self._history(fdp, self.breaker_tokens[si])
        candidates, sorted_flag = self._candidates(fdp, history, self.breaker_tokens[si])
        return Case(history=tuple(history), alphabet=self.n, penalty_last_n=last_n, breakers=breakers,
                    multiplier=multiplier, base=base, allowed_length=allowed, candidates=candidates,
                    sorted=sorted_flag, vocab=self.name, vocab_sha256=self.sha, skip_validation=True)

    # The input -> Case mapping is pinned (crash files and campaign corpora are bytes): the helpers below make
    # the same draws in the same order as the numpy forms they replaced, in plain Python where an input's few
    # values made numpy's per-call cost the larger part (tests/test_vocab_cases.py pins the mapping).
    def _ids(self, fdp, count: int) -> list:
        """count ids over the full range (3 bytes each, little-endian, modulo the vocabulary's size)."""
        raw = fdp.ConsumeBytes(3 * count).ljust(3 * count, b"\0")
        n = self.n
        if count > 16:
            b = np.frombuffer(raw, dtype=np.uint8).astype(np.int64).reshape(-1, 3)
            return ((b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)) % n).tolist()
        return [(raw[i] | raw[i + 1] << 8 | raw[i + 2] << 16) % n for i in range(0, 3 * count, 3)]

    def _history(self, fdp, btoks) -> list:
        rng = fdp.ConsumeIntInRange
        shape = rng(0, 3)
        if shape == 0:  # raw ids over the full range
            return self._ids(fdp, rng(0, MAX_VOCAB_HISTORY))
        snip = self.snippet_lists[rng(0, len(self.snippet_lists) - 1)]
        if shape == 1:  # a block, a gap, the block again (possibly cut): long repeats ending anywhere
            start = rng(0, len(snip) - 1)
            block = snip[start:start + rng(1, 64)]
            gap = self._ids(fdp, rng(0, 8)) if fdp.ConsumeBool() else snip[:rng(0, 8)]
            cut = rng(0, len(block))
            h = gap + block + gap[:len(gap) // 2] + block[:cut]
        else:  # a cut of the snippet (rotated to start there), repeated to length, mutated
            n = rng(1, MAX_VOCAB_HISTORY)
            start = rng(0, len(snip) - 1)
            rot = snip[start:] + snip[:start]
            h = (rot * (n // len(rot) + 1))[:n]
        for _ in range(rng(0, 6)):
            if not h:
                break
            op = rng(0, 4)
            p = rng(0, len(h) - 1)
            if op == 0:    # any id of the vocabulary
                h[p] = self._ids(fdp, 1)[0]
            elif op == 1:  # a token of the snippets
                h[p] = self.pool_list[rng(0, len(self.pool_list) - 1)]
            elif op == 2 and len(btoks):  # a token of the breakers
                h[p] = int(btoks[rng(0, len(btoks) - 1)])
            elif op == 3:  # repeat a block in place
                q = rng(p, len(h))
                h = h[:q] + h[p:q] + h[q:]
            else:          # delete a block
                h = h[:p] + h[rng(p, len(h)):]
        return h[:MAX_VOCAB_HISTORY]

    def _candidates(self, fdp, history: list, btoks):
        """The history's distinct tokens (a prefix of them in a drawn order), ids from the full range and
        breaker tokens, at most MAX_CANDIDATES, with logits as the symbol decoder draws them."""
        rng = fdp.ConsumeIntInRange
        pool = set(history)
        pool.update(self._ids(fdp, rng(0, 8)))
        if len(btoks):
            pool.update(btoks[:rng(0, min(8, len(btoks)))].tolist())
        ids = sorted(pool) or self._ids(fdp, 1)
        keys = fdp.ConsumeBytes(len(ids)).ljust(len(ids), b"\0")
        order = sorted(range(len(ids)), key=keys.__getitem__)  # a stable sort by key
        ids = [ids[i] for i in order[:rng(1, min(MAX_CANDIDATES, len(ids)))]]
        size = len(ids)
        if not fdp.ConsumeBool():  # every logit 0
            return tuple(zip(ids, [0.0] * size)), False
        raw = fdp.ConsumeBytes(5 * size).ljust(5 * size, b"\0")
        kinds = np.bitwise_and(np.frombuffer(raw, dtype=np.uint8, count=size), 7)
        logits = np.frombuffer(raw, dtype="<f4", count=size, offset=size).astype(np.float32)
        np.copyto(logits, 0.0, where=np.isnan(logits))
        np.minimum(logits, LOGIT_BOUND, out=logits)
        np.maximum(logits, -LOGIT_BOUND, out=logits)
        np.copyto(logits, 0.0, where=np.equal(kinds, 1))
        np.copyto(logits, -np.inf, where=np.equal(kinds, 0))
        return tuple(zip(ids, logits.tolist())), fdp.ConsumeBool()


_DECODERS: dict = {}


def decoder(spec, breakers: str, lib) -> VocabDecoder:
    """The decoder of a vocabulary campaign's inputs, its vocabulary as the subject `lib` gives it (one per
    process and subject)."""
    key = (str(spec), breakers, lib.spec)
    if key not in _DECODERS:
        _DECODERS[key] = VocabDecoder(spec, breakers, lib)
    return _DECODERS[key]


__all__ = ["VocabDecoder", "decoder", "TYPICAL_FLOATS", "MAX_VOCAB_HISTORY", "BREAKER_MODES"]
