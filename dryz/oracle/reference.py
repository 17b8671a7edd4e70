"""The reference design's semantics as a second promise: text-generation-webui's DRYLogitsProcessor.

DRY was designed in text-generation-webui (Python, transformers). This module is an independent model of
that design, written from its description in issue 6 and pinned down against a stored copy of the original
(text-generation-webui, modules/sampler_hijack.py, class DRYLogitsProcessor and get_logits_processor_patch;
found with the code search, two stored copies agree). What the original does, in the details that matter:

  * range:   `if self._range > 0: input_ids = input_ids[:, -self._range:]` -- so a range of 0 *or any
             negative value* means the whole context (range = repetition_penalty_range).
  * enabled: get_logits_processor_patch appends the processor only `if dry_multiplier > 0.0`; dry_base has
             no check at all (any float, also < 1).
  * breakers: `{tokenizer.encode(f'a{s}')[-1] for s in sequence_breaker_strings}` -- every breaker string
             becomes ONE token, the last token of 'a' + s. In dryz's symbol vocabulary (one token per
             character, no merges) that is the string's last character; for the empty string it is 'a'.
  * if the last token is a breaker: `continue` (nothing is penalized).
  * matches: every idx in input_ids[:-1] holding the last token; the candidate is input_ids[idx + 1];
             `if next_token in sequence_breakers: continue` (breaker candidates are never penalized).
  * length:  `match_length = 1` (the last token itself), then `while match_length < 50`: compare
             input_ids[idx - match_length] with input_ids[-(match_length + 1)], stop at the start of the
             input, at a mismatch, or when that (suffix-side) token is a breaker. The cap is 50.
  * per candidate: the maximum match length over its matches.
  * penalty: `if match_length >= self.allowed_length: penalty = self.multiplier * self.base **
             (match_length - self.allowed_length)`; `scores_row[token] -= penalty`. Python float
             arithmetic (double; `**` raises OverflowError when the double overflows), then an in-place
             subtraction on a float32 tensor: torch casts the Python scalar to float32 and subtracts in
             float32 (assumed here; torch is not installed in this environment, so not run).

Reference assumptions where the original is silent for dryz Cases: the empty history (the original would
raise IndexError on input_ids[-1]) is modelled as "nothing penalized"; multiplier and base are the Case's
float32 values, read as Python floats (the webui passes doubles such as 0.8; dryz only uses float32 values,
so both designs see the same numbers).

On top of the reference, `divergences()` catalogues where the shipped library (llama_sampler_dry_apply,
llama-sampler.cpp) differs. It uses a bridge model R(S): the reference with the shipped behaviour switched
on for each feature in S (FEATURES below, each with its C++ source line). R(empty) is the reference;
R(all features) must reproduce the library's observed output bit for bit (else `ref-unexplained`, a finding
about this bridge or the library). A class is named when the library differs from the reference and
switching that one feature back to the reference changes the shipped output (leave-one-out); when no single
feature is necessary (two features each suffice), every feature that alone changes the reference is named.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..case import Case
from ..symbols import SYMBOLS
from .shipped import clamped_exponent, penalty_at, rep_limits

MATCH_CAP = 50  # `while match_length < 50` in DRYLogitsProcessor

# Features: where the shipped library departs from the reference, with the C++ that explains each.
FEATURES = {
    # llama_sampler_init_dry: dry_enabled = (dry_multiplier != 0.0f && ...); the webui: dry_multiplier > 0.0.
    "gate-multiplier": "llama-sampler.cpp llama_sampler_init_dry: `dry_enabled = (dry_multiplier != 0.0f && "
                       "dry_base >= 1.0f && dry_penalty_last_n != 0)` -- a negative multiplier is enabled",
    # ... && dry_base >= 1.0f ...; the webui has no check on base.
    "gate-base": "llama_sampler_init_dry: `dry_base >= 1.0f` in dry_enabled (and apply: `dry_base < 1.0f` "
                 "returns)",
    # dry_penalty_last_n = std::max(dry_penalty_last_n, 0); 0 disables; the webui: range <= 0 = whole context.
    "window": "llama_sampler_init_dry: `dry_penalty_last_n = std::max(dry_penalty_last_n, 0)` then "
              "`dry_penalty_last_n != 0` in dry_enabled -- 0 and negative disable DRY",
    # get_overlapping_token_sequences: a multi-character string is a head + tail restart sequence.
    "breaker-multi": "llama_sampler_init_dry -> get_overlapping_token_sequences: a string longer than one "
                     "token is a head token plus a tail (a restart sequence), not one breaker token",
    # llama_sampler_init_dry: `if (... std::strlen(seq_breakers[i]) == 0) { ... continue; }`.
    "breaker-empty": "llama_sampler_init_dry: `skipping null or empty DRY sequence breaker` (continue)",
    # Step 3 scans every position, `if (repeat_len >= ctx->dry_allowed_length)`, including repeat_len 0.
    "structure": "llama_sampler_dry_apply Step 3: `if (repeat_len >= ctx->dry_allowed_length)` over every "
                 "position of dry_repeat_count (also repeat_len == 0); Step 1 has no 'last token is a "
                 "breaker' exit, only `if (rep_limit < ctx->dry_allowed_length) return`",
    # No cap on the match length in Step 2 (only rep_limit); the webui caps at 50.
    "cap-50": "llama_sampler_dry_apply Step 2: `dry_repeat_count[last - k] = std::min(n, rep_limit)` -- no "
              "cap at 50; the length only ends at the window start or rep_limit",
    # Step 4: repeat_exp clamped to max_exponent; the webui: Python float pow, no clamp.
    "clamp": "llama_sampler_dry_apply Step 4: `if (max_exponent > 0 && repeat_exp > max_exponent) "
             "repeat_exp = max_exponent;` with `max_exponent = FLOAT_MAX_LOG / std::log(ctx->dry_base)`",
}
ALL = frozenset(FEATURES)
CLASSES = ("ref-multiplier-negative", "ref-base-below-1", "ref-penalty-last-n-0", "ref-penalty-last-n-negative",
           "ref-multi-char-breaker", "ref-empty-breaker", "ref-allowed-length-0", "ref-allowed-length-negative",
           "ref-match-cap-50", "ref-exponent-clamp", "ref-pow-overflow", "ref-window", "ref-structure",
           "ref-unexplained")


def class_name(feature: str, case: Case, ref_error: str | None) -> str:
    if feature == "gate-multiplier":
        return "ref-multiplier-negative"
    if feature == "gate-base":
        return "ref-base-below-1"
    if feature == "window":
        if case.penalty_last_n > 0:
            return "ref-window"  # not expected: a positive window is the same in both designs
        return "ref-penalty-last-n-0" if case.penalty_last_n == 0 else "ref-penalty-last-n-negative"
    if feature == "breaker-multi":
        return "ref-multi-char-breaker"
    if feature == "breaker-empty":
        return "ref-empty-breaker"
    if feature == "structure":
        if case.allowed_length > 0:
            return "ref-structure"  # not expected: with allowed_length >= 1 both structures agree
        return "ref-allowed-length-0" if case.allowed_length == 0 else "ref-allowed-length-negative"
    if feature == "cap-50":
        return "ref-match-cap-50"
    if feature == "clamp":
        return "ref-pow-overflow" if ref_error else "ref-exponent-clamp"
    raise ValueError(feature)


# -- float helpers ----------------------------------------------------------------------------------

def _f32(x: float) -> np.float32:
    with np.errstate(over="ignore"):
        return np.float32(x)


# -- the bridge model R(S) ----------------------------------------------------------------------------


@dataclass
class RefOutput:
    """Per candidate (in the case's candidate order): the match length that drives the penalty (0 where
    none), whether a penalty is subtracted, and the resulting float32 logits. error: the Python exception
    the reference design raises instead of returning ("OverflowError"), logits then None."""
    L: list
    penalized: list
    logits: np.ndarray | None
    error: str | None = None

    def __iter__(self):
        return iter((self.L, self.penalized, self.logits))

    def key(self):
        if self.error:
            return ("raise", self.error)
        bits = self.logits.view(np.uint32).copy()
        bits[np.isnan(self.logits)] = 0x7FC00000  # every NaN is the same NaN
        return ("logits", bits.tobytes())


def _breaker_model(case: Case, S: frozenset):
    """(single-token breaker ids, multi-token restart sequences as (head, tail) pairs)."""
    singles: set[int] = set()
    seqs: list[tuple[int, tuple[int, ...]]] = []
    for s in case.breakers:
        if s == "":
            if "breaker-empty" not in S:
                singles.add(0)  # encode('a' + '')[-1] is the token 'a' (id 0)
            continue
        if len(s) == 1:
            singles.add(SYMBOLS.index(s))
            continue
        if "breaker-multi" in S:
            # Symbol vocabulary: only the one-character token s[0] ends with a prefix of s; the tail is the
            # tokenization of the rest of the 40-character string, cut to 20 tokens.
            s = s[:40]
            seqs.append((SYMBOLS.index(s[0]), tuple(SYMBOLS.index(ch) for ch in s[1:])[:20]))
        else:
            singles.add(SYMBOLS.index(s[-1]))  # encode('a' + s)[-1]
    return singles, seqs


def _shipped_rep_limit(w: list[int], singles: set[int], seqs=()) -> int:
    """Step 1 as shipped (oracle.shipped.rep_limits), with the single-token breakers as sequences without a
    tail: the tokens after the most recent head that completes a sequence; none: the window length."""
    all_seqs = tuple((h, ()) for h in sorted(singles)) + tuple((h, tuple(t)) for h, t in seqs)
    return int(rep_limits(np.array([w], dtype=np.int64), all_seqs)[0])


def _pow_reference(m: float, b: float, e: int):
    """multiplier * base ** e in Python floats; None when ** raises OverflowError."""
    try:
        return m * (b ** e)
    except OverflowError:
        return None
    except ZeroDivisionError:  # 0.0 ** negative: cannot happen (e >= 0), kept for completeness
        return None


def model(case: Case, S: frozenset = frozenset()) -> RefOutput:
    """R(S): the reference design with the shipped behaviour for each feature in S. R(frozenset()) is the
    reference; R(ALL) the shipped library."""
    cands = case.candidate_ids()
    init = np.array(case.initial_logits(), dtype=np.float32)
    untouched = RefOutput([0] * len(cands), [False] * len(cands), init.copy())
    m, b, allowed = case.multiplier, case.base, case.allowed_length
    hist = list(case.history)

    # enable gates and the window
    if not ((m != 0.0) if "gate-multiplier" in S else (m > 0.0)):
        return untouched
    if "gate-base" in S and not b >= 1.0:
        return untouched
    if "window" in S:
        n = max(case.penalty_last_n, 0)
        if n == 0:
            return untouched
        w = hist[-n:] if hist else []
    else:
        w = hist[-case.penalty_last_n:] if case.penalty_last_n > 0 else hist
    if not w:
        return untouched  # (shipped: last_n_repeat 0 <= allowed or nothing to scan; the reference: no input)

    singles, seqs = _breaker_model(case, S)
    cap = math.inf if "cap-50" in S else MATCH_CAP
    last = w[-1]
    n = len(w)
    best: dict[int, int] = {}  # candidate token -> max match length
    if "structure" in S:
        # Shipped structure: early exits, then every position p < n-1 whose match length (capped by
        # rep_limit) reaches allowed_length votes for the token after it.
        if n <= allowed:
            return untouched
        rep_limit = _shipped_rep_limit(w, singles, seqs if "breaker-multi" in S else ())
        if rep_limit < allowed:
            return untouched
        for p in range(n - 1):
            L = 0
            while p - L >= 0 and L < rep_limit and L < cap and w[p - L] == w[n - 1 - L]:
                L += 1
            if L >= allowed:
                tok = w[p + 1]
                best[tok] = max(best.get(tok, -1), L)
    else:
        if last in singles:
            return untouched
        # With shipped restart sequences, the suffix side also stops at the shipped rep_limit.
        limit = _shipped_rep_limit(w, singles, seqs) if ("breaker-multi" in S and seqs) else math.inf
        for idx in range(n - 1):
            if w[idx] != last:
                continue
            nxt = w[idx + 1]
            if nxt in singles:
                continue
            L = 1
            while L < cap and L < limit:
                j = idx - L
                if j < 0:
                    break
                prev = w[n - 1 - L]
                if w[j] != prev or prev in singles:
                    break
                L += 1
            if L > limit:
                L = int(limit)
            best[nxt] = max(best.get(nxt, 0), L)
        if limit < 1:
            best = {}  # the shipped rep_limit 0 lets no match through (Step 2 min(n, rep_limit))
        best = {t: L for t, L in best.items() if L >= allowed}

    # Step 4 / the penalty loop: breaker candidates are skipped (reference: `continue` on next_token).
    penalty: dict[int, np.float32] = {}
    for tok, L in best.items():
        if tok in singles:
            continue
        if "clamp" in S:
            penalty[tok] = np.float32(penalty_at(m, b, clamped_exponent(L, allowed, b)))
            continue
        p = _pow_reference(m, b, L - allowed)
        if p is None:
            return RefOutput([best.get(t, 0) for t in cands], [t in best for t in cands], None,
                             error="OverflowError")
        penalty[tok] = _f32(p)
    out = init.copy()
    Ls, pen = [], []
    with np.errstate(invalid="ignore", over="ignore"):
        for i, t in enumerate(cands):
            if t in penalty:
                out[i] = np.float32(out[i] - penalty[t])
                Ls.append(best[t])
                pen.append(True)
            else:
                Ls.append(0)
                pen.append(False)
    return RefOutput(Ls, pen, out)


def reference_output(case: Case) -> RefOutput:
    """The reference design's output for a dryz Case: (L per candidate, penalized per candidate, logits
    float32); `.error` is "OverflowError" where the reference raises instead (logits None)."""
    return model(case, frozenset())


def shipped_output(case: Case) -> RefOutput:
    """The bridge with every shipped feature on: must equal the library's observed logits."""
    return model(case, ALL)


