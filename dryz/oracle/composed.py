"""llama.cpp's DRY with deviation models composed: one case at a time, every rule a switch (pure: no subject runs).

The shipped model (shipped.py) is llama.cpp's DRY, vectorised, with the deviations that only change its
configuration (restart sequences, a match cap, the window's meaning, the breaker exemption, the clamp). Other
engines' DRY differs in how the scan itself goes: which occurrences it reads, which repeats it keeps, how it
weights and rounds the penalty, which inputs make it raise. Those rules are switches of this model, each the
model of one cause (dryz.oracle.deviations names them and says which Config field each sets); with every switch
off it is llama.cpp's DRY again, which tests/test_composed.py checks against the shipped model on the certificate
space and every conformance probe, and each switch that the shipped model also has against its vectorised form.

The case's window W is the last min(n, window) tokens of the history. llama.cpp (Steps 1-4 of
llama_sampler_dry_apply): exit when DRY is off or |W| <= allowed_length; rep_limit from the restart sequences
(Step 1, shipped.rep_limits); exit when rep_limit < allowed_length; for every position j >= 1 of W, Z_j is the
backward match of W[:j] against W's suffix (the repeat that emitting W[j] extended), and a candidate's L is the
largest min(Z_j, rep_limit) over the positions holding it; a candidate in W[1:], not a single-token breaker, with
L >= allowed_length is penalized by multiplier * base^(L - allowed_length) (the exponent clamped), rounded once.

The switches (Config fields, defaults are llama.cpp's):
  occurrence_cap, early_exit   only the latest occurrences of the last token (W[j-1] == W[-1]) are read, latest
                               first, and the scan stops after the first whose repeat reaches early_exit tokens
  last_breaker_checked=False   Step 1 does not look at the last token: a breaker there restarts nothing
  repeat_min=N                 a repeat shorter than N tokens is never penalized, whatever allowed_length
  threshold=False              no L >= allowed_length test: every repeat found is penalized, below
                               allowed_length with a negative exponent
  exit_rule="window"           the scan exits when min(rep_limit, |W| - 1) <= allowed_length (llama.cpp:
                               rep_limit < allowed_length); "tail": when rep_limit - 1 <= allowed_length
  arithmetic="float32"         the penalty is multiplier * powf(base, exponent) in float32 (two roundings)
  times_count                  the penalty is multiplied by how many earlier occurrences the token followed
  longest_only                 only the tokens that followed the longest repeated suffix are penalized, each at
                               that suffix's length (llama.cpp: each candidate at its own longest repeat)
  last_follower=False          the last token is never the follower of a repeat (a repeat it continued is not
                               recorded)
  suffix_cap=N                 suffixes of at most N tokens are recorded: a repeat of N tokens or more
                               penalizes nothing
  window_extra=K               the window holds K tokens more than penalty_last_n
  multiplier_negative_off      a negative multiplier switches DRY off
  raises                       ((exception, condition), ...): the engine raises instead of answering
  overflow_raises              a penalty whose power overflows a double raises (Python's float power)

A case's prediction is an Output-like pair (logits, sorted flag), or Raises(exception): what the composed model
says the engine does. `predict(cfg, case_parts)` is the one entry point; check.Batch.declared and the
conformance fit (dryz.conformance.fit) use it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..case import f32
from .shipped import FLT_MAX32, _pow, max_exponent, penalty_at, rep_limits

_libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
_powf = _libm.powf
_powf.argtypes, _powf.restype = [ctypes.c_float, ctypes.c_float], ctypes.c_float


@dataclass(frozen=True)
class Raises:
    """The composed model predicts the engine raises this exception (a crash answer of that type)."""
    exception: str
    why: str


# The conditions a `raises` rule names (each a function of the case's parameters and history length).
CONDITIONS = {
    "window-at-most": lambda cfg, n, k: 0 < cfg.penalty_last_n <= k,
    "short-history": lambda cfg, n, k: cfg.penalty_last_n > 0 and n <= k,
    "always": lambda cfg, n, k: True,
}


def raised(cfg, n: int) -> Raises | None:
    """The first raise rule whose condition holds for a case of n tokens, or None."""
    for exception, cond, k in cfg.raises:
        if CONDITIONS[cond](cfg, n, k):
            return Raises(exception, f"{cond} {k}")
    return None


def _penalty(cfg, exponent: int, count: int) -> float:
    """Step 4's float penalty for one (unclamped) exponent, by the configuration's arithmetic."""
    if cfg.clamp:
        mx = max_exponent(cfg.base)
        if mx > 0:
            exponent = min(exponent, mx)
    if cfg.arithmetic == "float32":
        with np.errstate(over="ignore"):
            return float(np.float32(cfg.multiplier) * np.float32(_powf(f32(cfg.base), float(exponent))))
    if count != 1:  # (multiplier * pow(base, exponent)) * count in double, rounded to float once
        return f32((cfg.multiplier * _pow(cfg.base, float(exponent))) * count)
    return penalty_at(cfg.multiplier, cfg.base, exponent)


def _z_array(s: list) -> list:
    """z[k]: the longest common prefix of s and s[k:] (z[0] = len(s)), in linear time."""
    n = len(s)
    z = [0] * n
    if n:
        z[0] = n
    lt = rt = 0
    for k in range(1, n):
        if k < rt:
            z[k] = min(rt - k, z[k - lt])
        while k + z[k] < n and s[z[k]] == s[k + z[k]]:
            z[k] += 1
        if k + z[k] > rt:
            lt, rt = k, k + z[k]
    return z


@lru_cache(maxsize=64)
def _backward_matches(W: tuple, limit: int) -> tuple:
    """Z[j] for every position j of the window W (Z[0] = 0): the backward match of W[:j] against W's suffix, capped
    at limit. Cached: one case is predicted on several configurations with the same window (a subject's declared
    variants in check.Batch.declared, then its fitted causes in dryz.causes), and the scan is most of the cost."""
    w = len(W)
    zr = _z_array(W[::-1])  # the Z-algorithm on the reversed window: zr[w - j] is the backward match at j
    return (0,) + tuple(min(zr[w - j], limit) for j in range(1, w))


def predict(cfg, history, ids, initial, sorted_in: bool):
    """(logits float32 (C,), sorted flag) the composed model leaves for one case, or Raises."""
    out = np.array(initial, dtype=np.float32).reshape(-1).copy()
    hist = list(map(int, history))
    n = len(hist)
    if any(cond == "always" for _, cond, _ in cfg.raises):  # the sampler dies before DRY's own checks run
        return Raises("", "always")
    enabled = cfg.enabled and not (cfg.multiplier_negative_off and cfg.multiplier < 0)
    if not enabled:
        return out, bool(sorted_in)
    r = raised(cfg, n)
    if r is not None:
        return r
    allowed = cfg.allowed_length
    cap = cfg.window_cap + cfg.window_extra if cfg.window_cap < (1 << 31) - 1 else cfg.window_cap
    w = min(n, cap)
    if w <= allowed or w == 0:  # (no token to read: a negative allowed_length and an empty history)
        return out, bool(sorted_in)
    W = tuple(hist[n - w:])
    if cfg.last_breaker_checked:
        rep = int(rep_limits(np.array([W], dtype=np.int64), cfg.seqs)[0])
    else:  # Step 1 from the token before the last
        rep = int(rep_limits(np.array([W[:-1]], dtype=np.int64), cfg.seqs)[0]) + 1 if w > 1 else w
    if rep < allowed or (cfg.exit_rule == "window" and min(rep, w - 1) <= allowed) or \
            (cfg.exit_rule == "tail" and rep - 1 <= allowed):
        return out, bool(sorted_in)
    last = W[-1]
    limit = rep if cfg.match_cap is None else min(rep, cfg.match_cap)
    # Step 2: every position's repeat (Z_j, capped), the occurrences as the scan reads them
    Z = _backward_matches(W, limit)
    followers = range(1, w) if cfg.last_follower else range(1, w - 1)
    occ = [j for j in range(w - 1, 0, -1) if W[j - 1] == last]
    if cfg.occurrence_cap is not None or cfg.early_exit is not None:
        kept = []
        for j in occ:
            kept.append(j)
            if (cfg.occurrence_cap is not None and len(kept) >= cfg.occurrence_cap) or \
                    (cfg.early_exit is not None and Z[j] >= cfg.early_exit):
                break
        read = set(kept)
    else:
        read = None
    # Step 3: per candidate token, its L and how many occurrences it followed
    heads = cfg.single_token_breakers()
    L: dict[int, int] = {}
    count: dict[int, int] = {}
    S = max(Z) if read is None else max((Z[j] for j in read), default=0)  # the longest repeat (Z[0] = 0)
    if cfg.suffix_cap is not None and S >= cfg.suffix_cap:
        return out, False
    if cfg.longest_only:
        if S < allowed:
            return out, False
        if S == 0:  # allowed_length 0 and no repeat: the empty suffix, which every recorded token follows (the
            followers = range(0, followers.stop)  # window's first token too: it follows nothing before it)
        for j in followers:
            if Z[j] >= S and (read is None or j in read or S == 0):
                L[W[j]] = S
                count[W[j]] = count.get(W[j], 0) + 1
    else:
        # Every follower is present with L 0 (a repeat of 0 tokens: Z[j] is 0 wherever W[j - 1] is not the last
        # token, and a position whose repeat was not read counts as present only); then, in order, each position
        # read that has a repeat raises its token's L, its count the occurrences at the largest L. (As a scan of
        # every follower in order, with what a repeat of 0 leaves: L 0 and, where it was read, a count of 0.)
        L = dict.fromkeys(W[followers.start:followers.stop], 0)
        seen = [j for j in (occ[::-1] if read is None else sorted(read)) if j in followers]
        count = dict.fromkeys(W[followers.start:followers.stop], 0) if read is None else \
            dict.fromkeys((W[j] for j in seen), 0)
        for j in seen:
            z, zj = W[j], Z[j]
            if zj > L[z]:
                L[z], count[z] = zj, 1
            elif zj == L[z] and zj > 0:
                count[z] += 1
    # Step 4 (an engine whose power raises on overflow computes it for every token it penalizes, a candidate or not)
    if cfg.overflow_raises and math.isfinite(cfg.base) and any(
            math.isinf(_pow(cfg.base, float(lz - allowed))) for t, lz in L.items()
            if t not in heads and lz >= cfg.repeat_min and not (cfg.threshold and lz < allowed)):
        return Raises("OverflowError", "overflow")
    for i, t in enumerate(int(x) for x in ids):
        if t not in L or t in heads:
            continue
        lz = L[t]
        if lz < cfg.repeat_min or (cfg.threshold and lz < allowed):
            continue
        p = _penalty(cfg, lz - allowed, count.get(t, 1) if cfg.times_count else 1)
        before = out[i]
        after = np.float32(before - np.float32(p))
        if cfg.saturate and np.isfinite(before) and not np.isfinite(after):
            after = np.float32(FLT_MAX32 if p < 0 else -FLT_MAX32)
        out[i] = after
    return out, False
