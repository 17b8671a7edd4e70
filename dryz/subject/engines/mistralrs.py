"""dryz's adapter for mistral.rs (pip install 'dryz[mistralrs]'): `--subject engine:mistralrs` (its prefix cache off)
and `--subject engine:mistralrs-cached` (its prefix cache on, as users run it: mistral.rs's default prefix_cache_n).

End to end, as a user sends a request: a `mistralrs.Runner` over a tiny llama GGUF whose every logit is exactly 0
(dryz.subject.tinymodel) and dryz's symbol vocabulary with an end-of-sequence token (mistral.rs's GGUF tokenizer
requires one; ids 0..63 are dryz's symbols, 64 is `</s>`), a chat template that is the message alone, and per case
`ChatCompletionRequest(messages=[the history as text], max_tokens=1, temperature=0, logprobs=True, top_logprobs=K,
logit_bias=..., dry_multiplier=, dry_base=, dry_allowed_length=, dry_sequence_breakers=)`. The history's ids are
checked against the Runner's own tokenization of the text (no BOS: its GGUF tokenizer adds none).

engine:mistralrs runs every case on one Runner with prefix_cache_n=0 (no prefix cache: every request is read
whole). engine:mistralrs-cached runs prefix_cache_n=16 (mistral.rs's default): with it, a request whose prompt
shares a prefix with an earlier request's on the same Runner is a cache hit, and DRY reads the uncached suffix only
(the model prefix-cache:suffix; SOURCES_CACHED cites the code). Both run request sequences (the `sequence` op):
request k is answered by a fresh Runner that has answered requests 1..k-1 (each once, as sent), so its first ask is
in exactly the state a user's instance is in. On the cached adapter a single case is a sequence of one request: a
fresh Runner per case (never one Runner for many cases: every probe space has prompts sharing prefixes, and which
earlier prompt matters is what the requests property audits).

What DRY did is read back exactly, never guessed. mistral.rs applies DRY to the raw logits, then logit_bias
("Penalties, on the raw logits: DRY first, ... then logit bias", its sampling guide), so a candidate's logit is
f32(bias - p) for its penalty p. One request without bias gives every token's log-probability: a candidate whose
log-probability equals the end-of-sequence token's (never in the history, never penalized) has p = 0 when no penalty
the parameters allow could be too small to show (below 1e-5), or when none that small changes its output f32(initial
- p) (an initial logit of 1,000: no |p| below 1e-5 moves it); else that is checked, below; the others' p is found
exactly with greedy requests that mask every token but the candidate (biased by b) and `</s>` (bias 0): the first
maximum wins, so the candidate is chosen iff f32(b - p) >= 0 iff b >= p, and p is the least float32 b chosen. A
guess from the log-probability is confirmed bit for bit (two requests); else p is searched first among the penalties
the formula can give (multiplier * base^k, each rounding: a penalty whose log-probability underflowed leaves no
estimate), then by bisection over the float32 order between the two found. A lower bound is asked for many
candidates at once (`</s>` is chosen iff every candidate's b < p); an upper bound takes one request per candidate
(the argmax names one token), so where a penalty too small to show in a log-probability is possible, proving p = 0
costs a request per candidate. The candidates' searches run side by side, and each round's asks (one per candidate)
are sent together, streamed, on engine:mistralrs: mistral.rs answers them as one batch, each as it would alone (a
test holds both equal), 64 asks over 8 tokens in ~15 ms instead of ~40 (one core). A search stops once every p left
gives the candidate the same output logit f32(initial - p) (a candidate at -inf stays -inf; beside a large initial
logit a small penalty changes nothing): what is read back exactly is the candidate's logit after DRY. An answer that
cannot be read so (an infinite logit raised by a negative multiplier) is not judged.

A read-back ask repeats the request's prompt, and on a cached Runner a repeated prompt is in the cache. So in a
sequence the read-back asks run on the request's own Runner only where that repeat answers as the first ask did:
after the read-back the prompt is asked once more and its log-probabilities must equal the first ask's bit for bit
(a prompt the cache holds whole is no cache hit: prefix_cacher.rs:559-561); where they differ (the first ask was a
cache hit that changed DRY's context), every read-back ask is the first ask of a fresh Runner that has answered the
earlier requests (exact; ~0.03 s each). On the cached adapter every ask is sent alone. Cost, measured on one core
with MODEL_DIMS: a fresh Runner ~0.023 s, an ask ~0.6 ms up to ~100 tokens (of 545 tokens 2.5 ms, of 1,000 tokens
6.9 ms: mistral.rs's time grows with the prompt's square); a single case on the cached adapter ~0.022 s.

mistral.rs has no window parameter: its DRY reads the whole context. A case whose window would cut the history (or
switch DRY off: penalty_last_n <= 0 in llama.cpp's library) cannot be asked and is not judged.
Declared: nothing (mistral.rs's user documentation, docs/src/content/docs/guides/customize/sampling.mdx, states
none of the deviations its code has).
"""

