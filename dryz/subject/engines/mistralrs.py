"""dryz's adapter for mistral.rs (pip install 'dryz[mistralrs]'): `--subject engine:mistralrs`.

End to end, as a user sends a request: a `mistralrs.Runner` over a tiny llama GGUF whose every logit is exactly 0
(dryz.subject.tinymodel) and dryz's symbol vocabulary with an end-of-sequence token (mistral.rs's GGUF tokenizer
requires one; ids 0..63 are dryz's symbols, 64 is `</s>`), a chat template that is the message alone, and per case
`ChatCompletionRequest(messages=[the history as text], max_tokens=1, temperature=0, logprobs=True, top_logprobs=K,
logit_bias=..., dry_multiplier=, dry_base=, dry_allowed_length=, dry_sequence_breakers=)`. The history's ids are
checked against the Runner's own tokenization of the text (no BOS: its GGUF tokenizer adds none). The Runner runs
with prefix_cache_n=0: with its prefix cache, a request sharing a cached prefix gets DRY over the uncached suffix
only (docs/engines/mistralrs.md).

What DRY did is read back exactly, never guessed. mistral.rs applies DRY to the raw logits, then logit_bias
("Penalties, on the raw logits: DRY first, ... then logit bias", its sampling guide), so a candidate's logit is
f32(bias - p) for its penalty p. One request without bias gives every token's log-probability: a candidate whose
log-probability equals the end-of-sequence token's (never in the history, never penalized) has p = 0 when no
penalty the parameters allow could be too small to show (else that is checked, below); the others' p is found
exactly with greedy requests that mask every token but the candidate (biased by b) and `</s>` (bias 0): the first
maximum wins, so the candidate is chosen iff f32(b - p) >= 0 iff b >= p, and p is the least float32 b chosen, found
by bisection over the float32 order. An answer that cannot be read so (an infinite logit raised by a negative
multiplier) is not judged.

mistral.rs has no window parameter: its DRY reads the whole context. A case whose window would cut the history (or
switch DRY off: penalty_last_n <= 0 in llama.cpp's library) cannot be asked and is not judged.
Declared: nothing (mistral.rs's user documentation, docs/src/content/docs/guides/customize/sampling.mdx, states
none of the deviations its code has).
"""

from __future__ import annotations

import math
import os
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

from .serve import NotExpressible, Refusal, engine, serve, symbol_pieces

EOS = 64
TEMPLATE = "{{ messages[0]['content'] }}"


SRC = "mistralrs-core/src/sampler.rs:{line} (read at commit 9e922623f, version 0.9.2; the 0.9.5 wheel ships no " \
      "source): {text}"
# The engine's code behind each deviation model dryz may fit (dryz.causes): what the conformance page cites.
SOURCES = [
    {"name": "last-breaker:unchecked", "source": SRC.format(line=1778, text="let mut match_length = 1: the last "
                                                             "token matches without a breaker check")},
    {"name": "breaker-form:last-token", "source": SRC.format(line=246, text='encode_fast(["a", &breaker].concat()) '
                                                              "and its last id (\"FIXME: This is a hack\")")},
    {"name": "repeat-min:N", "source": SRC.format(line=1756, text="only positions after an occurrence of the last "
                                                   "token are matched (match_length starts at 1)")},
    {"name": "base-below-one:applied", "source": SRC.format(line=1819, text="params.base.powf(...): base not "
                                                             "checked")},
    {"name": "match-cap:N", "source": SRC.format(line=1781, text="while match_length < 50")},
    {"name": "allowed-negative:refused", "source": SRC.format(line=192, text="pub allowed_length: usize (the Python "
                                                               "binding raises OverflowError for a negative value)")},
    {"name": "arithmetic:float32", "source": SRC.format(line=1819, text="params.multiplier * params.base.powf(...) "
                                                         "in f32")},
    {"name": "no-clamp", "source": SRC.format(line=1819, text="base.powf(match_len - allowed_length): no exponent "
                                               "clamp")},
]


