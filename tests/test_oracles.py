"""Oracles A and B, and the shipped configuration model, against hand-worked cases."""

import numpy as np
import pytest

from dryz.case import Case
from dryz.check import predict_all
from dryz.config import case_config
from dryz.oracle.lengths import match_lengths_A
from dryz.oracle.lengths_b import _match_lengths_B_bytes, match_lengths_B
from dryz.oracle.shipped import rep_limits
from dryz.symbols import SYMBOLS, from_symbols


def lengths(symbols, alphabet=26, oracle="both", **cfg):
    """Per-symbol L (only non-zero entries) for a history written as symbols."""
    case = Case(history=tuple(from_symbols(symbols)), alphabet=alphabet,
                penalty_last_n=cfg.pop("penalty_last_n", 64), **cfg)
    H = np.array([case.history], dtype=np.int64)
    pa, pb = predict_all(H, np.arange(alphabet), case_config(case))
    a = {SYMBOLS[i]: int(x) for i, x in enumerate(pa.L[0]) if x}
    b = {SYMBOLS[i]: int(x) for i, x in enumerate(pb.L[0]) if x}
    assert a == b, f"oracles disagree on {symbols}: A={a} B={b}"
    return a


def test_source_worked_example():
    # llama-sampler.cpp, Step 3: "a b c c b c y a b c" -> c: 3, b: 1, y: 2
    assert lengths("abccbcyabc") == {"c": 3, "b": 1, "y": 2}


@pytest.mark.parametrize("hist,expected", [
    ("a", {}),                      # window 1 <= allowed_length 1: early exit
    ("ab", {}),                     # b at j=1 follows 'a', which is not the suffix 'b'
    ("aa", {"a": 1}),
    ("aaaa", {"a": 3}),             # matches may overlap the suffix
    ("abab", {"a": 2}),             # ababa: 'aba' recurs
    ("abcab", {"c": 2}),
    ("abcabc", {"a": 3}),
    ("abcdbc", {"d": 2}),
    ("xyzxyq", {}),                 # the suffix q never occurred before
])
def test_hand_worked(hist, expected):
    assert lengths(hist) == expected


def test_window_cuts_history():
    assert lengths("abcab", penalty_last_n=5) == {"c": 2}
    assert lengths("abcab", penalty_last_n=3) == {}           # window 'cab'
    assert lengths("abcabc", penalty_last_n=4) == {"a": 1}     # window 'cabc': 'c' recurs before 'a'
    assert lengths("aaaaaa", penalty_last_n=4) == {"a": 3}


def test_row_A_on_long_repeats_equals_its_definition():
    """The row layout of A (a trace's applies: ragged windows, PAD before the shorter) compares positions 8
    wide, then WIDE wide, then in full: a trace's prefixes of periodic streams with flipped tokens, up to 300
    tokens (past WIDE and past a CHUNK of positions), against the definition computed letter by letter."""
    from dryz.oracle.lengths import WIDE, _match_lengths_A_rows
    from dryz.oracle.windows import PAD
    rng = np.random.default_rng(7)
    for trial in range(12):
        p, n = int(rng.integers(1, 6)), int(rng.integers(WIDE + 2, 300))
        stream = [int(x) for x in np.resize(rng.integers(0, 4, p), n)]
        for at in rng.integers(0, n, int(rng.integers(0, 4))):
            stream[int(at)] = int(rng.integers(0, 6))
        ends = sorted({int(e) for e in rng.integers(1, n + 1, 40)} | {n})
        starts = [max(0, e - int(rng.integers(1, n + 1))) for e in ends]   # a window cap or a reset before each
        W = np.full((len(ends), n), PAD, dtype=np.int16)
        for r, (a, e) in enumerate(zip(starts, ends)):
            W[r, n - (e - a):] = stream[a:e]
        cands = np.arange(6)
        got = _match_lengths_A_rows(W, cands)
        for r, (a, e) in enumerate(zip(starts, ends)):
            assert got[r].tolist() == _brute_force_A(stream[a:e], cands.tolist()), (trial, r)


