"""Other engines' documented deviations from llama.cpp's DRY, as parameterised models (pure: no subject runs here).

An engine adapter (`--subject cmd:...` or `engine:NAME`) declares the deviations its engine's own user
documentation states, each with where it says so (the citation; a declaration without one is refused). dryz still
judges it against llama.cpp's semantics: an output that differs from llama.cpp's model but equals, bit for bit, the
model with a declared deviation applied is class `declared-<name>` (listed, not a finding); any other difference is
a mismatch. Each deviation is a change to the configuration the shipped model (dryz.oracle.shipped) runs:

  breaker form
    single-token-breakers       only breakers that are one token restart a repeat: every restart sequence with a
                                tail is dropped (the engine takes breakers as token ids)
    breaker-form:last-token     each breaker string is one token: the last token of "a" + the string, tokenized
                                (text-generation-webui's, mistral.rs's and Aphrodite's resolution)
  window
    window-zero:unlimited       penalty_last_n 0 means the whole history (llama.cpp: DRY off)
    window-negative:unlimited   a negative penalty_last_n means the whole history (llama.cpp: DRY off)
  match and occurrences
    match-cap:N                 a repeat counts at most N tokens: L = min(L, N) (alias max-ngram:N)
    occurrence-cap:N            only the N latest occurrences of the last token are extended into repeats
    early-exit:N                scanning the occurrences latest first, the scan stops after the first repeat of
                                N tokens or more
  parameters and arithmetic
    base-below-one:applied      base < 1 penalizes (multiplier * base^k; llama.cpp: DRY off)
  refusals (the engine answers a refusal instead of running; llama.cpp runs the case)
    base-below-one:refused      base <= 1 is refused
    window-negative:refused     a negative penalty_last_n is refused
    allowed-negative:refused    a negative allowed_length is refused
    multiplier-negative:refused a negative multiplier is refused
    breakers-not-exempt         a single-token breaker is penalized like any token
    no-clamp                    Step 4 does not clamp the exponent: a penalty past the float range is inf
  requests on one instance (what an engine's instance carries from one request to the next)
    prefix-cache:suffix         a request whose prompt shares a prefix with an earlier request's prompt on the same
                                instance is read by DRY from the end of the longest such shared prefix on (the
                                unshared suffix); the whole prompt when nothing or everything is shared (mistral.rs's
                                prefix cache: the cached tokens are not in DRY's context)

A fix to a llama.cpp finding is declared the same way, by whoever built the fixed subject (`dryz --declare NAME`,
or the gate from `--expect-change CLASS`): a libllama, the binding or a llama-server that keeps a promise the
shipped code breaks, or a request layer that keeps the library's semantics (FIXES: the model, and the finding it
fixes). The fixed output is then `declared-<name>` where it equals that model, and anything else still differs:

    finite-penalty:saturate     Step 4 saturates: a finite logit the penalty would push past the float range
                                becomes -FLT_MAX (+FLT_MAX for a negative penalty); fixes promise-finite-penalty
    base-below-one:off          llama-server passes dry_base < 1 to the library, which switches DRY off (its
                                request layer as shipped replaces it with 1.75); fixes served-base-replaced
    breaker-text:printed        init_dry builds the restart sequences from each token's piece as printed (not
                                detokenize({id}), which drops a SentencePiece token's leading space) and, on a
                                vocabulary with a space prefix, tokenizes a breaker's tail as a continuation
                                (restarts_vocab.continuation_tokenizer); fixes promise-breaker-in-token,
                                -across-tokens and -phantom where the printed text shows them

`variants(cfg, declared, breakers, tokenize)` gives the (class, Config) pairs check_batch tries: each deviation
alone, and all of them together when more than one is declared (each only where it changes the configuration at
hand). `refuses(case, declared)` names the declared refusal that covers a case, if any.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

from ..errors import DryzError, did_you_mean
from .shipped import effective_last_n

@dataclass(frozen=True)
class Model:
    """One deviation from llama.cpp's DRY, as a change to the configuration the models run (shipped.Config; the
    composed model evaluates the scan's own rules). `name` is its pattern (N: a whole number >= 1, the fit tries
    `numbers`); `kind`: output (it changes what DRY leaves), refusal (the engine refuses such a case: REFUSALS),
    raise (the engine raises on such a case), fix (a fix of a llama.cpp finding: FIXES), layer (a fix of llama-server's
    request layer: REQUEST_LAYER), vocab (acts only on a real vocabulary's breakers), context (it changes the history
    DRY reads, from the requests sent before to the same instance: CONTEXTS)."""
    name: str
    meaning: str
    kind: str = "output"
    numbers: tuple = ()


REGISTRY = (
    Model("single-token-breakers", "only single-token breakers restart a repeat"),
    Model("breaker-form:last-token", "each breaker is the last token of 'a' + the string"),
    Model("last-breaker:unchecked", "Step 1 does not look at the last token: a breaker there restarts nothing"),
    Model("breakers-not-exempt", "single-token breakers are penalized"),
    Model("window-zero:unlimited", "penalty_last_n 0 is the whole history"),
    Model("window-negative:unlimited", "a negative penalty_last_n is the whole history"),
    Model("window:one-wider", "the window holds penalty_last_n + 1 tokens"),
    Model("window-context:N", "every window is capped at a context of N tokens, penalty_last_n -1 is all N of them, "
          "and below -1 the process dies (the 8-argument init_dry with n_ctx_train = N)",
          numbers=(64, 128, 256, 512, 1024, 2048, 4096)),
    Model("match-cap:N", "a repeat counts at most N tokens", numbers=tuple(range(1, 65))),
    Model("suffix-cap:N", "a repeat of N tokens or more penalizes nothing (not a cap)", numbers=tuple(range(1, 33))),
    Model("occurrence-cap:N", "only the N latest occurrences of the last token are extended",
          numbers=tuple(range(1, 17))),
    Model("early-exit:N", "the scan stops after the first repeat of N tokens or more", numbers=tuple(range(1, 17))),
    Model("suffix:longest-only", "only the tokens that followed the longest repeated suffix are penalized, each at "
          "that suffix's length"),
    Model("last-follower:unseen", "a repeat the last token continued is not seen (the last token follows nothing)"),
    Model("repeat-min:N", "a repeat shorter than N tokens is never penalized, whatever allowed_length",
          numbers=(1, 2, 3)),
    Model("threshold:none", "no L >= allowed_length test: a shorter repeat is penalized with a negative exponent"),
    Model("exit:at-allowed", "the scan exits when min(rep_limit, window - 1) <= allowed_length (llama.cpp: "
          "rep_limit < allowed_length)"),
    Model("exit:tail-at-allowed", "the scan exits when rep_limit - 1 <= allowed_length: the tail it measures stops "
          "one token short of a breaker (llama.cpp: rep_limit < allowed_length)"),
    Model("base-below-one:applied", "base < 1 penalizes"),
    Model("multiplier-negative:off", "a negative multiplier switches DRY off"),
    Model("no-clamp", "no exponent clamp in Step 4"),
    Model("arithmetic:float32", "the penalty is multiplier * powf(base, exponent) in float32: two roundings"),
    Model("penalty:times-count", "the penalty is multiplied by how many times the token followed the repeat"),
    Model("prefix-cache:suffix", "a request whose prompt shares a prefix with an earlier request's on the same "
          "instance is read by DRY on the unshared suffix only (the whole prompt when nothing or everything is "
          "shared)", "context"),
    Model("raises-window:N", "a window of 1..N tokens raises instead of answering", "raise", tuple(range(1, 33))),
    Model("raises-overflow", "a penalty whose power overflows a double raises instead of answering (Python's float "
          "power)", "raise"),
    Model("raises-history:N", "a history of at most N tokens raises instead of answering (with a window)", "raise",
          (1, 2)),
    Model("base-below-one:refused", "base <= 1 is refused", "refusal"),
    Model("window-negative:refused", "a negative penalty_last_n is refused", "refusal"),
    Model("allowed-negative:refused", "a negative allowed_length is refused", "refusal"),
    Model("multiplier-negative:refused", "a negative multiplier is refused", "refusal"),
    Model("finite-penalty:saturate", "Step 4 saturates a finite logit at -FLT_MAX (+FLT_MAX) instead of "
          "overflowing", "fix"),
    Model("base-below-one:off", "llama-server passes dry_base < 1 to the library (DRY off) instead of 1.75", "layer"),
    Model("breaker-text:printed", "restart sequences from the tokens' printed pieces, tails tokenized as a "
          "continuation", "vocab"),
)
BY_PATTERN = {m.name: m for m in REGISTRY}
# name pattern -> meaning (the glossary and the adapter guide read this)
MODELLED = {m.name: m.meaning for m in REGISTRY}
# A fix's model -> the finding classes it fixes (declarable on a llama.cpp subject: --declare, the gate's
# --expect-change); REQUEST_LAYER: the ones that change a request layer's model, not the library's.
FIXES = {"finite-penalty:saturate": ("promise-finite-penalty",), "base-below-one:off": ("served-base-replaced",),
         "breaker-text:printed": ("promise-breaker-in-token", "promise-breaker-across-tokens",
                                  "promise-breaker-phantom")}
REQUEST_LAYER = ("base-below-one:off",)
KNOWN = tuple(MODELLED)  # (kept for the adapters that read it)
_NUMBERED = tuple(m.name[:-2] for m in REGISTRY if m.name.endswith(":N"))
# A refusal: the case a declaration covers (its parameters), the engine refusing it instead of running.
REFUSALS = {"base-below-one:refused": lambda c: c.base <= 1.0,
            "window-negative:refused": lambda c: c.penalty_last_n < 0,
            "allowed-negative:refused": lambda c: c.allowed_length < 0,
            "multiplier-negative:refused": lambda c: c.multiplier < 0}
# A configuration field each flag model sets (the others: apply below).
_SETS = {"window-zero:unlimited": {"window_zero_unlimited": True},
         "window-negative:unlimited": {"window_negative_unlimited": True},
         "window:one-wider": {"window_extra": 1},
         "base-below-one:applied": {"base_below_one_applied": True},
         "breakers-not-exempt": {"exempt_breakers": False},
         "no-clamp": {"clamp": False},
         "finite-penalty:saturate": {"saturate": True},
         "last-breaker:unchecked": {"last_breaker_checked": False},
         "suffix:longest-only": {"longest_only": True},
         "last-follower:unseen": {"last_follower": False},
         "threshold:none": {"threshold": False},
         "exit:at-allowed": {"exit_rule": "window"},
         "exit:tail-at-allowed": {"exit_rule": "tail"},
         "multiplier-negative:off": {"multiplier_negative_off": True},
         "arithmetic:float32": {"arithmetic": "float32"},
         "penalty:times-count": {"times_count": True},
         "raises-overflow": {"overflow_raises": True}}
# A numbered model's field (N: its number); a raise model's (exception-free) condition.
_NUMBER_SETS = {"match-cap": "match_cap", "suffix-cap": "suffix_cap", "occurrence-cap": "occurrence_cap",
                "early-exit": "early_exit", "repeat-min": "repeat_min"}
_RAISES = {"raises-window": "window-at-most", "raises-history": "short-history"}


def _suffix_after_cache(history: tuple, earlier: tuple) -> tuple:
    """prefix-cache:suffix: m = the longest prefix the prompt shares with an earlier prompt; DRY reads history[m:]
    when 0 < m < len(history), else the whole history."""
    m = max((_shared(history, q) for q in earlier), default=0)
    return tuple(history[m:]) if 0 < m < len(history) else tuple(history)


def _shared(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


# A context model: (the request's history, the earlier requests' histories) -> the history DRY reads.
CONTEXTS = {"prefix-cache:suffix": _suffix_after_cache}


def context(names, history, earlier=()) -> tuple:
    """The history DRY reads for a request sent after the prompts `earlier` to the same instance, under the
    context models among `names` (the history itself without one, or with no earlier request)."""
    out = tuple(history)
    if earlier:
        for name in names:
            if name in CONTEXTS:
                out = CONTEXTS[name](out, tuple(tuple(q) for q in earlier))
    return out


def pattern(name: str) -> str:
    """A model's registry pattern: match-cap:12 -> match-cap:N."""
    kind, n = parse(name)
    return f"{kind}:N" if n is not None else kind