def model_dir() -> Path:
    """A folder holding tiny.gguf (zero logits) over dryz's symbols + </s>, and raw.jinja; written once."""
    from ..cache import cache_dir  # on use: the adapter's start-up (run as its own process)
    from ..tinymodel import write_model  # on use: the adapter's start-up
    d = cache_dir() / "engines" / "mistralrs-symbols-v1"
    if not (d / "tiny.gguf").exists():
        import gguf
        d.mkdir(parents=True, exist_ok=True)
        vocab = d / "vocab.gguf"
        w = gguf.GGUFWriter(str(vocab), "llama")
        pieces = symbol_pieces()
        # "Ġ", "ĠĠ" (65, 66) so that the merge "Ġ Ġ" names tokens of the vocabulary (the BPE builder mistral.rs
        # uses refuses a merge whose parts are not in it; llama.cpp does not mind)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("gpt-2")
        w.add_token_list(pieces + ["</s>", "Ġ", "ĠĠ"])
        w.add_token_types([gguf.TokenType.NORMAL] * len(pieces) + [gguf.TokenType.CONTROL, gguf.TokenType.NORMAL,
                                                                    gguf.TokenType.NORMAL])
        w.add_token_merges(["Ġ Ġ"])
        w.add_eos_token_id(EOS)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        write_model(vocab, d / "tiny.gguf")
    (d / "raw.jinja").write_text(TEMPLATE)
    return d


def _key(x: np.float32) -> int:
    """float32 order as integers (negative floats reversed)."""
    i = int(np.array([x], dtype=np.float32).view(np.int32)[0])
    return i if i >= 0 else -(i & 0x7FFFFFFF)


def _float(k: int) -> np.float32:
    i = k if k >= 0 else (-k) | -0x80000000
    return np.array([i], dtype=np.int32).view(np.float32)[0]