from __future__ import annotations

import math
import os
import sys
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path

import numpy as np

from .serve import EngineRaised, NotExpressible, Refusal, engine, serve, symbol_pieces

EOS = 64
TEMPLATE = "{{ messages[0]['content'] }}"


def _src(line: int, text: str, file: str = "sampler.rs") -> str:
    return f"mistralrs-core/src/{file}:{line} (read at commit 9e922623f, version 0.9.2; the 0.9.5 wheel ships no " \
           f"source): {text}"


# The engine's code behind each deviation model dryz may fit (dryz.causes): what the conformance page cites.
SOURCES = [
    {"name": "last-breaker:unchecked", "source": _src(1778, "let mut match_length = 1: the last token matches "
                                                            "without a breaker check")},
    {"name": "breaker-form:last-token", "source": _src(246, 'encode_fast(["a", &breaker].concat()) and its last id '
                                                            '("FIXME: This is a hack")')},
    {"name": "repeat-min:N", "source": _src(1756, "only positions after an occurrence of the last token are matched "
                                                  "(match_length starts at 1)")},
    {"name": "base-below-one:applied", "source": _src(1819, "params.base.powf(...): base not checked")},
    {"name": "match-cap:N", "source": _src(1781, "while match_length < 50")},
    {"name": "allowed-negative:refused", "source": _src(192, "pub allowed_length: usize (the Python binding raises "
                                                             "OverflowError for a negative value)")},
    {"name": "arithmetic:float32", "source": _src(1819, "params.multiplier * params.base.powf(...) in f32")},
    {"name": "no-clamp", "source": _src(1819, "base.powf(match_len - allowed_length): no exponent clamp")},
]
# The prefix cache (engine:mistralrs-cached): the longest prefix an earlier prompt shares, its suffix as the
# sequence's prefill tokens, which are the context DRY reads at the first sampled token.
SOURCES_CACHED = SOURCES + [
    {"name": "prefix-cache:suffix", "source": _src(
        466, "match_len = toks.shared_prefix_len(&k.tokens) over every cached prompt, the longest kept; :559 "
        "new_toks = toks[match_len..] (:560 none left: no hit, the whole prompt); engine/add_request.rs:907 "
        "seq.prefill_v2_normal(normal, toks, offset); sequence.rs:1011 get_toks() is the prefill tokens; "
        "pipeline/sampling.rs:1070 ctx = seq.get_toks(); sampler.rs:1674 apply_dry_penalty(&mut logits, context)",
        "prefix_cacher.rs")},
]
CACHE_N = 16  # mistral.rs's default prefix_cache_n (Runner(prefix_cache_n=16), mistralrs.pyi)
# The tiny model's (embedding length, heads, feed-forward length): the smallest mistral.rs loads. Its logits are 0
# whatever the sizes, and mistral.rs's time per request grows with them and with the prompt's square: a request
# over 545 tokens took 5.5 ms with llama-server's model (16, 2, 32) and 2.5 ms with this one, over 1,000 tokens
# 15.4 and 6.9 ms (one core). v1, llama-server's sizes, stays where an older dryz wrote it.
MODEL_DIMS = (2, 1, 2)
MODEL_DIR = "mistralrs-symbols-v2"
# A penalty this large or larger shows in a candidate's log-probability (it differs from </s>'s): read back level with
# </s>'s, a penalty is below it (the float32 log-softmax of logits near 0 resolves about 1e-7).
SHOWN = 1e-5


