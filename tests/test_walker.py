"""The one tree walker (dryz.subject.walker, in C in dryz/subject/_drive.c): its output is the Python runners'
output bit for bit, every history once, a prefix walk is the subtree of the full walk, the C and the ctypes
path agree, and every sampler is freed exactly once, also on errors and interrupts."""

import ctypes
import dataclasses
import itertools
import signal
import threading
import _thread

import numpy as np
import pytest

from dryz.config import space_config
from dryz.space import PlainSpace as PlainTree, canonical_slices, canonical_strings, case_count, space_for
from dryz.subject import libllama
from dryz.subject.binding import ArrayChanged
from dryz.subject.walker import addresses, walk

NAMES = ("base", "window4", "breaker")
DRIVES = ["c", "ctypes"] if libllama._DRIVE is not None else ["ctypes"]


def collect(lib, tree, max_len, args, **kw):
    """walk's output as {(n, m): (H, logits)}, rows sorted by history; also the batches' sizes."""
    parts, sizes = {}, []

    def sink(n, m, H, logits, cands):
        assert H.dtype == np.int64 and H.shape[1] == n and logits.dtype == np.float32
        assert logits.shape == (len(H), len(cands)) and tuple(cands) == tuple(tree.cands(m))
        parts.setdefault((n, m), []).append((H.copy(), logits.copy()))
        sizes.append((n, len(H)))
    walk(lib, tree, max_len, args, sink, **kw)
    return {k: sort_rows(np.concatenate([h for h, _ in v]), np.concatenate([lg for _, lg in v]))
            for k, v in parts.items()}, sizes


def sort_rows(H, logits):
    o = np.lexsort(H.T[::-1])
    return H[o], logits[o]


def same(a, b):
    """Identical keys, histories and logits bit for bit."""
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k][0], b[k][0]), k
        assert np.array_equal(a[k][1].view(np.uint32), b[k][1].view(np.uint32)), k
    return True


def merged(*outs):
    acc = {}
    for out in outs:
        for k, (H, lg) in out.items():
            acc.setdefault(k, []).append((H, lg))
    return {k: sort_rows(np.concatenate([h for h, _ in v]), np.concatenate([lg for _, lg in v]))
            for k, v in acc.items()}


# -- the plain tree ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_plain_tree_walks_every_history_once(lib, name):
    k, N = 3, 7
    args = space_config(name, k, N).sampler_args()
    new, sizes = collect(lib, PlainTree(k, N), N, args)
    # Every history exactly once: the rows are all k^n histories, in order once sorted.
    for n in range(1, N + 1):
        assert np.array_equal(new[(n, 0)][0], np.array(list(itertools.product(range(k), repeat=n))))
    assert sum(lg.size for _, lg in new.values()) == case_count(k, N) == 9_837
    assert sum(r for _, r in sizes) == sum(k ** n for n in range(1, N + 1))


def test_plain_penalties_are_there(lib):
    """Not a vacuous comparison: the library penalizes in this space."""
    new, _ = collect(lib, PlainTree(3, 6), 6, space_config("base", 3, 6).sampler_args())
    assert min(float(lg.min()) for _, lg in new.values()) == -16.0  # L = 5 at n = 6