def instances(pattern_name: str) -> list[str]:
    """Every model the fit tries for a pattern: match-cap:N -> match-cap:1 ... match-cap:64."""
    m = BY_PATTERN[pattern_name]
    return [pattern_name.replace(":N", f":{n}") for n in m.numbers] if pattern_name.endswith(":N") else [pattern_name]


def meaning(name: str) -> str:
    """A model's meaning with its number (match-cap:12: "a repeat counts at most 12 tokens"), in the singular for
    one (repeat-min:1: "a repeat shorter than 1 token ...", occurrence-cap:1: "only the latest occurrence ... is")."""
    kind, n = parse(name)
    text = MODELLED.get(pattern(name), "")
    if n is None:
        return text
    text = re.sub(r"\bN\b", str(n), text)
    if n == 1:
        text = re.sub(r"\b(1\.\.)?1 tokens\b", "1 token", text).replace(
            "the 1 latest occurrences of the last token are", "the latest occurrence of the last token is")
    return text


class DeviationError(ValueError, DryzError):
    """A declared deviation dryz does not model (one-line reason)."""


@lru_cache(maxsize=4096)
def parse(name: str) -> tuple[str, int | None]:
    """(deviation, its number or None); DeviationError for one dryz does not model."""
    if name in BY_PATTERN and not name.endswith(":N"):
        return name, None
    m = re.fullmatch(r"(%s|max-ngram):(\d+)" % "|".join(map(re.escape, _NUMBERED)), name)
    if m and int(m.group(2)) >= 1:
        return ("match-cap" if m.group(1) == "max-ngram" else m.group(1)), int(m.group(2))
    raise DeviationError(f"unknown deviation {name!r} (dryz models: {', '.join(MODELLED)})")


