"""Match lengths, oracle B: the unclamped match length M_z (see PREREG.md) as an extended-string search: the longest
suffix of w + [z] that occurs inside w; M_z is its length minus one. Oracle A (lengths.py) computes the same
function another way; this module shares no code with it (not a helper, not a table: a test checks neither
imports the other), so that their agreement, which every verdict requires before it judges a library, cannot be a
shared bug's.

Vectorised over batches of equal-length windows (dryz.oracle.windows: PAD, ROWS_MAX), in three layouts computing the
same function: one window (the fuzz target's batch of one, searched with bytes.find, or str.find for ids past a
byte), up to ROWS_MAX windows as rows (the occurrences that exist, grown together; heavy windows searched as
text), and larger batches as columns.

Code that runs per fuzz input compares numpy arrays with ufuncs (np.not_equal, ...), never with ==, != or <:
atheris 3.0 leaks the result of an instrumented comparison operator that is an array.
"""

from __future__ import annotations

from itertools import compress

import numpy as np

from .windows import PAD, ROWS_MAX

CHUNK = 512  # occurrences grown at a time in the row layout
HEAVY = 32  # the row layout searches a window with more occurrences of a 4-token suffix as text


def _ids_as_bytes(ids) -> bytes | None:
    """The ids as bytes when each is in 0..255, else None (B's own reading; A has its own)."""
    a = np.asarray(ids)
    if a.dtype == np.uint8:
        return a.tobytes()
    a = a.astype(np.int64, copy=False)
    if np.count_nonzero(np.right_shift(a, 8)):  # an id past a byte, or negative
        return None
    return a.astype(np.uint8).tobytes()


