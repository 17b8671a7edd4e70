"""check_batch (dryz/check.py): a batch's classes are check()'s classes of its cases, row by row."""

import numpy as np

from dryz.case import Case
from dryz.verdict import AGREE, MISMATCH
from dryz.judge import check
from dryz.check import check_batch
from dryz.config import case_config


def _Given(output):
    """A subject whose run() returns a given output (check() then judges it as the library's)."""
    from dryz.trace_check import _Recorded
    return _Recorded(7, output)


def test_a_sorted_flag_alone_is_a_mismatch_in_a_batch_as_in_check():
    # a b a b: every candidate agrees with the model; the library clears no sorted flag where apply reaches
    # Step 4 (it must). Batch.odd_rows, with every logit agreeing, once classed that row oracle-disagreement.
    from dryz.subject.answers import Output
    case = Case(history=(0, 1, 0, 1), alphabet=2, penalty_last_n=64, candidates=((0, 0.0), (1, 0.0)), sorted=True)
    cfg = case_config(case)
    H = np.array([case.history, case.history], dtype=np.uint8)
    cands = np.array([0, 1], dtype=np.uint8)
    b0 = check_batch(cfg, H[:1], cands, np.zeros((1, 2), dtype=np.float32), np.zeros(2, dtype=np.float32), True,
                     np.array([False]))
    right = b0.expected[0]
    observed = np.array([right, right], dtype=np.float32)
    b = check_batch(cfg, H, cands, observed, np.zeros(2, dtype=np.float32), True, np.array([False, True]))
    assert b.odd_rows() == [(1, MISMATCH)]
    assert check(case, lib=_Given(Output((0, 1), right.copy(), True, 2))).klass == MISMATCH
    assert check(case, lib=_Given(Output((0, 1), right.copy(), False, 2))).klass == AGREE


# -- the row layouts and ragged batches ---------------------------------------------------------------------------

import pytest  # noqa: E402

from dryz.oracle import lengths as L_mod, lengths_b as B_mod  # noqa: E402
from dryz.oracle import promised as P_mod  # noqa: E402
from dryz.oracle import shipped as S_mod  # noqa: E402


def _windows(rng, N, w, k, big=False):
    if rng.random() < 0.4:  # periodic, a few tokens changed: long repeats
        per = rng.integers(0, k, int(rng.integers(1, 5)))
        W = np.array([np.resize(np.roll(per, int(rng.integers(0, 5))), w) for _ in range(N)]).reshape(N, w)
        W[rng.random(W.shape) < 0.03] = rng.integers(0, k)
    else:
        W = rng.integers(0, k, (N, w))
    return (W + 300).astype(np.int64) if big else W.astype(np.uint8 if rng.random() < 0.5 else np.int64)


def test_row_layouts_equal_the_column_layouts_and_the_single_window(monkeypatch):
    """Batches up to ROWS_MAX windows take the row layouts; the column layouts (larger batches) and the
    one-window layouts compute the same M, rep_limit and promised rep_limit."""
    from dryz.config import restart_sequences_of
    from dryz.symbols import SYMBOLS
    rng = np.random.default_rng(1)
    for trial in range(600):
        N, w, k = int(rng.integers(2, 20)), int(rng.integers(0, 100)), int(rng.integers(1, 6))
        big = rng.random() < 0.2
        W = _windows(rng, N, w, k, big)
        C = int(rng.integers(1, 7))
        cands = (rng.permutation(max(k, C))[:C] + (300 if big else 0)).astype(W.dtype)
        rows = (L_mod.match_lengths_A(W, cands), B_mod.match_lengths_B(W, cands))
        single = np.array([L_mod._match_lengths_A_single(r, cands) for r in W]).reshape(N, C)
        brs = tuple("".join(SYMBOLS[int(x)] for x in rng.integers(0, k, int(rng.integers(1, 4))))
                    for _ in range(int(rng.integers(0, 4))))
        seqs = restart_sequences_of(brs)
        Wr = W.astype(np.uint8) if not big else W
        reps = (S_mod.rep_limits(Wr, seqs), P_mod.promised_rep_limits(Wr, seqs)) if not big else None
        with monkeypatch.context() as m:
            for mod in (L_mod, B_mod, S_mod, P_mod):
                m.setattr(mod, "ROWS_MAX", 0)
            assert np.array_equal(rows[0], L_mod.match_lengths_A(W, cands)), trial
            assert np.array_equal(rows[1], B_mod.match_lengths_B(W, cands)), trial
            if reps is not None:
                assert np.array_equal(reps[0], S_mod.rep_limits(Wr, seqs)), trial
                assert np.array_equal(reps[1], P_mod.promised_rep_limits(Wr, seqs)), trial
        assert np.array_equal(rows[0], single) and np.array_equal(rows[1], single), trial