class Adapter:
    def __init__(self):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from mistralrs import ChatCompletionRequest, Runner, Which
        self.Request = ChatCompletionRequest
        d = model_dir()
        try:
            self.runner = Runner(which=Which.GGUF(tok_model_id=None, quantized_model_id=str(d),
                                                  quantized_filename="tiny.gguf"),
                                 chat_template=str(d / "raw.jinja"), prefix_cache_n=0)
        except BaseException as e:  # noqa: BLE001 (a Rust panic is a BaseException): the adapter cannot start
            first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            print(f"mistral.rs {version('mistralrs')} cannot load {d / 'tiny.gguf'}: {first}", file=sys.stderr,
                  flush=True)
            sys.exit(3)
        self.pieces = symbol_pieces()
        self.n_vocab = len(self.pieces) + 3
        self.requests = 0

    def _ask(self, text, dry, bias, k):
        req = self.Request(messages=[{"role": "user", "content": text}], model="dryz", max_tokens=1,
                           temperature=0, logprobs=True, top_logprobs=k, logit_bias=bias, **dry)
        self.requests += 1
        res = engine(self.runner.send_chat_completion_request, req)
        lp = res.choices[0].logprobs.content[0]
        return lp.token, {t.token: t.logprob for t in lp.top_logprobs}

    def _chosen(self, text, dry, z, b) -> bool:
        """Greedy choice between z biased by b and </s> (bias 0), every other token masked: z wins iff b >= p."""
        bias = {i: float("-inf") for i in range(self.n_vocab)}
        bias[EOS] = 0.0
        bias[z] = float(b)
        tok, _ = self._ask(text, dry, bias, 2)
        return tok == self.pieces[z]

    def _is_penalty(self, text, dry, z, P: np.float32) -> bool:
        """p == P, bit for bit: z is chosen at bias P and not at the float32 just below it (2 requests)."""
        return self._chosen(text, dry, z, P) and not self._chosen(text, dry, z, _float(_key(P) - 1))

    def _penalty(self, text, dry, z, guesses) -> np.float32:
        """p, exactly: a guess confirmed bit for bit, else the least float32 b with z chosen (bisection over the
        float32 order, at most 33 requests; not chosen even at the largest float32: p is +inf)."""
        for P in guesses:
            if self._is_penalty(text, dry, z, P):
                return P
        top = _key(np.float32(3.4028235e38))
        if not self._chosen(text, dry, z, _float(top)):
            return np.float32(math.inf)
        a, c = -top - 1, top  # not chosen at -inf (below every float32 b), chosen at the largest
        while c - a > 1:
            mid = (a + c) // 2
            if self._chosen(text, dry, z, _float(mid)):
                c = mid
            else:
                a = mid
        return _float(c)

    @staticmethod
    def _guesses(estimate: float, m: float, base: float) -> list[np.float32]:
        """Penalties of the form m * base^k (k a whole number, rounded as float32 or as double) nearest the
        log-probability estimate: only guesses, each confirmed bit for bit before it is read back."""
        if not math.isfinite(estimate) or estimate == 0 or m == 0 or base <= 0:
            return []
        if base == 1:
            ks = [0]
        else:
            ratio = estimate / m
            if ratio <= 0:
                return []
            k = round(math.log(ratio) / math.log(base))
            ks = [x for x in (k, k - 1, k + 1) if 0 <= x <= 4096]
        out = []
        with np.errstate(over="ignore"):
            for k in ks:
                for P in (np.float32(np.float32(m) * np.float32(np.float32(base) ** np.float32(k))),
                          np.float32(m * float(base) ** k if k * math.log(base) < 700 else math.inf)):
                    if math.isfinite(P) and P not in out:
                        out.append(P)
        return sorted(out, key=lambda P: abs(float(P) - estimate))[:3]

    def run(self, req):
        if req["vocab"]["name"] != "symbols":
            raise NotExpressible("the adapter runs dryz's symbol vocabulary")
        p = req["params"]
        hist = [int(t) for t in req["history"]]
        if not hist:
            raise NotExpressible("a chat request needs a message: an empty history cannot be sent")
        if p["penalty_last_n"] <= 0 or p["penalty_last_n"] < len(hist):
            raise NotExpressible("mistral.rs has no window parameter (its DRY reads the whole context): a window "
                                 "that cuts the history or switches DRY off cannot be asked")
        text = "".join(self.pieces[t] for t in hist)
        if list(engine(self.runner.tokenize_text, text, False, None)) != hist:
            raise NotExpressible("the history's text does not tokenize back to its ids")
        try:
            dry = dict(dry_multiplier=float(p["multiplier"]), dry_base=float(p["base"]),
                       dry_allowed_length=int(p["allowed_length"]), dry_sequence_breakers=list(p["breakers"]))
            _, lps = self._ask(text, dry, None, self.n_vocab)
        except (OverflowError, TypeError, ValueError) as e:  # the binding refuses the value (a usize, ...)
            raise Refusal(f"{type(e).__name__}: {e}") from None
        ref = lps[EOS]
        m, base = abs(float(p["multiplier"])), float(p["base"])
        smallest = m if base >= 1 else m * base ** len(hist) if base > 0 else 0.0  # the least penalty it can give
        out = []
        for t, b in req["candidates"]:
            b = np.float32(-math.inf if b == "-inf" else float(b))
            lp = lps.get(t, -math.inf)
            if lp == math.inf or math.isnan(lp):
                raise NotExpressible(f"token {t}'s log-probability is {lp}: an infinite logit cannot be read")
            elif lp == ref and (smallest >= 1e-5 or self._is_penalty(text, dry, t, np.float32(0.0))):
                pen = np.float32(0.0)
            else:  # (a log-probability of -inf: the probability underflowed, the penalty is large, maybe +inf)
                pen = self._penalty(text, dry, t, self._guesses(ref - lp, float(p["multiplier"]), base))
            with np.errstate(over="ignore", invalid="ignore"):
                out.append(float(np.float32(b - pen)))
        return out, bool(req["sorted"])


def main() -> int:
    from .serve import answers_stream  # on use: the adapter's start-up
    out = answers_stream()
    adapter = Adapter()
    hello = {"engine": "mistral.rs", "version": version("mistralrs"), "deviations": [], "sources": SOURCES,
             "vocabularies": ["symbols"],
             "initial_logits": True, "candidate_arrays": True, "sorted_flag": False, "batch": 16}
    return serve(hello, adapter.run, out)


if __name__ == "__main__":
    sys.exit(main())
