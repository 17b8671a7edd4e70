"""Match lengths: two independent algorithms for the unclamped match length M_z (see PREREG.md).

  A  position-keyed: for every position j >= 1 of the window, the backward match of w[:j] against w's suffix;
     M_z is the maximum over the positions holding z.
  B  extended-string: the longest suffix of w + [z] that occurs inside w; M_z is its length minus one.

Both are vectorised over batches of equal-length windows. The shipped model (shipped.py) clamps them.

Code that runs per fuzz input (the one-window paths) compares numpy arrays with ufuncs (np.not_equal, ...),
never with ==, != or <: atheris 3.0 instruments every comparison operator and leaks its result when that is
an array (a campaign's memory grew ~7 KB per input); tests/test_fuzz_campaign.py checks no such comparison runs.
"""

from __future__ import annotations

import numpy as np

from .idbytes import all_bytes, bytes_or_none

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
    text = bytes_or_none(window)
    if text is None:  # ids past a byte (a real vocabulary's)
        return _match_lengths_B_str(window, cands)
    w = len(text)
    c = np.asarray(cands)
    out = np.zeros(len(c), dtype=np.int64)
    if w < 2 or not len(c):
        return out  # a suffix of length 2 of w + [z] cannot occur in fewer than 2 tokens: M = 0
    if bytes_or_none(c) is None:
        return _match_lengths_B_str(window, cands)
    t = np.frombuffer(text, dtype=np.uint8)
    follows = np.zeros(256, dtype=bool)
    follows[t[1:][np.equal(t[:-1], t[-1])]] = True  # the bytes right after an occurrence of the last one
    for ci in np.flatnonzero(follows[c]).tolist():
        extended = text + bytes([int(c[ci])])
        out[ci] = _longest_suffix(text, extended) - 1
    return out


def _match_lengths_B_str(window: np.ndarray, cands: np.ndarray) -> np.ndarray:
    """_match_lengths_B_bytes for ids past a byte (a real vocabulary): the window as a str of code points
    chr(id) (every llama_token id is below 0x110000 here), searched with str.find the same way."""
    c = np.asarray(cands)
    out = np.zeros(len(c), dtype=np.int64)
    w = len(window)
    if w < 2 or not len(c):
        return out
    ids = [int(t) for t in window]
    if min(ids) < 0 or int(c.min()) < 0:
        raise ValueError("token ids must be non-negative")
    text = "".join(map(chr, ids))
    last = ids[-1]
    follows = {ids[i + 1] for i in range(w - 1) if ids[i] == last}
    for ci, z in enumerate(c.tolist()):
        if z not in follows:
            continue
        extended = text + chr(z)
        out[ci] = _longest_suffix(text, extended) - 1
    return out


def _longest_suffix(text, extended) -> int:
    """The longest suffix of `extended` (text + one candidate; bytes or str) that occurs in `text`, given that
    the suffix of length 2 does: lo occurs, hi bounds it; gallop (most lengths are short), then bisect."""
    w = len(text)
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
    return lo
