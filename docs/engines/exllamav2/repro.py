"""exllamav2 0.3.2 against llama.cpp's DRY: each difference dryz found, with exllamav2 alone.

    pip install exllamav2==0.3.2     (on a machine where its CUDA extension loads)
    python repro.py

Tokens are one character each (a, b, c, d = ids 0..3); every logit starts at 0, so what apply_dry leaves is minus
the penalty.
"""

import torch
from exllamav2.generator.sampler import ExLlamaV2Sampler

PIECES = "abcd"


class Tokenizer:  # what apply_dry reads of an ExLlamaV2Tokenizer
    actual_vocab_size = len(PIECES)
    extended_id_to_piece = {}

    def get_id_to_piece_list(self, include_special_tokens=False):
        return list(PIECES)


def settings(**kw):
    s = ExLlamaV2Sampler.Settings()
    s.dry_multiplier, s.dry_base, s.dry_allowed_length, s.dry_range = 1.0, 2.0, 1, 0
    s.dry_sequence_breakers = set()
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def penalties(text, s=None, **kw):
    s = s or settings(**kw)
    logits = torch.zeros((1, 1, len(PIECES)))
    try:
        ExLlamaV2Sampler.apply_dry(s, Tokenizer(), torch.tensor([[PIECES.index(c) for c in text]]), logits)
    except Exception as e:  # noqa: BLE001
        return f"raises {type(e).__name__}: {e}"
    return {PIECES[t]: -float(logits[0, 0, t]) for t in range(len(PIECES)) if logits[0, 0, t] != 0}


def show(what, llama_cpp, got):
    print(f"{what}\n    llama.cpp: {llama_cpp}\n    exllamav2: {got}\n")


show("1. a one-token sequence with a window: 'a', dry_range 64", {}, penalties("a", dry_range=64))
show("2. a window of at most dry_max_ngram (20) tokens: 'aa', dry_range 4", {"a": 1.0}, penalties("aa", dry_range=4))
show("3. a repeat that continues into the last token is missed: 'aa'", {"a": 1.0}, penalties("aa"))
show("4. base < 1 applies: 'aba', base 0.5 (llama.cpp: DRY off below base 1)", {}, penalties("aba", dry_base=0.5))
show("5. a repeat longer than dry_max_ngram (20) is not penalized at all: 'ab' * 12 (llama.cpp: L 22, 2^21)",
     {"a": 2.0 ** 21}, penalties("ab" * 12))

# 6. Settings keeps its n-gram trie between calls: a Settings used for one sequence penalizes the next one with
#    the first one's n-grams.
s = settings()
penalties("abcd", s)
show("6. one Settings for two sequences: 'da' after 'abcd' (llama.cpp: 'a' has not occurred before: nothing)",
     {}, penalties("da", s))
