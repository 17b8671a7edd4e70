"""The one verdict: check_batch judges what the library left for a batch of histories against both oracles,
the shipped model (bit for bit), the source's promises and the off-by-one control; check(case) is its batch of
one. Every mode (exhaustive, canonical, restart sweep, fuzz, minimize, replay, matrix) judges through it.
"""

from __future__ import annotations

import bisect
import math
import os
import time
from dataclasses import dataclass, replace

import numpy as np

from .case import Case, json_number, seed_parameters
from .oracle import MATCH_LENGTHS, PRIMARY as match_lengths_A
from .oracle.promised import is_interior_factor, promised_lengths, promised_rep_limits, restart_divergence
from .oracle.shipped import (Config, Matched, Prediction, output_logits, output_logits_zero, ragged_rep, rep_limits,
                             shipped_lengths, shipped_lengths_each)
from .config import Semantics, case_config
from .oracle.deviations import refuses
from .subject.answers import Crash, Refused, Unrecoverable, Unsupported
from .symbols import MAX_ALPHABET
from .verdict import (AGREE, MISMATCH, ORACLE_DISAGREEMENT, HarnessError, Verdict, _lazy, crash_verdict, promise_class,
                      refused_verdict)
from .oracle.promise_text import classify


DECLARED = "declared"  # row_status of a history an adapter's declared deviation explains (Batch.declared)


# Fault injection for positive controls (fuzz campaign, minimizer demo): DRYZ_FAULT=off-by-one makes the
# reference claim one more than the true length wherever that length is >= 2, in both oracles;
# DRYZ_FAULT=abort kills the process (as a crashing subject would) wherever a length is >= 3;
# DRYZ_FAULT=slow pauses a process 1.5 s the first time a length is >= 3 in it (as a busy machine pauses a run;
# a fork pauses once of its own).
FAULTS = ("off-by-one", "abort", "slow")
_paused = None  # the process that paused


# os.environ's own bytes mapping (CPython, POSIX): a lookup there costs no KeyError when the variable is absent,
# which os.environ.get raises and catches (~0.5 us; fault() runs once per fuzz input).
_ENVIRON_DATA = getattr(os.environ, "_data", None) if os.name == "posix" else None


def fault() -> str | None:
    if _ENVIRON_DATA is not None and isinstance(_ENVIRON_DATA, dict):
        raw = _ENVIRON_DATA.get(b"DRYZ_FAULT")
        f = os.fsdecode(raw) if raw else None
    else:
        f = os.environ.get("DRYZ_FAULT") or None
    if f is not None and f not in FAULTS:
        raise ValueError(f"unknown DRYZ_FAULT {f!r} (known: {', '.join(FAULTS)})")
    return f


def _inject(p: Prediction) -> Prediction:
    bump = p.penalized & np.greater_equal(p.L, 2)
    return replace(p, L=p.L + bump)


if MAX_ALPHABET > 256:
    raise ImportError("case_arrays holds token ids in uint8: the alphabet must fit a byte")