def _unmoved(initial: np.float32) -> bool:
    """No penalty p with |p| below SHOWN (one that can hide: a negative multiplier or base gives negative ones)
    changes the output f32(initial - p): f32(initial - p) is monotone in p, so the two ends decide (one side of
    a power of two, float32's step is half the other side's)."""
    shown = np.float32(SHOWN)
    return bool(np.float32(initial - shown) == initial and np.float32(initial + shown) == initial)


def model_dir() -> Path:
    """A folder holding tiny.gguf (zero logits) over dryz's symbols + </s>, and message.jinja; written once."""
    from ..cache import cache_dir  # on use: the adapter's start-up (run as its own process)
    from ..tinymodel import write_model  # on use: the adapter's start-up
    d = cache_dir() / "engines" / MODEL_DIR
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
        write_model(vocab, d / "tiny.gguf", MODEL_DIMS)
    # Written atomically, and never again once there: a Runner made while the file is rewritten reads an empty
    # template ("Received an empty prompt"), and the cached adapter makes a Runner per case. (Before, every start
    # rewrote raw.jinja in place, as older dryz versions sharing this cache still do: this name is not theirs.)
    t = d / "message.jinja"
    if not t.exists() or t.read_text() != TEMPLATE:
        tmp = d / f".message.jinja.{os.getpid()}"
        tmp.write_text(TEMPLATE)
        os.replace(tmp, t)
    return d


def _key(x: np.float32) -> int:
    """float32 order as integers (negative floats reversed)."""
    i = int(np.array([x], dtype=np.float32).view(np.int32)[0])
    return i if i >= 0 else -(i & 0x7FFFFFFF)


def _float(k: int) -> np.float32:
    i = k if k >= 0 else (-k) | -0x80000000
    return np.array([i], dtype=np.int32).view(np.float32)[0]


@lru_cache(maxsize=256)
def _family(m: float, base: float, allowed: int, n: int) -> tuple:
    """The float32 keys (ascending) of the penalties DRY's formula gives a request: 0 (none), and m * base^k for
    every exponent k a repeat in n tokens can reach (from -allowed, a repeat below allowed_length, to n), rounded
    as float32 arithmetic or as double; only where to look first (_penalty), never taken for an answer
    unconfirmed. A penalty too large for its log-probability to show it (it underflows to -inf) leaves no
    estimate to guess from: searched among these, it takes about log2(2n) asks, not the 33 of the bisection over
    every float32."""
    keys = {0}
    if not (math.isfinite(m) and m != 0 and math.isfinite(base)):  # (any base: mistral.rs checks none, and a
        return tuple(keys)                                             # negative one's odd powers are negative)
    with np.errstate(all="ignore"):
        for k in range(-max(allowed, 0), n + 1):
            forms = [np.float32(np.float32(m) * np.float32(np.float32(base) ** np.float32(k)))]
            try:
                forms.append(np.float32(m * float(base) ** k))
            except (OverflowError, ZeroDivisionError):
                pass
            keys.update(_key(P) for P in forms if math.isfinite(P))
    return tuple(sorted(keys))


