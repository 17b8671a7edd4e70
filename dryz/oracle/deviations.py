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
alone, and all of them together when more than one is declared. `refuses(case, declared)` names the declared
refusal that covers a case, if any.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from ..errors import DryzError, did_you_mean

# name pattern -> meaning (the glossary and the adapter guide read this)
MODELLED = {
    "single-token-breakers": "only single-token breakers restart a repeat",
    "breaker-form:last-token": "each breaker is the last token of 'a' + the string",
    "window-zero:unlimited": "penalty_last_n 0 is the whole history",
    "window-negative:unlimited": "a negative penalty_last_n is the whole history",
    "match-cap:N": "a repeat counts at most N tokens",
    "occurrence-cap:N": "only the N latest occurrences of the last token are extended",
    "early-exit:N": "the scan stops after the first repeat of N tokens or more",
    "base-below-one:applied": "base < 1 penalizes",
    "base-below-one:refused": "base <= 1 is refused",
    "window-negative:refused": "a negative penalty_last_n is refused",
    "allowed-negative:refused": "a negative allowed_length is refused",
    "multiplier-negative:refused": "a negative multiplier is refused",
    "breakers-not-exempt": "single-token breakers are penalized",
    "no-clamp": "no exponent clamp in Step 4",
    "finite-penalty:saturate": "Step 4 saturates a finite logit at -FLT_MAX (+FLT_MAX) instead of overflowing",
    "base-below-one:off": "llama-server passes dry_base < 1 to the library (DRY off) instead of 1.75",
    "breaker-text:printed": "restart sequences from the tokens' printed pieces, tails tokenized as a continuation",
}
# A fix's model -> the finding classes it fixes (declarable on a llama.cpp subject: --declare, the gate's
# --expect-change); REQUEST_LAYER: the ones that change a request layer's model, not the library's.
FIXES = {"finite-penalty:saturate": ("promise-finite-penalty",), "base-below-one:off": ("served-base-replaced",),
         "breaker-text:printed": ("promise-breaker-in-token", "promise-breaker-across-tokens",
                                  "promise-breaker-phantom")}
REQUEST_LAYER = ("base-below-one:off",)
KNOWN = tuple(MODELLED)  # (kept for the adapters that read it)
_FLAGS = ("single-token-breakers", "breaker-form:last-token", "window-zero:unlimited", "window-negative:unlimited",
          "base-below-one:applied", "breakers-not-exempt", "no-clamp", *FIXES)
# A refusal: the case a declaration covers (its parameters), the engine refusing it instead of running.
REFUSALS = {"base-below-one:refused": lambda c: c.base <= 1.0,
            "window-negative:refused": lambda c: c.penalty_last_n < 0,
            "allowed-negative:refused": lambda c: c.allowed_length < 0,
            "multiplier-negative:refused": lambda c: c.multiplier < 0}


class DeviationError(ValueError, DryzError):
    """A declared deviation dryz does not model (one-line reason)."""


def parse(name: str) -> tuple[str, int | None]:
    """(deviation, its number or None); DeviationError for one dryz does not model."""
    if name in _FLAGS or name in REFUSALS:
        return name, None
    m = re.fullmatch(r"(match-cap|max-ngram|occurrence-cap|early-exit):(\d+)", name)
    if m and int(m.group(2)) >= 1:
        return ("match-cap" if m.group(1) == "max-ngram" else m.group(1)), int(m.group(2))
    raise DeviationError(f"unknown deviation {name!r} (dryz models: {', '.join(MODELLED)})")