def case_arrays(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """(candidate ids, history as a (1, n) batch), as uint8 arrays: every id is below MAX_ALPHABET <= 256, and
    the one-window model reads uint8 ids without the conversions and range checks wider ids need. A case over
    a real vocabulary (ids up to its size): int64 arrays."""
    if case.vocab is not None:
        return (np.array(case.ids, dtype=np.int64).reshape(-1),
                np.array(case.history, dtype=np.int64).reshape(1, -1))
    return (np.frombuffer(bytes(case.ids), dtype=np.uint8),
            np.frombuffer(bytes(case.history), dtype=np.uint8).reshape(1, -1))


# -- the one comparison: a batch of histories x candidates -----------------------------------------------


def invert_deltas(delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """L from a penalty 1 * 2^(L-1) by exact float equality: 0 -> 0, 2^(k-1) -> k.

    Returns (L, bad) where bad marks deltas that are neither 0 nor an exact power of two.
    """
    mant, expo = np.frexp(delta.astype(np.float64))
    # ufuncs, not operators: this runs per fuzz input (see the note in oracle/lengths.py)
    power = np.greater(delta, 0) & np.equal(mant, 0.5) & np.greater_equal(expo, 1)
    L = np.where(power, expo, 0).astype(np.int64)
    bad = ~(power | np.equal(delta, 0))
    return L, bad


def _pause() -> None:
    global _paused
    if _paused != os.getpid():
        _paused = os.getpid()
        time.sleep(1.5)


def predict_all(H: np.ndarray, cands: np.ndarray, cfg: Config, lengths=None) -> list[Prediction]:
    """The shipped model on every registered match-length oracle (dryz.oracle.MATCH_LENGTHS, the primary
    first), with DRYZ_FAULT's planted reference error if set."""
    preds = list(shipped_lengths_each(H, cands, cfg, tuple(f for _, f in MATCH_LENGTHS), lengths=lengths))
    planted = fault()
    if planted == "off-by-one":
        preds = [_inject(p) for p in preds]
    elif planted == "abort" and np.greater_equal(preds[0].L, 3).any():
        os.abort()
    elif planted == "slow" and np.greater_equal(preds[0].L, 3).any():
        _pause()
    return preds


def _bits(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32).view(np.uint32)


class Batch:
    """check_batch's verdict on N histories (equal length) x C candidates: what the library left against
    both oracles and the shipped model's output, bit for bit, plus the source's promises and the off-by-one
    control. Every mode judges through this: check() is a batch of one; the enumerator, the restart sweep,
    the reference and the matrix tally whole batches (weighted where one case stands for many).

    codes (N, C) int8: 0 agree, 1 mismatch (A == B, the library's bits differ from the model's), 2 oracle
    self-disagreement (A != B: the library is not judged). L: the library's L, inverted from its delta where
    the configuration inverts (initial logits 0, multiplier 1, base 2, allowed_length 1; -1 where the delta
    is neither 0 nor 2^(L-1)), else the model's L where the bits agree and -1 where they differ."""

    def __init__(self, cfg: Config, H: np.ndarray, cands: np.ndarray, observed: np.ndarray,
                 initial: np.ndarray | None = None, sorted_in=False, observed_sorted=None, lengths=None,
                 present=None):
        if lengths is not None and H.shape[0] == 1:  # one history: the batch of its own length
            H, lengths = H[:, H.shape[1] - int(lengths[0]):].astype(np.uint8), None
        if present is not None and cfg.text is not None:
            raise ValueError("per-history candidate arrays are for the symbol vocabulary")
        self.cfg, self.H, self.cands = cfg, H, cands
        self.lengths = lengths    # (N,) or None: every history is H's full width (see check_batch)
        self.present = present    # (N, C) bool or None: every history has every candidate (see check_batch)
        self.observed = observed  # (N, C) float32, C order
        self.initial = initial    # (C,) or (N, C) float32, None: every logit 0
        self.sorted_in, self.observed_sorted = sorted_in, observed_sorted  # (N,) bool or None: not judged
        self.one = H.shape[0] == 1  # a batch of one (a fuzz input): whole arrays, no row views
        self._per_row = present is not None  # initial logits and sorted flags per history
        self.preds = predict_all(H, cands, cfg, lengths)
        self.pa = self.preds[0]  # the primary oracle's prediction

    @_lazy
    def invertible(self) -> bool:
        c = self.cfg
        return self.initial is None and seed_parameters(c.multiplier, c.base, c.allowed_length)

    @_lazy
    def expected(self) -> np.ndarray:
        if self.initial is not None:
            return output_logits(self.initial, self.pa, self.cfg)
        try:
            return output_logits_zero(self.pa, self.cfg)
        except ValueError as e:  # a negative L
            raise HarnessError(str(e)) from None

    @_lazy
    def expected_sorted(self) -> np.ndarray:
        """apply clears the sorted flag when it reaches Step 4; else the flag is left as it came."""
        return np.logical_and(np.logical_not(self.pa.ran), self.sorted_in)

    @_lazy
    def bits(self) -> np.ndarray:
        return _bits(np.ascontiguousarray(self.observed))

    @_lazy
    def oracles_differ(self) -> np.ndarray:
        pa = self.pa
        out = np.zeros(pa.L.shape, dtype=bool)
        for p in self.preds[1:]:
            out |= np.not_equal(pa.L, p.L) | np.not_equal(pa.penalized, p.penalized)
        return out

    @_lazy
    def library_L(self) -> np.ndarray | None:
        """The library's L per case where the configuration inverts (-1: neither 0 nor 2^(L-1)), else None."""
        if not self.invertible:
            return None
        L, bad = invert_deltas(-self.observed)
        L[bad] = -1
        return L

    @_lazy
    def codes(self) -> np.ndarray:
        differ = np.not_equal(self.bits, _bits(self.expected))
        codes = np.where(self.oracles_differ, 2, np.where(differ, 1, 0)).astype(np.int8)
        if self.present is not None:  # only each history's own candidates are compared
            codes = np.where(self.present, codes, 0).astype(np.int8)
        if self.cfg.variants and codes.any():
            rows = list(self.declared)
            if rows:
                codes[rows] = 0
        return codes

    @_lazy
    def declared(self) -> dict:
        """history -> the declared variant's class (dryz.oracle.deviations) for every history whose output
        differs from llama.cpp's model but matches, bit for bit (and in the sorted flag), the model of a
        deviation the subject declares; those histories are not mismatches. In a ragged batch each history is
        its own (lengths, present: its own candidates, initial logits and sorted flag)."""
        if not self.cfg.variants:
            return {}
        differ = np.not_equal(self.bits, _bits(self.expected))
        if self.present is not None:
            differ &= self.present
        bad = np.nonzero(differ.any(axis=1) & ~self.oracles_differ.any(axis=1))[0]
        out: dict = {}
        for name, vcfg in self.cfg.variants:
            left = np.array([r for r in bad.tolist() if r not in out], dtype=np.int64)
            if not len(left):
                break
            if vcfg.composed:  # a rule of the scan's own: the composed model, one history at a time
                for r in left.tolist():
                    if self.variant_equal(r, vcfg):
                        out[r] = name
                continue
            pv = shipped_lengths_each(self.H[left], self.cands, vcfg, (match_lengths_A,),
                                      lengths=None if self.lengths is None else np.asarray(self.lengths)[left])[0]
            initial = self.initial
            if initial is not None and np.ndim(initial) == 2:
                initial = initial[left]
            exp = output_logits(initial, pv, vcfg) if initial is not None else output_logits_zero(pv, vcfg)
            eq = np.equal(self.bits[left], _bits(exp))
            if self.present is not None:
                eq |= ~self.present[left]
            same = eq.all(axis=1)
            if self.observed_sorted is not None:
                sorted_in = np.asarray(self.sorted_in)[left] if self._per_row else self.sorted_in
                want = np.logical_and(np.logical_not(pv.ran), sorted_in)
                same &= np.equal(np.asarray(self.observed_sorted)[left], want)
            for r in left[same].tolist():
                out[r] = name
        return out

    def variant_output(self, r: int, vcfg: Config):
        """What the model with a deviation's configuration leaves for history r: (logits over the batch's
        candidates, sorted flag), or composed.Raises."""
        from .oracle import composed  # on use: a declared rule of the scan's own (an engine's)
        return composed.predict(vcfg, self._history(r)[0], self.cands, self._initial(r),
                                bool(np.asarray(self.sorted_in)[r]) if self._per_row else bool(self.sorted_in))

    def variant_equal(self, r: int, vcfg: Config) -> bool:
        """History r's output equals, bit for bit (its own candidates; the sorted flag where it is judged), what
        the model with this configuration leaves."""
        got = self.variant_output(r, vcfg)
        if not isinstance(got, tuple):  # composed.Raises: an answer is not a raise
            return False
        logits, srt = got
        eq = np.equal(self.bits[r], _bits(logits))
        if self.present is not None:
            eq |= ~self.present[r]
        if not eq.all():
            return False
        return self.observed_sorted is None or bool(np.asarray(self.observed_sorted)[r]) == srt

    @_lazy
    def L(self) -> np.ndarray:
        if self.library_L is not None:
            return self.library_L
        return np.where(np.equal(self.codes, 0), self.pa.L, -1)

    @_lazy
    def penalized(self) -> np.ndarray:
        """The library changed the logit."""
        if self.library_L is not None:
            return np.greater(self.library_L, 0)
        changed = np.not_equal(self.bits, _bits(self.initial if self.initial is not None else 0.0))
        return changed if self.present is None else changed & self.present

    @_lazy
    def flagged(self) -> np.ndarray:
        """The off-by-one reference (L + 1 wherever the model penalizes) differs from the library: the
        non-vacuity control every mode carries."""
        pa = self.pa
        if self.library_L is not None:
            return np.not_equal(self.library_L, pa.L + np.greater(pa.L, 0))
        off = Prediction(pa.L + pa.penalized, pa.penalized, pa.ran)
        exp = output_logits_zero(off, self.cfg) if self.initial is None else output_logits(self.initial, off,
                                                                                           self.cfg)
        flagged = np.not_equal(self.bits, _bits(exp))
        return flagged if self.present is None else flagged & self.present

    # -- per history ------------------------------------------------------------------------------------
    def row_status(self, r: int) -> str:
        """AGREE, MISMATCH or ORACLE_DISAGREEMENT for history r (before promises), bytes-compared: the fast
        path of a batch of one."""
        pa = self.pa
        if self.one and self.present is None:
            obs, exp = self.observed, self.expected
            pick = None
        else:
            obs, exp = self.observed[r], self.expected[r]
            m = self.present[r] if self.present is not None else None  # the history's own candidates
            pick = (lambda a: a[r][m]) if m is not None else (lambda a: a[r])
            if m is not None:
                obs, exp = obs[m], exp[m]
        La, Pa = (pa.L, pa.penalized) if pick is None else (pick(pa.L), pick(pa.penalized))
        for p in self.preds[1:]:
            Lb, Pb = (p.L, p.penalized) if pick is None else (pick(p.L), pick(p.penalized))
            if La.tobytes() != Lb.tobytes() or Pa.tobytes() != Pb.tobytes():
                return ORACLE_DISAGREEMENT
        if obs.tobytes() != exp.tobytes() or (  # bit-exact (both float32, C order)
                self.observed_sorted is not None and bool(self.observed_sorted[r]) != self.row_sorted(r)):
            return DECLARED if r in self.declared else MISMATCH
        return AGREE

    def row_sorted(self, r: int) -> bool:
        """The sorted flag history r must leave: apply clears it when it reaches Step 4."""
        return False if self.pa.ran[r] else self._sorted_in(r)

    def _sorted_in(self, r: int) -> bool:
        return bool(self.sorted_in[r]) if self._per_row else bool(self.sorted_in)

    def promises(self, r: int) -> list[str]:
        """The promises history r breaks (judged only where it agrees with the shipped model)."""
        if self.present is not None:  # the history's own candidates and initial logits
            m = self.present[r]
            out = _finite_penalty(self._initial(r)[m], self.observed[r][m], self.pa.penalized[r][m])
        else:
            initial = self.initial if self.initial is not None else self._initial_row()
            if self.one:
                out = _finite_penalty(initial, self.observed, self.pa.penalized)
            else:
                out = _finite_penalty(initial, self.observed[r], self.pa.penalized[r])
        if self.cfg.multi_token:
            out += self._restart_promise(r)
        if self.cfg.text is not None:
            out += self._text_promise(r)
        return out

    def row_class(self, r: int) -> str:
        """The class check() gives history r: mismatch(-multi-token), oracle-disagreement, a promise's class,
        or agree."""
        s = self.row_status(r)
        if s == MISMATCH:
            return "mismatch-multi-token" if self.cfg.multi_token else MISMATCH
        if s == DECLARED:
            return self.declared[r]
        if s != AGREE:
            return s
        broken = self.promises(r)
        return promise_class(broken[0]) if broken else AGREE

    def odd_rows(self) -> list[tuple[int, str]]:
        """(history, class) for every history whose class is not agree, in order: the rows with a
        disagreement, and the rows that agree but may break a promise (finite-penalty; the restart promise
        where multi-token sequences exist), judged one by one."""
        codes = self.codes
        N = self.H.shape[0]
        if codes.any():
            dis = np.equal(codes, 2).any(axis=1)
            mis = np.equal(codes, 1).any(axis=1) & ~dis
        else:  # the common case: every case agrees with the model
            dis, mis = np.zeros(N, dtype=bool), np.zeros(N, dtype=bool)  # two arrays: mis is updated below
        if self.observed_sorted is not None:
            mis |= ~dis & np.not_equal(np.asarray(self.observed_sorted), self.expected_sorted)
        suspect = self._finite_suspects()
        if self.cfg.multi_token:
            suspect |= self._restart_suspects()
        if self.cfg.text is not None:
            suspect |= self._text_suspects()
        declared = self.declared
        if declared:
            suspect = suspect.copy()
            suspect[list(declared)] = True
        rows = np.nonzero(dis | mis | suspect)[0]
        if not len(rows):
            return []
        mismatch = "mismatch-multi-token" if self.cfg.multi_token else MISMATCH
        out = []
        for r in rows.tolist():
            if r in declared:
                out.append((r, declared[r]))
            elif dis[r]:
                out.append((r, ORACLE_DISAGREEMENT))
            elif mis[r]:
                out.append((r, mismatch))
            else:
                broken = self.promises(r)
                if broken:
                    out.append((r, promise_class(broken[0])))
        return out

    def row_classes(self) -> np.ndarray:
        """row_class for every history (odd_rows filled into an array of agree)."""
        out = np.full(self.H.shape[0], AGREE, dtype=object)
        for r, klass in self.odd_rows():
            out[r] = klass
        return out

    def _initial_row(self) -> np.ndarray:
        """The initial logits, (C,) for every history or (N, C) one row each."""
        return self.initial if self.initial is not None else np.zeros(len(self.cands), dtype=np.float32)

    def _initial(self, r: int) -> np.ndarray:
        """History r's initial logits (C,)."""
        i = self._initial_row()
        return i[r] if self._per_row else i

    def _finite_suspects(self) -> np.ndarray:
        if np.isfinite(self.observed).all():  # the common case: nothing can have become infinite
            return np.zeros(self.H.shape[0], dtype=bool)
        init = np.isfinite(self._initial_row())
        suspect = self.pa.penalized & (init if init.ndim == 2 else init[None, :]) & ~np.isfinite(self.observed)
        return (suspect if self.present is None else suspect & self.present).any(axis=1)

    def _restart_rows(self):
        cfg = self.cfg
        n = self.H.shape[1]
        if self.lengths is not None:  # a ragged batch: the widest window, shorter ones after PAD
            widths = self._widths
            if not cfg.enabled or not np.greater(widths, cfg.allowed_length).any():
                return None
            return self.H[:, n - int(widths.max()):]
        w = cfg.window_length(n)
        if not cfg.enabled or w <= cfg.allowed_length:
            return None  # apply exits before Step 1 in both models
        return self.H[:, n - w:]

    @_lazy
    def _widths(self) -> np.ndarray:
        """A ragged batch's window length per row."""
        return np.minimum(np.asarray(self.lengths, dtype=np.int64), self.cfg.window_cap)

    def _window(self, W: np.ndarray, r: int) -> np.ndarray:
        """Row r's own window (without a ragged batch's PAD)."""
        return W[r] if self.lengths is None else W[r, W.shape[1] - int(self._widths[r]):].astype(np.uint8)

    def _history(self, r: int) -> np.ndarray:
        """Row r's history as a batch of one."""
        if self.lengths is None:
            return self.H[r:r + 1]
        return self.H[r:r + 1, self.H.shape[1] - int(self.lengths[r]):].astype(np.uint8)

    @_lazy
    def _promised(self):
        W = self._restart_rows()
        if W is None:
            return None
        rep = self.pa.rep if self.pa.rep is not None else rep_limits(W, self.cfg.seqs)
        prom = promised_rep_limits(W, self.cfg.seqs)
        if self.lengths is not None:  # rows past the early exits, each with its own window's default
            prom = ragged_rep(prom, W.shape[1], self._widths)
            return W, np.not_equal(rep, prom) & np.greater(self._widths, self.cfg.allowed_length)
        return W, np.not_equal(rep, prom)

    def _restart_suspects(self) -> np.ndarray:
        p = self._promised
        return np.zeros(self.H.shape[0], dtype=bool) if p is None else p[1]

    @_lazy
    def _promised_predictions(self):
        """The promised model (Step 1 as promised, the rest as shipped) on every history whose shipped and
        promised rep_limits differ, as one batch: ({history: its row}, Prediction)."""
        rows = np.flatnonzero(self._promised[1])
        at = {r: i for i, r in enumerate(rows.tolist())}
        # The primary oracle's match lengths: the promised model clamps them by its own Step 1. A row the shipped
        # model did not match (nothing eligible there) has nothing eligible as promised either: the promised
        # rep_limit is never above the shipped one (the shipped occurrence is one of those it minimizes over).
        M = self.pa.M
        oracle = match_lengths_A if M is None else Matched(M[rows])
        if len(rows) == 1:
            return at, promised_lengths(self._history(int(rows[0])), self.cands, self.cfg, oracle)
        if self.lengths is not None:
            return at, shipped_lengths_each(self.H[rows], self.cands, self.cfg, (oracle,),
                                            rep_fn=promised_rep_limits, lengths=self.lengths[rows])[0]
        return at, promised_lengths(self.H[rows], self.cands, self.cfg, oracle)

    def _restart_promised(self, r: int):
        """The promised model's output for history r (Step 1 as promised, the rest as shipped): (logits over the
        batch's candidates, sorted flag), where its rep_limit differs from the shipped one; else None."""
        p = self._promised
        if p is None or not p[1][r]:
            return None  # the two models differ only through rep_limit: nothing to compare
        at, pred = self._promised_predictions
        i = at[r]
        pp = Prediction(pred.L[i:i + 1], pred.penalized[i:i + 1], pred.ran[i:i + 1])
        return output_logits(self._initial(r), pp, self.cfg)[0], (False if pp.ran[0] else self._sorted_in(r))

    def _restart_promise(self, r: int) -> list[str]:
        """Step 1's promise: "the most recently completed restart sequence limits the repetition". Where the
        output (which agreed with the as-shipped model) differs from the promised model's, the window shows
        contained-restart (the documented limitation: the sequence the shipped scan stops at lies strictly
        inside the one completed closer to the end, 'ni' in 'amniotic') or restart-order (anything else)."""
        out = self._restart_promised(r)
        if out is None:
            return []
        promised, promised_sorted = out
        observed = self.observed[r]
        if self.present is not None:
            promised, observed = promised[self.present[r]], observed[self.present[r]]
        same_sorted = self.observed_sorted is None or bool(self.observed_sorted[r]) == promised_sorted
        if _bits(observed).tobytes() == _bits(promised).tobytes() and same_sorted:
            return []
        return [restart_promise_class(self._window(self._promised[0], r), self.cfg.seqs)]


    # -- the text-level promise over a real vocabulary -------------------------------------------------------
    def _text_rep(self, r: int):
        """(window, the rep_limit the text promises for history r's window, the shipped one); None when apply
        exits before Step 1 or no breaker is given. The promised rep_limit is promise_text.promised_rep_limit's:
        n - 1 - k for the token k in which the latest-ending occurrence of a breaker ends (for each breaker its
        rightmost occurrence ends latest: one rfind each)."""
        t = self.cfg.text
        W = self._restart_rows()
        if W is None or not t.breakers or self.pa.rep is None:
            return None
        window = W[r].tolist()
        n = len(window)
        text = b"".join(map(t.pieces.__getitem__, window))
        ends = None
        prom = n
        for bb in t.breakers_bytes:
            p = text.rfind(bb)
            if p < 0:
                continue
            if ends is None:
                ends = np.cumsum(t.piece_lengths[W[r]]).tolist()
            k1 = bisect.bisect_right(ends, p + len(bb) - 1)
            prom = min(prom, n - 1 - k1)
        return window, prom, int(self.pa.rep[r])

    def _text_suspects(self) -> np.ndarray:
        out = np.zeros(self.H.shape[0], dtype=bool)
        for r in range(self.H.shape[0]):
            x = self._text_rep(r)
            out[r] = x is not None and x[1] != x[2]
        return out

    def _text_promise(self, r: int) -> list[str]:
        """A sequence breaker stops a repetition wherever it occurs in the text the tokens print
        (dryz.oracle.promise_text): where the text's rep_limit differs from Step 1's and the output would differ,
        promise_text.classify names the class (documented-breaker-truncated, documented-tail-cap,
        documented-contained-restart, promise-breaker-in-token, -across-tokens, -phantom)."""
        x = self._text_rep(r)
        if x is None or x[1] == x[2]:
            return []
        window, prom, ship = x
        promised, promised_sorted = self._text_promised(r, prom)
        same_sorted = self.observed_sorted is None or bool(self.observed_sorted[r]) == promised_sorted
        if _bits(self.observed[r]).tobytes() == _bits(promised).tobytes() and same_sorted:
            return []
        t = self.cfg.text
        cls, info = classify(window, t.pieces, t.texts, t.breakers, t.model, min(ship, len(window)), t.tokenize)
        if cls in ("agree", "construction-mismatch"):
            raise HarnessError(f"the text-level promise model and Step 1's model disagree on a window ({cls}: "
                               f"{info})")
        return [cls.split("-", 1)[1]]  # promise-breaker-in-token -> breaker-in-token; documented-X -> X

    def _text_promised(self, r: int, prom: int):
        """The text promise's output for history r, its rep_limit prom (the rest as shipped): (logits, sorted)."""
        pp = shipped_lengths(self.H[r:r + 1], self.cands, self.cfg, match_lengths_A,
                             rep_fn=lambda W, seqs: np.array([prom], dtype=np.int64))
        return output_logits(self._initial(r), pp, self.cfg)[0], (False if pp.ran[0] else self._sorted_in(r))

    def promised_output(self, r: int):
        """What the source's promises say history r's output must be where they and the shipped model part: Step
        1's restart order (multi-token restart sequences), else the text-level breaker promise (a real
        vocabulary): (logits over the batch's candidates, sorted flag); None where the promised rep_limit is the
        shipped one (the shipped model's output is the promised one)."""
        out = self._restart_promised(r) if self.cfg.multi_token else None
        if out is None and self.cfg.text is not None:
            x = self._text_rep(r)
            if x is not None and x[1] != x[2]:
                out = self._text_promised(r, x[1])
        return out


def check_batch(cfg: Config, H: np.ndarray, cands: np.ndarray, observed: np.ndarray, initial=None,
                sorted_in=False, observed_sorted=None, lengths=None, present=None) -> Batch:
    """The one verdict: what the library left for the histories H (N, n) and candidates cands (C,), judged
    against both oracles, the shipped model bit for bit, the promises and the controls.

    Histories of different lengths and candidate arrays (a trace's applies), over the symbol vocabulary:
    lengths (N,): row r's history is H[r, n - lengths[r]:], the entries before it lengths.PAD (H then a signed
    integer array); every row is judged as in a batch of its own length (shipped_lengths_ragged; promises on
    the row's own history). present (N, C) bool: row r's candidate array is the candidates present[r] (the
    model's predictions for a candidate do not depend on the others), initial (N, C) their logits and
    sorted_in (N,) its sorted flag; the classes (codes, odd_rows, row_class) judge only those, as a batch of
    that array would (the order of an array's candidates changes no class)."""
    return Batch(cfg, H, cands, np.ascontiguousarray(observed, dtype=np.float32), initial, sorted_in,
                 observed_sorted, lengths, present)


def _finite_penalty(initial: np.ndarray, observed: np.ndarray, penalized: np.ndarray) -> list[str]:
    """finite-penalty: Step 4 clamps the exponent "to prevent floating point overflow in pow(penalty_base,
    exponent)"; a penalized candidate with a finite logit must keep a finite logit."""
    if np.count_nonzero(penalized) and np.count_nonzero(penalized & np.isfinite(initial) & ~np.isfinite(observed)):
        return ["finite-penalty"]
    return []


def restart_promise_class(window, seqs) -> str:
    """contained-restart or restart-order for a window whose shipped and promised rep_limit differ."""
    d = restart_divergence(window, seqs)
    if d is not None and is_interior_factor(d[0][2], d[1][2]):
        return "contained-restart"
    return "restart-order"


# -- a single case: a batch of one -------------------------------------------------------------------


def model_logits(case: Case) -> np.ndarray:
    """The shipped model's logits for a case of the symbol vocabulary (the 7-argument semantics): what the
    library must leave, with no subject run (the served witnesses' replay predicts an answer from it)."""
    cands, H = case_arrays(case)
    b = Batch(case_config(case), H, cands, np.zeros((1, len(cands)), dtype=np.float32),
              np.array(case.logits, dtype=np.float32), case.sorted)
    return b.expected[0]


@dataclass
class Expected:
    """What the oracles say a subject must leave for one case, with no subject run (dryz export asserts it)."""
    logits: np.ndarray      # float32, per candidate in array order
    sorted: bool            # the sorted flag apply must leave
    finite: np.ndarray      # bool per candidate: the promise finite-penalty asks only that this logit stay finite
                            # (the shipped model overflows it to -inf); its `logits` entry is the shipped one
    promised: bool          # logits are the promised model's (Step 1's restart order or the text promise), which
                            # the shipped model's differ from
    multi_token: bool       # some restart sequence of the breakers has a tail


def expected_output(case: Case, abi: int = 7, vocabulary=None, promises: bool = False) -> Expected:
    """The case's expected output on the semantics of an init_dry ABI (a real vocabulary's case: that vocabulary
    loaded, dryz.vocab_cases): the shipped model's logits and sorted flag, both oracles agreeing (else
    HarnessError: no expected value); with promises, what the source's promises say instead where they part from
    the shipped model (promised_output: the promised rep_limit's output; finite-penalty: the candidates the
    shipped model overflows need only stay finite)."""
    cands, H = case_arrays(case)
    initial = np.array(case.logits, dtype=np.float32)
    b = Batch(case_config(case, abi, (), vocabulary), H, cands, np.zeros((1, len(cands)), dtype=np.float32), initial,
              case.sorted)
    if b.oracles_differ.any():
        raise HarnessError("oracles A and B disagree on this case: there is no expected value")
    logits, srt = b.expected[0].copy(), b.row_sorted(0)
    finite = np.zeros(len(cands), dtype=bool)
    promised = False
    if promises:
        finite = b.pa.penalized[0] & np.isfinite(initial) & ~np.isfinite(logits)
        out = b.promised_output(0)
        if out is not None:
            (logits, srt), promised = out, True
    return Expected(np.asarray(logits, dtype=np.float32), bool(srt), finite, promised, b.cfg.multi_token)


# -- one answer: a batch of one ----------------------------------------------------------------------------------


def answer_verdict(case: Case, sem: Semantics, out) -> Verdict:
    """The verdict on what a subject answered for one case, on its semantics sem: a Crash is class crash (or
    memory); an Output (its candidate array after one apply) is judged by check_batch on a batch of one, the
    differing candidates named; a refusal, where the semantics say nothing of refusing, is a mismatch; an answer
    that cannot be read back exactly is not judged (Unsupported)."""
    if isinstance(out, Crash):
        return crash_verdict(case, out)
    if isinstance(out, Unrecoverable):
        raise Unsupported(f"{sem.kind} subject: not judged: {out.detail}")
    cfg = sem.config(case)  # the semantics first (as every other answer is judged on them), then the answer
    if isinstance(out, Refused):
        declared = refuses(case, sem.deviations)
        if declared is not None:  # a refusal the subject's engine documents for such parameters
            v = refused_verdict(case, f"the engine refused the case as it documents: {out.message}")
            v.status, v.declared, v.differing = AGREE, declared, []
            return v
        return refused_verdict(case, f"the subject refused the case ({out.message}); llama.cpp's semantics run it")
    cands, H = case_arrays(case)
    initial = np.array(case.logits, dtype=np.float32)
    if out.size != len(cands) or out.ids != case.ids:
        b = Batch(cfg, H, cands, np.zeros((1, len(cands)), dtype=np.float32), initial, case.sorted)
        v = _verdict(case, b, out.logits, out.sorted)
        # DRY only changes logits: a changed array is the library's doing (reading it is checked at load).
        v.status, v.detail = MISMATCH, "the sampler changed the candidate array's size or ids"
        v.differing.append({"id": -1, "expected": "unchanged ids and size", "observed": "changed",
                            "direction": "array"})
        return v
    b = Batch(cfg, H, cands, out.logits.reshape(1, -1), initial, case.sorted,  # float32 C order
              None if out.sorted is None else (out.sorted,))  # None: a subject without the flag
    v = _verdict(case, b, out.logits, out.sorted)
    if case.invertible():
        L, bad = invert_deltas(-out.logits)
        # None: not 0 nor 2^(L-1) (past the float range, or not a power of two at all); the bit-exact
        # comparison judges it.
        v.library_L = [None if x else int(y) for y, x in zip(L, bad)]
    status = b.row_status(0)
    if status == DECLARED:
        v.declared = b.declared[0]
        v.detail = f"the output differs from llama.cpp's model as the deviation the subject declares: {v.declared}"
        return v
    if status == ORACLE_DISAGREEMENT:
        v.status, v.detail = status, "oracles A and B disagree; the library is not judged"
    elif status == MISMATCH:
        v.status = MISMATCH
        expected = v.expected_array
        diff = np.not_equal(_bits(out.logits), _bits(expected))  # a ufunc: see the note in oracle/lengths.py
        for i in np.nonzero(diff)[0]:
            obs, exp = float(out.logits[i]), float(expected[i])
            # Lower logit than expected = the library penalized more.
            direction = "more" if obs < exp or (math.isnan(exp) and not math.isnan(obs)) else "less"
            v.differing.append({"id": int(cands[i]), "expected": json_number(exp), "observed": json_number(obs),
                                "direction": direction})
        if v.differing:
            v.detail = f"{int(diff.sum())} candidate logit(s) differ from the exact model"
        else:
            v.detail = f"sorted flag {out.sorted}, expected {v.expected_sorted}"
            v.differing.append({"id": -1, "expected": v.expected_sorted, "observed": out.sorted,
                                "direction": "sorted"})
    else:
        v.broken_promises = b.promises(0)
        if v.broken_promises:
            v.detail = "the shipped output agrees with the model but breaks: " + ", ".join(v.broken_promises)
    return v


def _verdict(case: Case, b: Batch, observed: np.ndarray, observed_sorted: bool) -> Verdict:
    return Verdict(case=case, status=AGREE, oracle_L_array=b.pa.L[0],
                   other_L_arrays=tuple(p.L[0] for p in b.preds[1:]), expected_array=b.expected[0], observed_array=observed,
                   expected_sorted=b.row_sorted(0), observed_sorted=observed_sorted,
                   multi_token=b.cfg.multi_token)
