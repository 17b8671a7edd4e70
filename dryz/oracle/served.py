"""The served semantics: what llama-server (llama-cpp-python 0.3.36's vendored llama.cpp) makes of a /completion
request's DRY fields before it calls `llama_sampler_init_dry`. Pure: it runs no subject and no server.

Modelled from tools/server/server-schema.cpp (make_llama_cmpl_schema, field_num<T>::eval), server-common.cpp
(tokenize_input_prompts, format_error_response), server-context.cpp (launch_slot_with_task, init_sampler,
the empty-prompt path) and common/sampling.cpp (common_sampler_init), common/common.h (the defaults):

* `dry_multiplier` (field_num<float>, no limits): the JSON number converted to float (nlohmann get<float>:
  a double rounded to nearest, past FLT_MAX to inf) and clamped to [-FLT_MAX, FLT_MAX] (std::max/std::min with
  numeric_limits<float>::lowest()/max(): +inf becomes FLT_MAX).
* `dry_base` (custom handler): `v < 1.0f ? params_base.sampling.dry_base : v`, the server's own default
  (1.75, or its --dry-base). The library switches DRY off for base < 1; the server runs DRY with 1.75
  instead: served-base-replaced.
* `dry_allowed_length`, `dry_penalty_last_n` (field_num<int32_t>, hard limits 0..INT32_MAX): the number cast
  to int32 (nlohmann get<int32_t>: static_cast from int64 / uint64 wraps modulo 2^32, from a double truncates
  toward zero), then outside the limits HTTP 400 "Field 'NAME': Value must be between 0 <= value <=
  2147483647, but got V". The library takes any int32 (a negative window is 0, DRY off; -1 meant the context
  size before llama.cpp PR #26524): served-window-refused, served-allowed-refused.
* `dry_sequence_breakers` (custom handler): json_value(data, key, vector<string>{}) (a value of another type
  is logged and read as the empty default), and an empty list is HTTP 400 "Field 'dry_sequence_breakers':
  Error: dry_sequence_breakers must be a non-empty array of strings": the library's "no breakers" cannot be
  asked for (served-breakers-required). Absent (or null): the server's defaults "\\n", ":", "\\"", "*".
* `samplers`: names lower-cased and mapped (unknown names skipped with a warning); the chain built by
  common_sampler_init is logit_bias (user biases plus the vocabulary's suppressed tokens; only when there is
  any), the named samplers in order, then `dist` (softmax and a draw).
* The prompt: an array of token ids is taken as is (no BOS: tokenize_mixed adds special tokens only to string
  pieces); every prompt token is accepted into the fresh chain (init_sampler) before the one sample. An empty
  prompt samples nothing (the slot is released with an empty answer): served-empty-prompt.
* An absent DRY field takes the server's default (common.h: multiplier 0, base 1.75, allowed length 2,
  window 64, the four breakers above), not the library's.

`served_params(body)` gives what a request becomes: `Effective` (the library parameters init_dry receives and
the chain), `Refused` (the HTTP status and message predicted) or `NoSample`. `request_for(case)` is the request
a front-end sends for a Case; `served_outcome(case)` both, with `classes` naming each difference from the
library semantics as a `served-*` finding (CLASSES).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from . import softmax as sm
from ..case import Case

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
FLT_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]

# common/common.h, common_params_sampling: the server's defaults when the request leaves a field out.
SERVER_DEFAULTS = {"dry_multiplier": 0.0, "dry_base": 1.75, "dry_allowed_length": 2, "dry_penalty_last_n": 64,
                   "dry_sequence_breakers": ["\n", ":", "\"", "*"]}
DEFAULT_SAMPLERS = ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"]
SAMPLER_NAMES = {"dry", "top_k", "top_p", "top_n_sigma", "typ_p", "min_p", "temperature", "xtc", "infill",
                 "penalties", "adaptive_p", "top-k", "top-p", "top-n-sigma", "typ-p", "min-p", "adaptive-p",
                 "topk", "topp", "topnsigma", "typp", "minp", "adaptivep", "nucleus", "temp", "typ"}
_CANONICAL = {"top-k": "top_k", "topk": "top_k", "top-p": "top_p", "topp": "top_p", "nucleus": "top_p",
              "top-n-sigma": "top_n_sigma", "topnsigma": "top_n_sigma", "typ-p": "typ_p", "typp": "typ_p",
              "typ": "typ_p", "min-p": "min_p", "minp": "min_p", "temp": "temperature",
              "adaptive-p": "adaptive_p", "adaptivep": "adaptive_p"}

BREAKERS_MESSAGE = "Error: dry_sequence_breakers must be a non-empty array of strings"

# The served-* classes, in report order: each a documented difference between what a front-end asks for and
# what the library would do with the same numbers.
CLASSES = ("served-base-replaced", "served-window-refused", "served-allowed-refused", "served-breakers-required",
           "served-empty-prompt")
DESCRIPTIONS = {
    "served-base-replaced": "dry_base < 1 is replaced by the server's default (1.75): DRY runs where the "
                            "library switches it off",
    "served-window-refused": "a negative dry_penalty_last_n (-1: the context size before PR #26524, else DRY "
                             "off in the library) is HTTP 400",
    "served-allowed-refused": "a negative dry_allowed_length, which the library takes, is HTTP 400",
    "served-breakers-required": "an empty dry_sequence_breakers (the library's 'no breakers') is HTTP 400; "
                                "leaving it out means the four default breakers",
    "served-empty-prompt": "an empty prompt samples nothing: the server answers with no token and no "
                           "probabilities",
}


@dataclass(frozen=True)
class Effective:
    """What llama_sampler_init_dry receives, and the chain around it."""
    multiplier: float
    base: float
    allowed_length: int
    penalty_last_n: int
    breakers: tuple[str, ...]
    samplers: tuple[str, ...]  # canonical names in chain order (logit_bias before, dist after: not listed)
    prompt: tuple[int, ...]


@dataclass(frozen=True)
class Refused:
    status: int
    message: str

    def body(self) -> dict:
        """The error body format_error_response builds for an invalid request."""
        return {"error": {"code": self.status, "message": self.message, "type": "invalid_request_error"}}


@dataclass(frozen=True)
class NoSample:
    """The prompt was empty: the slot is released with an empty answer (no token, no probabilities)."""
    reason: str = "empty prompt"


class RequestError(ValueError):
    """A request body outside what this model covers (one-line reason)."""


def f32(x: float) -> float:
    """C's (float)x for a double: round to nearest, inf past the float range."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def _get_float(v) -> float:
    """nlohmann get<float>: the stored int64 / uint64 / double converted with static_cast<float>."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"type must be number, but is {_json_type(v)}")
    return f32(float(v))


def _get_int32(v) -> int:
    """nlohmann get<int32_t>: static_cast from the stored int64 / uint64 (wraps modulo 2^32) or double
    (truncation toward zero; out of range is undefined in C++, x86's cvttsd2si gives INT32_MIN)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"type must be number, but is {_json_type(v)}")
    if isinstance(v, float):
        if not math.isfinite(v) or not INT32_MIN <= math.trunc(v) <= INT32_MAX:
            return INT32_MIN
        return int(math.trunc(v))
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _json_type(v) -> str:
    return {bool: "boolean", str: "string", list: "array", dict: "object", type(None): "null"}.get(type(v), "number")


def _has(body: dict, key: str) -> bool:
    return key in body and body[key] is not None


def served_params(body: dict, defaults: dict | None = None, fixes=()) -> Effective | Refused | NoSample:
    """What llama-server makes of a /completion body's DRY fields and prompt (see the module docstring). fixes:
    the request layer's fixes a patched server declares (dryz.oracle.deviations.REQUEST_LAYER:
    base-below-one:off passes dry_base < 1 to the library)."""
    if not isinstance(body, dict):
        raise RequestError("a request body must be a JSON object")
    d = {**SERVER_DEFAULTS, **(defaults or {})}
    mult, base = float(d["dry_multiplier"]), float(d["dry_base"])
    allowed, window = int(d["dry_allowed_length"]), int(d["dry_penalty_last_n"])
    breakers = tuple(d["dry_sequence_breakers"])
    samplers = tuple(DEFAULT_SAMPLERS)
    # The schema evaluates fields in make_llama_cmpl_schema's order; the first that throws is the answer.
    try:
        if _has(body, "dry_multiplier"):
            mult = min(FLT_MAX, max(-FLT_MAX, _get_float(body["dry_multiplier"])))
        if _has(body, "dry_base"):
            v = _get_float(body["dry_base"])
            base = float(d["dry_base"]) if v < 1.0 and "base-below-one:off" not in fixes else v
        for name in ("dry_allowed_length", "dry_penalty_last_n"):
            if _has(body, name):
                v = _get_int32(body[name])
                if not 0 <= v <= INT32_MAX:
                    return Refused(400, f"Field '{name}': Value must be between 0 <= value <= {INT32_MAX}, "
                                        f"but got {v}")
                if name == "dry_allowed_length":
                    allowed = v
                else:
                    window = v
    except TypeError as e:
        raise RequestError(f"a DRY field of another type: {e}") from None
    if _has(body, "dry_sequence_breakers"):
        v = body["dry_sequence_breakers"]
        breakers = tuple(v) if isinstance(v, list) and all(isinstance(s, str) for s in v) else ()
        if not breakers:
            return Refused(400, f"Field 'dry_sequence_breakers': {BREAKERS_MESSAGE}")
    if _has(body, "samplers"):
        v = body["samplers"]
        if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
            raise RequestError("this model covers 'samplers' as an array of names only")
        samplers = tuple(_CANONICAL.get(s.lower(), s.lower()) for s in v if s.lower() in SAMPLER_NAMES)
    prompt = body.get("prompt")
    if not isinstance(prompt, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        raise RequestError("this model covers a prompt of token ids only")
    if not prompt:
        # `[]` is not an array of numbers: tokenize_input_prompts reads it as a list of zero prompts.
        return Refused(400, '"prompt" must not be empty')
    return Effective(mult, base, allowed, window, breakers, samplers, tuple(prompt))


# -- a Case as a request, and what it becomes -------------------------------------------------------------------

def request_number(x: float):
    """A float32 value as JSON: the shortest repr of the double, which the server's parser reads back exactly
    (then rounds to the same float32)."""
    return float(x)


def inert_breakers(texts, breakers=SERVER_DEFAULTS["dry_sequence_breakers"]) -> bool:
    """True when none of `breakers` can act on this vocabulary: get_overlapping_token_sequences only records a
    token whose text contains the breaker or a position where the breaker's first byte occurs, so a breaker
    whose first byte occurs in no token text (texts: every token's detokenized bytes) adds nothing."""
    firsts = {b.encode()[0] for b in breakers if b}
    return not any(f in t for t in texts for f in firsts) if texts is not None else False


def request_for(case, texts=None, extra: dict | None = None) -> dict:
    """The /completion body a front-end sends for a Case: the history as prompt token ids, the DRY fields as
    the case has them, samplers ["dry"], one token, the post-sampling probabilities of every candidate.
    Initial logits go into logit_bias by the subject (it adds them); `extra` is merged last.

    A Case without breakers cannot be asked for literally ([] is HTTP 400); when the server's default
    breakers are inert on the vocabulary (`texts`, every token's bytes; dryz's symbol vocabulary has none of
    their characters) the field is left out, which runs the library's "no breakers" exactly; otherwise the
    literal [] is sent (and refused: served-breakers-required)."""
    body = {"prompt": list(case.history), "n_predict": 1, "samplers": ["dry"], "post_sampling_probs": True,
            "dry_multiplier": request_number(case.multiplier), "dry_base": request_number(case.base),
            "dry_allowed_length": int(case.allowed_length), "dry_penalty_last_n": int(case.penalty_last_n)}
    if case.breakers:
        body["dry_sequence_breakers"] = list(case.breakers)
    elif not inert_breakers(texts):
        body["dry_sequence_breakers"] = []
    body.update(extra or {})
    return body


@dataclass(frozen=True)
class ServedOutcome:
    request: dict
    served: Effective | Refused | NoSample
    classes: tuple[str, ...] = field(default=())
    effective_case: object = None  # the Case the library would have to run to match (Effective only)


def served_outcome(case, texts=None, defaults: dict | None = None, fixes=()) -> ServedOutcome:
    """The request for a Case, what the server makes of it (with the request layer's declared fixes), and the
    served-* classes: each way the served outcome differs from the library's semantics for the Case."""
    body = request_for(case, texts)
    out = served_params(body, defaults, fixes)
    classes, eff = classify(case, body, out)
    return ServedOutcome(body, out, classes, eff)


# The request layers dryz models, by the name a subject's Capabilities.request_layer gives: what the layer makes
# of a Case (texts: the symbol vocabulary's token texts as bytes, None for a real vocabulary).
LAYERS = {"llama-server": served_outcome}


def classify(case, body: dict, out) -> tuple[tuple[str, ...], object]:
    """(served-* classes, the Case the library would have to run to match) for what the server made of a
    request `body` sent for `case`."""
    from dataclasses import replace
    if isinstance(out, Refused):
        for needle, klass in (("dry_penalty_last_n", "served-window-refused"),
                              ("dry_allowed_length", "served-allowed-refused"),
                              ("dry_sequence_breakers", "served-breakers-required"),
                              ('"prompt"', "served-empty-prompt")):
            if needle in out.message:
                return (klass,), None
        return (), None
    if isinstance(out, NoSample):
        return ("served-empty-prompt",), None
    eff = replace(case, multiplier=out.multiplier, base=out.base, allowed_length=out.allowed_length,
                  penalty_last_n=out.penalty_last_n,
                  breakers=case.breakers if "dry_sequence_breakers" not in body else out.breakers)
    return (("served-base-replaced",) if eff.base != case.base else ()), eff


def class_of(classes) -> str | None:
    """The first served-* class in report order, or None."""
    for c in CLASSES:
        if c in classes:
            return c
    return None


# -- corpus witnesses: a stored request and response --------------------------------------------------------

def witness_http(request: dict, status: int, body) -> dict:
    """The `http` field of a corpus entry: the request sent and the response received."""
    return {"endpoint": "/completion", "request": request, "response": {"status": status, "body": body}}


def validate_http(http, where: str) -> None:
    if not isinstance(http, dict) or not isinstance(http.get("request"), dict) \
            or not isinstance(http.get("response"), dict) or not isinstance(http["response"].get("status"), int) \
            or "body" not in http["response"]:
        raise ValueError(f"{where}: 'http' must be {{request: object, response: {{status: int, body}}}}")


def replay_http(case, http: dict, expected_logits, texts=None, fixes=()) -> tuple[str, str]:
    """A witness replayed without a server: the served model's prediction for the stored request, compared
    with the stored response (an error: its status and message; an answer: every reported probability, bit
    for bit, from the library model's logits for what the server runs, through the chain's softmax).
    expected_logits(case) -> the shipped model's logits for a case (the caller's: dryz.check.model_logits).
    (class, detail): the served-* class (or agree) when the response is what the model predicts, else
    mismatch. fixes: the request layer's fixes the server that answered declares: a response the layer as
    shipped does not explain but the layer with them does is declared-<fixes>."""
    (klass, detail), declared = with_layer_fixes(lambda f: _replay_http(case, http, expected_logits, f), fixes,
                                                 lambda r: r[0])
    return (declared, f"as the fix the server declares makes it: {detail}") if declared else (klass, detail)


def with_layer_fixes(judge, fixes, klass_of):
    """The one rule for a request layer's declared fixes: judge(()) is the answer judged against the layer as
    shipped; where that is not agree and the subject declares fixes, judge(fixes) against the layer with them,
    and if that is agree, it is the verdict, of class declared-<fixes>. (result, the declared class or None)."""
    first = judge(())
    if not fixes or klass_of(first) == "agree":
        return first, None
    fixed = judge(tuple(fixes))
    return (fixed, "declared-" + "+".join(fixes)) if klass_of(fixed) == "agree" else (first, None)


def _replay_http(case, http: dict, expected_logits, fixes) -> tuple[str, str]:
    req, resp = http["request"], http["response"]
    out = served_params(req, fixes=fixes)
    status, body = resp["status"], resp["body"]
    got_classes = classify(case, req, out)[0]
    if isinstance(out, Refused):
        msg = body.get("error", {}).get("message") if isinstance(body, dict) else None
        if (status, msg) != (out.status, out.message):
            return "mismatch", f"stored HTTP {status} {msg!r}; predicted {out.status} {out.message!r}"
        return class_of(got_classes) or "mismatch", f"HTTP {status}: {msg}"
    if status != 200:
        return "mismatch", f"stored HTTP {status}; predicted an answer ({out})"
    predicted = predicted_probs(case, out, req, expected_logits)
    try:
        top = body["completion_probabilities"][0]["top_probs"]
        stored = {int(e["id"]): float(e["prob"]) for e in top}
    except (KeyError, IndexError, TypeError, ValueError):
        return "mismatch", "the stored answer holds no post-sampling probabilities"
    want = {t: p for t, p in predicted.items() if p > 0.0}
    n = req.get("n_probs", 0)
    if len(want) > n:  # only the n_probs highest come back; compare those the answer holds
        want = {t: p for t, p in want.items() if t in stored}
    if stored != want:
        diff = sorted(t for t in set(stored) | set(want) if stored.get(t) != want.get(t))
        return "mismatch", f"probabilities of tokens {diff[:8]} differ from the model's"
    return class_of(got_classes) or "agree", f"{len(stored)} probabilities bit for bit"


def predicted_probs(case, eff: Effective, req: dict, expected_logits) -> dict:
    """Every token's post-sampling probability for a request the server answers: the library model's logits
    (expected_logits: the shipped model) for the case with the served parameters, over the whole vocabulary
    in id order (the case must name every token: alphabet = the vocabulary), through the chain after DRY
    (an optional power-of-two temperature, then dist) as dryz.oracle.softmax computes it."""
    from dataclasses import replace

    if set(eff.samplers) - {"dry", "temperature"} or req.get("logit_bias"):
        raise RequestError("predicted_probs covers samplers dry and temperature without logit_bias")
    run = replace(case, multiplier=eff.multiplier, base=eff.base, allowed_length=eff.allowed_length,
                  penalty_last_n=eff.penalty_last_n,
                  breakers=case.breakers if "dry_sequence_breakers" not in req else eff.breakers)
    if "dry" in eff.samplers:
        logits = [float(x) for x in expected_logits(run)]
    else:
        logits = list(run.logits)
    T = float(req.get("temperature", 1.0)) if "temperature" in eff.samplers else 1.0
    return dict(zip(run.ids, sm.probs(logits, T)))


def witness_cases(texts):
    """One minimal case per served-* class, with the literal request a front-end sends for it. Over the whole
    symbol vocabulary (alphabet 64; texts: its token texts), so an answer's probabilities can be predicted for
    every token. [(class, Case, request, note)]"""
    a = (0,)

    def req(c, **extra):
        body = request_for(c, texts)
        body.update({"n_probs": 64, **extra})
        return body

    base = Case(history=(0, 0), alphabet=64, penalty_last_n=64, base=0.5)
    window = Case(history=a, alphabet=64, penalty_last_n=-1)
    allowed = Case(history=a, alphabet=64, penalty_last_n=64, allowed_length=-1)
    breakers = Case(history=a, alphabet=64, penalty_last_n=64)
    empty = Case(history=(), alphabet=64, penalty_last_n=64)
    return [
        ("served-base-replaced", base, req(base),
         "dry_base 0.5: the library switches DRY off (base < 1); llama-server replaces the base with its default "
         "1.75 and penalises 'a' after 'aa' by 1 (multiplier 1 x 1.75^0)"),
        ("served-window-refused", window, req(window),
         "dry_penalty_last_n -1 (the context size before llama.cpp PR #26524; DRY off in 0.3.36's library) is "
         "HTTP 400 at the server"),
        ("served-allowed-refused", allowed, req(allowed),
         "dry_allowed_length -1, which the library takes, is HTTP 400 at the server"),
        ("served-breakers-required", breakers, req(breakers, dry_sequence_breakers=[]),
         "no breakers, asked for literally (an empty dry_sequence_breakers): HTTP 400; leaving the field out "
         "means the four default breakers"),
        ("served-empty-prompt", empty, req(empty),
         "an empty history: the server samples nothing (HTTP 400 for an empty prompt); the library applies DRY "
         "to no history and leaves every logit"),
    ]
