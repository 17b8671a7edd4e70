"""The oracles and the shipped-configuration model, vectorised over batches of equal-length histories.

Two independent algorithms compute the unclamped match length M_z (see PREREG.md):
  A  position-keyed: for every position j >= 1 of the window, the backward match of w[:j] against w's suffix;
     M_z is the maximum over the positions holding z.
  B  extended-string: the longest suffix of w + [z] that occurs inside w; M_z is its length minus one.
On top of both, one model of the shipped configuration, read from llama_sampler_dry_apply (Steps 1-4):
the window, the early exits, rep_limit from restart sequences, breaker candidates, and the float arithmetic.
check() runs these on a batch of one; the enumerator on whole levels of the search tree.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass

import numpy as np

from .symbols import SYMBOLS

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
    """The same position-keyed matching for one long window: per position, the common prefix of the
    reversed window before j and the reversed window, by binary search over bytes slices."""
    R = _as_bytes(window[::-1])
    w = len(R)
    if w == 0:
        return np.zeros(len(cands), dtype=np.int64)
    best: dict[int, int] = {}
    toks = window.tolist()
    for j in range(1, w):
        before = R[w - j:]          # W[j-1], W[j-2], ..., W[0]
        if before[0] != R[0]:
            m = 0
        else:
            lo, hi = 1, j
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if before[:mid] == R[:mid]:
                    lo = mid
                else:
                    hi = mid - 1
            m = lo
        z = toks[j]
        if m > best.get(z, -1):
            best[z] = m
    return np.array([best.get(int(c), 0) for c in cands], dtype=np.int64)


def _as_bytes(window: np.ndarray) -> bytes:
    if len(window) and (window.min() < 0 or window.max() > 255):
        raise ValueError("the single-window oracles need token ids in 0..255")
    return bytes(window.astype(np.uint8))


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
    the extended string occurs in the window, so does every shorter one: binary search the longest."""
    text = _as_bytes(window)
    w = len(text)
    out = np.zeros(len(cands), dtype=np.int64)
    for ci, z in enumerate(cands):
        z = int(z)
        if not 0 <= z <= 255 or text.find(bytes([z])) < 0:
            continue  # z does not occur: no suffix of the extended string does
        extended = text + bytes([z])
        lo, hi = 1, w  # the suffix of length lo occurs; find the longest
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if text.find(extended[w + 1 - mid:]) >= 0:
                lo = mid
            else:
                hi = mid - 1
        out[ci] = lo - 1
    return out


# -- restart sequences (Step 1) and the configuration model -----------------------------------------


def symbol_texts(n: int = len(SYMBOLS)) -> list[str]:
    return list(SYMBOLS[:n])


def restart_sequences(breakers, token_texts, tokenize) -> list[tuple[int, tuple[int, ...]]]:
    """(head, tail) pairs as get_overlapping_token_sequences builds them (strings cut to 40 chars, tails to 20).

    A token whose text contains the string is a head with an empty tail; a token whose text ends with a
    proper prefix of the string is a head whose tail is the tokenization of the remainder.
    """
    seqs: list[tuple[int, tuple[int, ...]]] = []
    for s in breakers:
        if not s:
            continue  # skipped by llama_sampler_init_dry
        s = s[:40]
        for tid, word in enumerate(token_texts):
            if s in word:
                seqs.append((tid, ()))
                continue
            pos = word.find(s[0])
            while pos >= 0:
                i = 1
                match = True
                while i < len(s) and i + pos < len(word):
                    if word[pos + i] != s[i]:
                        match = False
                        break
                    i += 1
                if match:
                    tail = tuple(tokenize(s[i:]))[:20]
                    if (tid, tail) not in seqs:
                        seqs.append((tid, tail))
                pos = word.find(s[0], pos + 1)
    return seqs


def rep_limits(W: np.ndarray, seqs) -> np.ndarray:
    """Step 1 as shipped: scanning back from the end, the first head that completes a restart sequence
    (the longest tail matching at that head) sets rep_limit = distance - tail length; none: the window length."""
    N, w = W.shape
    rep = np.full(N, w, dtype=np.int64)
    if not seqs:
        return rep
    if N == 1:
        return np.array([_rep_limit_single(W[0].tolist(), seqs)], dtype=np.int64)
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


def _rep_limit_single(window: list[int], seqs) -> int:
    """rep_limits for one window (the same scan, on a list)."""
    w = len(window)
    heads: dict[int, list[tuple]] = {}
    for head, tail in seqs:
        heads.setdefault(head, []).append(tail)
    for i in range(w):
        tails = heads.get(window[w - 1 - i])
        if tails is None:
            continue
        longest = -1
        for tail in tails:
            k = len(tail)
            if longest < k <= i and all(window[w - i + off] == tail[off] for off in range(k)):
                longest = k
        if longest >= 0:
            return i - longest
    return w