def apply(cfg, name: str, breakers=(), tokenize=None, printed=None):
    """The configuration with one declared deviation (breakers and tokenize: the case's breaker strings and the
    vocabulary's text -> ids, for breaker-form:last-token; printed: the restart sequences of breaker-text:printed
    over a real vocabulary, which the caller builds: None on the symbol vocabulary, where pieces and texts are the
    same and there is no space prefix, so the fix changes nothing)."""
    kind, n = parse(name)
    if kind == "breaker-text:printed":
        return replace(cfg, variants=()) if printed is None else replace(cfg, seqs=printed, variants=())
    if kind == "single-token-breakers":
        return replace(cfg, seqs=tuple((h, t) for h, t in cfg.seqs if not t), variants=())
    if kind == "breaker-form:last-token":
        if tokenize is None:
            raise DeviationError("breaker-form:last-token needs the vocabulary's tokenizer")
        heads = sorted({tokenize("a" + b)[-1] for b in breakers if b})
        return replace(cfg, seqs=tuple((h, ()) for h in heads), variants=())
    if kind == "match-cap":
        return replace(cfg, match_cap=n if cfg.match_cap is None else min(n, cfg.match_cap), variants=())
    if kind in ("occurrence-cap", "early-exit"):
        occ, early = getattr(cfg.lengths, "limits", (None, None))
        occ, early = (n, early) if kind == "occurrence-cap" else (occ, n)
        return replace(cfg, lengths=limited_lengths(occ, early), variants=())
    if kind == "window-zero:unlimited":
        return replace(cfg, window_zero_unlimited=True, variants=())
    if kind == "window-negative:unlimited":
        return replace(cfg, window_negative_unlimited=True, variants=())
    if kind == "base-below-one:applied":
        return replace(cfg, base_below_one_applied=True, variants=())
    if kind == "no-clamp":
        return replace(cfg, clamp=False, variants=())
    if kind == "finite-penalty:saturate":
        return replace(cfg, saturate=True, variants=())
    if kind in REFUSALS or kind in REQUEST_LAYER:  # the library's output model is unchanged (refuses() judges a
        return replace(cfg, variants=())            # refusal; dryz.judge a request layer's fix)
    return replace(cfg, exempt_breakers=False, variants=())


def variants(cfg, declared, breakers=(), tokenize=None, printed=None) -> tuple:
    """(class, Config) for each declared deviation that changes the output model (a refusal does not: refuses()
    judges it), and for all of them together."""
    declared = tuple(d for d in declared if d not in REFUSALS and d not in REQUEST_LAYER)
    out = [(f"declared-{d}", apply(cfg, d, breakers, tokenize, printed)) for d in declared]
    if len(declared) > 1:
        both = cfg
        for d in declared:
            both = apply(both, d, breakers, tokenize, printed)
        out.append(("declared-" + "+".join(declared), both))
    return tuple(out)


def fix_for(klass: str) -> str | None:
    """The fix dryz models for a finding class (FIXES), or None."""
    return next((d for d, k in FIXES.items() if klass in k), None)


def fixed_by(klass: str) -> tuple:
    """The finding classes a `declared-<fix>` class fixes (`declared-<fix>+<fix>`: both's); () for any other
    class."""
    if not klass.startswith("declared-"):
        return ()
    return tuple(k for name in klass.removeprefix("declared-").split("+") for k in FIXES.get(name, ()))


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


# -- a match-length model with occurrence limits ------------------------------------------------------------------


def limited_lengths(occurrence_cap: int | None, early_exit: int | None):
    """M[n, c] as llama.cpp defines it (the longest repeat a candidate would extend), but looking only at the
    occurrence_cap latest occurrences of the window's last token, latest first, and stopping after the first
    whose repeat reaches early_exit tokens. A position j of the window extends a repeat when the token before it
    equals the last token: its repeat is the backward match of window[:j] against the window's suffix."""

    def lengths(W: np.ndarray, cands: np.ndarray) -> np.ndarray:
        W = np.asarray(W)
        N, w = W.shape
        c = [int(x) for x in np.asarray(cands).tolist()]
        at = {z: i for i, z in enumerate(c)}
        M = np.zeros((N, len(c)), dtype=np.int64)
        for r in range(N):
            row = [int(x) for x in W[r].tolist() if int(x) >= 0]  # (a ragged batch's PAD dropped)
            n = len(row)
            seen = 0
            for j in range(n - 1, 0, -1):  # the token at j follows the occurrence at j - 1
                if row[j - 1] != row[-1]:
                    continue
                m = 0
                while m < j and row[j - 1 - m] == row[n - 1 - m]:
                    m += 1
                i = at.get(row[j])
                if i is not None:
                    M[r, i] = max(M[r, i], m)
                seen += 1
                if (occurrence_cap is not None and seen >= occurrence_cap) or \
                        (early_exit is not None and m >= early_exit):
                    break
        return M
    lengths.limits = (occurrence_cap, early_exit)
    return lengths
