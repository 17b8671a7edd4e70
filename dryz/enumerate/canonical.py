"""Canonical enumeration: one history per equality pattern, each standing for all its relabelings.

DRY compares tokens only for equality, except where the configuration distinguishes a token (a breaker). So
the library's output on a history, for a candidate, depends only on the equality pattern of history + candidate,
up to the distinguished tokens. The canonical histories are restricted-growth strings: digit 0 first, and each
new symmetric symbol is the next unused one (first-occurrence order); a single-token breaker is a fixed digit
allowed anywhere. A canonical history with m distinct symmetric symbols has as candidates its m symbols, the
breaker (if any) and one fresh symbol (if the pool is not exhausted), which must always get L = 0.

Multiplicities over a pool of K interchangeable symbols (K = k, or k - 1 with the breaker fixed):
  a canonical history with m distinct symmetric symbols stands for K!/(K-m)! concrete histories;
  each used candidate and the breaker candidate for K!/(K-m)! concrete (history, candidate) pairs;
  the fresh candidate for K!/(K-m)! * (K-m) pairs (every unused symbol).
With K unbounded (--all-alphabets) every count is canonical; the run covers every alphabet size at once.

The library side is a depth-first walk with llama_sampler_clone over the canonical tree (CanonicalTreeRunner);
the oracle side is check.predict_both / compare_lengths, the same model code as every other path.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..space import CanonicalError, Space
from ..subject import TOKEN_DATA
from ..subject.binding import ArrayChanged

# -- the library's side: depth-first over the canonical tree --------------------------------------------


class GroupBuffer:
    """B candidate arrays of one fixed id list (the candidates of histories with one m), in one block."""

    def __init__(self, L, ids: tuple[int, ...], B: int):
        c = len(ids)
        self.c, self.B, self.ids = c, B, np.array(ids, dtype=np.int64)
        self.data = (L.llama_token_data * (B * c))()
        self.data_np = np.frombuffer(self.data, dtype=TOKEN_DATA)
        self.template_ids = np.tile(np.array(ids, dtype=np.int32), B)
        self.data_np["id"] = self.template_ids
        self.arrs = (L.llama_token_data_array * B)()
        base = ctypes.addressof(self.data)
        entry = ctypes.sizeof(L.llama_token_data)
        T = L.llama_token_data_array
        self.arrs_np = np.frombuffer(self.arrs, dtype=np.dtype(
            {"names": ["data", "size", "selected", "sorted"], "formats": [np.uint64, np.uint64, np.int64, np.bool_],
             "offsets": [T.data.offset, T.size.offset, T.selected.offset, T.sorted.offset],
             "itemsize": ctypes.sizeof(T)}))
        self.arrs_np["data"] = base + np.arange(B, dtype=np.uint64) * np.uint64(c * entry)
        self.arrs_np["size"], self.arrs_np["selected"], self.arrs_np["sorted"] = c, -1, False
        self.expected_ptrs = self.arrs_np["data"].copy()
        self.addrs = (ctypes.addressof(self.arrs) + np.arange(B) * ctypes.sizeof(L.llama_token_data_array)).tolist()


def group_buffer(subject, m: int, ids: tuple[int, ...], need: int) -> GroupBuffer:
    """A buffer per (m, candidate ids) with at least min(need, the batch size) slots, kept per process (and
    grown when a later run needs more): two groups with equal ids (m = K - 1 and m = K) never share slots."""
    cache = subject.__dict__.setdefault("_canonical_buffers", {})
    key = (m, ids)
    want = max(1, min(need, 65536, (1 << 18) // max(len(ids), 1)))
    if key not in cache or cache[key].B < want:
        cache[key] = GroupBuffer(subject.L, ids, want)
    return cache[key]


def raw_calls(subject):
    """llama_sampler_{clone,accept,apply,free} with address-sized arguments (Subject.raw_calls)."""
    return subject.raw_calls


class CanonicalTreeRunner:
    """Depth-first walk of the canonical tree with llama_sampler_clone. Each child's candidate array is a
    slot of the buffer for its m (the candidates differ by m, so each m has its own buffer of fixed-size
    arrays). Each child but the last gets a clone of the node's sampler and is walked at once; the last
    takes the node's sampler over, so every sampler is freed exactly once and at most one sampler per
    depth is alive.

    Output arrives in batches: sink(n, m, rows, logits, cands) with rows the histories' digits read as
    base-radix integers, logits (len(rows), len(cands)) float32 in candidate order."""

    def __init__(self, subject, space: Space, max_len: int, sampler_args, sink):
        self.S, self.space, self.N, self.args, self.sink = subject, space, max_len, sampler_args, sink
        M = space.labels
        self.R = space.radix
        if self.R ** (max_len + 1) >= 1 << 63:  # space_for refuses such spaces up front
            raise CanonicalError(f"canonical rows overflow: radix {self.R} ** {max_len + 1} >= 2**63")
        self.kids = [space.children(m) for m in range(M + 1)]
        need = [0] * (M + 1)  # histories per m in the whole tree: an upper bound for any subtree
        for c in space.counts(max_len).values():
            for m, cnt in c.items():
                need[m] += cnt
        self.bufs = [group_buffer(subject, m, space.cands(m), need[m]) for m in range(M + 1)]
        self.fill = [0] * (M + 1)
        self.cap = [b.B for b in self.bufs]
        self.addrs = [b.addrs for b in self.bufs]
        self.rows = [[] for _ in range(M + 1)]  # rows with a leading sentinel digit 1 (it gives the length)
        self.clone, self.accept, self.apply, self.free = raw_calls(subject)

    def run(self, prefix=()):
        """The subtree below `prefix` (canonical digits; the prefix itself is not evaluated)."""
        self.run_many([tuple(prefix)])

    def run_many(self, prefixes):
        """The subtrees below each prefix in turn, flushed together at the end."""
        import sys
        for b in self.bufs:  # a buffer left dirty by an aborted run must not leak into this one
            b.data_np["logit"] = 0.0
        if sys.getrecursionlimit() < self.N + 200:  # one frame per depth
            sys.setrecursionlimit(self.N + 200)
        for prefix in prefixes:
            self._walk(prefix)
        for g in range(len(self.bufs)):
            self._flush(g)

    def _walk(self, prefix):
        sp = self.space
        root = ctypes.cast(self.S.new_sampler(*self.args), ctypes.c_void_p).value  # the walk owns it
        row, m = 1, 0
        try:
            for d in prefix:
                step = {digit: (tok, mc) for digit, tok, mc in sp.children(m)}
                if d not in step:
                    raise ValueError(f"prefix {prefix!r} is not a canonical history")
                tok, m = step[d]
                self.accept(root, tok)
                row = row * self.R + d
        except BaseException:
            self.free(root)
            raise
        if len(prefix) >= self.N:
            self.free(root)
            return
        self._visit(root, len(prefix), row, m)

    def _visit(self, parent, depth, row, m):
        clone, accept, apply, free = self.clone, self.accept, self.apply, self.free
        fill, cap, addrs, rows = self.fill, self.cap, self.addrs, self.rows
        R = self.R
        n = depth + 1
        spec = self.kids[m]
        last = len(spec) - 1
        if n == self.N:  # leaves: nothing to keep
            for i, (digit, tok, mc) in enumerate(spec):
                s = parent if i == last else clone(parent)
                accept(s, tok)
                f = fill[mc]
                if f == cap[mc]:
                    self._flush(mc)
                    f = 0
                fill[mc] = f + 1
                rows[mc].append(row * R + digit)
                apply(s, addrs[mc][f])
                free(s)
            return
        for i, (digit, tok, mc) in enumerate(spec):
            s = parent if i == last else clone(parent)
            accept(s, tok)
            f = fill[mc]
            if f == cap[mc]:
                self._flush(mc)
                f = 0
            fill[mc] = f + 1
            crow = row * R + digit
            rows[mc].append(crow)
            apply(s, addrs[mc][f])
            self._visit(s, n, crow, mc)

    def _flush(self, g):
        f = self.fill[g]
        if not f:
            return
        b = self.bufs[g]
        c = b.c
        if not np.array_equal(b.data_np["id"][:f * c], b.template_ids[:f * c]):
            raise ArrayChanged("the sampler changed candidate ids in the array (DRY must not)")
        if not (np.all(b.arrs_np["size"][:f] == c) and np.array_equal(b.arrs_np["data"][:f],
                                                                      b.expected_ptrs[:f])):
            raise ArrayChanged("the sampler changed the candidate array's size or data pointer")
        logits = b.data_np["logit"][:f * c].reshape(f, c).copy()
        b.data_np["logit"][:f * c] = 0.0
        rows = np.array(self.rows[g], dtype=np.int64)
        self.rows[g].clear()
        self.fill[g] = 0
        # The sentinel: a row of length n lies in [R^n, 2 R^n).
        powers = np.array([self.R ** e for e in range(self.N + 2)], dtype=np.int64)
        lens = np.searchsorted(powers, rows, side="right") - 1
        for n in np.unique(lens):
            sel = lens == n
            self.sink(int(n), g, rows[sel] - powers[n], logits[sel], b.ids)