def apply(cfg, name: str, breakers=(), tokenize=None, printed=None):
    """The configuration with one declared deviation (breakers and tokenize: the case's breaker strings and the
    vocabulary's text -> ids, for breaker-form:last-token; printed: the restart sequences of breaker-text:printed
    over a real vocabulary, which the caller builds: None on the symbol vocabulary, where pieces and texts are the
    same and there is no space prefix, so the fix changes nothing)."""
    return replace(cfg, **_changes(cfg, name, breakers, tokenize, printed), variants=())


class _Changed:
    """A configuration's fields as changed so far (compose's fold): the changes, else the configuration's own."""

    def __init__(self, cfg):
        self.cfg, self.changes = cfg, {}

    def __getattr__(self, field):
        changes = self.__dict__["changes"]
        return changes[field] if field in changes else getattr(self.__dict__["cfg"], field)


def _changes(cfg, name: str, breakers=(), tokenize=None, printed=None) -> dict:
    """The fields one deviation changes in a configuration (cfg: a Config, or compose's _Changed), as apply()
    documents."""
    kind, n = parse(name)
    if kind == "breaker-text:printed":
        return {} if printed is None else {"seqs": printed}
    if kind == "single-token-breakers":
        return {"seqs": tuple((h, t) for h, t in cfg.seqs if not t)}
    if kind == "breaker-form:last-token":
        if tokenize is None:
            raise DeviationError("breaker-form:last-token needs the vocabulary's tokenizer")
        heads = sorted({tokenize("a" + b)[-1] for b in breakers})  # ("": "a" itself, as the engines take it)
        return {"seqs": tuple((h, ()) for h in heads)}
    if kind in _SETS:
        return dict(_SETS[kind])
    if kind in _NUMBER_SETS:
        field = _NUMBER_SETS[kind]
        now = getattr(cfg, field)
        if field in ("match_cap", "suffix_cap", "occurrence_cap", "early_exit") and now is not None:
            n = min(n, now)
        elif field == "repeat_min":
            n = max(n, now)
        return {field: n}
    if kind == "window-context":  # the 8-argument init_dry's window (shipped.effective_last_n) with context n
        raw = cfg.penalty_last_n
        out = {"penalty_last_n": effective_last_n(raw, n, 8)}
        return {**out, "raises": cfg.raises + (("", "always", 0),)} if raw < -1 else out
    if kind in _RAISES:
        return {"raises": cfg.raises + (("", _RAISES[kind], n),)}
    # a refusal, a request layer's fix or a context model: the library's output model is unchanged (refuses()
    # judges a refusal; dryz.judge a request layer's fix; context() gives a context model's history)
    return {}


