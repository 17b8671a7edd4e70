"""An independent model of the restart sequences llama_sampler_init_dry builds from breaker strings, over a real
vocabulary.

What the shipped code does (llama-sampler.cpp of llama-cpp-python 0.3.36, `llama_sampler_init_dry` and
`get_overlapping_token_sequences`), restated as a specification rather than transcribed:

* Each breaker is a C string. NULL or empty ones are skipped. One longer than MAX_CHAR_LEN = 40 is cut with
  `std::string::resize(40)`: 40 *bytes*, although the warning says "characters", so a multi-byte UTF-8
  character can be cut in half (the tail then holds an invalid byte, which the tokenizer turns into U+FFFD).
* For each token t of the vocabulary, with w = `vocab.detokenize({t}, true)` (bytes) and s the (cut) breaker:
  - if s occurs in w: the entry (t, []) ("a single-token breaker");
  - otherwise, for every l with 1 <= l < len(s) such that w ends with s[:l] (the C++ scans every position of
    s[0] in w and checks that the rest of w agrees with s: that is exactly "w[pos:] is a proper prefix of s"):
    the entry (t, tokenize(s[l:])[:MAX_SEQ_LEN]) with MAX_SEQ_LEN = 20 and tokenize = `vocab.tokenize(.., add
    special false, parse special false)`.
* Duplicates. The store is a `std::unordered_multimap<llama_token, std::vector<llama_token>>`. A prefix/tail
  entry is added only if the head holds no entry with an equal tail yet (checked against every entry of that
  head, from this breaker or an earlier one, including an empty tail). A containment entry (t, []) is emplaced
  unconditionally: a token containing two breakers holds (t, []) twice. Behaviourally a multiplicity never
  matters: Step 1 of apply takes, per head, the longest tail that matches, and Step 4 asks whether the head
  has any empty tail. So the canonical form here is a set: {head: {tail, ...}}; `multiplicities` gives the
  multimap's counts for whoever wants them.

The model is vectorised over the vocabulary: the token texts are joined once into one byte buffer with an
offsets array (`TextIndex`, built once per vocabulary); containment is a scan of that buffer for the breaker
(numpy, first byte then the following ones), mapped to tokens with searchsorted; a token ending with s[:l] is
found from a per-last-byte index, narrowed byte by byte. Only the tails call the tokenizer: at most len(s) - 1
calls per breaker.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

MAX_CHAR_LEN = 40  # bytes (std::string::size), llama_sampler_init_dry
MAX_SEQ_LEN = 20   # tail tokens, passed to get_overlapping_token_sequences as max_tail_len


def prepare_breakers(breakers) -> list[bytes]:
    """The breaker strings as init_dry processes them: UTF-8 bytes, empty ones skipped, cut to 40 bytes.
    A str holding NUL is cut there (the C string ends at it)."""
    out = []
    for b in breakers:
        if b is None:
            continue
        s = b.encode() if isinstance(b, str) else bytes(b)
        s = s.split(b"\0", 1)[0]
        if not s:
            continue
        out.append(s[:MAX_CHAR_LEN])
    return out


class TextIndex:
    """The vocabulary's token texts (bytes, id order) joined into one buffer, with per-token offsets and a
    per-last-byte index."""

    def __init__(self, texts):
        self.texts = list(texts)
        self.n = len(self.texts)
        self.joined = b"".join(self.texts)
        self.buf = np.frombuffer(self.joined, dtype=np.uint8)
        self.lens = np.fromiter((len(t) for t in self.texts), dtype=np.int64, count=self.n)
        self.ends = np.cumsum(self.lens)
        self.starts = self.ends - self.lens
        nonempty = np.nonzero(np.greater(self.lens, 0))[0]  # ufuncs, not operators: see oracle/lengths.py
        last = self.buf[self.ends[nonempty] - 1]
        order = np.argsort(last, kind="stable")
        ids_sorted, last_sorted = nonempty[order], last[order]
        bounds = np.searchsorted(last_sorted, np.arange(257))
        self.by_last = [ids_sorted[bounds[b]:bounds[b + 1]] for b in range(256)]  # ascending ids per byte

    def containing(self, s: bytes) -> np.ndarray:
        """Ids (ascending, unique) of the tokens whose text contains s."""
        m, buf = len(s), self.buf
        if m == 0 or m > len(buf):
            return np.zeros(0, dtype=np.int64)
        pos = np.nonzero(np.equal(buf[:len(buf) - m + 1], s[0]))[0]
        for k in range(1, m):
            if not len(pos):
                break
            pos = pos[np.equal(buf[pos + k], s[k])]
        if not len(pos):
            return np.zeros(0, dtype=np.int64)
        tok = np.searchsorted(self.ends, pos, side="right")  # the token whose span holds pos
        inside = np.less_equal(pos + m, self.ends[tok])
        return np.unique(tok[inside])

    def ending_with(self, p: bytes) -> np.ndarray:
        """Ids (ascending) of the tokens whose text ends with p (non-empty)."""
        ids = self.by_last[p[-1]]
        ids = ids[np.greater_equal(self.lens[ids], len(p))]
        for k in range(2, len(p) + 1):
            if not len(ids):
                break
            ids = ids[np.equal(self.buf[self.ends[ids] - k], p[-k])]
        return ids


@dataclass
class RestartModel:
    """The model's restart sequences for one vocabulary and breaker list."""
    seqs: dict                      # head -> set of tail tuples (the canonical form)
    breakers: list                  # the processed breakers (bytes)
    counts: Counter = field(default_factory=Counter)  # (head, tail) -> multiplicity in the library's multimap
    full_tail_lengths: dict = field(default_factory=dict)  # remainder bytes -> tokens before the 20-token cap

    def pairs(self) -> list[tuple[int, tuple]]:
        return sorted((h, t) for h, ts in self.seqs.items() for t in ts)

    def single_token_heads(self) -> set[int]:
        return {h for h, ts in self.seqs.items() if () in ts}


