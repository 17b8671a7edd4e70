"""Step 1 as promised: the most recently *completed* restart sequence limits the repetition.

Everything else is the shipped model's (shipped.py); only rep_limit differs.
"""

from __future__ import annotations

import numpy as np

from .idbytes import bytes_or_none
from .lengths import match_lengths_A
from .windows import ROWS_MAX
from .seqindex import RestartSeqs
from .shipped import Config, Prediction, _completes, _sequence_bytes, occurrences, shipped_lengths

# -- Step 1 as promised ----------------------------------------------------------------------------------
# The source promises that the most recently *completed* restart sequence limits the repetition. The shipped
# scan (rep_limits above) takes the most recent *head* that completes one instead; PREREG.md derives when the
# two differ (only when one restart sequence completes strictly inside another: the documented 'ni' in
# 'amniotic').


def _promised_rep_limit_single(window, seqs) -> int | None:
    """promised_rep_limits for one window: the fewest tokens after the end of an occurrence, i.e. over each
    sequence's rightmost occurrence, w - (start + length)."""
    text, seq_bytes = bytes_or_none(window), _sequence_bytes(seqs)
    if text is None or seq_bytes is None:
        return None
    w = len(text)
    return min((w - p - len(b) for b, p in zip(seq_bytes, map(text.rfind, seq_bytes)) if p >= 0), default=w)


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
    if isinstance(seqs, RestartSeqs):  # a real vocabulary's: by head position (seqindex.py)
        if N == 1:
            return np.array([seqs.promised_rep_limit(W[0])], dtype=np.int64)
        seqs = seqs.restricted(set(np.unique(W).tolist()))
        if not seqs:
            return rep
    if N == 1:
        one = _promised_rep_limit_single(W[0], seqs)
        if one is not None:
            return np.array([one], dtype=np.int64)
    if N <= ROWS_MAX:  # each sequence's occurrence nearest the end leaves the fewest tokens after it
        for head, tail in seqs:
            hit = occurrences(W, head, tail)
            p = hit.shape[1]
            if p:
                last = p - 1 - hit[:, ::-1].argmax(axis=1)
                rep = np.where(hit.any(axis=1), np.minimum(rep, w - 1 - last - len(tail)), rep)
        return rep
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
    if isinstance(seqs, RestartSeqs):
        return divergence_of(seqs.occurrences(window))
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
