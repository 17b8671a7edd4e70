"""mistral.rs 0.9.5 against llama.cpp's DRY: each difference dryz found, with mistral.rs alone.

    pip install mistralrs==0.9.5
    HF_HUB_OFFLINE=1 python repro.py

tiny.gguf (beside this file) is a llama model whose every logit is 0, over a vocabulary of one-character tokens
(a..z A..Z 0..9 ! #, then </s>); raw.jinja sends the message text as the prompt. With every logit 0, DRY's
penalty of token t is logprob(</s>) - logprob(t) (</s> is never in the history, never penalized); the figures
below are that difference, rounded.
"""

import math
import os
from pathlib import Path

from mistralrs import ChatCompletionRequest, Runner, Which

HERE = Path(__file__).parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def runner(prefix_cache_n=0):
    return Runner(which=Which.GGUF(tok_model_id=None, quantized_model_id=str(HERE), quantized_filename="tiny.gguf"),
                  chat_template=str(HERE / "raw.jinja"), prefix_cache_n=prefix_cache_n)


def penalties(r, text, **dry):
    """{token: penalty} of one request (tokens with no penalty left out)."""
    req = ChatCompletionRequest(messages=[{"role": "user", "content": text}], model="m", max_tokens=1,
                                temperature=0, logprobs=True, top_logprobs=67, **dry)
    lp = {t.token: t.logprob for t in r.send_chat_completion_request(req).choices[0].logprobs.content[0].top_logprobs}
    eos = lp[64]
    pieces = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#"
    out = {}
    for t, p in lp.items():
        if t < 64 and p != eos:
            out[pieces[t]] = "inf" if p == -math.inf else round(eos - p, 4)
    return out


def show(what, llama_cpp, got):
    print(f"{what}\n    llama.cpp: {llama_cpp}\n    mistral.rs: {got}\n")


r = runner()
D = dict(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1, dry_sequence_breakers=[])

show("1. a breaker as the last token: 'cac', breakers ['c'] (llama.cpp: no repeat continues past a breaker)",
     {}, penalties(r, "cac", **{**D, "dry_sequence_breakers": ["c"]}))
show("2. a breaker of two characters is its last character: 'bb', breakers ['ab'] (llama.cpp: 'ab' never occurs)",
     {"b": 1.0}, penalties(r, "bb", **{**D, "dry_sequence_breakers": ["ab"]}))
show("3. allowed_length 0: 'ab' (llama.cpp penalizes every token that follows one in the window)",
     {"b": 1.0}, penalties(r, "ab", **{**D, "dry_allowed_length": 0}))
show("4. base < 1 applies: 'aa', base 0.5 (llama.cpp: DRY off below base 1)",
     {}, penalties(r, "aa", **{**D, "dry_base": 0.5}))
show("5. no exponent clamp: 'ab' * 21, base 10 (llama.cpp clamps the exponent: a finite penalty)",
     {"a": 9.9999997e37}, penalties(r, "ab" * 21, **{**D, "dry_base": 10.0}))
show("6. repeats are capped at 50 tokens: 'abc' * 18 (54 tokens), base 1.01 (llama.cpp: L 51)",
     {"a": round(1.01 ** 50, 4)}, penalties(r, "abc" * 18, **{**D, "dry_base": 1.01}))

# 7. The prefix cache (on by default: prefix_cache_n 16): a request whose prompt shares a prefix with an earlier
# request's prompt on the same Runner is penalized over the unshared suffix only (dryz's prefix-cache:suffix). The
# shortest witness: 'a', then 'aa' on the same Runner ('aa' is read as 'a': nothing repeats).
c = runner(prefix_cache_n=16)
penalties(c, "a", **D)
show("7. with the prefix cache (the default): 'aa' after a request for 'a' (llama.cpp: every request on its own)",
     penalties(r, "aa", **D), penalties(c, "aa", **D))
c = runner(prefix_cache_n=16)
penalties(c, "abcabcz", **D)  # the cache holds 'abc...': 'abcdabcd' is read as 'dabcd'
show("8. with the prefix cache: 'abcdabcd' after a request for 'abcabcz' (llama.cpp: a repeat of 4)",
     penalties(r, "abcdabcd", **D), penalties(c, "abcdabcd", **D))
