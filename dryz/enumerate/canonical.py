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
import time
from dataclasses import dataclass
from math import perm

import numpy as np

from .. import check as check_mod
from ..check import case_config, compare_lengths, invert_deltas
from ..subject import TOKEN_DATA, SubjectError
from ..subject.binding import ArrayChanged
from ..subject.symbols import MAX_ALPHABET, SYMBOLS

MAX_UNBOUNDED_LENGTH = 15   # row indices are base-(N+1) integers in int64
UNBOUNDED_BREAKER = MAX_ALPHABET - 1  # '#': the breaker token when the alphabet is unbounded


class CanonicalError(ValueError):
    """A configuration canonical enumeration cannot reduce soundly (one-line reason)."""


@dataclass(frozen=True)
class Space:
    """The canonical tree: K interchangeable symbols (None: unbounded), an optional distinguished breaker."""
    K: int | None
    breaker: int | None   # the breaker's token id
    max_len: int

    @property
    def labels(self) -> int:
        """Symmetric digits a history can hold (0..labels-1); the breaker's digit is `labels`."""
        return self.max_len if self.K is None else min(self.K, self.max_len)

    @property
    def radix(self) -> int:
        """Base of the row integers (at least 2: rows carry a leading sentinel digit 1)."""
        return max(2, self.labels + (self.breaker is not None))

    @property
    def bdigit(self) -> int | None:
        return self.labels if self.breaker is not None else None

    def digit_tokens(self) -> np.ndarray:
        t = np.arange(self.radix, dtype=np.int64)
        if self.breaker is not None:
            t[-1] = self.breaker
        return t

    def fresh(self, m: int) -> bool:
        return self.K is None or m < self.K

    def cands(self, m: int) -> tuple[int, ...]:
        """Candidate token ids for a history with m distinct symmetric symbols: used, fresh, breaker."""
        sym = tuple(range(m + 1 if self.fresh(m) else m))
        return sym + ((self.breaker,) if self.breaker is not None else ())

    def weights(self, m: int) -> list[int]:
        """Concrete (history, candidate) pairs each candidate of cands(m) stands for (1s when unbounded)."""
        c = self.cands(m)
        if self.K is None:
            return [1] * len(c)
        h = perm(self.K, m)
        w = [h] * len(c)
        if self.fresh(m):
            w[m] = h * (self.K - m)
        return w

    def history_weight(self, m: int) -> int:
        return 1 if self.K is None else perm(self.K, m)

    def children(self, m: int) -> list[tuple[int, int, int]]:
        """(digit, token, m of the child) for a node with m distinct symmetric symbols, in walk order."""
        out = [(d, d, m) for d in range(m)]
        if self.breaker is not None:
            out.append((self.bdigit, self.breaker, m))
        if self.fresh(m) and m < self.labels:
            out.append((m, m, m + 1))
        return out

    def counts(self, n_max: int | None = None) -> dict[int, dict[int, int]]:
        """Canonical histories per length and m, by dynamic programming over the tree (no enumeration)."""
        n_max = self.max_len if n_max is None else n_max
        level = {0: 1}
        out = {}
        for n in range(1, n_max + 1):
            nxt: dict[int, int] = {}
            for m, c in level.items():
                for _, _, mc in self.children(m):
                    nxt[mc] = nxt.get(mc, 0) + c
            out[n] = level = nxt
        return out

    def to_json(self) -> dict:
        return {"interchangeable_symbols": self.K if self.K is not None else "unbounded",
                "breaker": SYMBOLS[self.breaker] if self.breaker is not None else None}


def space_for(spec, alphabet: int | None, max_len: int) -> Space:
    """The canonical space of a SpaceConfig, or CanonicalError when the configuration distinguishes tokens in
    a way the reduction does not handle. alphabet None: every alphabet size (unbounded symmetric pool)."""
    if getattr(spec, "candidates", None) is not None:
        raise CanonicalError(f"canonical mode cannot reduce configuration {spec.name!r}: custom candidates "
                             "distinguish tokens (use --no-canonical)")
    if alphabet is None and max_len > MAX_UNBOUNDED_LENGTH:
        raise CanonicalError(f"--all-alphabets supports --max-length up to {MAX_UNBOUNDED_LENGTH}")
    cfg = case_config(spec.case(alphabet or MAX_ALPHABET, ()))
    if any(tail for _, tail in cfg.seqs):
        raise CanonicalError(f"canonical mode cannot reduce configuration {spec.name!r}: breakers "
                             f"{list(spec.breakers)!r} make multi-token restart sequences (use --no-canonical)")
    heads = sorted({h for h, _ in cfg.seqs})
    if not heads:
        sp = Space(alphabet, None, max_len)
    else:
        want = alphabet - 1 if alphabet is not None else UNBOUNDED_BREAKER
        if heads != [want]:
            raise CanonicalError(f"canonical mode cannot reduce configuration {spec.name!r}: it handles one "
                                 f"single-character breaker {SYMBOLS[want]!r} (the last symbol), not "
                                 f"{list(spec.breakers)!r} (use --no-canonical)")
        sp = Space(alphabet - 1 if alphabet is not None else None, want, max_len)
    if sp.radix ** (max_len + 1) >= 1 << 63:
        raise CanonicalError(f"canonical rows of length {max_len} in base {sp.radix} overflow int64; "
                             "lower --max-length")
    return sp