@pytest.mark.parametrize("drive", DRIVES)
def test_small_batches_and_both_drives_agree(lib, drive):
    k, N = 3, 6
    args = space_config("breaker", k, N).sampler_args()
    ref, _ = collect(lib, PlainTree(k, N), N, args)
    small, sizes = collect(lib, PlainTree(k, N), N, args, batch_rows=7, _drive=drive)
    assert max(r for _, r in sizes) == 7 and sum(r for _, r in sizes) == sum(k ** n for n in range(1, N + 1))
    assert same(small, ref)
    tiny, sizes = collect(lib, PlainTree(k, N), N, args, batch_bytes=100, _drive=drive)
    assert all(r <= max(1, 100 // (8 * n + 4 * k)) for n, r in sizes) and (6, 1) in sizes
    assert same(tiny, ref)


def test_histories_agree_with_fresh_samplers(lib):
    """A clone-built state gives what a fresh sampler that accepted the whole history gives (run: init_dry,
    accept each token, apply), on a sample of histories of every configuration."""
    rng = np.random.default_rng(7)
    k, N = 3, 7
    for name in NAMES:
        spec = space_config(name, k, N)
        new, _ = collect(lib, PlainTree(k, N), N, spec.sampler_args())
        for n in (1, 4, 7):
            H, lg = new[(n, 0)]
            for r in rng.choice(len(H), size=min(25, len(H)), replace=False):
                out = lib.run(spec.case(k, H[r]))
                assert out.ids == tuple(range(k))
                assert np.array_equal(np.asarray(out.logits, dtype=np.float32).view(np.uint32),
                                      lg[r].view(np.uint32)), (name, H[r])


@pytest.mark.parametrize("prefixes", [[(0,)], [(2, 1)], [(0, 1), (2,), (1, 1, 1)], [(0, 0, 0, 0, 0, 0)]])
def test_plain_prefix_walk_is_the_subtree(lib, prefixes):
    k, N = 3, 6
    args = space_config("window4", k, N).sampler_args()
    full, _ = collect(lib, PlainTree(k, N), N, args)
    part, _ = collect(lib, PlainTree(k, N), N, args, prefixes=prefixes)
    want = {}
    for key, (H, lg) in full.items():
        sel = np.zeros(len(H), dtype=bool)
        for p in prefixes:
            if len(p) < key[0]:
                sel |= np.all(H[:, :len(p)] == np.array(p, dtype=np.int64), axis=1)
        if sel.any():
            want[key] = (H[sel], lg[sel])
    assert sum(len(H) for H, _ in want.values()) == sum(
        sum(k ** j for j in range(1, N - len(p) + 1)) for p in prefixes)
    assert same(part, want)


def test_top_and_prefixes(lib):
    k, N = 3, 5
    args = space_config("base", k, N).sampler_args()
    full, _ = collect(lib, PlainTree(k, N), N, args)
    top, _ = collect(lib, PlainTree(k, N), N, args, top=2)
    assert same(top, {key: v for key, v in full.items() if key[0] <= 2})
    rest, _ = collect(lib, PlainTree(k, N), N, args, prefixes=list(itertools.product(range(k), repeat=2)))
    assert same(merged(top, rest), full)
    with pytest.raises(ValueError):
        walk(lib, PlainTree(k, N), N, args, lambda *a: None, prefixes=[(0,)], top=2)
    with pytest.raises(ValueError, match="not a node"):
        walk(lib, PlainTree(k, N), N, args, lambda *a: None, prefixes=[(3,)])


# -- the canonical tree -------------------------------------------------------------------------------------


CANONICAL = [("base", 4, 7), ("breaker", 4, 7), ("window4", None, 8), ("breaker", None, 8)]


@pytest.mark.parametrize("name,alphabet,N", CANONICAL)
def test_canonical_tree_walks_every_pattern_once(lib, name, alphabet, N):
    spec = space_config(name, alphabet or 64, N)
    space = space_for(spec, alphabet, N)
    new, _ = collect(lib, space, N, spec.sampler_args())
    counts = space.counts(N)
    assert {key: len(H) for key, (H, _) in new.items()} == {
        (n, m): c for n, per in counts.items() for m, c in per.items()}
    for n in range(1, N + 1):  # every canonical history once, as tokens
        H = np.concatenate([new[(n, m)][0] for m in counts[n]])
        want = space.digit_tokens()[np.array(canonical_strings(space, n), dtype=np.int64)]
        assert np.array_equal(sort_rows(H, H)[0], sort_rows(want, want)[0])


def test_canonical_slices_cover_the_walk(lib):
    """The slices exhaustive deals out (top, then groups of canonical digit prefixes) add up to the full walk."""
    spec = space_config("breaker", 64, 8)
    space = space_for(spec, None, 8)
    full, _ = collect(lib, space, 8, spec.sampler_args())
    outs = []
    for sl in canonical_slices(space, 8, 2):
        if "top" in sl:
            outs.append(collect(lib, space, 8, spec.sampler_args(), top=sl["top"])[0])
        else:
            outs.append(collect(lib, space, 8, spec.sampler_args(), prefixes=sl["prefixes"])[0])
    assert len(outs) > 2 and same(merged(*outs), full)


def test_canonical_fresh_candidates_against_fresh_samplers(lib):
    spec = space_config("base", 64, 7)
    space = space_for(spec, None, 7)
    new, _ = collect(lib, space, 7, spec.sampler_args())
    rng = np.random.default_rng(3)
    for (n, m), (H, lg) in sorted(new.items())[::3]:
        for r in rng.choice(len(H), size=min(10, len(H)), replace=False):
            case = dataclasses.replace(spec.case(64, H[r]), candidates=tuple((c, 0.0) for c in space.cands(m)))
            out = lib.run(case)
            assert np.array_equal(np.asarray(out.logits, dtype=np.float32).view(np.uint32), lg[r].view(np.uint32))


# -- samplers: made and freed exactly once ---------------------------------------------------------------------


class Counting:
    """The five library functions wrapped in ctypes callbacks that count calls (and can misbehave)."""

    def __init__(self, lib):
        self.lib = lib
        real = addresses(lib)
        vp = ctypes.c_void_p
        init_t = ctypes.CFUNCTYPE(vp, *lib.L.llama_sampler_init_dry.argtypes)
        self.r_init = init_t(real[0])
        self.r_clone = ctypes.CFUNCTYPE(vp, vp)(real[1])
        self.r_accept = ctypes.CFUNCTYPE(None, vp, ctypes.c_int32)(real[2])
        self.r_apply = ctypes.CFUNCTYPE(None, vp, vp)(real[3])
        self.r_free = ctypes.CFUNCTYPE(None, vp)(real[4])
        self.live, self.calls = set(), {"init": 0, "clone": 0, "accept": 0, "apply": 0, "free": 0}
        self.double_free = self.foreign = 0
        self.corrupt_at = None  # apply number after which the wrapped apply changes a candidate id

        def init(*a):
            s = self.r_init(*a)
            self.calls["init"] += 1
            self.live.add(s)
            return s

        def clone(s):
            c = self.r_clone(s)
            self.calls["clone"] += 1
            self.live.add(c)
            return c

        def accept(s, t):
            self.calls["accept"] += 1
            self.foreign += s not in self.live
            self.r_accept(s, t)

        def apply(s, arr):
            self.calls["apply"] += 1
            self.foreign += s not in self.live
            self.r_apply(s, arr)
            if self.corrupt_at is not None and self.calls["apply"] == self.corrupt_at:
                a = lib.L.llama_token_data_array.from_address(arr)
                a.data[0].id = 99

        def free(s):
            self.calls["free"] += 1
            if s in self.live:
                self.live.remove(s)
            else:
                self.double_free += 1
            self.r_free(s)

        self.cbs = [init_t(init), ctypes.CFUNCTYPE(vp, vp)(clone), ctypes.CFUNCTYPE(None, vp, ctypes.c_int32)(accept),
                    ctypes.CFUNCTYPE(None, vp, vp)(apply), ctypes.CFUNCTYPE(None, vp)(free)]
        self.fns = tuple(ctypes.cast(c, vp).value for c in self.cbs)

    def balanced(self):
        c = self.calls
        return not self.live and not self.double_free and not self.foreign and c["free"] == c["init"] + c["clone"]


@pytest.mark.parametrize("drive", DRIVES)
def test_every_sampler_freed_once_and_the_call_counts(lib, drive):
    k, N = 3, 5
    args = space_config("breaker", k, N).sampler_args()
    cnt = Counting(lib)
    ref, _ = collect(lib, PlainTree(k, N), N, args)
    out, _ = collect(lib, PlainTree(k, N), N, args, _fns=cnt.fns, _drive=drive, prefixes=[(), (1, 2)])
    hist = sum(k ** n for n in range(1, N + 1)) + sum(k ** n for n in range(1, N - 1))
    parents = 1 + sum(k ** n for n in range(1, N)) + 1 + sum(k ** n for n in range(1, N - 2))
    assert cnt.calls == {"init": 2, "clone": hist - parents, "accept": hist + 2, "apply": hist,
                         "free": 2 + hist - parents}
    assert cnt.balanced()
    space = space_for(space_config("breaker", 64, 6), None, 6)
    cnt = Counting(lib)
    n = walk(lib, space, 6, space_config("breaker", 64, 6).sampler_args(), lambda *a: None, _fns=cnt.fns,
             _drive=drive)
    assert n == cnt.calls["apply"] == sum(sum(c.values()) for c in space.counts(6).values())
    assert cnt.balanced() and cnt.calls["init"] == 1


class Stop(Exception):
    pass


@pytest.mark.parametrize("drive", DRIVES)
@pytest.mark.parametrize("exc", [Stop, KeyboardInterrupt])
def test_samplers_freed_when_the_sink_raises(lib, drive, exc):
    k, N = 3, 6
    args = space_config("base", k, N).sampler_args()
    for stop_at in (1, 5, 40):
        cnt = Counting(lib)
        seen = []

        def sink(n, m, H, logits, cands):
            seen.append(len(H))
            if len(seen) == stop_at:
                raise exc("stop")
        with pytest.raises(exc):
            walk(lib, PlainTree(k, N), N, args, sink, batch_rows=5, _fns=cnt.fns, _drive=drive,
                 prefixes=[(0,), (1,), ()])
        assert cnt.balanced() and cnt.calls["apply"] < 3 * sum(k ** n for n in range(1, N + 1)), stop_at


@pytest.mark.parametrize("drive", DRIVES)
def test_array_changed_is_raised_and_samplers_freed(lib, drive):
    cnt = Counting(lib)
    cnt.corrupt_at = 50
    with pytest.raises(ArrayChanged, match="ids"):
        walk(lib, PlainTree(3, 5), 5, space_config("base", 3, 5).sampler_args(), lambda *a: None, _fns=cnt.fns,
             _drive=drive)
    assert cnt.calls["apply"] == 50 and cnt.balanced()


def _heap_in_use():
    libc = ctypes.CDLL(None)

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(f, ctypes.c_size_t) for f in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                   "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc.mallinfo2.restype = Mallinfo2
    mi = libc.mallinfo2()
    return mi.uordblks + mi.hblkhd


@pytest.mark.skipif(libllama._DRIVE is None, reason="the C walker is not built")
def test_interrupted_walks_do_not_grow_the_heap(lib):
    """KeyboardInterrupt (a real pending SIGINT, seen by the C walk between its signal checks) while the library
    runs: the walk stops, and repeated walks, interrupted or not, leave the C heap as it was (the samplers
    alive at the interrupt, one per depth, are freed)."""
    if not hasattr(ctypes.CDLL(None), "mallinfo2"):
        pytest.skip("no glibc mallinfo2")
    N = 10
    space = space_for(space_config("breaker", 64, N), None, N)
    args = space_config("breaker", 64, N).sampler_args()
    armed = False

    def on_sigint(signum, frame):  # a KeyboardInterrupt only while a walk runs (not one late after it)
        if armed:
            raise KeyboardInterrupt

    def interrupted():
        """True when the interrupt stopped the C walk (after its first batch: the samplers were live)."""
        nonlocal armed
        batches = []
        t = threading.Timer(0.02, _thread.interrupt_main)
        stopped = False
        try:
            try:
                armed = True
                t.start()
                walk(lib, space, N, args, lambda *a: batches.append(1), batch_rows=512)
            except KeyboardInterrupt:
                stopped = True
            finally:
                armed = False
                t.cancel()
                t.join()
        except KeyboardInterrupt:  # one that arrived in the finally clause
            armed, stopped = False, True
            t.join()
        return stopped and bool(batches)

    old = signal.signal(signal.SIGINT, on_sigint)
    try:
        run_interrupted(interrupted, lib, args)
    finally:
        signal.signal(signal.SIGINT, old)


def run_interrupted(interrupted, lib, args):

    for _ in range(3):
        interrupted()
        walk(lib, PlainTree(3, 6), 6, args, lambda *a: None)
    before = _heap_in_use()
    hits = sum(interrupted() for _ in range(30))
    for _ in range(10):
        walk(lib, PlainTree(3, 6), 6, args, lambda *a: None)
    grown = _heap_in_use() - before
    assert hits >= 20
    # A leak of the live samplers (about 9 per interrupted walk, each several hundred bytes) would show here.
    assert grown < 64 * 1024, grown