def restart_model(breakers, index: TextIndex, tokenize) -> RestartModel:
    """The restart sequences init_dry builds for `breakers` over the vocabulary `index`; tokenize(bytes) ->
    token ids is the vocabulary's tokenizer (add_special false, parse_special false)."""
    seqs: dict[int, set] = {}
    counts: Counter = Counter()
    full: dict[bytes, int] = {}
    procs = prepare_breakers(breakers)
    for s in procs:
        contained = index.containing(s)
        for t in contained.tolist():
            seqs.setdefault(t, set()).add(())
            counts[(t, ())] += 1  # emplaced without a duplicate check
        for l in range(1, len(s)):
            heads = index.ending_with(s[:l])
            if len(contained) and len(heads):
                heads = heads[~np.isin(heads, contained, assume_unique=True)]
            if not len(heads):
                continue
            rest = s[l:]
            toks = tuple(tokenize(rest))
            full[rest] = len(toks)
            tail = toks[:MAX_SEQ_LEN]
            for h in heads.tolist():
                have = seqs.setdefault(h, set())
                if tail not in have:  # the duplicate check covers every entry of the head
                    have.add(tail)
                    counts[(h, tail)] += 1
    return RestartModel(seqs, procs, counts, full)


def restart_sets(breakers, texts, tokenize) -> dict[int, set]:
    """The canonical structure only: {head: {tail, ...}}."""
    return restart_model(breakers, TextIndex(texts), tokenize).seqs


def continuation_tokenizer(tokenize, piece, space_prefix: bool):
    """A breaker tail's tokens as the printed-text fix makes them (dryz.oracle.deviations: breaker-text:printed):
    on a vocabulary with a space prefix, tokenize(tail) starts a text with a word-start space ("\n" becomes
    [\u2581, \n]), which a model continuing a text does not emit. The fix tokenizes "\n" + tail instead and keeps
    the tokens after the newline, when the pieces before them print exactly "\n" or " \n" (at most two bytes,
    up to the first that is "\n") and the pieces after them print exactly the tail; otherwise, and on every
    vocabulary without a space prefix, tokenize(tail). tokenize(bytes) -> ids; piece(id) -> bytes as printed."""
    if not space_prefix:
        return tokenize

    def tok(text: bytes) -> tuple:
        plain = tuple(tokenize(text))
        if not text:
            return plain
        after = tuple(tokenize(b"\n" + text))
        lead, k = b"", 0
        while k < len(after) and lead != b"\n" and len(lead) < 2:
            lead += piece(after[k])
            k += 1
        if lead not in (b" \n", b"\n") or b"".join(map(piece, after[k:])) != text:
            return plain
        return after[k:]
    return tok
