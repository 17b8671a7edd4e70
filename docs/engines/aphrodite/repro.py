"""Aphrodite 0.24.1 against llama.cpp's DRY: each difference dryz found, with Aphrodite alone.

    pip install aphrodite-engine==0.24.1
    python repro.py

Tokens are one character each (a..z = ids 0..25). _compute_dry_penalties gives, per token, the repeat length L
it is penalized for (SamplingOps.apply_dry then subtracts multiplier * base ** (L - allowed_length)); the
defaults of SamplingParams (dry_max_ngram 12, dry_max_occurrences 8, dry_early_exit_match_len 8) are used.
"""

from aphrodite.v1.sample.ops.dry import DryRequestState, _compute_dry_penalties


def lengths(text, breakers="", allowed_length=1, dry_range=0):
    ids = [ord(c) - ord("a") for c in text]
    state = DryRequestState.from_history(ids, [ord(c) - ord("a") for c in breakers])
    got = _compute_dry_penalties(state, allowed_length, dry_range, 12, 8, 8)
    return {chr(ord("a") + t): n for t, n in sorted(got.items())}


def show(what, llama_cpp, got):
    print(f"{what}\n    llama.cpp: {llama_cpp}\n    Aphrodite: {got}\n")


show("1. a repeat of one token is never penalized: 'aa', allowed_length 1", {"a": 1}, lengths("aa"))
show("2. a breaker is penalized: 'aabaa', breaker b (llama.cpp exempts single-token breakers)", {"a": 1},
     lengths("aabaa", breakers="b"))
show("3. dry_range 0 reads the whole history: 'aaa' (llama.cpp: penalty_last_n 0 is DRY off)", {},
     lengths("aaa", dry_range=0))
show("4. dry_max_ngram 12 lets a repeat count 13 tokens: 'ab' * 10 (llama.cpp: L 18)", {"a": 18},
     lengths("ab" * 10))
show("5. a repeat shorter than allowed_length is penalized: 'abcqrsab', allowed_length 3 (L 2: llama.cpp none; "
     "apply_dry subtracts base ** (2 - 3) = 0.5)", {}, lengths("abcqrsab", allowed_length=3))
