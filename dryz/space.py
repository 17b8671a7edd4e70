"""The spaces exhaustive enumeration walks, and everything about them that needs no library: the plain tree
(every history over k symbols) and the canonical tree (one history per equality pattern), their candidates,
weights, counts (Bell numbers), the slices a run is cut into, and row -> history.

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

The library side is a depth-first walk with llama_sampler_clone over the tree (dryz.subject.walker);
the oracle side is check.predict_all and check_batch, the same model code as every other path.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import perm

import numpy as np

from .config import case_config
from .symbols import MAX_ALPHABET, SYMBOLS
from .errors import DryzError


@dataclass(frozen=True)
class PlainSpace:
    """Every history over k symbols, every symbol a candidate: the canonical protocol with one state (m = 0)."""
    k: int
    max_len: int

    @property
    def labels(self) -> int:
        return 0

    @property
    def radix(self) -> int:
        return self.k

    def fresh(self, m: int) -> bool:
        return False

    def cands(self, m: int) -> tuple[int, ...]:
        return tuple(range(self.k))

    def weights(self, m: int) -> list[int]:
        return [1] * self.k

    def history_weight(self, m: int) -> int:
        return 1

    def children(self, m: int) -> list[tuple[int, int, int]]:
        return [(t, t, 0) for t in range(self.k)]

    def counts(self, n_max: int | None = None) -> dict[int, dict[int, int]]:
        n_max = self.max_len if n_max is None else n_max
        return {n: {0: self.k ** n} for n in range(1, n_max + 1)}


def histories(k: int, n: int, rows: np.ndarray) -> np.ndarray:
    """The histories with lexicographic indices `rows` among all length-n histories over k symbols."""
    powers = k ** np.arange(n - 1, -1, -1, dtype=np.int64)
    return (rows[:, None] // powers[None, :]) % k


def case_count(k: int, max_len: int) -> int:
    return k * sum(k ** n for n in range(1, max_len + 1))


def plain_slices(k: int, max_len: int, workers: int) -> list[dict]:
    """Deterministic partition of one configuration's plain space: histories of length <= d, then one slice
    per prefix of length d. d grows until there are enough slices to keep every worker busy."""
    if workers <= 1:
        return [{"top": max_len}]
    d = 1
    while k ** d < 8 * workers and d < max_len - 1:
        d += 1
    if d >= max_len:
        return [{"top": max_len}]
    out = [{"top": d}]
    for row in range(k ** d):
        out.append({"prefix": tuple(int(x) for x in histories(k, d, np.array([row]))[0])})
    return out


MAX_UNBOUNDED_LENGTH = 15   # row indices are base-(N+1) integers in int64
UNBOUNDED_BREAKER = MAX_ALPHABET - 1  # '#': the breaker token when the alphabet is unbounded


class CanonicalError(ValueError, DryzError):
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


def decode(space: Space, n: int, rows: np.ndarray) -> np.ndarray:
    """Token histories (len(rows), n) from base-radix digit rows."""
    R = space.radix
    powers = np.array([R ** e for e in range(n - 1, -1, -1)], dtype=np.int64)
    digits = (rows[:, None] // powers[None, :]) % R
    return space.digit_tokens()[digits]


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


