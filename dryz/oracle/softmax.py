"""The arithmetic of llama-server's sampler chain after DRY, exactly, and its inverse: which float32 logits are
consistent with the probabilities a /completion response reports.

The chain a ServerSubject request builds is logit_bias -> dry -> temperature(T) -> dist (common_sampler_init;
T a power of two). Over the whole vocabulary, in id order (set_logits fills cur[i] = {i, logit_i, 0}):

    z'_i = f32(z_i / T)                      llama_sampler_temp_impl: `logit /= temp` (exact: T = 2^k)
    m    = max_i z'_i                        llama_sampler_dist_apply (the array is unsorted)
    e_i  = expf(f32(z'_i - m))               float, glibc's expf (the same libm.so.6 here as the server's)
    S    = sum_i (double) e_i                double, in array order
    p_i  = f32((double) e_i / S)             `cur_p->data[i].p /= sum_cum`: a float divided by a double

and the response reports p_i (a float, printed by nlohmann as a round-trip double: read back exactly) for
every token with p_i > 0, up to n_probs of them.

Inversion. An anchor token (not in the history, so DRY leaves it; its logit A set by logit_bias and the
largest of all) has e = 1, so p_anchor = f32(1/S) bounds S to an interval [S_lo, S_hi] of relative width
~2^-24. Every step from z to p is monotone non-decreasing, so the logits z consistent with an observed p are an
interval [lo, hi] of float32 values, found by bisection over the float32 ordering (`preimage`). Which logits
are recoverable at float32 softmax precision:

* the interval is one float exactly when a one-ulp step of z moves p by more than the rounding of e and p
  (~2^-23 relative) and the subtraction z' - m is exact. With A = 0 the subtraction is exact; a step of z'
  changes p by a relative |z'| * 2^-23, so every |z'| in [2, 87] is one float (sampled: 12,000 values with
  1, 3 and 64 tokens at the maximum, every one; tests/test_served.py keeps 450 of them), while below 2 only
  some are (36 % of [1, 2); z' = -1 has three floats mapping to one p);
* |z'| up to ~87 keeps e a normal float; past ~103.3 e underflows to 0 and the token is missing from the
  response (p = 0): nothing is known but an upper bound;
* a logit equal to the maximum (z' = m, e = 1: the candidates DRY did not penalise) is an interval of every z'
  within ~2^-25 of m: a softmax cannot tell 0 from 1e-30. Such a candidate is reported as its initial logit when
  the initial logit lies in the interval (what DRY left is then indistinguishable from "untouched" at float32
  precision, and the width is recorded), never as an exact value.

The subject therefore chooses T per candidate: first T = 1/2 (z' = 2z: a penalty of 1 becomes |z'| = 2, one
float, and penalties up to ~43 stay in the normal range); a candidate missing from the response (p = 0) is asked
again alone with T x 8 until it appears (a penalty of 512 at T = 32: z' = -16); a candidate whose interval is
several floats and does not hold its initial logit is asked again with T = 2^floor(log2(|z|/32)), which puts
|z'| in [32, 64). Every request masks (logit_bias false = -inf) the tokens it does not ask about.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import struct

_F = struct.Struct("<f")
_I = struct.Struct("<I")

_libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
_expf = _libm.expf
_expf.restype = ctypes.c_float
_expf.argtypes = [ctypes.c_float]

NEG_INF, POS_INF = -math.inf, math.inf


def f32(x: float) -> float:
    try:
        return _F.unpack(_F.pack(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def expf(x: float) -> float:
    return _expf(x)


def bits(x: float) -> int:
    return _I.unpack(_F.pack(x))[0]


def from_bits(b: int) -> float:
    return _F.unpack(_I.pack(b))[0]


def key(x: float) -> int:
    """A float32's position in the total order of float32 values (-inf lowest; -0 and +0 adjacent)."""
    b = bits(x)
    return b if b < 0x80000000 else -(b & 0x7FFFFFFF) - 1


def unkey(k: int) -> float:
    return from_bits(k if k >= 0 else ((-k - 1) | 0x80000000))


KEY_NEG_INF, KEY_POS_INF = key(NEG_INF), key(POS_INF)


def forward(z: float, T: float, m: float, S: float) -> float:
    """p for a token of logit z (what DRY left), at temperature T, maximum m (after the temperature), sum S."""
    zt = f32(z / T)
    d = f32(zt - m)
    e = expf(d) if d != NEG_INF else 0.0
    return f32(e / S)


def probs(logits, T: float = 1.0) -> list[float]:
    """The whole chain after DRY for an array of logits (array order = id order): every p."""
    zt = [f32(z / T) for z in logits]
    m = max(zt)
    es = [expf(f32(z - m)) if z != NEG_INF else 0.0 for z in zt]
    S = 0.0
    for e in es:
        S += e
    return [f32(e / S) for e in es]


def _mid_lo(p: float) -> float:
    """The lowest double that rounds to the float32 p (the midpoint with the float below, inclusive:
    conservative)."""
    below = unkey(key(p) - 1)
    return (below + p) / 2


def _mid_hi(p: float) -> float:
    above = unkey(key(p) + 1)
    return (p + above) / 2 if above != POS_INF else p


def sum_interval(p_anchor: float) -> tuple[float, float]:
    """The sums S (doubles) with f32(1/S) == p_anchor, widened outward by one double ulp each side."""
    lo_q, hi_q = _mid_lo(p_anchor), _mid_hi(p_anchor)
    return math.nextafter(1.0 / hi_q, 0.0), math.nextafter(1.0 / lo_q, math.inf)


def preimage(p: float, T: float, m: float, S_lo: float, S_hi: float) -> tuple[float, float] | None:
    """The float32 interval [lo, hi] of logits z for which some S in [S_lo, S_hi] gives forward(z) == p;
    None when no z does (the observation contradicts the model)."""
    if p == 0.0:
        # every z whose p rounds to 0 at the smallest S: from -inf to the largest such z
        hi = _last(lambda z: forward(z, T, m, S_lo) <= 0.0)
        return (NEG_INF, hi) if hi is not None else None
    lo = _first(lambda z: forward(z, T, m, S_lo) >= p)
    hi = _last(lambda z: forward(z, T, m, S_hi) <= p)
    if lo is None or hi is None or key(lo) > key(hi):
        return None
    return lo, hi


def _first(pred) -> float | None:
    """The lowest finite-or-infinite float32 z with pred(z) (pred monotone: False ... False True ... True)."""
    a, b = KEY_NEG_INF, KEY_POS_INF
    if not pred(unkey(b)):
        return None
    if pred(unkey(a)):
        return unkey(a)
    while b - a > 1:  # pred(a) False, pred(b) True
        mid = (a + b) // 2
        if unkey(mid) != unkey(mid) or not pred(unkey(mid)):  # NaN never occurs between -inf and +inf keys
            a = mid
        else:
            b = mid
    return unkey(b)


def _last(pred) -> float | None:
    """The highest float32 z with pred(z) (pred monotone: True ... True False ... False)."""
    a, b = KEY_NEG_INF, KEY_POS_INF
    if not pred(unkey(a)):
        return None
    if pred(unkey(b)):
        return unkey(b)
    while b - a > 1:  # pred(a) True, pred(b) False
        mid = (a + b) // 2
        if pred(unkey(mid)):
            a = mid
        else:
            b = mid
    return unkey(a)


def width(lo: float, hi: float) -> int:
    """How many float32 values lie in [lo, hi]."""
    return key(hi) - key(lo) + 1
