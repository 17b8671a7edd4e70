"""Match lengths, oracle A: the unclamped match length M_z (see PREREG.md) by position-keyed matching: for every
position j >= 1 of the window, the backward match of w[:j] against w's suffix; M_z is the maximum over the
positions holding z. Oracle B (lengths_b.py) computes the same function another way and shares no code with this
module: the two must agree before a library is judged, so a bug in one cannot hide in the other.

Vectorised over batches of equal-length windows (dryz.oracle.windows: PAD, ROWS_MAX), in four layouts computing the
same function: one window (the fuzz target's batch of one), up to ROWS_MAX windows as rows (a trace's applies: all
positions of all rows in a few array operations), windows that follow one another through a stream (a generation
loop's applies: each window the one before it, a few tokens later: the backward matches of every window read off
runs along the stream's diagonals, _match_lengths_A_stream), and larger batches as columns (the enumerator's: one
array operation per position, over every window). The shipped model (shipped.py) clamps them.

Code that runs per fuzz input (the one-window paths) compares numpy arrays with ufuncs (np.not_equal, ...),
never with ==, != or <: atheris 3.0 instruments every comparison operator and leaks its result when that is
an array (a campaign's memory grew ~7 KB per input); tests/test_fuzz_campaign.py checks no such comparison runs.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from .idbytes import all_bytes
from .windows import PAD, ROWS_MAX

CHUNK = 512  # positions compared in full at a time, in the row layout
SHIFT_MAX = 8  # A's stream layout finds a window continuing the one before it up to this many tokens later
SHIFT_BUDGET = 1 << 17  # and any number of tokens later, for windows that do not, within these comparisons
WIDE = 64  # A's row layout compares a chunk's positions this wide before it compares the rest in full

def _columns(W: np.ndarray) -> np.ndarray:
    """W (N, w) as contiguous columns (w, N): each position one vector, so the loops below are cheap."""
    dtype = np.uint8 if W.size == 0 or (W.min() >= 0 and W.max() < 256) else np.int64
    return np.ascontiguousarray(W.T, dtype=dtype)


def match_lengths_A(W: np.ndarray, cands: np.ndarray) -> np.ndarray:
    """M[n, c] for windows W (N, w) and candidate ids cands (C,), by position-keyed backward matching."""
    N, w = W.shape
    if N == 1:
        return _match_lengths_A_single(W[0], cands)[None, :]
    if N <= ROWS_MAX:
        stream = _stream_of(W)
        if stream is not None:
            return _match_lengths_A_stream(W, cands, *stream)
        return _match_lengths_A_rows(W, cands)
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


def _reversed_padded(W: np.ndarray) -> np.ndarray:
    """P (N, 2w): each window reversed, then w sentinels (-1, unequal to every id) that stop every comparison."""
    N, w = W.shape
    if W.dtype == np.uint8:
        P = np.full((N, 2 * w), -1, dtype=np.int16)
    else:
        if np.count_nonzero(np.less(W, PAD)):
            raise ValueError("token ids must be non-negative")
        P = np.full((N, 2 * w), -1, dtype=np.int64)
    P[:, :w] = W[:, ::-1]
    return P


def _match_lengths_A_rows(W: np.ndarray, cands: np.ndarray) -> np.ndarray:
    """The position-keyed matching for a batch of windows (the layout of _match_lengths_A_single, one row per
    window). With R a window reversed, the tokens before position j = w - s read backwards are R[s:], so Z_j is
    the common prefix of R[s:] and R: the first mismatch in a row of comparisons, which the sentinels after R
    bound by j. Every position is compared 8 columns wide; the positions holding a candidate with no mismatch
    within 8 are then compared in full (WIDE columns first), nearest the end first, CHUNK at a time, skipping a
    position that cannot raise its token's maximum (Z <= w - s): in a periodic window the first full repeat
    decides its token. M_z: the largest Z over the positions holding z (the token at position j = w - s is
    R[s - 1])."""
    N, w = W.shape
    c = np.asarray(cands)
    C = len(c)
    if w < 2 or not C:
        return np.zeros((N, C), dtype=np.int64)
    P = _reversed_padded(W)
    R = P[:, :w]
    step = P.itemsize

    def rows(width: int) -> np.ndarray:        # [n, s - 1] holds P[n, s:s + width]: a view, no copy
        return as_strided(P[:, 1:], shape=(N, w - 1, width), strides=(P.strides[0], step, step), writeable=False)

    width = min(8, w)
    E = np.not_equal(rows(width), R[:, None, :width])
    Z = E.argmax(axis=2)
    idx = candidate_index(R[:, :w - 1], c)     # the candidate at position s - 1 of each row, or -1
    holds = np.greater_equal(idx, 0)
    later = holds & np.logical_not(np.take_along_axis(E, Z[:, :, None], axis=2)[:, :, 0]) if w > width else None
    best = np.zeros(N * C, dtype=np.int64)
    n_i, s_i = np.nonzero(holds if later is None else holds & np.logical_not(later))
    np.maximum.at(best, n_i * C + idx[n_i, s_i], Z[n_i, s_i])
    if later is not None and later.any():  # no mismatch within 8: in full, nearest the end first
        n_i, s_i = np.nonzero(later)
        order = np.argsort(s_i, kind="stable")
        n_i, s_i = n_i[order], s_i[order]
        key = n_i * C + idx[n_i, s_i]
        bound = own_widths(W)[n_i] - 1 - s_i   # Z <= j, j counted from the window's own first token
        while len(n_i):
            if len(n_i) > CHUNK:
                can = np.greater(bound, best[key])
                n_i, s_i, key, bound = n_i[can], s_i[can], key[can], bound[can]
            nb, sb, kb = n_i[:CHUNK], s_i[:CHUNK], key[:CHUNK]
            if w > WIDE:  # WIDE columns first: most positions stop there, the others are compared in full
                E = np.not_equal(rows(WIDE)[nb, sb], R[nb, :WIDE])
                first = E.argmax(axis=1)
                stop = E[np.arange(len(first)), first]
                np.maximum.at(best, kb[stop], first[stop])
                go = np.logical_not(stop)
                nb, sb, kb = nb[go], sb[go], kb[go]
            np.maximum.at(best, kb, np.not_equal(rows(w)[nb, sb], R[nb]).argmax(axis=1))
            n_i, s_i, key, bound = n_i[CHUNK:], s_i[CHUNK:], key[CHUNK:], bound[CHUNK:]
    return best.reshape(N, C)


def _stream_of(W: np.ndarray):
    """(y, end, own) when the windows W (N, w) are cheaper to match as stretches of one stream than row by row:
    window n (its own entries, after any PAD: own[n] of them) is y[end[n] - own[n] + 1: end[n] + 1]. A window
    that continues the one before it (the same window, or one k tokens later: its entries but the last k are
    the previous window's last ones; k up to SHIFT_MAX for every window, any k for the few others, within
    SHIFT_BUDGET comparisons) adds its last k tokens to y, any other its whole window. None when the stream
    costs more than the row layout (about 8 comparisons per position), or the windows are short (16 tokens at
    most) or few (fewer than 1,024 entries): the row layout is as fast there."""
    N, w = W.shape
    if w <= 16 or N * w < 1024:
        return None
    own = own_widths(W)
    new = own.copy()  # the tokens each window adds to the stream
    pad = np.equal(W[1:], PAD) if W.dtype != np.uint8 else None  # entries before a window's own
    same = np.equal(W[1:, :-1], W[:-1, 1:])  # one token later (a generation loop), all windows at once
    if pad is not None:
        same |= pad[:, :-1]
    ok = same.all(axis=1) & np.greater(own[1:], 1)
    new[1:][ok] = 1
    left = np.flatnonzero(np.logical_not(ok)) + 1
    if len(left):  # the others: every shift k = 0..SHIFT_MAX at once, the smallest that fits
        K = SHIFT_MAX + 1
        prev = np.concatenate([W[left - 1], np.zeros((len(left), K - 1), dtype=W.dtype)], axis=1)
        same = np.equal(sliding_window_view(prev, w, axis=1), W[left][:, None, :])  # [n, k]: prev[n, k:k + w]
        same |= np.greater_equal(np.arange(w), w - np.arange(K)[:, None])  # the k new entries
        if pad is not None:
            same |= pad[left - 1][:, None, :]
        ok = same.all(axis=2) & np.less(np.arange(K), own[left][:, None])
        fits = ok.any(axis=1)
        new[left[fits]] = ok.argmax(axis=1)[fits]
        left = left[np.logical_not(fits)]
        if len(left):  # after a longer prompt: the k where the previous window's last token lands, checked
            i, col = np.nonzero(np.equal(W[left], W[left - 1, -1:]))
            k = w - 1 - col
            keep = np.greater(k, SHIFT_MAX) & np.less(k, own[left[i]])
            i, k = i[keep], k[keep]
            if len(k) and len(k) * w <= SHIFT_BUDGET:
                n = left[i]
                at = np.arange(w) + k[:, None]
                same = np.equal(np.take_along_axis(W[n - 1], np.minimum(at, w - 1), axis=1), W[n])
                same |= np.greater_equal(at, w)
                if pad is not None:
                    same |= pad[n - 1]
                ok = same.all(axis=1)
                first = np.full(N, w, dtype=np.int64)
                np.minimum.at(first, n[ok], k[ok])
                fits = np.less(first[left], w)
                new[left[fits]] = first[left[fits]]
    Ly = int(new.sum())
    if (w - 1) * Ly > 8 * N * w:
        return None
    y = W[np.greater_equal(np.arange(w), (w - new)[:, None])]
    return y, np.cumsum(new) - 1, own


def _match_lengths_A_stream(W: np.ndarray, cands: np.ndarray, y: np.ndarray, end: np.ndarray,
                            own: np.ndarray) -> np.ndarray:
    """The position-keyed matching for windows that are stretches of one stream y (_stream_of). The backward
    match of w[:j] against the suffix of window n is the common suffix of y[:e - d + 1] and y[:e + 1], e =
    end[n], d = w - j, capped at j counted from the window's own first entry (it stays inside w[:j]): the run of
    equal pairs y[i] == y[i - d] ending at i = e, capped. Per lag d = 1..w-1 the runs are read for the whole
    stream at once (the index of the last unequal pair at or before each i, a running maximum), so a window costs
    its lags, not its lags times their match lengths. M_z: the largest match over the positions j >= 1 holding z
    (PAD holds no candidate)."""
    N, w = W.shape
    c = np.asarray(cands)
    C = len(c)
    if w < 2 or not C:
        return np.zeros((N, C), dtype=np.int64)
    if y.dtype == np.uint8:
        y = y.astype(np.int16)  # room for PAD
    Ly = len(y)
    it = np.int16 if Ly < 1 << 15 else np.int64
    yp = np.concatenate([np.full(w - 1, PAD, dtype=y.dtype), y])
    # row o holds y shifted right by d = w - 1 - o (PAD before the stream): the pairs y[i], y[i - d] of the lag
    # that column j = o + 1 of a window reads
    eq = np.equal(sliding_window_view(yp, Ly)[:w - 1], y)
    eq &= np.not_equal(y, PAD)
    last = np.where(eq, it(-1), np.arange(Ly, dtype=it))
    np.maximum.accumulate(last, axis=1, out=last)  # the last unequal pair at or before i, per lag
    # Z[n, o]: column j = o + 1 of window n, the run at e of its lag, capped at j less the window's PAD
    Z = np.minimum(end[:, None] - last[:, end].T, np.arange(1, w) - (w - own)[:, None])
    idx = candidate_index(W[:, 1:], c)
    key = np.where(np.greater_equal(idx, 0), idx + (np.arange(N) * C)[:, None], N * C)
    best = np.zeros(N * C + 1, dtype=np.int64)
    np.maximum.at(best, key.ravel(), Z.ravel())
    return best[:-1].reshape(N, C)


def own_widths(W: np.ndarray) -> np.ndarray:
    """Each window's own length (its entries after any PAD)."""
    return W.shape[1] - np.count_nonzero(np.equal(W, PAD), axis=1) if W.dtype != np.uint8 else \
        np.full(W.shape[0], W.shape[1], dtype=np.int64)