@dataclass(frozen=True)
class Config:
    """The sampler's parameters, as llama_sampler_init_dry receives them (float32 values)."""
    multiplier: float
    base: float
    allowed_length: int
    penalty_last_n: int
    seqs: tuple  # restart sequences, (head, tail) pairs

    @property
    def enabled(self) -> bool:
        # llama_sampler_init_dry: penalty_last_n = max(penalty_last_n, 0); disabled -> an empty sampler.
        return self.multiplier != 0.0 and self.base >= 1.0 and max(self.penalty_last_n, 0) != 0

    def window_length(self, n: int) -> int:
        return min(n, max(self.penalty_last_n, 0)) if self.enabled else 0

    def single_token_breakers(self) -> set[int]:
        return {h for h, t in self.seqs if not t}


@dataclass
class Prediction:
    """What the shipped sampler should do to a batch: per history and candidate."""
    L: np.ndarray          # (N, C) the audited length (0 where no penalty applies)
    penalized: np.ndarray  # (N, C) bool: a penalty is subtracted
    ran: np.ndarray        # (N,) bool: apply reached Step 4 (and so clears the sorted flag)


def shipped_lengths(H: np.ndarray, cands: np.ndarray, cfg: Config, oracle=match_lengths_A, rep_fn=None):
    """Apply the shipped configuration model to the histories H (N, n) using one oracle for M.

    Returns (Prediction, M) where M is the oracle's unclamped match length on the window.
    """
    return shipped_lengths_each(H, cands, cfg, (oracle,), rep_fn)[0]


def shipped_lengths_each(H: np.ndarray, cands: np.ndarray, cfg: Config, oracles, rep_fn=None) -> list:
    """shipped_lengths for several oracles at once: the configuration part (window, rep_limit, presence,
    breaker candidates) is computed once and each oracle's M is clamped by it. [(Prediction, M), ...]"""
    N, n = H.shape
    C = len(cands)
    w = cfg.window_length(n)
    W = H[:, n - w:]
    if not cfg.enabled or w <= cfg.allowed_length:
        z = np.zeros((N, C), dtype=np.int64)
        return [(Prediction(z, np.zeros((N, C), bool), np.zeros(N, bool)), z) for _ in oracles]
    rep = (rep_fn or rep_limits)(W, cfg.seqs)  # rep_fn: promised_rep_limits for the promise check
    ran = rep >= cfg.allowed_length
    # Step 3 only looks at tokens that follow some position, i.e. W[1:], and keeps lengths >= allowed.
    present = (W[:, 1:, None] == cands[None, None, :]).any(axis=1)
    breaker = np.isin(cands, list(cfg.single_token_breakers()))
    eligible = ran[:, None] & present & ~breaker[None, :]
    out = []
    for oracle in oracles:
        M = oracle(W, cands)
        L = np.minimum(M, rep[:, None])
        penalized = eligible & (L >= cfg.allowed_length)
        out.append((Prediction(np.where(penalized, L, 0), penalized, ran), M))
    return out


# -- Step 4 arithmetic, as the C++ computes it -------------------------------------------------------

_libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
_logf = _libm.logf
_logf.argtypes, _logf.restype = [ctypes.c_float], ctypes.c_float
_pow = _libm.pow
_pow.argtypes, _pow.restype = [ctypes.c_double, ctypes.c_double], ctypes.c_double

FLOAT_MAX_LOG = np.float32(88.7228391)


def max_exponent(base: float) -> int:
    """int max_exponent = FLOAT_MAX_LOG / std::log(base) (float / float, truncated), when base > 1.000001f."""
    b = np.float32(base)
    if b > np.float32(1.000001):
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
    table = {}
    out = np.empty(exp.shape, dtype=np.float32)
    flat, res = exp.ravel(), out.ravel()
    for i, e in enumerate(flat):
        e = int(e)
        if e not in table:
            with np.errstate(over="ignore"):  # the float cast overflows to inf exactly as the C++ does
                table[e] = np.float32(np.float64(cfg.multiplier) * _pow(cfg.base, float(e)))
        res[i] = table[e]
    return out


def output_logits(initial: np.ndarray, pred: Prediction, cfg: Config) -> np.ndarray:
    """The logits the shipped sampler leaves: logit -= penalty (float32) where penalized, untouched elsewhere."""
    out = np.array(np.broadcast_to(initial, pred.L.shape), dtype=np.float32)
    if pred.penalized.any():
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
        return np.array([_promised_rep_limit_single(W[0].tolist(), seqs)], dtype=np.int64)
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


def _promised_rep_limit_single(window: list[int], seqs) -> int:
    occ = restart_occurrences(window, seqs)
    return min((i - k for i, k, _ in occ), default=len(window))


def promised_lengths(H: np.ndarray, cands: np.ndarray, cfg: Config, oracle=match_lengths_A):
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
    occ = restart_occurrences(window, seqs)
    if not occ:
        return None
    i0 = min(i for i, _, _ in occ)
    shipped = max((o for o in occ if o[0] == i0), key=lambda o: o[1])
    promised = min(occ, key=lambda o: (o[0] - o[1], o[0]))
    if promised[0] - promised[1] == shipped[0] - shipped[1]:
        return None
    return shipped, promised