def _position_of(W: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Per entry of W (ids, or PAD): the index of its id among the distinct candidates c, else -1."""
    out = np.full(W.shape, -1, dtype=np.int64)
    if not W.size or not len(c):
        return out
    if W.dtype == np.uint8 and _ids_as_bytes(c) is not None:  # byte ids: a 256-entry lookup
        lookup = np.full(256, -1, dtype=np.int64)
        lookup[np.asarray(c, dtype=np.int64)] = np.arange(len(c))
        return lookup.take(W)
    order = np.argsort(c, kind="stable")
    ranked = np.asarray(c, dtype=np.int64)[order]
    at = np.clip(np.searchsorted(ranked, W.astype(np.int64)), 0, len(ranked) - 1)
    hit = np.equal(ranked[at], W)
    out[hit] = order[at[hit]]
    return out


def _lengths_without_pad(W: np.ndarray) -> np.ndarray:
    """Each window's own length: its entries that are not PAD (none in a byte array)."""
    if W.dtype == np.uint8:
        return np.full(W.shape[0], W.shape[1], dtype=np.int64)
    return np.count_nonzero(np.not_equal(W, PAD), axis=1)


def match_lengths_B(W: np.ndarray, cands: np.ndarray) -> np.ndarray:
    """M[n, c]: (longest suffix of W[n] + [c] occurring inside W[n]) - 1, floored at 0."""
    N, w = W.shape
    M = np.zeros((len(cands), N), dtype=np.int64)
    if w == 0:
        return M.T.copy()
    if N == 1:
        return _match_lengths_B_bytes(W[0], cands)[None, :]
    if N <= ROWS_MAX:
        return _match_lengths_B_rows(W, cands)
    T = np.ascontiguousarray(np.asarray(W, dtype=np.int64).T)  # each position one vector
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


def _match_lengths_B_rows(W: np.ndarray, cands: np.ndarray) -> np.ndarray:
    """The extended-string search of the column layout for a batch of windows and every candidate at once,
    keeping only the occurrences that exist: each is (window n, candidate z, start i) of the current suffix of
    W[n] + [z], which ends at the position p holding z. Length 1: every p with W[n, p] = z. Growing the suffix
    by W[n, w - m] to the left, an occurrence at i survives, at i - 1, when W[n, i - 1] is that token. Every
    occurrence grows 4 steps; those still alive then grow to their end CHUNK at a time, the latest-ending first
    (in stretches of 8 and 64 steps, each occurrence stopping at its first mismatch), skipping an occurrence
    that cannot exceed the longest found for its window and candidate (it can grow to p + 1 at most). found:
    the longest length that occurs. A window with more than HEAVY occurrences of a suffix of length 4 (a run or
    a short period, where growing each occurrence to its end costs its length squared) is searched as text
    instead (_search_as_text: the longest suffix found with bytes.find)."""
    N, w = W.shape
    c = np.asarray(cands)
    C = len(c)
    found = np.zeros(N * C, dtype=np.int64)
    if w == 0 or not C:
        return found.reshape(N, C)
    idx = _position_of(W, c)
    holds = np.greater_equal(idx, 0)
    heavy = _heavy_windows(W, holds, c)
    if len(heavy):
        holds[heavy] = False
    n_i, p_i = np.nonzero(holds)
    pair = n_i * C + idx[n_i, p_i]
    found[pair] = 1
    # W with w PAD columns before it: the tokens left of an occurrence, read as PAD before the window's start
    Wl = np.concatenate([np.full((N, w), PAD, dtype=np.int16 if W.dtype == np.uint8 else np.int64), W],
                        axis=1).ravel()  # row n at n * 2w, its window at n * 2w + w

    def grow(n_i, p_i, pair, m, stretches):
        """Grow the occurrences (all of length m, ending at p_i) through the stretches; found updated. Returns
        the ones alive after the last stretch."""
        for stretch in stretches:
            L = min(stretch, w - m)
            if not len(pair) or L <= 0:
                break
            i = np.arange(L)
            row = n_i * (2 * w) + w
            # step m + i compares W[start - 1 - i] with W[w - m - i] (start = p - m + 1)
            E = np.not_equal(Wl[(row + p_i - m)[:, None] - i], Wl[(row + w - m)[:, None] - i])
            first = E.argmax(axis=1)
            stop = E[np.arange(len(first)), first]
            np.maximum.at(found, pair, np.where(stop, m + first, m + L))
            go = np.logical_not(stop)
            n_i, p_i, pair, m = n_i[go], p_i[go], pair[go], m + L
        return n_i, p_i, pair, m

    n_i, p_i, pair, m = grow(n_i, p_i, pair, 1, (1, 3))
    if len(pair) > CHUNK:
        order = np.argsort(-p_i, kind="stable")
        n_i, p_i, pair = n_i[order], p_i[order], pair[order]
    # the longest an occurrence ending at p can grow: to its window's own first token
    reach = p_i + 1 - (w - _lengths_without_pad(W))[n_i]
    while len(pair) and m < w:
        if len(pair) > CHUNK:
            can = np.greater(reach, found[pair])
            n_i, p_i, pair, reach = n_i[can], p_i[can], pair[can], reach[can]
        grow(n_i[:CHUNK], p_i[:CHUNK], pair[:CHUNK], m, (8, 64, w))
        n_i, p_i, pair, reach = n_i[CHUNK:], p_i[CHUNK:], pair[CHUNK:], reach[CHUNK:]
    M = np.maximum(found - 1, 0).reshape(N, C)
    if len(heavy):
        _search_as_text(W, c, heavy, M)
    return M


def _heavy_windows(W: np.ndarray, holds: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The windows of a row batch that B's row layout searches as text (_search_as_text), when the ids are
    bytes: those with more than HEAVY occurrences of a suffix of length 4 of W[n] + [z] (runs, short periods:
    growing every occurrence to its end costs its length squared)."""
    w = W.shape[1]
    if w <= 16 or _ids_as_bytes(c) is None or int(W.max()) > 255:
        return np.zeros(0, dtype=np.int64)
    four = holds[:, 3:] & np.equal(W[:, 2:-1], W[:, -1:]) & np.equal(W[:, 1:-2], W[:, -2:-1]) \
        & np.equal(W[:, :-3], W[:, -3:-2])
    return np.flatnonzero(np.greater(np.count_nonzero(four, axis=1), HEAVY))


def _search_as_text(W: np.ndarray, c: np.ndarray, rows: np.ndarray, M: np.ndarray) -> None:
    """The extended-string search of the windows `rows` (ascending) as bytes, candidate by candidate, into M:
    a candidate z whose suffix of length 2 ([last, z]) occurs in the window is searched further (the longest
    suffix of text + [z] that occurs, _longest_suffix); M_z is that length minus one, else 0.

    A window one token after the one before it (its entries but the last are the previous window's last ones,
    as in a generation loop) is bounded by it: if a suffix of length m of u' + [z] occurs in u' (u' a suffix of
    u + [t]), its first m - 1 tokens, a suffix of u + [t], occur in u' without its last token, so in u:
    m - 1 <= (the longest for u and t) = M_u(t) + 1 at most. The bound is tried first."""
    w = W.shape[1]
    own = _lengths_without_pad(W).tolist()
    buf = W.astype(np.uint8).tobytes()
    zs = [bytes((z,)) for z in c.tolist()]
    pairs: dict = {}  # last byte -> [last, z] per candidate
    col = _position_of(W[:, -1:], c)[:, 0].tolist()  # each window's last token among the candidates
    follows = np.equal(W[1:, :-1], W[:-1, 1:])  # window n + 1 is window n one token later
    if W.dtype != np.uint8:
        follows |= np.equal(W[1:, :-1], PAD)
    follows = [False] + follows.all(axis=1).tolist()
    prev, prev_n = None, -1
    for n in rows.tolist():
        text = buf[n * w + w - own[n]:(n + 1) * w]
        out = [0] * len(zs)
        bound = None
        if follows[n] and col[n] >= 0:
            if prev_n != n - 1:
                prev = M[n - 1].tolist()
            bound = prev[col[n]] + 2
        if len(text) >= 2 and (bound is None or bound >= 2):
            last = text[-1]
            pz = pairs.get(last)
            if pz is None:
                pz = pairs[last] = [bytes((last,)) + z for z in zs]
            for i, pair in enumerate(pz):
                if text.find(pair) >= 0:
                    out[i] = _longest_suffix(text, text + zs[i], bound) - 1
        M[n] = out
        prev, prev_n = out, n


def _match_lengths_B_bytes(window: np.ndarray, cands: np.ndarray) -> np.ndarray:
    """The same extended-string search for one window, with bytes.find. If the suffix of length m+1 of
    the extended string occurs in the window, so does every shorter one: search the longest. Length 2 is
    tested for every candidate at once (the bytes right after each occurrence of the window's last byte);
    only candidates that pass it are searched further, one bytes.find per length tried."""
    text = _ids_as_bytes(window)
    if text is None:  # ids past a byte (a real vocabulary's)
        return _match_lengths_B_str(window, cands)
    w = len(text)
    c = np.asarray(cands)
    out = np.zeros(len(c), dtype=np.int64)
    if w < 2 or not len(c):
        return out  # a suffix of length 2 of w + [z] cannot occur in fewer than 2 tokens: M = 0
    if _ids_as_bytes(c) is None:
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
    chr(id) (every llama_token id is below 0x110000 here), searched with str.find the same way. The tokens
    that follow an occurrence of the last one, and the candidates among them, are found without a Python loop
    (a fuzz campaign traces every iteration of one)."""
    c = np.asarray(cands)
    out = np.zeros(len(c), dtype=np.int64)
    w = len(window)
    if w < 2 or not len(c):
        return out
    t = np.asarray(window)
    if int(t.min()) < 0 or int(c.min()) < 0:
        raise ValueError("token ids must be non-negative")
    ids = t.tolist()
    text = "".join(map(chr, ids))
    follows = set(t[1:][np.equal(t[:-1], ids[-1])].tolist())
    cl = c.tolist()
    for ci in compress(range(len(cl)), map(follows.__contains__, cl)):
        out[ci] = _longest_suffix(text, text + chr(cl[ci])) - 1
    return out


def _longest_suffix(text, extended, bound: int | None = None) -> int:
    """The longest suffix of `extended` (text + one candidate; bytes or str) that occurs in `text`, given that
    the suffix of length 2 does: lo occurs, hi bounds it; gallop (most lengths are short), then bisect. bound:
    a length known not to be exceeded, tried first."""
    w = len(text)
    lo, hi, step = 2, w, 1
    if bound is not None and bound < w:
        if bound <= lo or text.find(extended[w + 1 - bound:]) >= 0:
            return max(bound, lo)
        hi = bound - 1
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
