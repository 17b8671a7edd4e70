"""One tree walker for the library's side of `dryz exhaustive`: the plain tree (every history over k symbols)
and the canonical tree (dryz.space.Space), walked depth-first in C (dryz/subject/_drive.c, walk).

A tree is described by any object with
  radix             the base of its digits (not needed by the walk itself; kept for the callers' row codes),
  labels            the largest state m (states are 0..labels),
  children(m)       [(digit, token, child m), ...] in walk order, for a node in state m,
  cands(m)          the candidate token ids of a history in state m (each at logit 0 in its candidate array).
dryz.space.PlainSpace (one state, m = 0) and dryz.space.Space (the canonical tree) satisfy it.

walk() makes the same library calls as the Python runners it replaces, and no others: per root a sampler
from llama_sampler_init_dry with the prefix accepted; per history one llama_sampler_clone of its parent's
sampler (none for a node's last child, which takes its parent's over), one llama_sampler_accept of its last
token and one llama_sampler_apply; every sampler freed once. Only the loop is in C: the tree's tables go in once,
the output comes back per full batch of one (length, state) group, as token histories and logits.

DRYZ_DRIVE=ctypes (or an unbuilt extension) walks in Python through ctypes instead, with the same calls in the
same order and the same batches.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from .binding import N_CTX_TRAIN_DEFAULT, TOKEN_DATA, ArrayChanged

BATCH_ROWS = 65536          # histories per batch at most
BATCH_BYTES = 4 << 20       # and at most this many output bytes per batch (token history + logits): a
                            # (n, m) group of length 13, 14 candidates holds 34,952 histories; the canonical
                            # all-alphabets tree of length 13 then holds at most ~100 MB of batches at once
CHECK_EVERY = 16384         # histories between two looks at pending signals (KeyboardInterrupt)


@dataclass(frozen=True)
class Tables:
    """A tree's description as the C walk takes it (int32 arrays), plus what the Python side needs."""
    S: int
    kid_off: np.ndarray
    kid_tok: np.ndarray
    kid_m: np.ndarray
    kid_digit: np.ndarray
    cand_off: np.ndarray
    cand_ids: np.ndarray
    cands: tuple            # per m: np.int64 array of candidate ids (what the sink gets)

    def step(self, m: int) -> dict[int, tuple[int, int]]:
        lo, hi = self.kid_off[m], self.kid_off[m + 1]
        return {int(d): (int(t), int(c)) for d, t, c in
                zip(self.kid_digit[lo:hi], self.kid_tok[lo:hi], self.kid_m[lo:hi])}


def tables(tree) -> Tables:
    S = tree.labels + 1
    off, tok, mm, dig, coff, cids, cands = [0], [], [], [], [0], [], []
    for m in range(S):
        for d, t, c in tree.children(m):
            if not 0 <= c < S:
                raise ValueError(f"tree: child state {c} of state {m} is out of range 0..{S - 1}")
            dig.append(d), tok.append(t), mm.append(c)
        off.append(len(tok))
        ids = tuple(int(x) for x in tree.cands(m))
        cids.extend(ids)
        coff.append(len(cids))
        cands.append(np.array(ids, dtype=np.int64))
    i32 = lambda x: np.array(x, dtype=np.int32)  # noqa: E731
    return Tables(S, i32(off), i32(tok), i32(mm), np.array(dig, dtype=np.int64), i32(coff), i32(cids),
                  tuple(cands))


def group_counts(tab: Tables, roots, max_len: int) -> np.ndarray:
    """Histories per (length n, state m) below the given roots ((depth, m) pairs), by dynamic programming:
    (max_len + 1, S) int64 (the exact batch sizes the walk will need at most)."""
    out = np.zeros((max_len + 1, tab.S), dtype=object)
    level: dict[tuple[int, int], int] = {}
    for depth, m in roots:
        level[(depth, m)] = level.get((depth, m), 0) + 1
    for depth in range(max_len):
        for (d, m), cnt in list(level.items()):
            if d != depth:
                continue
            del level[(d, m)]
            for i in range(tab.kid_off[m], tab.kid_off[m + 1]):
                c = int(tab.kid_m[i])
                out[depth + 1, c] += cnt
                level[(depth + 1, c)] = level.get((depth + 1, c), 0) + cnt
    return out