def compose(cfg, names, breakers=(), tokenize=None, printed=None):
    """The configuration with several deviations applied (in order; refusals change nothing here): apply() of
    each in turn, folded into one new Config (a fuzz job composes a fitted set of a dozen models per new
    configuration)."""
    cur = _Changed(cfg)
    for name in names:
        cur.changes.update(_changes(cur, name, breakers, tokenize, printed))
    return replace(cfg, **cur.changes, variants=())


def variants(cfg, declared, breakers=(), tokenize=None, printed=None) -> tuple:
    """(class, Config) for each declared deviation that changes the output model (a refusal does not: refuses()
    judges it), and for all of them together."""
    declared = tuple(d for d in declared if d not in REFUSALS and d not in REQUEST_LAYER)
    out = [(f"declared-{d}", apply(cfg, d, breakers, tokenize, printed)) for d in declared]
    if len(declared) > 1:
        out.append(("declared-" + "+".join(declared), compose(cfg, declared, breakers, tokenize, printed)))
    # A variant that is, for this configuration, the configuration itself or an earlier variant (Config.normal:
    # window-zero:unlimited where penalty_last_n is not 0, single-token-breakers with no breaker of two tokens, ...)
    # cannot explain what they did not: only the others are tried.
    seen, kept = [cfg.normal()], []
    for name, v in out:
        nv = v.normal()
        if nv not in seen:
            seen.append(nv)
            kept.append((name, v))
    return tuple(kept)