# -- the divergence classifier --------------------------------------------------------------------------


def _observed_key(observed) -> tuple:
    a = np.asarray(observed, dtype=np.float32)
    return RefOutput([], [], a).key()


def divergences(case: Case, verdict=None, observed=None) -> list[str]:
    """The classes in which the shipped library's observed output (verdict.observed_logits, or `observed`)
    differs from the reference design. [] when they agree."""
    if observed is None:
        if verdict is None:
            raise ValueError("divergences needs the library's output: a verdict or the observed logits")
        observed = verdict.observed_logits
    obs = _observed_key(observed)
    ref = model(case, frozenset())
    if ref.key() == obs:
        return []
    names: list[str] = []
    shipped = model(case, ALL)
    for f in FEATURES:
        if model(case, ALL - {f}).key() != shipped.key():
            names.append(class_name(f, case, ref.error))
    if not names:
        for f in FEATURES:
            if model(case, frozenset({f})).key() != ref.key():
                names.append(class_name(f, case, ref.error))
    if shipped.key() != obs:
        names.append("ref-unexplained")
    if not names:
        names.append("ref-unexplained")
    return sorted(set(names), key=CLASSES.index)


# -- shortest witnesses ------------------------------------------------------------------------------

def threshold_length(klass: str, case: Case) -> int | None:
    """For classes that only depend on one candidate's match length L reaching a threshold (cap, clamp,
    overflow; no breakers, the default candidate array), the shortest history: L <= len(window) - 1, and
    the all-equal history of length L + 1 reaches L. Returns L* + 1 for the least L* that diverges."""
    if klass not in ("ref-match-cap-50", "ref-exponent-clamp", "ref-pow-overflow") or case.breakers:
        return None
    for L in range(1, 200):
        c = replace(case, history=(0,) * (L + 1), alphabet=1, candidates=None, sorted=False)
        if klass in divergences(c, observed=model(c, ALL).logits):
            return L + 1
    return None


def without_trigger(case: Case, klass: str) -> Case:
    """The same case with the trigger of `klass` removed (a control: the divergence must then be absent)."""
    if klass == "ref-multiplier-negative":
        return replace(case, multiplier=abs(case.multiplier))
    if klass == "ref-base-below-1":
        return replace(case, base=2.0)
    if klass in ("ref-penalty-last-n-0", "ref-penalty-last-n-negative"):
        return replace(case, penalty_last_n=max(len(case.history), 1))
    if klass == "ref-multi-char-breaker":
        return replace(case, breakers=tuple(b for b in case.breakers if len(b) <= 1))
    if klass == "ref-empty-breaker":
        return replace(case, breakers=tuple(b for b in case.breakers if b))
    if klass in ("ref-allowed-length-0", "ref-allowed-length-negative"):
        return replace(case, allowed_length=1)
    if klass == "ref-match-cap-50":
        return case.with_history(case.history[-MATCH_CAP - 1:])  # every match length <= 50
    if klass in ("ref-exponent-clamp", "ref-pow-overflow"):
        return replace(case, base=2.0)
    raise ValueError(f"no trigger known for {klass!r}")
