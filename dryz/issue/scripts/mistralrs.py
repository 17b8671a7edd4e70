"""mistral.rs's part of a reproduction script: a chat request as a user sends it (ChatCompletionRequest with
dry_multiplier, dry_base, dry_allowed_length, dry_sequence_breakers) to a Runner over a tiny llama model whose
every logit is 0, written here with the gguf package (the 64 one-character tokens, then </s>); each candidate's
penalty read back exactly through the public API: with every other token masked by logit_bias, the token is chosen
over </s> exactly when its bias reaches its penalty, so the least float32 bias that chooses it is the penalty
(a bisection over the float32 order)."""

NAME = "mistral.rs"
INSTALL = ("pip install mistralrs==0.9.5 gguf",)
HOW = ("It sends one chat request with the witness's DRY parameters to a mistralrs Runner over a tiny llama model "
       "whose every logit is 0 (written here with gguf: the 64 one-character tokens, then </s>), and reads each "
       "candidate's penalty exactly through the public API: with every other token masked by logit_bias, the "
       "token is chosen over </s> exactly when its bias reaches its penalty, so a bisection over the float32 "
       "values finds the penalty bit for bit. Where requests came before the witness's on the same instance, every ask goes "
       "to a fresh Runner (its prefix cache as the subject ran it) that answered them first.")
ISOLATE = False
REQUESTS = True  # a request sequence: each ask on a fresh Runner that answered the earlier requests first
IMPORTS = """
import tempfile
from pathlib import Path

import numpy as np
"""