def _ragged_case(rng):
    """A random symbol configuration and a ragged batch: histories of 0..n tokens, PAD before each."""
    from dryz.config import config_of
    from dryz.symbols import SYMBOLS
    k = int(rng.integers(1, 6))
    brs = tuple("".join(SYMBOLS[int(x)] for x in rng.integers(0, k, int(rng.integers(1, 3))))
                for _ in range(int(rng.integers(0, 3))))
    m, b = [(1.0, 2.0), (0.8, 1.75), (2.0, 1.1), (1.0, 1.0), (0.0, 2.0), (3e38, 2.0)][int(rng.integers(0, 6))]
    last_n = int([rng.integers(1, 12), 64, 0, 2][int(rng.integers(0, 4))])
    cfg = config_of(np.float32(m).item(), np.float32(b).item(), int(rng.integers(0, 4)), last_n, brs)
    N, n = int(rng.integers(2, 30)), int(rng.integers(0, 40))
    lengths = rng.integers(0, n + 1, N)
    H = np.full((N, n), L_mod.PAD, dtype=np.int16)
    rows = []
    for r, ln in enumerate(lengths.tolist()):
        h = _windows(rng, 1, ln, k)[0].astype(np.uint8)
        H[r, n - ln:] = h
        rows.append(h)
    C = int(rng.integers(1, k + 2))
    cands = rng.permutation(k + 1)[:C].astype(np.uint8)
    initial = np.where(rng.random(C) < 0.3, -np.inf, rng.choice([0.0, 1.5, -3.25], C)).astype(np.float32)
    return cfg, H, lengths, rows, cands, initial


def test_a_ragged_batch_judges_every_row_as_a_batch_of_its_own_length():
    """check_batch(lengths=...) (a trace's applies) gives every row the predictions and the class of that
    history judged alone: random configurations (windows, breakers incl. multi-token ones, disabled DRY, -inf
    logits), outputs right, off by a bit, or with the sorted flag flipped."""
    rng = np.random.default_rng(5)
    seen = set()
    for trial in range(400):
        cfg, H, lengths, rows, cands, initial = _ragged_case(rng)
        sorted_in = bool(rng.random() < 0.5)
        alone = [check_batch(cfg, h[None, :], cands, np.zeros((1, len(cands)), np.float32), initial, sorted_in)
                 for h in rows]
        observed = np.array([b.expected[0] for b in alone], dtype=np.float32)
        obs_sorted = np.array([bool(b.expected_sorted[0]) for b in alone])
        for r in range(len(rows)):
            u = rng.random()
            if u < 0.15:
                observed[r, int(rng.integers(0, len(cands)))] -= np.float32(1.0)
            elif u < 0.25:
                obs_sorted[r] = not obs_sorted[r]
        b = check_batch(cfg, H, cands, observed, initial, sorted_in, obs_sorted, lengths=lengths)
        got = dict(b.odd_rows())
        for r, h in enumerate(rows):
            one = check_batch(cfg, h[None, :], cands, observed[r:r + 1], initial, sorted_in, obs_sorted[r:r + 1])
            assert got.get(r, AGREE) == one.row_class(0), (trial, r)
            for p, q in zip(b.preds, one.preds):
                assert np.array_equal(p.L[r], q.L[0]) and np.array_equal(p.penalized[r], q.penalized[0])
                assert bool(p.ran[r]) == bool(q.ran[0])
            seen.add(one.row_class(0))
    assert {AGREE, MISMATCH, "mismatch-multi-token", "promise-finite-penalty"} <= seen


def test_ragged_batches_are_for_the_symbol_vocabulary():
    from dryz.oracle.seqindex import RestartSeqs
    from dryz.oracle.shipped import Config
    cfg = Config(1.0, 2.0, 1, 64, RestartSeqs([(5, ())], 10))
    with pytest.raises(ValueError, match="symbol vocabulary"):
        check_batch(cfg, np.zeros((2, 3), np.int16), np.arange(3, dtype=np.uint8), np.zeros((2, 3), np.float32),
                    np.zeros(3, np.float32), False, None, lengths=np.array([3, 2]))


def test_row_layouts_on_long_periodic_batches(monkeypatch):
    """Batches where thousands of positions repeat far (the row layouts' pruned, CHUNK-at-a-time paths)."""
    rng = np.random.default_rng(8)
    for trial in range(12):
        N, w, k = int(rng.integers(100, 200)), int(rng.integers(40, 120)), int(rng.integers(1, 4))
        W = np.array([np.resize(rng.integers(0, k, int(rng.integers(1, 4))), w) for _ in range(N)], dtype=np.uint8)
        W[rng.random(W.shape) < 0.01] = rng.integers(0, k)
        cands = np.arange(k + 1, dtype=np.uint8)
        rows = (L_mod.match_lengths_A(W, cands), B_mod.match_lengths_B(W, cands))
        assert L_mod.CHUNK < N * w // 4 and B_mod.CHUNK < N * w // 4
        with monkeypatch.context() as m:
            m.setattr(L_mod, "ROWS_MAX", 0)
            m.setattr(B_mod, "ROWS_MAX", 0)
            cols = (L_mod.match_lengths_A(W, cands), B_mod.match_lengths_B(W, cands))
        assert np.array_equal(rows[0], cols[0]) and np.array_equal(rows[1], cols[1]), trial