class Adapter:
    def __init__(self, prefix_cache_n: int = 0):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from mistralrs import ChatCompletionRequest, Runner, Which
        self.Request, self._Runner, self._Which = ChatCompletionRequest, Runner, Which
        self.prefix_cache_n = prefix_cache_n
        self.dir = model_dir()
        self.runners = 0
        try:
            self.runner = self._new_runner()
        except BaseException as e:  # noqa: BLE001 (a Rust panic is a BaseException): the adapter cannot start
            first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            print(f"mistral.rs {version('mistralrs')} cannot load {self.dir / 'tiny.gguf'}: {first}",
                  file=sys.stderr, flush=True)
            sys.exit(3)
        self.pieces = symbol_pieces()
        self.n_vocab = len(self.pieces) + 3
        self.requests = 0
        self.replay = None  # the earlier requests of a sequence, while each read-back ask needs a fresh Runner

    def _new_runner(self):
        self.runners += 1
        d = self.dir
        return self._Runner(which=self._Which.GGUF(tok_model_id=None, quantized_model_id=str(d),
                                                   quantized_filename="tiny.gguf"),
                            chat_template=str(d / "message.jinja"), prefix_cache_n=self.prefix_cache_n)

    def _fresh(self, earlier):
        """A fresh Runner that has answered the earlier requests ((text, DRY parameters), each asked once as the
        first ask of a request is); a request the engine raised on is sent all the same (it was sent before)."""
        runner = engine(self._new_runner)
        saved, self.runner = self.runner, runner
        try:
            for text, dry in earlier:
                try:
                    self._ask(text, dry, None, self.n_vocab)
                except EngineRaised:
                    pass
        finally:
            self.runner = saved
        return runner

    def _request(self, text, dry, bias, k, stream=False):
        return self.Request(messages=[{"role": "user", "content": text}], model="dryz", max_tokens=1, temperature=0,
                            logprobs=True, top_logprobs=k, logit_bias=bias, stream=stream, **dry)

    def _ask(self, text, dry, bias, k):
        req = self._request(text, dry, bias, k)
        self.requests += 1
        res = engine(self.runner.send_chat_completion_request, req)
        lp = res.choices[0].logprobs.content[0]
        return lp.token, {t.token: t.logprob for t in lp.top_logprobs}

    def _masked(self, biased: dict) -> dict:
        """The bias of a choice among the tokens biased (z -> b) and </s> (bias 0): every other token masked."""
        bias = {i: float("-inf") for i in range(self.n_vocab)}
        bias[EOS] = 0.0
        bias.update({z: float(b) for z, b in biased.items()})
        return bias

    def _choices(self, text, dry, biased: list) -> list[str]:
        """The greedy choice of each ask (a dict z -> b, as _choice), every ask its own request. On a Runner without
        a prefix cache, outside a replay, they are sent together (streamed: the engine answers them as one batch,
        ~2.5x faster than one by one at 64 asks; each is the request it would be alone, and every logit of the tiny
        model is 0 whatever the batch); a streamed answer is its one token's text, or none with finish_reason
        "stop" for </s>."""
        if len(biased) < 2 or self.replay is not None or self.prefix_cache_n:
            return [self._choice(text, dry, b) for b in biased]
        streams = []
        try:
            for b in biased:
                self.requests += 1
                streams.append(engine(self.runner.send_chat_completion_request,
                                      self._request(text, dry, self._masked(b), 2, stream=True)))
            return [self._streamed(s) for s in streams]
        finally:
            for s in streams:  # none left pending in the engine (drained where a reading stopped early)
                try:
                    for _ in s:
                        pass
                except Exception:  # noqa: BLE001 (what one of them raised is already the answer's)
                    pass

    def _streamed(self, stream) -> str:
        """The token a streamed ask chose, named as an ask's answer names it (_ask): its text, or `</s>` (no text,
        finish_reason "stop"); a token other than the candidate is read as such, not chosen, as one by one."""
        chunks = engine(list, stream)
        text = "".join(c.choices[0].delta.content or "" for c in chunks)
        reason = chunks[-1].choices[0].finish_reason if chunks else None
        if reason == "stop" and text == "":
            return "</s>"
        if reason == "length" and text:
            return text
        raise RuntimeError(f"a streamed answer dryz cannot read: {text!r}, finish_reason {reason!r}")

    def _choice(self, text, dry, biased: dict) -> str:
        """The greedy choice among the tokens biased (z -> b) and </s> (bias 0), every other token masked: the first
        maximum of f32(b_z - p_z) and 0 (every candidate's id is below </s>'s, so it wins a tie with it)."""
        bias = self._masked(biased)
        if self.replay is None:
            tok, _ = self._ask(text, dry, bias, 2)
        else:  # the ask must be in the request's own state: the first ask of a fresh Runner after the earlier ones
            saved, self.runner = self.runner, self._fresh(self.replay)
            try:
                tok, _ = self._ask(text, dry, bias, 2)
            finally:
                self.runner = saved
        return tok

    def _chosen(self, text, dry, asks: dict) -> dict:
        """For each z -> b: the greedy choice between z biased by b and </s> (bias 0), every other token masked: z
        wins iff b >= p. One ask each, sent together (_choices)."""
        zs = list(asks)
        return {z: tok == self.pieces[z] for z, tok in zip(zs, self._choices(text, dry, [{z: asks[z]} for z in zs]))}

    def _all_at_least(self, text, dry, guessed: dict) -> bool:
        """Every p_z >= its guess P_z, in one ask: each z biased by the float32 just below P_z, </s> at 0; </s> is
        chosen iff every f32(b_z - p_z) < 0, i.e. b_z < p_z for all z."""
        return self._choice(text, dry, {z: _float(_key(P) - 1) for z, P in guessed.items()}) == "</s>"

    def _settle(self, text, dry, searches: dict) -> dict:
        """Runs searches side by side (z -> a generator that yields each bias it asks z at, is sent whether z was
        chosen, and returns its answer): each round's asks, one per search, go to mistral.rs together."""
        out, asks = {}, {}

        def step(z, chosen):
            try:
                asks[z] = searches[z].send(chosen)
            except StopIteration as stop:
                out[z] = stop.value

        for z in searches:
            step(z, None)
        while asks:
            answers, asks = self._chosen(text, dry, asks), {}
            for z, chosen in answers.items():
                step(z, chosen)
        return out

    @staticmethod
    def _is_penalty(P: np.float32):
        """(a search) p == P, bit for bit: z is chosen at bias P and not at the float32 just below it (2 asks)."""
        return (yield P) and not (yield _float(_key(P) - 1))

    def _penalty(self, guesses, family=(), initial=np.float32(0.0)):
        """(a search) p, exactly as far as the candidate's output f32(initial - p) goes (a penalty giving that
        output): a guess confirmed bit for bit, else the least float32 b with z chosen (z is chosen iff b >= p):
        first searched among the family's values (float32 keys, ascending: the penalties the formula can give,
        _family) and the largest float32, each ask halving them (not chosen even at the largest float32: p is
        +inf); a family value found is confirmed with one ask (not chosen just below it), else the bisection over
        the float32 order goes on between the two values found (at most 33 requests in all). It stops once every p
        left gives the same output (f32(initial - p) is monotone in p: the same at both ends of what is left):
        beside a large initial logit a penalty below half its float32 step changes nothing."""
        for P in guesses:
            if (yield from self._is_penalty(P)):
                return P

        def settled(a, c) -> bool:  # p in [_float(a + 1), _float(c)] gives one output
            with np.errstate(over="ignore", invalid="ignore"):
                return c is not None and np.float32(initial - _float(a + 1)) == np.float32(initial - _float(c))

        top = _key(np.float32(3.4028235e38))
        a, c = -top - 1, None  # not chosen at -inf (below every float32 b)
        keys = [k for k in family if a < k < top] + [top]
        lo, hi = 0, len(keys)
        while lo < hi and not settled(a, c):  # the least of keys z is chosen at
            mid = (lo + hi) // 2
            if (yield _float(keys[mid])):
                c, hi = keys[mid], mid
            else:
                a, lo = keys[mid], mid + 1
        if c is None:
            return np.float32(math.inf)
        if c != top and c - a > 1 and not settled(a, c):  # a family value: p itself unless chosen just below it
            if not (yield _float(c - 1)):
                return _float(c)
            c -= 1
        while c - a > 1 and not settled(a, c):
            mid = (a + c) // 2
            if (yield _float(mid)):
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

    def _prepare(self, req):
        """(history, text, DRY parameters) of a request, or why it cannot be sent (NotExpressible, Refusal)."""
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
            self.Request(messages=[{"role": "user", "content": text}], model="dryz", max_tokens=1, **dry)
        except (OverflowError, TypeError, ValueError) as e:  # the binding refuses the value (a usize, ...)
            raise Refusal(f"{type(e).__name__}: {e}") from None
        return hist, text, dry

    def run(self, req):
        """One case: on the Runner every case shares (prefix cache off), or, with the cache on, as a sequence of
        one request (a fresh Runner)."""
        if self.prefix_cache_n:
            return self._in_sequence([req], 0)
        hist, text, dry = self._prepare(req)
        _, lps = self._ask(text, dry, None, self.n_vocab)
        return self._read(req, hist, text, dry, lps)

    def sequence(self, reqs):
        """Per request, a call answering it as a fresh Runner does after the requests before it."""
        return [lambda k=k: self._in_sequence(reqs, k) for k in range(len(reqs))]

    def _in_sequence(self, reqs, k):
        req = reqs[k]
        hist, text, dry = self._prepare(req)
        earlier = []
        for r in reqs[:k]:  # the requests sent before it (one that cannot be sent is not)
            try:
                earlier.append(self._prepare(r)[1:])
            except (NotExpressible, Refusal):
                pass
        self.runner = self._fresh(earlier)
        _, lps = self._ask(text, dry, None, self.n_vocab)  # the first ask: in the state the earlier requests left
        out = self._read(req, hist, text, dry, lps)
        _, again = self._ask(text, dry, None, self.n_vocab)
        if again != lps:  # the prompt repeated reads otherwise: every read-back ask on a fresh Runner instead
            self.replay = earlier
            try:
                out = self._read(req, hist, text, dry, lps)
            finally:
                self.replay = None
        return out

    def _read(self, req, hist, text, dry, lps):
        """The candidates' logits after DRY, read back exactly from the first ask's log-probabilities lps."""
        p = req["params"]
        ref = lps[EOS]
        m, base = abs(float(p["multiplier"])), float(p["base"])
        smallest = m if base >= 1 else m * base ** len(hist) if base > 0 else 0.0  # the least penalty it can give
        initial = {t: np.float32(-math.inf if b == "-inf" else float(b)) for t, b in req["candidates"]}
        pens, guesses, level = {}, {}, []
        for t, _ in req["candidates"]:
            lp = lps.get(t, -math.inf)
            if lp == math.inf or math.isnan(lp):
                raise NotExpressible(f"token {t}'s log-probability is {lp}: an infinite logit cannot be read")
            elif initial[t] == -math.inf:  # -inf less any penalty it can have (not -inf: lp would be +inf) is -inf
                pens[t] = np.float32(0.0)
            elif lp == ref and (smallest >= SHOWN or _unmoved(initial[t])):
                pens[t] = np.float32(0.0)  # no penalty it can have hides, or none that hides changes its output
            elif lp == ref:  # level with </s>: p is 0 unless a penalty too small to show it, checked below
                level.append(t)
            else:  # (a log-probability of -inf: the probability underflowed, the penalty is large, maybe +inf)
                guesses[t] = self._guesses(ref - lp, float(p["multiplier"]), base)
        # p == 0 for those level with </s>: every p >= 0 in one ask, then each p <= 0 (chosen at bias 0), one ask
        # each (an argmax answers for one token at a time), sent together; a p not 0 is found as any other
        at_least = len(level) > 1 and self._all_at_least(text, dry, {t: np.float32(0.0) for t in level})

        def level_zero():
            return (yield np.float32(0.0)) if at_least else (yield from self._is_penalty(np.float32(0.0)))

        for t, zero in self._settle(text, dry, {t: level_zero() for t in level}).items():
            if zero:
                pens[t] = np.float32(0.0)
            else:
                guesses[t] = []
        # every first guess's lower bound in one ask, then each upper bound (p_z == P_z, bit for bit), sent together
        first = {t: g[0] for t, g in guesses.items() if g}
        if len(first) > 1 and self._all_at_least(text, dry, first):
            pens.update({t: first[t] for t, chosen in self._chosen(text, dry, first).items() if chosen})
        rest = [t for t in guesses if t not in pens]  # the rest: a guess confirmed, else the bisection, side by side
        if rest:
            family = _family(float(p["multiplier"]), base, int(p["allowed_length"]), len(hist))
            pens.update(self._settle(text, dry, {t: self._penalty(guesses[t], family, initial[t]) for t in rest}))
        out = []
        for t, _ in req["candidates"]:
            with np.errstate(over="ignore", invalid="ignore"):
                out.append(float(np.float32(initial[t] - pens[t])))
        return out, bool(req["sorted"])


def main(cached: bool = False) -> int:
    from .serve import answers_stream  # on use: the adapter's start-up
    out = answers_stream()
    adapter = Adapter(CACHE_N if cached else 0)
    hello = {"engine": "mistral.rs-cached" if cached else "mistral.rs",
             "version": version("mistralrs") + (f" (prefix_cache_n {CACHE_N})" if cached else ""), "deviations": [],
             "sources": SOURCES_CACHED if cached else SOURCES, "vocabularies": ["symbols"],
             "initial_logits": True, "candidate_arrays": True, "sorted_flag": False, "batch": 16,
             "instance_per_case": cached}
    return serve(hello, adapter.run, out, adapter.sequence)


if __name__ == "__main__":
    sys.exit(main())