BODY = '''
EOS = len(SYMBOLS)  # </s>
TEMPLATE = "{{ messages[0]['content'] }}"


def write_model(d):
    """A llama model of one block whose every weight is 0 (norms 1): every logit is exactly 0."""
    import gguf
    path = Path(d) / "tiny.gguf"
    n, embd, ff = len(SYMBOLS) + 3, 16, 32
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(4096)
    w.add_embedding_length(embd)
    w.add_block_count(1)
    w.add_feed_forward_length(ff)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_rope_dimension_count(embd // 2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(list(SYMBOLS) + ["</s>", "\\u0120", "\\u0120\\u0120"])
    w.add_token_types([gguf.TokenType.NORMAL] * len(SYMBOLS) + [gguf.TokenType.CONTROL, gguf.TokenType.NORMAL,
                                                                 gguf.TokenType.NORMAL])
    w.add_token_merges(["\\u0120 \\u0120"])
    w.add_eos_token_id(EOS)
    zeros = lambda *shape: np.zeros(shape, dtype=np.float32)  # noqa: E731
    w.add_tensor("token_embd.weight", zeros(n, embd))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(embd, dtype=np.float32))
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        w.add_tensor(f"blk.0.{name}.weight", zeros(embd, embd))
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(embd, dtype=np.float32))
    w.add_tensor("blk.0.ffn_gate.weight", zeros(ff, embd))
    w.add_tensor("blk.0.ffn_up.weight", zeros(ff, embd))
    w.add_tensor("blk.0.ffn_down.weight", zeros(embd, ff))
    w.add_tensor("output_norm.weight", np.ones(embd, dtype=np.float32))
    w.add_tensor("output.weight", zeros(n, embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    (Path(d) / "raw.jinja").write_text(TEMPLATE)
    return path


def _order(x):
    """A float32 as an integer in the floats' order."""
    i = int(np.array([x], dtype=np.float32).view(np.int32)[0])
    return i if i >= 0 else -(i & 0x7FFFFFFF)


def _float(k):
    i = k if k >= 0 else (-k) | -0x80000000
    return float(np.array([i], dtype=np.int32).view(np.float32)[0])


class Engine:
    def __init__(self, d):
        from mistralrs import ChatCompletionRequest, Runner, Which
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        write_model(d)
        self.Request = ChatCompletionRequest
        self.new = lambda: Runner(which=Which.GGUF(tok_model_id=None, quantized_model_id=str(d),  # noqa: E731
                                                   quantized_filename="tiny.gguf"),
                                  chat_template=str(Path(d) / "raw.jinja"), prefix_cache_n=PREFIX_CACHE_N)
        self.runner = None if EARLIER else self.new()  # (with earlier requests every ask has a Runner of its own)
        self.text = "".join(SYMBOLS[t] for t in HISTORY)
        self.dry = dict(dry_multiplier=MULTIPLIER, dry_base=BASE, dry_allowed_length=ALLOWED_LENGTH,
                        dry_sequence_breakers=list(BREAKERS))

    def instance(self):
        """The Runner an ask goes to: with earlier requests, a fresh one that answered them first (each ask then
        meets the instance in the state the witness's request met it: its prefix cache holds only theirs)."""
        if not EARLIER:
            return self.runner
        runner = self.new()
        for e in EARLIER:
            runner.send_chat_completion_request(self.Request(
                messages=[{"role": "user", "content": "".join(SYMBOLS[t] for t in e["history"])}], model="m",
                max_tokens=1, temperature=0, dry_multiplier=e["multiplier"], dry_base=e["base"],
                dry_allowed_length=e["allowed_length"], dry_sequence_breakers=list(e["breakers"])))
        return runner

    def chosen(self, token, bias):
        """Greedy choice between the token (biased) and </s>, every other token masked: the token wins iff its
        bias reaches its penalty."""
        masks = {i: float("-inf") for i in range(len(SYMBOLS) + 3)}
        masks[EOS], masks[token] = 0.0, float(bias)
        req = self.Request(messages=[{"role": "user", "content": self.text}], model="m", max_tokens=1,
                           temperature=0, logprobs=True, top_logprobs=2, logit_bias=masks, **self.dry)
        return self.instance().send_chat_completion_request(req).choices[0].logprobs.content[0].token == SYMBOLS[token]

    def penalty(self, token, guesses=()):
        """The token's penalty, exactly: the least float32 bias that chooses it (inf: none does); a guess is
        confirmed with two requests (chosen at it, not at the float32 below it), else a bisection finds it."""
        for g in guesses:
            if math.isfinite(g) and self.chosen(token, g) and not self.chosen(token, _float(_order(g) - 1)):
                return g
        top = _order(3.4028235e38)
        if not self.chosen(token, _float(top)):
            return math.inf
        lo, hi = -top - 1, top  # not chosen below every float32, chosen at the largest
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.chosen(token, _float(mid)):
                hi = mid
            else:
                lo = mid
        return _float(hi)


def answer():
    with tempfile.TemporaryDirectory() as d:
        try:
            e = Engine(d)
            out = []
            for i, (t, before) in enumerate(CANDIDATES):
                with np.errstate(over="ignore", invalid="ignore"):  # the penalties llama.cpp and the report give
                    guesses = [float(np.float32(before) - np.float32(a[1][i])) for a in (LLAMA_CPP, REPORTED)
                               if a[0] == "logits"]
                    out.append(float(np.float32(np.float32(before) - np.float32(e.penalty(t, guesses)))))
        except (OverflowError, TypeError, ValueError) as err:  # the binding refuses the value (a usize, ...)
            return ("refused", f"{type(err).__name__}: {err}")
        return ("logits", out)
'''


def setup(w) -> str:
    """The prefix cache as the subject ran it (engine:mistralrs-cached: mistral.rs's default, 16) and the requests
    sent before (scripts.constants writes EARLIER for a request sequence)."""
    import re
    m = re.search(r"prefix_cache_n (\d+)", str(w.identity.get("engine_version") or ""))
    return (f"PREFIX_CACHE_N = {int(m.group(1)) if m else 0}  # Runner(prefix_cache_n=...): 0 is no prefix cache\n"
            + ("" if w.requests is not None else "EARLIER = []\n"))


def refuses(w) -> str | None:
    if w.trace is not None:
        return "a trace: a mistral.rs request has no reset or clone"
    c = w.case
    if not c.history:
        return "an empty history: a chat request needs a message"
    if c.penalty_last_n <= 0 or c.penalty_last_n < len(c.history):
        return "a window that cuts the history: mistral.rs's DRY reads the whole context"
    return None