def bell(n: int) -> int:
    """Bell number B(n) by the Bell triangle (independent of Space.counts)."""
    row = [1]
    for _ in range(n):
        nxt = [row[-1]]
        for x in row:
            nxt.append(nxt[-1] + x)
        row = nxt
    return row[0]


def canonical_strings(space: Space, d: int) -> list[tuple[int, ...]]:
    """Every canonical history (digits) of length d, in walk order."""
    out = []

    def rec(prefix, m):
        if len(prefix) == d:
            out.append(tuple(prefix))
            return
        for digit, _, mc in space.children(m):
            prefix.append(digit)
            rec(prefix, mc)
            prefix.pop()
    rec([], 0)
    return out


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


def decode(space: Space, n: int, rows: np.ndarray) -> np.ndarray:
    """Token histories (len(rows), n) from base-radix digit rows."""
    R = space.radix
    powers = np.array([R ** e for e in range(n - 1, -1, -1)], dtype=np.int64)
    digits = (rows[:, None] // powers[None, :]) % R
    return space.digit_tokens()[digits]


# -- the oracle side and the tallies --------------------------------------------------------------------


def run_canonical_slice(lib, alphabet, max_len, spec, prefix=(), top=None, prefixes=None):
    """One slice of a configuration's canonical space: the subtrees below the canonical `prefixes` (or one
    `prefix`), or (top=d) every canonical history of length 1..d. Tallies are weighted by multiplicity (the covered concrete
    cases) and also kept canonical."""
    from .run import MAX_EXAMPLES, ConfigResult, HarnessError
    space = space_for(spec, alphabet, max_len)
    res = ConfigResult(spec, mode="canonical")
    cfg = case_config(spec.case(alphabet or MAX_ALPHABET, ()))
    weights = {}
    t0 = time.perf_counter()

    def example(codes, H, cands):
        if len(res.examples) < MAX_EXAMPLES and codes.any():
            from ..case import Case
            for r in np.nonzero(codes.any(axis=1))[0][:MAX_EXAMPLES - len(res.examples)]:
                kind = "oracle-disagreement" if (codes[r] == 2).any() else "mismatch"
                k = alphabet if alphabet is not None else int(max(cands)) + 1
                res.examples.append((kind, Case(history=tuple(int(t) for t in H[r]), alphabet=k,
                                                penalty_last_n=spec.penalty_last_n, breakers=spec.breakers,
                                                multiplier=spec.multiplier, base=spec.base,
                                                allowed_length=spec.allowed_length)))

    def exact_sink(n, m, rows, logits, cands):
        """Parameters other than (1, 2, 1): the library's logits against the output model, bit for bit
        (exhaustive.exact_batch); the fresh candidate must come back bit-identical +0.0."""
        from .run import exact_batch, histogram_add
        H = decode(space, n, rows)
        pa, pb = check_mod.predict_both(H, cands, cfg)
        eb = exact_batch(cfg, logits, pa, pb)
        codes = eb.codes
        if space.fresh(m):
            viol = eb.bits[:, m] != 0
            res.fresh_violations += int(viol.sum())
            codes[:, m] = np.where(viol & (codes[:, m] == 0), 1, codes[:, m])
        if m not in weights:
            weights[m] = space.weights(m)
        w = weights[m]
        nh = len(rows)
        res.canonical_histories += nh
        res.canonical_cases += codes.size
        res.canonical_by_length[n] = res.canonical_by_length.get(n, 0) + nh
        res.histories += nh * space.history_weight(m)
        covered = nh * sum(w)
        res.cases += covered
        res.by_length[n] = res.by_length.get(n, 0) + covered
        mism, dis = codes == 1, codes == 2
        res.canonical_mismatches += int(mism.sum())
        for j, wj in enumerate(w):
            res.mismatches += int(mism[:, j].sum()) * wj
            res.oracle_disagreements += int(dis[:, j].sum()) * wj
            res.penalized_cases += int(eb.changed[:, j].sum()) * wj
            res.off_by_one_flagged += int(eb.flagged[:, j].sum()) * wj
            known = eb.L[:, j][eb.L[:, j] >= 0]
            histogram_add(res.L_histogram, known, wj)
            histogram_add(res.logit_bits_histogram, eb.bits[:, j], wj)
            if known.size:
                res.max_L = max(res.max_L, int(known.max()))
        example(codes, H, cands)

    def sink(n, m, rows, logits, cands):
        H = decode(space, n, rows)
        pa, pb = check_mod.predict_both(H, cands, cfg)
        lib_L, bad = invert_deltas(-logits)
        # A delta that is neither 0 nor 2^(L-1) is the library's doing, so a mismatch: -1 equals no oracle L.
        lib_L[bad] = -1
        codes = compare_lengths(lib_L, pa.L, pb.L)
        if space.fresh(m):
            viol = lib_L[:, m] != 0
            res.fresh_violations += int(viol.sum())
            codes[:, m] = np.where(viol & (codes[:, m] == 0), 1, codes[:, m])
        if m not in weights:
            weights[m] = space.weights(m)
        w = weights[m]
        nh = len(rows)
        hw = space.history_weight(m)
        res.canonical_histories += nh
        res.canonical_cases += codes.size
        res.canonical_by_length[n] = res.canonical_by_length.get(n, 0) + nh
        res.histories += nh * hw
        covered = nh * sum(w)
        res.cases += covered
        res.by_length[n] = res.by_length.get(n, 0) + covered
        mism, dis = codes == 1, codes == 2
        res.canonical_mismatches += int(mism.sum())
        off_by_one = pa.L + (pa.L > 0)
        flagged = lib_L != off_by_one
        pen = lib_L > 0
        for j, wj in enumerate(w):
            res.mismatches += int(mism[:, j].sum()) * wj
            res.oracle_disagreements += int(dis[:, j].sum()) * wj
            res.penalized_cases += int(pen[:, j].sum()) * wj
            res.off_by_one_flagged += int(flagged[:, j].sum()) * wj
            col = lib_L[:, j]
            for L, cnt in enumerate(np.bincount(col[col >= 0]).tolist()):
                if cnt:
                    res.L_histogram[L] = res.L_histogram.get(L, 0) + cnt * wj
        res.max_L = max(res.max_L, int(lib_L.max()))
        example(codes, H, cands)

    runner = CanonicalTreeRunner(lib, space, top if top is not None else max_len, spec.sampler_args(),
                                 sink if spec.invertible else exact_sink)
    if top is not None:
        runner.run()
    else:
        runner.run_many([tuple(p) for p in (prefixes if prefixes is not None else [prefix])])
    res.seconds = time.perf_counter() - t0
    return res


def subtree_sizes(space: Space, d: int, max_len: int) -> dict[int, int]:
    """Histories strictly below a node of depth d with m distinct symmetric symbols, per m (exact)."""
    sizes = {}
    for m0 in range(space.labels + 1):
        level, total = {m0: 1}, 0
        for _ in range(d, max_len):
            nxt: dict[int, int] = {}
            for m, c in level.items():
                for _, _, mc in space.children(m):
                    nxt[mc] = nxt.get(mc, 0) + c
            level = nxt
            total += sum(level.values())
        sizes[m0] = total
    return sizes


def canonical_slices(space: Space, max_len: int, workers: int) -> list[dict]:
    """Deterministic partition: canonical histories of length <= d, then the canonical prefixes of length d
    dealt into 2 * workers groups of about equal work (largest subtree first, to the lightest group; each
    group keeps walk order). A group is walked by one runner, so its oracle batches stay large."""
    if workers <= 1:
        return [{"top": max_len}]
    d = 1
    counts = space.counts(max_len)
    while sum(counts[d].values()) < 8 * workers and d < max_len - 1:
        d += 1
    if d >= max_len:
        return [{"top": max_len}]
    prefixes = canonical_strings(space, d)
    size = subtree_sizes(space, d, max_len)
    ms = [len({x for x in p if x != space.bdigit}) for p in prefixes]
    parts = min(2 * workers, len(prefixes))
    load = [0] * parts
    groups: list[list[int]] = [[] for _ in range(parts)]
    for i in sorted(range(len(prefixes)), key=lambda i: (-size[ms[i]], i)):
        g = min(range(parts), key=lambda g: (load[g], g))
        groups[g].append(i)
        load[g] += size[ms[i]]
    return [{"top": d}] + [{"prefixes": [prefixes[i] for i in sorted(g)]} for g in groups if g]


def expected_canonical(space: Space, max_len: int) -> dict:
    """Canonical and covered counts from the dynamic programme (independent of the walk)."""
    counts = space.counts(max_len)
    by_len = {n: sum(c.values()) for n, c in counts.items()}
    covered = None
    if space.K is not None:
        covered = sum(cnt * sum(space.weights(m)) for c in counts.values() for m, cnt in c.items())
    cases = sum(cnt * len(space.cands(m)) for c in counts.values() for m, cnt in c.items())
    return {"histories_by_length": by_len, "histories": sum(by_len.values()), "cases": cases,
            "covered_cases": covered}


def multiplier_zero_control(lib, alphabet, max_len: int, specs) -> dict:
    """Negative control on the canonical tree: with multiplier 0 every logit must stay exactly 0."""
    nonzero = 0
    cases = 0
    for spec in specs:
        space = space_for(spec, alphabet, max_len)

        def sink(n, m, rows, logits, cands):
            nonlocal nonzero, cases
            nonzero += int(np.count_nonzero(logits))
            cases += logits.size
        args = (0.0,) + spec.sampler_args()[1:]
        CanonicalTreeRunner(lib, space, max_len, args, sink).run()
    return {"max_length": max_len, "cases": cases, "nonzero_deltas": nonzero, "canonical": True,
            "passed": nonzero == 0 and cases > 0}