def fix_for(klass: str) -> str | None:
    """The fix dryz models for a finding class (FIXES), or None."""
    return next((d for d, k in FIXES.items() if klass in k), None)


def fixed_by(klass: str) -> tuple:
    """The finding classes a `declared-<fix>` class fixes (`declared-<fix>+<fix>`: both's); () for any other
    class."""
    if not klass.startswith("declared-"):
        return ()
    return tuple(k for name in klass.removeprefix("declared-").split("+") for k in FIXES.get(name, ()))


def is_declared_class(klass: str) -> bool:
    """Whether a class is `declared-<model>[+<model>...]` of models (or fixes) dryz has: what a subject's declared
    deviations give (an entry may expect it)."""
    if not klass.startswith("declared-"):
        return False
    for name in klass.removeprefix("declared-").split("+"):
        if name not in FIXES:
            try:
                parse(name)
            except DeviationError:
                return False
    return True


def replays_as(got: str, expect: str) -> bool:
    """A corpus entry that expects `expect` and is now `got` shows the fix the subject declares: got is
    declared-<fix> and expect the finding it fixes, or the fix is a request layer's and expect is agree (the layer
    then runs the case as the library does, which an entry recorded on a library expects)."""
    fixes = got.removeprefix("declared-").split("+") if got.startswith("declared-") else ()
    return expect in fixed_by(got) or (expect == "agree" and any(f in REQUEST_LAYER for f in fixes))


def check_fixes(names, request_layer: str = "") -> tuple:
    """The fixes a llama.cpp subject declares (--declare), checked: DeviationError (one line) for a name that is
    not a fix dryz models, or a request layer's fix on a subject without that layer."""
    names = tuple(dict.fromkeys(names))
    for n in names:
        if n not in FIXES:
            raise DeviationError(f"--declare {n!r}: a llama.cpp subject declares only a fix dryz models"
                                 f"{did_you_mean(n, FIXES)} ("
                                 + ", ".join(f"{d}: fixes {'/'.join(k)}" for d, k in FIXES.items())
                                 + "); another engine's deviations are its adapter's, with their citations")
        if n in REQUEST_LAYER and not request_layer:
            raise DeviationError(f"--declare {n}: a fix of llama-server's request layer (a server:PATH subject)")
    return names


def refuses(case, declared) -> str | None:
    """The class of the declared refusal that covers the case (the engine documents it refuses such parameters),
    or None."""
    return next((f"declared-{d}" for d in declared if d in REFUSALS and REFUSALS[d](case)), None)