def candidate_index(T: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Per entry of T (ids, or PAD): the index of its id in the candidates c (distinct ids), else -1."""
    if not T.size:
        return np.zeros(T.shape, dtype=np.int64)
    top = max(int(T.max()), int(c.max()))
    if top < 1 << 16:  # a table over the ids (PAD and any id outside c map to -1)
        table = np.full(top + 2, -1, dtype=np.int64)
        table[c.astype(np.int64) + 1] = np.arange(len(c))
        return table[T.astype(np.int64) + 1]
    order = np.argsort(c)
    sc = c[order].astype(np.int64)
    pos = np.minimum(np.searchsorted(sc, T), len(sc) - 1)
    return np.where(np.equal(sc[pos], T), order[pos], -1)


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
        # Ids past a byte (a real vocabulary's, up to ~262k): the maximum per candidate (its first place in c
        # sorted) and one spare slot for every other token, not a table over every id (allocating and touching
        # that cost more than the matching itself on a fuzz input's window).
        sc = np.sort(c)
        key = np.minimum(np.searchsorted(sc, tokens), len(sc) - 1)
        key[np.not_equal(sc[key], tokens)] = len(sc)
        back = np.searchsorted(sc, c)
        best = np.zeros(len(sc) + 1, dtype=np.int64)
    else:
        key, back = tokens, c
        best = np.zeros(256, dtype=np.int64)
    if w > width:
        todo = np.logical_not(E[np.arange(w - 1), Z])  # rows with no mismatch yet: Z >= 64, not known
        Z[todo] = 0
        todo = np.flatnonzero(todo) + 1        # their s, ascending
        np.maximum.at(best, key, Z)
        full = rows(w)
        while todo.size:
            todo = todo[np.greater(w - todo, best[key[todo - 1]])]  # those that could raise their maximum
            batch, todo = todo[:16], todo[16:]
            if batch.size:
                np.maximum.at(best, key[batch - 1], np.not_equal(full[batch - 1], R).argmax(axis=1))
    else:
        np.maximum.at(best, key, Z)
    return best[back]
