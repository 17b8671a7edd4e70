"""The oracles and the shipped-configuration model, vectorised over batches of equal-length histories.

Two independent algorithms compute the unclamped match length M_z (see PREREG.md):
  A  position-keyed: for every position j >= 1 of the window, the backward match of w[:j] against w's suffix;
     M_z is the maximum over the positions holding z.
  B  extended-string: the longest suffix of w + [z] that occurs inside w; M_z is its length minus one.
On top of both, one model of the shipped configuration, read from llama_sampler_dry_apply (Steps 1-4):
the window, the early exits, rep_limit from restart sequences, breaker candidates, and the float arithmetic.
check() runs these on a batch of one; the enumerator on whole levels of the search tree.

Code that runs per fuzz input (the one-window paths) compares numpy arrays with ufuncs (np.not_equal, ...),
never with ==, != or <: atheris 3.0 instruments every comparison operator and leaks its result when that is
an array (a campaign's memory grew ~7 KB per input); tests/test_fuzz_campaign.py checks no such comparison runs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .case import f32
from .idbytes import all_bytes, as_bytes, bytes_or_none, cached_when_hashable

# -- oracle A ------------------------------------------------------------------------------------


def _columns(W: np.ndarray) -> np.ndarray:
    """W (N, w) as contiguous columns (w, N): each position one vector, so the loops below are cheap."""
    dtype = np.uint8 if W.size == 0 or (W.min() >= 0 and W.max() < 256) else np.int64
    return np.ascontiguousarray(W.T, dtype=dtype)


def match_lengths_A(W: np.ndarray, cands: np.ndarray) -> np.ndarray:
    """M[n, c] for windows W (N, w) and candidate ids cands (C,), by position-keyed backward matching."""
    N, w = W.shape
    if N == 1:
        return _match_lengths_A_single(W[0], cands)[None, :]
    T = _columns(W)
    M = np.zeros((len(cands), N), dtype=np.int64)
    for j in range(1, w):
        # Z_j: how far the tokens before j, read backwards, agree with the suffix read backwards.
        Z = np.zeros(N, dtype=np.int64)
        run = np.ones(N, dtype=bool)
        for t in range(j):
            run &= T[j - 1 - t] == T[w - 1 - t]
            if not run.any():
                break
            Z += run
        for ci, z in enumerate(cands):
            holds = T[j] == z
            np.maximum(M[ci], np.where(holds, Z, 0), out=M[ci])
    return M.T.copy()


def _match_lengths_A_single(window: np.ndarray, cands: np.ndarray) -> np.ndarray:
    """The same position-keyed matching for one long window, all positions at once. With R the window
    reversed, the tokens before position j = w - s read backwards are R[s:], so Z_j is the common prefix of
    R[s:] and R: the first mismatch in a row of comparisons. A NaN sentinel after R (unequal to every id,
    itself included) stops every row at j. Rows are compared up to 64 columns wide first (for w <= 64 every
    row then reaches the sentinel). Rows with no mismatch within 64 (long repeats: most rows of a periodic
    window) are compared in full, nearest the end first (smallest s), 16 at a time, and a row is skipped when
    it cannot raise its token's maximum (Z <= w - s): in a periodic window the first full repeat decides its
    token, where comparing every row in full made the work quadratic (6.8 ms for 1,000 tokens of one
    symbol)."""
    w = len(window)
    c = np.asarray(cands)
    if w < 2 or not len(c):
        return np.zeros(len(c), dtype=np.int64)
    P = np.empty(2 * w)                        # float64 holds every id exactly (ids are far below 2^53)
    P[:w] = window[::-1]
    P[w:] = np.nan
    R = P[:w]
    step = P.itemsize

    def rows(width: int) -> np.ndarray:        # row s - 1 holds P[s:s + width]: a view, no copy
        return np.ndarray((w - 1, width), dtype=P.dtype, buffer=P, offset=step, strides=(step, step))

    width = min(64, w)
    E = np.not_equal(rows(width), R[:width])
    Z = E.argmax(axis=1)                       # Z[s - 1], s = 1..w-1: the first mismatch in each row
    # M_z: the largest Z over the positions holding z (the token at position j = w - s is R[s - 1]), through
    # a per-id maximum (sized to a byte when every id fits one: no min/max reductions then).
    tokens = np.asarray(window[-1:0:-1])       # R[:w - 1] as ids
    if not (all_bytes(tokens) and all_bytes(c)):
        if int(tokens.min()) < 0 or int(c.min()) < 0:
            raise ValueError("token ids must be non-negative")
        best = np.zeros(max(int(tokens.max()), int(c.max())) + 1, dtype=np.int64)
    else:
        best = np.zeros(256, dtype=np.int64)
    if w > width:
        todo = np.logical_not(E[np.arange(w - 1), Z])  # rows with no mismatch yet: Z >= 64, not known
        Z[todo] = 0
        todo = np.flatnonzero(todo) + 1        # their s, ascending
        np.maximum.at(best, tokens, Z)
        full = rows(w)
        while todo.size:
            todo = todo[np.greater(w - todo, best[tokens[todo - 1]])]  # those that could raise their maximum
            batch, todo = todo[:16], todo[16:]
            if batch.size:
                np.maximum.at(best, tokens[batch - 1], np.not_equal(full[batch - 1], R).argmax(axis=1))
    else:
        np.maximum.at(best, tokens, Z)
    return best[c]


def match_lengths_B(W: np.ndarray, cands: np.ndarray) -> np.ndarray:
    """M[n, c]: (longest suffix of W[n] + [c] occurring inside W[n]) - 1, floored at 0."""
    N, w = W.shape
    M = np.zeros((len(cands), N), dtype=np.int64)
    if w == 0:
        return M.T.copy()
    if N == 1:
        return _match_lengths_B_bytes(W[0], cands)[None, :]
    T = _columns(W)
    for ci, z in enumerate(cands):
        # occ[i]: the suffix of length m of the extended string W + [z] occurs in W starting at i.
        occ = [T[i] == z for i in range(w)]            # m = 1: the suffix is [z] alone
        alive = np.logical_or.reduce(occ)
        found = alive.astype(np.int64)                 # longest m that occurs (0: z absent)
        for m in range(1, w):
            # Extend the suffix one token to the left (by W[w-m]); an occurrence at i survives when the
            # shorter suffix occurred at i+1 and W[i] equals the new token.
            new = T[w - m]
            occ = [occ[i + 1] & (T[i] == new) for i in range(w - m)]
            alive = np.logical_or.reduce(occ)
            if not alive.any():
                break
            found += alive                             # monotone: a longer suffix occurs only if shorter ones do
        M[ci] = np.maximum(found - 1, 0)
    return M.T.copy()


def _match_lengths_B_bytes(window: np.ndarray, cands: np.ndarray) -> np.ndarray:
    """The same extended-string search for one window, with bytes.find. If the suffix of length m+1 of
    the extended string occurs in the window, so does every shorter one: search the longest. Length 2 is
    tested for every candidate at once (the bytes right after each occurrence of the window's last byte);
    only candidates that pass it are searched further, one bytes.find per length tried."""
    text = as_bytes(window)
    w = len(text)
    c = np.asarray(cands)
    out = np.zeros(len(c), dtype=np.int64)
    if w < 2 or not len(c):
        return out  # a suffix of length 2 of w + [z] cannot occur in fewer than 2 tokens: M = 0
    if bytes_or_none(c) is None:
        raise ValueError("the single-window oracles need candidate ids in 0..255")
    t = np.frombuffer(text, dtype=np.uint8)
    follows = np.zeros(256, dtype=bool)
    follows[t[1:][np.equal(t[:-1], t[-1])]] = True  # the bytes right after an occurrence of the last one
    for ci in np.flatnonzero(follows[c]).tolist():
        extended = text + bytes([int(c[ci])])
        # The suffix of length lo occurs, hi is an upper bound; gallop (most lengths are short), then bisect.
        lo, hi, step = 2, w, 1
        while lo < hi:
            mid = min(lo + step, hi)
            if text.find(extended[w + 1 - mid:]) >= 0:
                lo, step = mid, 2 * step
            else:
                hi = mid - 1
                break
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if text.find(extended[w + 1 - mid:]) >= 0:
                lo = mid
            else:
                hi = mid - 1
        out[ci] = lo - 1
    return out


# -- rep_limit (Step 1) and the configuration model -----------------------------------------


def rep_limits(W: np.ndarray, seqs) -> np.ndarray:
    """Step 1 as shipped: scanning back from the end, the first head that completes a restart sequence
    (the longest tail matching at that head) sets rep_limit = distance - tail length; none: the window length."""
    N, w = W.shape
    rep = np.full(N, w, dtype=np.int64)
    if not seqs:
        return rep
    if N == 1:
        one = _rep_limit_single(W[0], seqs)
        if one is not None:
            return np.array([one], dtype=np.int64)
    done = np.zeros(N, dtype=bool)
    for i in range(w):
        longest = np.full(N, -1, dtype=np.int64)
        for head, tail in seqs:
            k = len(tail)
            if k > i:
                continue
            hit = _completes(W, i, head, tail)
            longest = np.where(hit & (k > longest), k, longest)
        new = (longest >= 0) & ~done
        rep[new] = i - longest[new]
        done |= new
        if done.all():
            break
    return rep


def _completes(W: np.ndarray, i: int, head: int, tail: tuple) -> np.ndarray:
    """Per window: the restart sequence (head, tail) has its head i tokens from the end and its tail after it."""
    w = W.shape[1]
    hit = W[:, w - 1 - i] == head
    for off in range(len(tail)):
        hit &= W[:, w - i + off] == tail[off]
    return hit


@cached_when_hashable
def _sequence_bytes(seqs) -> tuple | None:
    """Each restart sequence as bytes, head then tail; None when some id is outside 0..255."""
    try:
        return tuple(bytes((head, *tail)) for head, tail in seqs)
    except ValueError:
        return None


# For one window, a complete occurrence of a restart sequence (its head at distance i from the end, its k tail
# tokens after it, k <= i) is an occurrence of its bytes inside the window's bytes, starting at p = w - 1 - i;
# the rightmost one of each sequence is bytes.rfind. None: ids outside 0..255 (the callers scan instead).

def _rep_limit_single(window, seqs) -> int | None:
    """rep_limits for one window: the head nearest the end that completes a sequence (the largest start of
    any sequence), the longest sequence starting there; rep_limit = i0 - k0."""
    text, seq_bytes = bytes_or_none(window), _sequence_bytes(seqs)
    if text is None or seq_bytes is None:
        return None
    starts = list(map(text.rfind, seq_bytes))
    p0 = max(starts, default=-1)
    if p0 < 0:
        return len(text)
    k0 = max(len(b) for b, p in zip(seq_bytes, starts) if p == p0) - 1
    return (len(text) - 1 - p0) - k0


def _promised_rep_limit_single(window, seqs) -> int | None:
    """promised_rep_limits for one window: the fewest tokens after the end of an occurrence, i.e. over each
    sequence's rightmost occurrence, w - (start + length)."""
    text, seq_bytes = bytes_or_none(window), _sequence_bytes(seqs)
    if text is None or seq_bytes is None:
        return None
    w = len(text)
    return min((w - p - len(b) for b, p in zip(seq_bytes, map(text.rfind, seq_bytes)) if p >= 0), default=w)


@dataclass(frozen=True)
class Config:
    """The sampler's parameters, as llama_sampler_init_dry receives them (float32 values)."""
    multiplier: float
    base: float
    allowed_length: int
    penalty_last_n: int
    seqs: tuple  # restart sequences, (head, tail) pairs

    def __post_init__(self):
        # Derived once per Config (one is made per checked case; cached_property locks on Python 3.11).
        # llama_sampler_init_dry: penalty_last_n = max(penalty_last_n, 0); disabled -> an empty sampler.
        enabled = self.multiplier != 0.0 and self.base >= 1.0 and max(self.penalty_last_n, 0) != 0
        heads, multi = _sequence_facts(self.seqs)
        object.__setattr__(self, "enabled", enabled)
        object.__setattr__(self, "window_cap", max(self.penalty_last_n, 0) if enabled else 0)
        object.__setattr__(self, "single_token_heads", heads)  # sorted ids of the single-token sequences
        object.__setattr__(self, "multi_token", multi)          # some restart sequence has a tail

    def window_length(self, n: int) -> int:
        return min(n, self.window_cap)  # the last penalty_last_n tokens; none when disabled

    def single_token_breakers(self) -> set[int]:
        return set(self.single_token_heads)


@cached_when_hashable
def _sequence_facts(seqs) -> tuple[tuple[int, ...], bool]:
    return tuple(sorted({h for h, t in seqs if not t})), any(tail for _, tail in seqs)


@dataclass
class Prediction:
    """What the shipped sampler should do to a batch: per history and candidate."""
    L: np.ndarray          # (N, C) the audited length (0 where no penalty applies)
    penalized: np.ndarray  # (N, C) bool: a penalty is subtracted
    ran: np.ndarray        # (N,) bool: apply reached Step 4 (and so clears the sorted flag)
    rep: np.ndarray | None = None  # (N,) rep_limit from Step 1; None when apply exits before Step 1


def shipped_lengths(H: np.ndarray, cands: np.ndarray, cfg: Config, oracle=match_lengths_A, rep_fn=None):
    """Apply the shipped configuration model to the histories H (N, n) using one oracle for M: a Prediction."""
    return shipped_lengths_each(H, cands, cfg, (oracle,), rep_fn)[0]


def shipped_lengths_each(H: np.ndarray, cands: np.ndarray, cfg: Config, oracles, rep_fn=None) -> list:
    """shipped_lengths for several oracles at once: the configuration part (window, rep_limit, presence,
    breaker candidates) is computed once and each oracle's M is clamped by it. [Prediction, ...]"""
    N, n = H.shape
    C = len(cands)
    w = cfg.window_length(n)
    W = H[:, n - w:]
    if not cfg.enabled or w <= cfg.allowed_length:
        return [Prediction(np.zeros((N, C), dtype=np.int64), np.zeros((N, C), dtype=bool), np.zeros(N, dtype=bool))
                for _ in oracles]
    rep = (rep_fn or rep_limits)(W, cfg.seqs)  # rep_fn: promised_rep_limits for the promise check
    if N == 1:
        return _shipped_lengths_single(W, cands, cfg, oracles, rep)
    ran = rep >= cfg.allowed_length
    # Step 3 only looks at tokens that follow some position, i.e. W[1:], and keeps lengths >= allowed.
    present = (W[:, 1:, None] == cands[None, None, :]).any(axis=1)
    heads = cfg.single_token_breakers()
    breaker = np.array([c in heads for c in cands.tolist()], dtype=bool)
    eligible = ran[:, None] & present & ~breaker[None, :]
    out = []
    for oracle in oracles:
        L = np.minimum(oracle(W, cands), rep[:, None])
        penalized = eligible & (L >= cfg.allowed_length)
        out.append(Prediction(np.where(penalized, L, 0), penalized, ran, rep))
    return out


def _shipped_lengths_single(W: np.ndarray, cands: np.ndarray, cfg: Config, oracles, rep: np.ndarray) -> list:
    """shipped_lengths_each's clamping for one window (the same rules in fewer array calls: the oracles'
    lengths are clamped together). The oracles run only when some candidate is eligible: otherwise no M can
    reach the output."""
    limit, allowed = int(rep[0]), cfg.allowed_length
    ran = np.array([limit >= allowed])
    c = np.asarray(cands)
    eligible = None
    if ran[0] and len(c) and W.shape[1] > 1:
        eligible = _eligible(W[0], c, cfg.single_token_heads)
    if eligible is None or not np.count_nonzero(eligible):
        return [Prediction(np.zeros((1, len(c)), dtype=np.int64), np.zeros((1, len(c)), dtype=bool), ran, rep)
                for _ in oracles]
    L = np.minimum(np.concatenate([oracle(W, cands) for oracle in oracles]), limit)  # (oracles, C)
    penalized = eligible & np.greater_equal(L, allowed)
    L = np.where(penalized, L, 0)
    return [Prediction(L[i:i + 1], penalized[i:i + 1], ran, rep) for i in range(len(oracles))]


def _eligible(window: np.ndarray, c: np.ndarray, breaker_heads: tuple) -> np.ndarray:
    """Per candidate: it follows some position (Step 3 reads window[1:]) and is not a single-token breaker."""
    if not (all_bytes(c) and all_bytes(window)):
        if np.count_nonzero(np.less(c, 0)) or np.count_nonzero(np.less(window, 0)):
            raise ValueError("token ids must be non-negative")
        top = max(int(window.max()), int(c.max()), 255) + 1  # ids past a byte: a table that holds them
    else:
        top = 256
    if breaker_heads and breaker_heads[-1] >= top:  # sorted ids
        top = breaker_heads[-1] + 1
    follows = np.zeros(top, dtype=bool)
    follows[window[1:]] = True
    follows[list(breaker_heads)] = False
    return follows[c]


# -- Step 4 arithmetic, as the C++ computes it -------------------------------------------------------

_libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
_logf = _libm.logf
_logf.argtypes, _logf.restype = [ctypes.c_float], ctypes.c_float
_pow = _libm.pow
_pow.argtypes, _pow.restype = [ctypes.c_double, ctypes.c_double], ctypes.c_double

FLOAT_MAX_LOG = np.float32(88.7228391)
_BASE_MIN = float(np.float32(1.000001))  # the source's 1.000001f, exactly


@lru_cache(maxsize=4096)
def max_exponent(base: float) -> int:
    """int max_exponent = FLOAT_MAX_LOG / std::log(base) (float / float, truncated), when base > 1.000001f."""
    b = np.float32(base)
    if float(b) > _BASE_MIN:
        q = FLOAT_MAX_LOG / np.float32(_logf(b))
        return int(q)  # C float->int conversion truncates toward zero
    return 0


def penalties(L: np.ndarray, cfg: Config) -> np.ndarray:
    """float penalty = multiplier * std::pow(base, repeat_exp): pow(double, double), double product,
    rounded to float. repeat_exp = L - allowed_length, clamped to max_exponent when that is positive."""
    exp = L.astype(np.int64) - cfg.allowed_length
    mx = max_exponent(cfg.base)
    if mx > 0:
        exp = np.minimum(exp, mx)
    flat = exp.ravel().tolist()
    # A Python float product is the C double product; f32 rounds to float as the C conversion does (inf
    # past the float range, as the C++ gets).
    table = {e: f32(cfg.multiplier * _pow(cfg.base, float(e))) for e in set(flat)}
    return np.array([table[e] for e in flat], dtype=np.float32).reshape(exp.shape)


def output_logits(initial: np.ndarray, pred: Prediction, cfg: Config) -> np.ndarray:
    """The logits the shipped sampler leaves: logit -= penalty (float32) where penalized, untouched elsewhere."""
    if pred.L.shape[0] == 1:
        out = np.array(initial, dtype=np.float32).reshape(1, -1)
    else:
        out = np.array(np.broadcast_to(initial, pred.L.shape), dtype=np.float32)
    if np.count_nonzero(pred.penalized):
        pen = penalties(pred.L[pred.penalized], cfg)
        out[pred.penalized] = out[pred.penalized] - pen
    return out


# -- Step 1 as promised ----------------------------------------------------------------------------------
# The source promises that the most recently *completed* restart sequence limits the repetition. The shipped
# scan (rep_limits above) takes the most recent *head* that completes one instead; PREREG.md derives when the
# two differ (only when one restart sequence completes strictly inside another: the documented 'ni' in
# 'amniotic').


def restart_occurrences(window, seqs) -> list[tuple[int, int, tuple]]:
    """Every complete occurrence of a restart sequence in the window: (i, k, seq) with the head at distance
    i from the end (0 = the last token), a tail of k <= i tokens matching, seq = (head, *tail). It occupies
    distances i..i-k and leaves i - k tokens after it."""
    window = [int(t) for t in window]
    w = len(window)
    out = []
    for i in range(w):
        tok = window[w - 1 - i]
        for head, tail in seqs:
            k = len(tail)
            if head == tok and k <= i and all(window[w - i + off] == tail[off] for off in range(k)):
                out.append((i, k, (head,) + tuple(tail)))
    return out


def promised_rep_limits(W: np.ndarray, seqs) -> np.ndarray:
    """Step 1 as promised: rep_limit = the fewest tokens after the end of any complete occurrence of a
    restart sequence (the minimum of i - k over every occurrence); none: the window length."""
    N, w = W.shape
    rep = np.full(N, w, dtype=np.int64)
    if not seqs:
        return rep
    if N == 1:
        one = _promised_rep_limit_single(W[0], seqs)
        if one is not None:
            return np.array([one], dtype=np.int64)
    kmax = max(len(t) for _, t in seqs)
    for i in range(w):
        if i - kmax >= rep.max():
            break  # no later occurrence can end closer to the end
        for head, tail in seqs:
            k = len(tail)
            if k > i:
                continue
            hit = _completes(W, i, head, tail)
            rep = np.where(hit, np.minimum(rep, i - k), rep)
    return rep


def promised_lengths(H: np.ndarray, cands: np.ndarray, cfg: Config, oracle=match_lengths_A) -> Prediction:
    """shipped_lengths with Step 1 as promised (everything else as shipped)."""
    return shipped_lengths(H, cands, cfg, oracle, rep_fn=promised_rep_limits)


def is_interior_factor(short: tuple, long: tuple) -> bool:
    """short occurs in long starting at offset >= 1 and ending >= 1 before long's end."""
    n, m = len(short), len(long)
    return any(tuple(long[d:d + n]) == tuple(short) for d in range(1, m - n))


def restart_divergence(window, seqs):
    """Where Step 1 as shipped and as promised part, for one window: None when they agree, else
    (shipped occurrence, promised occurrence), each (i, k, seq), the promised one with the fewest tokens
    after it (the most recent head among ties)."""
    occ = _rightmost_occurrences(window, seqs)
    return divergence_of(restart_occurrences(window, seqs) if occ is None else occ)


def divergence_of(occ):
    """restart_divergence from a list of occurrences (i, k, seq)."""
    if not occ:
        return None
    i0 = min(i for i, _, _ in occ)
    shipped = max((o for o in occ if o[0] == i0), key=lambda o: o[1])
    promised = min(occ, key=lambda o: (o[0] - o[1], o[0]))
    if promised[0] - promised[1] == shipped[0] - shipped[1]:
        return None
    return shipped, promised


def _rightmost_occurrences(window, seqs) -> list | None:
    """Each restart sequence's occurrence nearest the end (bytes.rfind), as (i, k, seq); None when some id is
    outside 0..255. They decide restart_divergence as every occurrence would: a sequence's rightmost occurrence
    has both its smallest distance i and its fewest tokens after the end (as in _rep_limit_single), where
    listing every occurrence is a Python loop over the window (~2 ms for 800 tokens, quadratic in events
    under the fuzz harness's instrumentation)."""
    text, seq_bytes = bytes_or_none(window), _sequence_bytes(seqs)
    if text is None or seq_bytes is None:
        return None
    w = len(text)
    return [(w - 1 - p, len(tail), (head,) + tuple(tail))
            for (head, tail), b, p in zip(seqs, seq_bytes, map(text.rfind, seq_bytes)) if p >= 0]