def test_rows_with_their_own_candidate_arrays_are_judged_as_those_arrays_alone():
    """check_batch(lengths=..., present=...): every row has its own candidate array (a subset of the union, in
    its own order, its own initial logits and sorted flag), and gets the class that array judged alone gets."""
    rng = np.random.default_rng(13)
    seen = set()
    for trial in range(300):
        cfg, H, lengths, rows, cands, _ = _ragged_case(rng)
        N, C = len(rows), len(cands)
        arrays = []
        for r in range(N):
            k = int(rng.integers(1, C + 1))
            ids = rng.permutation(cands)[:k]
            logits = np.where(rng.random(k) < 0.2, -np.inf, rng.choice([0.0, 1.5, -3.25, 1e30], k)).astype(np.float32)
            arrays.append((ids, logits, bool(rng.random() < 0.5)))
        alone = []
        for h, (ids, logits, srt) in zip(rows, arrays):
            b = check_batch(cfg, h[None, :], ids, np.zeros((1, len(ids)), np.float32), logits, srt)
            obs, obs_sorted = b.expected[0].copy(), bool(b.expected_sorted[0])
            u = rng.random()
            if u < 0.15:
                obs[int(rng.integers(0, len(ids)))] -= np.float32(1.0)
            elif u < 0.25:
                obs_sorted = not obs_sorted
            alone.append((obs, obs_sorted))
        present = np.zeros((N, C), dtype=bool)
        initial = np.zeros((N, C), dtype=np.float32)
        observed = np.full((N, C), np.float32(7.0))  # outside a row's array: never compared
        for r, ((ids, logits, srt), (obs, _)) in enumerate(zip(arrays, alone)):
            at = [cands.tolist().index(x) for x in ids.tolist()]
            present[r, at], initial[r, at], observed[r, at] = True, logits, obs
        b = check_batch(cfg, H, cands, observed, initial, np.array([a[2] for a in arrays]),
                        np.array([a[1] for a in alone]), lengths=lengths, present=present)
        got = dict(b.odd_rows())
        for r, (h, (ids, logits, srt), (obs, obs_sorted)) in enumerate(zip(rows, arrays, alone)):
            one = check_batch(cfg, h[None, :], ids, obs[None, :], logits, srt, np.array([obs_sorted]))
            assert got.get(r, AGREE) == one.row_class(0) == b.row_class(r), (trial, r)
            seen.add(one.row_class(0))
    assert {AGREE, MISMATCH, "mismatch-multi-token", "promise-finite-penalty"} <= seen


def test_the_promised_model_clamps_the_shipped_match_lengths_again():
    """Batch._promised_predictions clamps the shipped M again (shipped.Matched); shipped._step3 matched only the
    rows with an eligible candidate, and a suspect row it skipped has nothing eligible as promised either (the
    promised rep_limit is never above the shipped one). Each suspect row's promised prediction is
    promised_lengths on that row alone; random batches with multi-token breakers reach skipped suspect rows."""
    from dryz.oracle.promised import promised_lengths, promised_rep_limits
    from dryz.oracle.shipped import rep_limits
    from dryz.symbols import SYMBOLS
    rng = np.random.default_rng(3)
    suspects = skipped = 0
    for _ in range(3000):
        k, n = int(rng.integers(2, 4)), int(rng.integers(3, 16))
        breakers = tuple("".join(SYMBOLS[int(x)] for x in rng.integers(0, k, int(rng.integers(1, 4))))
                         for _ in range(int(rng.integers(1, 3))))
        case = Case(history=(0,) * n, alphabet=k, penalty_last_n=int(rng.integers(2, 16)), breakers=breakers,
                    allowed_length=int(rng.integers(0, 3)))
        cfg = case_config(case)
        if not cfg.multi_token:
            continue
        H = rng.integers(0, k, (8, n)).astype(np.uint8)
        cands = np.arange(k, dtype=np.uint8)
        W = H[:, n - cfg.window_length(n):]
        assert np.less_equal(promised_rep_limits(W, cfg.seqs), rep_limits(W, cfg.seqs)).all()
        b = check_batch(cfg, H, cands, np.zeros((8, k), dtype=np.float32))
        if b._promised is None or not b._promised[1].any():
            continue
        at, pred = b._promised_predictions
        for r in np.flatnonzero(b._promised[1]).tolist():
            suspects += 1
            if b.pa.M_rows is not None and not b.pa.M_rows[r]:
                skipped += 1
                assert not pred.penalized[at[r]].any()
            alone = promised_lengths(H[r:r + 1], cands, cfg)
            assert pred.L[at[r]].tolist() == alone.L[0].tolist()
            assert pred.penalized[at[r]].tolist() == alone.penalized[0].tolist()
    assert suspects > 100 and skipped > 5, (suspects, skipped)