def batch_caps(tab: Tables, counts, max_len: int, batch_rows: int = BATCH_ROWS,
               batch_bytes: int = BATCH_BYTES) -> np.ndarray:
    caps = np.zeros((max_len + 1, tab.S), dtype=np.int64)
    for n in range(1, max_len + 1):
        for m in range(tab.S):
            c = int(tab.cand_off[m + 1] - tab.cand_off[m])
            per = max(1, batch_bytes // (8 * n + 4 * c))
            caps[n, m] = max(1, min(int(counts[n, m]), batch_rows, per))
    return caps


def resolve_roots(tab: Tables, prefixes) -> list[tuple[tuple[int, ...], int]]:
    """Digit prefixes -> (token prefix, state m)."""
    roots = []
    for p in prefixes:
        m, toks = 0, []
        for d in p:
            st = tab.step(m)
            if int(d) not in st:
                raise ValueError(f"prefix {tuple(p)!r} is not a node of the tree")
            t, m = st[int(d)]
            toks.append(t)
        roots.append((tuple(toks), m))
    return roots


def addresses(subject) -> tuple[int, int, int, int, int]:
    """llama_sampler_{init_dry,clone,accept,apply,free} in the subject's loaded libllama."""
    return tuple(subject.L.address(n) for n in ("llama_sampler_init_dry", "llama_sampler_clone",
                                                  "llama_sampler_accept", "llama_sampler_apply",
                                                  "llama_sampler_free"))


def walk(subject, tree, max_len: int, sampler_args, sink, prefixes=((),), top: int | None = None, *,
         batch_rows: int = BATCH_ROWS, batch_bytes: int = BATCH_BYTES, n_ctx_train: int | None = None,
         _fns=None, _drive="auto") -> int:
    """Every history below each prefix (digits of `tree`; the prefix itself is not evaluated) up to length
    max_len, or (top=d) every history of length 1..d, with candidates tree.cands(m) at logit 0, one apply per
    history. Output: sink(n, m, H, logits, cands) per batch of one (length n, state m) group, H int64
    (rows, n) token histories, logits float32 (rows, len(cands)), cands int64 (len(cands),). Batches hold at
    most batch_rows histories and batch_bytes output bytes; the rest of every group is flushed at the end, in
    (n, m) order. sampler_args: (multiplier, base, allowed_length, penalty_last_n, breakers[, vocab]) as
    LibLlama.new_sampler takes them. Returns the number of histories applied.

    Raises ArrayChanged when the sampler changed a candidate array's ids, size or data pointer. Every sampler
    is freed exactly once, also when the sink raises or a KeyboardInterrupt arrives.

    _fns: (init_dry, clone, accept, apply, free) addresses to call instead of the library's own (tests wrap
    them to count calls); _drive: "auto" (C unless DRYZ_DRIVE=ctypes or the extension is missing), "c" or
    "ctypes"."""
    if top is not None:
        if tuple(tuple(p) for p in prefixes) != ((),):
            raise ValueError("walk: top and prefixes exclude each other")
        max_len = top
    tab = tables(tree)
    roots = resolve_roots(tab, prefixes)
    counts = group_counts(tab, [(len(t), m) for t, m in roots if len(t) < max_len], max_len)
    caps = batch_caps(tab, counts, max_len, batch_rows, batch_bytes)
    multiplier, base, allowed_length, penalty_last_n, breakers = sampler_args[:5]
    vocab = _vocab_address(subject, sampler_args)
    breakers = tuple(breakers)
    if n_ctx_train is None:
        n_ctx_train = N_CTX_TRAIN_DEFAULT
    cands = tab.cands
    widths = [len(c) for c in cands]

    def emit(n, m, Hb, Lb):
        H = np.frombuffer(Hb, dtype=np.int64).reshape(-1, n)
        logits = np.frombuffer(Lb, dtype=np.float32).reshape(-1, widths[m])
        sink(n, m, H, logits, cands[m])

    built = getattr(subject, "drive", None)
    use_c = built is not None if _drive == "auto" else _drive == "c"
    fns = tuple(_fns) if _fns is not None else addresses(subject)
    if use_c:
        if built is None:
            from . import _drive as drive  # on use: _drive="c" asked for it: fail loudly when it is not built
        else:
            drive = built
        return drive.walk(fns, vocab, subject.abi, n_ctx_train, multiplier, base,
                          allowed_length, penalty_last_n, breakers, tab.kid_off.tobytes(), tab.kid_tok.tobytes(),
                          tab.kid_m.tobytes(), tab.cand_off.tobytes(), tab.cand_ids.tobytes(), caps.tobytes(),
                          roots, max_len, emit, ArrayChanged, CHECK_EVERY)
    return _walk_ctypes(subject, fns, tab, caps, roots, max_len, sampler_args, n_ctx_train, emit)


def _vocab_address(subject, sampler_args) -> int:
    """The vocabulary the samplers are made with: sampler_args' sixth element (a vocabulary NAME or GGUF PATH,
    loaded into the subject: subject.vocabulary) when given, else the subject's symbol vocabulary."""
    if len(sampler_args) > 5 and sampler_args[5] is not None:
        v = subject.vocabulary(sampler_args[5]).handle
        return v if isinstance(v, int) else ctypes.cast(v, ctypes.c_void_p).value
    return subject.vocab_address


# -- the same walk through ctypes (DRYZ_DRIVE=ctypes) --------------------------------------------------------

_VP = ctypes.c_void_p


def _ctypes_calls(subject, fns):
    L = subject.L
    init = ctypes.CFUNCTYPE(_VP, *L.llama_sampler_init_dry.argtypes)(fns[0])
    clone = ctypes.CFUNCTYPE(_VP, _VP)(fns[1])
    accept = ctypes.CFUNCTYPE(None, _VP, ctypes.c_int32)(fns[2])
    apply = ctypes.CFUNCTYPE(None, _VP, _VP)(fns[3])
    free = ctypes.CFUNCTYPE(None, _VP)(fns[4])
    return init, clone, accept, apply, free


def _walk_ctypes(subject, fns, tab: Tables, caps, roots, max_len, sampler_args, n_ctx_train, emit) -> int:
    init, clone, accept, apply, free = _ctypes_calls(subject, fns)
    multiplier, base, allowed_length, penalty_last_n, breakers = sampler_args[:5]
    T, A = subject.L.llama_token_data, subject.L.llama_token_data_array
    cmax = max(1, int(np.diff(tab.cand_off).max()))
    scratch = (T * cmax)()
    sview = np.frombuffer(scratch, dtype=TOKEN_DATA)
    arr = A()
    arr_addr, data_addr = ctypes.addressof(arr), ctypes.addressof(scratch)
    kids = [list(zip(tab.kid_tok[tab.kid_off[m]:tab.kid_off[m + 1]].tolist(),
                     tab.kid_m[tab.kid_off[m]:tab.kid_off[m + 1]].tolist())) for m in range(tab.S)]
    cids = [tab.cand_ids[tab.cand_off[m]:tab.cand_off[m + 1]] for m in range(tab.S)]
    bufs: dict = {}   # (n, m) -> [H rows list, logits rows list]
    path = [0] * max(max_len, 1)
    applied = 0

    def flush(n, m):
        b = bufs.pop((n, m), None)
        if b and b[0]:
            emit(n, m, np.array(b[0], dtype=np.int64).tobytes(), np.array(b[1], dtype=np.float32).tobytes())

    def record(s, n, m):
        nonlocal applied
        c = len(cids[m])
        v = sview[:c]
        v["id"], v["logit"], v["p"] = cids[m], 0.0, 0.0
        arr.data = ctypes.cast(data_addr, subject.L.llama_token_data_p)
        arr.size, arr.selected, arr.sorted = c, -1, False
        apply(s, arr_addr)
        if ctypes.cast(arr.data, _VP).value != data_addr or arr.size != c:
            raise ArrayChanged("the sampler changed the candidate array's size or data pointer")
        if not np.array_equal(v["id"], cids[m]):
            raise ArrayChanged("the sampler changed candidate ids in the array (DRY must not)")
        b = bufs.setdefault((n, m), [[], []])
        b[0].append(path[:n])
        b[1].append(v["logit"].copy())
        applied += 1
        if len(b[0]) == caps[n, m]:
            flush(n, m)

    def visit(s, depth, m):  # owns s
        n = depth + 1
        spec = kids[m]
        if not spec:
            free(s)
            return
        last = len(spec) - 1
        for i, (t, mc) in enumerate(spec):
            try:
                c = s if i == last else clone(s)
                if not c:
                    raise RuntimeError("llama_sampler_clone returned NULL")
            except BaseException:
                free(s)
                raise
            try:
                path[depth] = t
                accept(c, t)
                record(c, n, mc)
            except BaseException:
                free(c)
                if i != last:
                    free(s)
                raise
            try:
                if n < max_len:
                    visit(c, n, mc)
                else:
                    free(c)
            except BaseException:
                if i != last:
                    free(s)
                raise

    if breakers:
        texts = (ctypes.c_char_p * len(breakers))(*[b.encode() for b in breakers])
    else:
        texts = None
    vocab = _vocab_address(subject, sampler_args)
    for toks, m0 in roots:
        if len(toks) >= max_len:
            continue
        if subject.abi == 8:
            s = init(vocab, n_ctx_train, multiplier, base, allowed_length, penalty_last_n, texts, len(breakers))
        else:
            s = init(vocab, multiplier, base, allowed_length, penalty_last_n, texts, len(breakers))
        if not s:
            raise RuntimeError("llama_sampler_init_dry returned NULL")
        try:
            for i, t in enumerate(toks):
                path[i] = t
                accept(s, t)
        except BaseException:
            free(s)
            raise
        visit(s, len(toks), m0)
    for n in range(1, max_len + 1):
        for m in range(tab.S):
            flush(n, m)
    return applied