def _trace_windows(rng, n):
    """A stream of up to n tokens (periodic, a few tokens flipped) and the windows of a trace's applies over it:
    generation loops (one token between applies), prompts of 2..12 tokens between them (past SHIFT_MAX too), the
    same window twice, window caps and resets; as a ragged batch (PAD before the shorter windows)."""
    from dryz.oracle.windows import PAD
    p = int(rng.integers(1, 6))
    stream = [int(x) for x in np.resize(rng.integers(0, 4, p), n)]
    for at in rng.integers(0, n, int(rng.integers(0, 4))):
        stream[int(at)] = int(rng.integers(0, 6))
    cap, reset = int(rng.integers(1, n + 1)), int(rng.integers(0, n)) if rng.integers(0, 2) else n
    ends, e = [], int(rng.integers(1, n // 2 + 1))
    while e <= n:
        ends.append(e)
        e += (1, 1, 1, 0, int(rng.integers(2, 13)))[int(rng.integers(0, 5))]
    starts = [max(0, e - cap, reset if e > reset else 0) for e in ends]
    w = max(e - a for a, e in zip(starts, ends))
    W = np.full((len(ends), w), PAD, dtype=np.int16)
    for r, (a, e) in enumerate(zip(starts, ends)):
        W[r, w - (e - a):] = stream[a:e]
    return W, [stream[a:e] for a, e in zip(starts, ends)]


def test_stream_layouts_equal_the_definition():
    """A's stream layout (windows that continue one another, read off one stream) and B's text search of heavy
    windows (runs, short periods; bounded by the window before), on a trace's windows, against the definition
    computed letter by letter; both layouts must have run."""
    from dryz.oracle.lengths import _stream_of, candidate_index
    from dryz.oracle.lengths_b import _heavy_windows
    rng = np.random.default_rng(17)
    streamed = heavy = 0
    for trial in range(60):
        W, windows = _trace_windows(rng, int(rng.integers(10, 260)))
        cands = rng.permutation(7)[:int(rng.integers(1, 8))]
        streamed += _stream_of(W) is not None
        heavy += len(_heavy_windows(W, np.greater_equal(candidate_index(W, cands), 0), cands))
        want = [_brute_force_A(u, cands.tolist()) for u in windows]
        assert match_lengths_A(W, cands).tolist() == want, trial
        assert match_lengths_B(W, cands).tolist() == want, trial
    assert streamed > 30 and heavy > 100, (streamed, heavy)


def test_single_token_breaker():
    # rep_limit = distance from the end to the most recent breaker 'a' (here 1): c's 2 becomes 1.
    assert lengths("abcab", breakers=("a",)) == {"c": 1}
    # A candidate that is itself a breaker is never penalized.
    assert lengths("abcabc", breakers=("a",)) == {}
    # Breaker as the last token: rep_limit 0 < allowed_length 1, DRY exits.
    assert lengths("abcabca", breakers=("a",)) == {}
    # A breaker outside the window does not limit.
    assert lengths("zabcabc", breakers=("z",), penalty_last_n=6) == {"a": 3}


def test_allowed_length_exits():
    assert lengths("aaaa", allowed_length=4) == {}              # window 4 <= allowed_length
    assert lengths("abab", allowed_length=2) == {"a": 2}
    assert lengths("abab", allowed_length=3) == {}              # L 2 < allowed_length


def test_rep_limit_model():
    W = np.array([from_symbols("abcab")])
    assert rep_limits(W, [(0, ())]).tolist() == [1]
    assert rep_limits(W, []).tolist() == [5]
    # multi-token restart sequence 'c a' (head c, tail a): completes 2 from the end -> rep_limit 1
    assert rep_limits(W, [(2, (0,))]).tolist() == [1]


def random_windows(rng, n, w, k):
    return rng.integers(0, k, size=(n, w))


def test_A_equals_B_random_batches():
    rng = np.random.default_rng(1)
    for w in (1, 2, 3, 7, 15, 40):
        for k in (1, 2, 3, 6):
            W = random_windows(rng, 300, w, k)
            cands = np.arange(k + 1)       # one candidate that never occurs
            a, b = match_lengths_A(W, cands), match_lengths_B(W, cands)
            assert np.array_equal(a, b), (w, k)
            assert not a[:, k].any()       # the absent symbol never gets a length


def test_B_byte_path_equals_batch_path():
    rng = np.random.default_rng(2)
    for w in (1, 2, 5, 30, 200):
        for k in (1, 3, 20, 64):
            W = random_windows(rng, 40, w, k)
            W[:10] = W[:10, :1] + (np.arange(w) % int(rng.integers(1, 6)))[None, :] % k  # periodic rows
            cands = rng.permutation(k + 1)[:int(rng.integers(1, k + 2))]  # a subset, any order, maybe absent
            batch = match_lengths_B(W, cands)
            single = np.array([_match_lengths_B_bytes(row, cands) for row in W])
            assert np.array_equal(batch, single), (w, k)


def test_A_equals_B_on_structured_histories():
    # Periodic and near-periodic histories drive long matches, where boundary errors live.
    rows = []
    for p in (1, 2, 3, 5):
        base = [i % p for i in range(60)]
        rows.append(base)
        for flip in (0, 17, 58, 59):
            r = list(base)
            r[flip] = 5
            rows.append(r)
    W = np.array(rows)
    cands = np.arange(6)
    assert np.array_equal(match_lengths_A(W, cands), match_lengths_B(W, cands))


def test_A_equals_B_random_configurations():
    rng = np.random.default_rng(3)
    for _ in range(300):
        k = int(rng.integers(1, 7))
        n = int(rng.integers(0, 50))
        hist = tuple(int(x) for x in rng.integers(0, k, n))
        breakers = tuple(SYMBOLS[int(x)] for x in rng.choice(k, size=int(rng.integers(0, min(k, 3) + 1)),
                                                             replace=False))
        case = Case(history=hist, alphabet=k, penalty_last_n=int(rng.integers(-1, n + 9)),
                    breakers=breakers, allowed_length=int(rng.integers(0, 4)))
        H = np.array([hist], dtype=np.int64).reshape(1, n)
        pa, pb = predict_all(H, np.arange(k), case_config(case))
        assert np.array_equal(pa.L, pb.L) and np.array_equal(pa.penalized, pb.penalized), case


def test_single_window_paths_equal_batch_paths():
    """The one-window layouts (bytes search, lists) compute exactly what the batch layouts do."""
    from dryz.oracle.lengths import _match_lengths_A_single
    from dryz.oracle.shipped import _rep_limit_single
    rng = np.random.default_rng(4)
    for w in (2, 17, 40, 63, 64, 65, 300):
        for k in (1, 2, 3, 8, 64):
            W = rng.integers(0, k, size=(40, w))
            W[:10] = np.array([i % k for i in range(w)])  # periodic rows: long matches
            W[10:15, : w // 3] = W[10:15, -(w // 3) or w:]  # a block repeated: matches ending anywhere
            cands = np.arange(k + 1)
            batch = match_lengths_A(W, cands)
            assert np.array_equal(batch, np.array([_match_lengths_A_single(r, cands) for r in W]))
            seqs = [(0, ()), (1, (0,)), (2, (1, 2))][: k]
            assert rep_limits(W, seqs).tolist() == [_rep_limit_single(r.tolist(), seqs) for r in W]


def _brute_force_A(window, cands):
    """Oracle A's definition, letter by letter: M_z = max over positions j holding z of the common suffix
    length of window[:j] and window."""
    w, best = len(window), {}
    for j in range(1, w):
        m = 0
        while m < j and window[j - 1 - m] == window[w - 1 - m]:
            m += 1
        best[window[j]] = max(best.get(window[j], 0), m)
    return [best.get(z, 0) for z in cands]


def test_one_window_A_on_long_repeats_equals_its_definition():
    """The one-window A skips rows that cannot raise their token's maximum once repeats pass 64 tokens:
    periodic windows (with and without flipped tokens), repeated blocks and repeats ending at different places,
    up to 700 tokens, and a 2,510-token window of one block repeated 31 times, against the definition computed
    letter by letter."""
    from dryz.oracle.lengths import _match_lengths_A_single
    rng = np.random.default_rng(41)
    windows = []
    for w in (65, 130, 700):
        for p in (1, 2, 3, 5, 12):
            base = [int(x) for x in np.resize(rng.integers(0, 6, p), w)]
            windows.append(base)
            for _ in range(3):
                r = list(base)
                for at in rng.integers(0, w, int(rng.integers(1, 4))):
                    r[int(at)] = int(rng.integers(0, 8))
                windows.append(r)
        block = [int(x) for x in rng.integers(0, 3, w // 3)]
        windows.append((block + [7] + block + [6] + block)[:w])
        windows.append(([0] * (w // 2) + [1] + [0] * (w // 2 - 1))[:w])
        windows.append([int(x) for x in rng.integers(0, 2, w)])
    # 30 tokens, each right after a copy of one 80-token block: 30 rows with long matches, every one its
    # token's maximum (more than one batch of them).
    block = [int(x) for x in rng.integers(0, 2, 80)]
    windows.append([t for tag in range(2, 32) for t in block + [tag]] + block)
    cands = np.arange(64)
    for win in windows:
        got = _match_lengths_A_single(np.array(win, dtype=np.uint8), cands).tolist()
        assert got == _brute_force_A(win, cands.tolist()), (len(win), win[:20])


def test_restart_sequences_cached_per_string_equal_uncached():
    """check() builds restart sequences from a per-breaker-string cache and a by-character token index;
    the result equals the direct scan over the whole vocabulary, duplicates and order included."""
    from dryz.config import restart_sequences_of, symbol_tokenize
    from dryz.oracle.restarts import restart_sequences
    from dryz.symbols import SYMBOLS, symbol_texts
    rng = np.random.default_rng(13)
    for _ in range(300):
        k = int(rng.integers(1, 8))
        breakers = tuple("".join(SYMBOLS[int(x)] for x in rng.integers(0, k, int(rng.integers(0, 5))))
                         for _ in range(int(rng.integers(0, 5))))
        assert list(restart_sequences_of(breakers)) == restart_sequences(breakers, symbol_texts(), symbol_tokenize)


def test_one_window_clamping_equals_the_batch_clamping():
    """shipped_lengths_each takes a one-window path for a batch of one window; it must give what the array
    path gives for the same windows inside a larger batch (random windows, caps, breakers incl. multi-token,
    allowed lengths, candidate sets)."""
    from dryz.config import case_config
    from dryz.oracle.shipped import shipped_lengths_each
    rng = np.random.default_rng(14)
    for _ in range(150):
        k = int(rng.integers(1, 6))
        n = int(rng.integers(0, 30))
        H = rng.integers(0, k, size=(5, n))
        breakers = tuple("".join("abcde"[int(x)] for x in rng.integers(0, k, int(rng.integers(1, 3))))
                         for _ in range(int(rng.integers(0, 3))))
        case = Case(history=tuple(int(t) for t in H[0]), alphabet=k, penalty_last_n=int(rng.integers(1, n + 3)),
                    breakers=breakers, allowed_length=int(rng.integers(0, 4)))
        cfg = case_config(case)
        cands = rng.permutation(k + 2)[: int(rng.integers(1, k + 3))]
        batch = shipped_lengths_each(H, cands, cfg, (match_lengths_A, match_lengths_B))
        for r in range(5):
            single = shipped_lengths_each(H[r:r + 1], cands, cfg, (match_lengths_A, match_lengths_B))
            for pb, ps in zip(batch, single):
                assert np.array_equal(pb.L[r], ps.L[0]) and np.array_equal(pb.penalized[r], ps.penalized[0])
                assert pb.ran[r] == ps.ran[0]


def test_penalty_arithmetic_rounds_as_a_float_cast():
    """penalties() rounds the double product to float32 through f32 (struct); it must equal numpy's
    float64 -> float32 cast everywhere, overflow to inf included (multipliers and bases near float max)."""
    from dryz.case import f32
    from dryz.oracle.shipped import Config, _pow, penalties
    rng = np.random.default_rng(15)
    bits = rng.integers(0, 0x7F800000, 400, dtype=np.int64).astype(np.uint32).view(np.float32)
    values = [f32(x) for x in np.concatenate([bits, np.float32([1.0, 2.0, 3.4028235e38, 1.000001, 1.5])])]
    L = np.arange(0, 140, dtype=np.int64)
    for m in values[::7]:
        for b in values[3::11]:
            if not (m > 0 and b >= 1.0):
                continue
            cfg = Config(m, b, int(rng.integers(0, 9)), 10, ())
            got = penalties(L, cfg)
            exp = L - cfg.allowed_length
            from dryz.oracle.shipped import max_exponent
            if max_exponent(b) > 0:
                exp = np.minimum(exp, max_exponent(b))
            with np.errstate(over="ignore"):
                want = np.array([np.float32(np.float64(m) * _pow(b, float(e))) for e in exp], dtype=np.float32)
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (m, b)


def test_one_window_paths_refuse_negative_ids():
    """The one-window layouts index tables by token id; a negative id would wrap around silently, so they
    refuse it (Cases never hold one: validate() keeps ids in the vocabulary)."""
    import pytest
    from dryz.case import Case
    from dryz.config import case_config
    from dryz.oracle.lengths import _match_lengths_A_single
    from dryz.oracle.shipped import shipped_lengths_each
    cfg = case_config(Case(history=(0, 1), alphabet=2, penalty_last_n=8, allowed_length=0))
    for H, cands in ((np.array([[0, -1, 0, 1]]), np.array([0, 1])), (np.array([[0, 1, 0, 1]]), np.array([-1, 0]))):
        with pytest.raises(ValueError):
            shipped_lengths_each(H, cands, cfg, (match_lengths_A, match_lengths_B))
    with pytest.raises(ValueError):
        _match_lengths_A_single(np.array([300, -2, 300]), np.array([300]))


def _M(window, z):
    """M_z by definition, in a few lines and nothing of either oracle: the longest suffix of window + [z] that
    occurs inside the window (one occurrence ends at a position holding z), minus one, floored at 0."""
    ext, w = list(window) + [z], len(window)
    longest = max((L for L in range(1, w + 1) if any(list(window[i:i + L]) == ext[-L:] for i in range(w - L + 1))),
                  default=0)
    return max(longest - 1, 0)


def _adversarial_windows(rng):
    """Windows where an off-by-one hides: runs, short periods, a block repeated after a gap, a near-repeat one
    token short, alternations, and random ones over 1..5 symbols."""
    out = []
    for w in (1, 2, 3, 4, 5, 8, 13, 17, 33, 70):
        out.append([0] * w)
        out.append([i % 2 for i in range(w)])
        out.append([i % 3 for i in range(w)])
        block = rng.integers(0, 3, size=max(1, w // 3)).tolist()
        out.append((block + [4] + block)[:w] if w > 2 else block[:w])
        near = block + [3] + block[:-1]
        out.append(near[:w] if len(near) >= w else near + [0] * (w - len(near)))
        for k in (1, 2, 3, 5):
            out.append(rng.integers(0, k, size=w).tolist())
    return out


def test_every_layout_of_both_oracles_equals_the_definition():
    """Oracles A (lengths.py) and B (lengths_b.py) share no code, and each of their layouts equals M's definition
    (_M): one window (bytes, and ids past a byte: a real vocabulary's), rows (and B's text search of heavy
    windows), A's stream of consecutive windows, columns, and ragged batches with PAD."""
    from dryz.oracle.lengths import _match_lengths_A_single, _match_lengths_A_stream, _stream_of
    from dryz.oracle.lengths_b import HEAVY, _heavy_windows, _match_lengths_B_bytes, _match_lengths_B_str
    from dryz.oracle.windows import PAD, ROWS_MAX
    rng = np.random.default_rng(35)
    wins = _adversarial_windows(rng)
    seen = set()
    for win in wins:
        cands = np.arange(6)  # every symbol used, and one that never occurs
        want = [_M(win, int(z)) for z in cands]
        W = np.array([win], dtype=np.int64)
        assert _match_lengths_A_single(np.array(win, dtype=np.uint8), cands.astype(np.uint8)).tolist() == want
        assert _match_lengths_B_bytes(np.array(win, dtype=np.uint8), cands.astype(np.uint8)).tolist() == want
        big = np.array(win, dtype=np.int64) * 1000 + 300  # the same window over ids past a byte
        assert _match_lengths_A_single(big, cands * 1000 + 300).tolist() == want
        assert _match_lengths_B_str(big, cands * 1000 + 300).tolist() == want
        for fn in (match_lengths_A, match_lengths_B):  # the batch of one, and a batch of one repeated (rows)
            assert fn(W, cands)[0].tolist() == want, (fn.__name__, win)
            assert fn(np.repeat(W, 3, axis=0), cands)[2].tolist() == want, (fn.__name__, win)
            seen.add(fn.__name__)
    # rows and columns: every window of one length, as a batch under and over ROWS_MAX
    by_len: dict = {}
    for win in wins:
        by_len.setdefault(len(win), []).append(win)
    for w, group in by_len.items():
        extra = [rng.integers(0, 3, size=w).tolist() for _ in range(ROWS_MAX + 5 - len(group))]
        for batch in (group, group + extra):
            W = np.array(batch, dtype=np.int64)
            want = np.array([[_M(win, z) for z in range(6)] for win in batch])
            for fn in (match_lengths_A, match_lengths_B):
                assert np.array_equal(fn(W, np.arange(6)), want), (fn.__name__, w, len(batch))
    # B's text search of heavy windows: long runs and short periods in a row batch
    heavy = np.array([[0] * 120, [0, 1] * 60, [i % 3 for i in range(120)]] + [rng.integers(0, 4, 120).tolist()] * 2)
    holds = np.isin(heavy, np.arange(4))
    assert _heavy_windows(heavy, holds, np.arange(4)).tolist() == [0, 1, 2] and HEAVY < 40
    want = np.array([[_M(win, z) for z in range(4)] for win in heavy.tolist()])
    assert np.array_equal(match_lengths_B(heavy, np.arange(4)), want)
    # A's stream: windows of a generation loop (each the one before it, one or a few tokens later)
    stream = rng.integers(0, 2, size=120).tolist()
    W = np.array([stream[i:i + 40] for i in range(0, 80, 1)], dtype=np.int64)
    assert _stream_of(W) is not None
    want = np.array([[_M(win, z) for z in range(3)] for win in W.tolist()])
    assert np.array_equal(_match_lengths_A_stream(W, np.arange(3), *_stream_of(W)), want)
    assert np.array_equal(match_lengths_B(W, np.arange(3)), want)
    # ragged: shorter windows right-aligned after PAD, each as it is alone
    ragged = [rng.integers(0, 3, size=int(rng.integers(1, 30))).tolist() for _ in range(40)]
    width = max(map(len, ragged))
    W = np.array([[PAD] * (width - len(r)) + r for r in ragged], dtype=np.int64)
    want = np.array([[_M(r, z) for z in range(4)] for r in ragged])
    for fn in (match_lengths_A, match_lengths_B):
        assert np.array_equal(fn(W, np.arange(4)), want), fn.__name__
    assert seen == {"match_lengths_A", "match_lengths_B"}
