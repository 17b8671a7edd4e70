"""Restart sequences of a real vocabulary as the one-window model takes them: a tuple of (head, tail) pairs
(the same value the symbol vocabulary's Config holds) with a precomputed hash and a per-head index.

A real vocabulary's breakers make thousands of sequences ("\\n" alone: 2,255 heads on llama-bpe). The model's
generic Step 1 loops over every sequence at every window position, and hashing the tuple (every cached
function of restart sequences hashes it) costs ~1 ms; here the hash is computed once and Step 1 looks only at
the window positions that hold a head (a boolean table over the vocabulary), each head's tails longest first.
The result is the same function of (window, sequences): tests/test_vocab_cases.py compares both on real windows.
"""

from __future__ import annotations

import numpy as np


def restart_scan(window, heads: dict, positions=None) -> tuple[int, tuple | None]:
    """Step 1 as shipped over one window (a list of ids) and a head -> tails map: scanning back from the last
    token, the first head whose longest matching tail (k <= i tokens, i its distance from the end) follows it
    sets rep_limit = i - k. positions: the window positions that hold a head, descending (default: every
    position). Returns (rep_limit, (head position, k)), or (window length, None) when none completes. The one
    scalar Step 1 (oracle/shipped.py's rep_limits scans batches the same way)."""
    w = len(window)
    for p in (range(w - 1, -1, -1) if positions is None else positions):
        tails = heads.get(window[p])
        if not tails:
            continue
        i = w - 1 - p
        longest = -1
        after = tuple(window[p + 1:])
        for t in tails:
            k = len(t)
            if longest < k <= i and after[:k] == t:
                longest = k
        if longest >= 0:
            return i - longest, (p, longest)
    return w, None


class RestartSeqs(tuple):
    """((head, tail), ...) sorted, with .by_head {head: tails, longest first}, .is_head (bool, per id),
    .kmax (the longest tail) and a hash computed once."""

    def __new__(cls, pairs, n_vocab: int):
        self = super().__new__(cls, sorted((int(h), tuple(int(x) for x in t)) for h, t in pairs))
        by_head: dict[int, list] = {}
        for h, t in self:
            by_head.setdefault(h, []).append(t)
        self.by_head = {h: tuple(sorted(ts, key=len, reverse=True)) for h, ts in by_head.items()}
        top = max([n_vocab] + [h + 1 for h in by_head])
        self.is_head = np.zeros(top, dtype=bool)
        if by_head:
            self.is_head[np.fromiter(by_head, dtype=np.int64)] = True
        self.kmax = max((len(t) for _, t in self), default=0)
        self._hash = tuple.__hash__(self)
        return self

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return self is other or tuple.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    def __reduce__(self):
        return (RestartSeqs, (tuple(self), len(self.is_head)))

    def head_positions(self, window: np.ndarray) -> np.ndarray:
        """Positions of the window that hold a head (ascending)."""
        w = np.asarray(window)
        inside = np.less(w, len(self.is_head))
        if inside.all():
            return np.flatnonzero(self.is_head[w])
        hit = np.zeros(len(w), dtype=bool)
        hit[inside] = self.is_head[w[inside]]
        return np.flatnonzero(hit)

    def occurrences(self, window) -> list[tuple[int, int, tuple]]:
        """Every complete occurrence (i, k, (head, *tail)): head at distance i from the end, k <= i."""
        win = np.asarray(window)
        lst = win.tolist()
        w = len(lst)
        out = []
        for p in self.head_positions(win).tolist():
            i = w - 1 - p
            h = lst[p]
            for t in self.by_head[h]:
                k = len(t)
                if k <= i and tuple(lst[p + 1:p + 1 + k]) == t:
                    out.append((i, k, (h,) + t))
        return out

    def rep_limit(self, window) -> int:
        """Step 1 as shipped: the head nearest the end that completes a sequence, its longest tail."""
        win = np.asarray(window)
        return restart_scan(win.tolist(), self.by_head, self.head_positions(win)[::-1].tolist())[0]

    def promised_rep_limit(self, window) -> int:
        """Step 1 as promised: the fewest tokens after the end of any complete occurrence."""
        win = np.asarray(window)
        lst = win.tolist()
        w = len(lst)
        best = w
        for p in self.head_positions(win)[::-1].tolist():
            i = w - 1 - p
            if i - self.kmax >= best:
                break
            for t in self.by_head[lst[p]]:
                k = len(t)
                if k <= i and i - k < best and (not k or tuple(lst[p + 1:p + 1 + k]) == t):
                    best = i - k
        return best

    def restricted(self, present) -> tuple:
        """The sequences whose tokens all occur in `present` (a set): the only ones that can complete in
        windows made of those tokens (a plain tuple, for the batch model's loops)."""
        return tuple((h, t) for h in present if h in self.by_head
                     for t in self.by_head[h] if all(x in present for x in t))
