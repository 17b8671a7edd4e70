"""Restart sequences from breaker strings, as llama_sampler_init_dry builds them (get_overlapping_token_sequences).

Built once per breaker set (check() caches them). Kept out of model.py, whose branches the fuzz harness
traces, because here they saturate at once: in the symbol vocabulary (one character per token) an input can
steer them down only a few paths (a breaker of one character or of more, repeated or not), which the first
inputs take; tracing them cost ~72,000 instructions per fuzz input with new breakers (bench/fuzz_instructions.py).
"""

from __future__ import annotations


def restart_sequences(breakers, token_texts, tokenize, per_string=None) -> list[tuple[int, tuple[int, ...]]]:
    """(head, tail) pairs as get_overlapping_token_sequences builds them (strings cut to 40 chars, tails to 20).

    A token whose text contains the string is a head with an empty tail; a token whose text ends with a
    proper prefix of the string is a head whose tail is the tokenization of the remainder; such a pair is
    not added twice. per_string(s) (a cache) stands for restart_sequences_one(s, token_texts, tokenize).
    """
    seqs: list[tuple[int, tuple[int, ...]]] = []
    seen = set()
    for s in breakers:
        found = per_string(s) if per_string else restart_sequences_one(s, token_texts, tokenize)
        for head, tail, overlap in found:
            if not overlap:
                seqs.append((head, tail))
            elif (head, tail) not in seen:
                seen.add((head, tail))
                seqs.append((head, tail))
    return seqs


def restart_sequences_one(s: str, token_texts, tokenize, by_char=None) -> list[tuple[int, tuple[int, ...], bool]]:
    """The (head, tail, overlap) triples one breaker string makes, in vocabulary order: overlap is False for a
    token containing the string, True for a head/tail overlap (those are deduplicated). Only tokens whose
    text contains s[0] can be either; by_char (tokens_by_char(token_texts)) lists them."""
    seqs: list = []
    if not s:
        return seqs  # skipped by llama_sampler_init_dry
    s = s[:40]
    tids = by_char.get(s[0], ()) if by_char is not None else range(len(token_texts))
    for tid in tids:
        word = token_texts[tid]
        if s in word:
            seqs.append((tid, (), False))
            continue
        pos = word.find(s[0])
        while pos >= 0:
            i = 1
            match = True
            while i < len(s) and i + pos < len(word):
                if word[pos + i] != s[i]:
                    match = False
                    break
                i += 1
            if match:
                tail = tuple(tokenize(s[i:]))[:20]
                if (tid, tail, True) not in seqs:
                    seqs.append((tid, tail, True))
            pos = word.find(s[0], pos + 1)
    return seqs


def tokens_by_char(token_texts) -> dict[str, list[int]]:
    """Per character, the ids (ascending) of the tokens whose text contains it."""
    out: dict[str, list[int]] = {}
    for tid, word in enumerate(token_texts):
        for ch in sorted(set(word)):
            out.setdefault(ch, []).append(tid)
    return out
