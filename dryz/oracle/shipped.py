"""The shipped model: llama_sampler_dry_apply's Steps 1-4 as the source writes them, on top of either match
length (lengths.py): the window, the early exits, rep_limit from restart sequences (Step 1, the only copy),
breaker candidates, and the float arithmetic of Step 4 (the only copy). Vectorised over batches of
equal-length histories; check() runs it on a batch of one, the enumerator on whole levels of the tree.

The ufunc rule of lengths.py holds here too (this module is instrumented by the fuzz harness).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from ..case import f32
from .idbytes import all_bytes, bytes_or_none, cached_when_hashable
from .lengths import candidate_index, match_lengths_A
from .windows import ROWS_MAX
from .seqindex import RestartSeqs, restart_scan  # noqa: F401 (restart_scan: Step 1 over one window)

# -- rep_limit (Step 1) and the configuration model -----------------------------------------


def rep_limits(W: np.ndarray, seqs) -> np.ndarray:
    """Step 1 as shipped: scanning back from the end, the first head that completes a restart sequence
    (the longest tail matching at that head) sets rep_limit = distance - tail length; none: the window length."""
    N, w = W.shape
    if not seqs:
        return np.full(N, w, dtype=np.int64)
    real = isinstance(seqs, RestartSeqs)  # a real vocabulary's (thousands of sequences): by head position
    if N == 1:
        if real:
            return np.array([seqs.rep_limit(W[0])], dtype=np.int64)
        one = _rep_limit_single(W[0], seqs)
        if one is not None:
            return np.array([one], dtype=np.int64)
    rep = np.full(N, w, dtype=np.int64)
    if real:
        seqs = seqs.restricted(set(np.unique(W).tolist()))
        if not seqs:
            return rep
    if N <= ROWS_MAX:
        return _rep_limits_rows(W, seqs)
    done = np.zeros(N, dtype=bool)
    for i in range(w):
        longest = np.full(N, -1, dtype=np.int64)
        for head, tail in seqs:
            k = len(tail)
            if k > i:
                continue
            hit = _completes(W, i, head, tail)
            longest = np.where(hit & (k > longest), k, longest)
        new = (longest >= 0) & ~done
        rep[new] = i - longest[new]
        done |= new
        if done.all():
            break
    return rep


def _rep_limits_rows(W: np.ndarray, seqs) -> np.ndarray:
    """rep_limits for a batch of windows, every head position at once: per position the longest tail of a
    sequence completing there (-1: none), then per window the position nearest the end that has one."""
    N, w = W.shape
    if not w:
        return np.zeros(N, dtype=np.int64)
    longest = np.full((N, w), -1, dtype=np.int64)
    for head, tail in seqs:
        hit = occurrences(W, head, tail)
        p = hit.shape[1]
        if p:
            np.maximum(longest[:, :p], np.where(hit, len(tail), -1), out=longest[:, :p])
    some = np.greater_equal(longest, 0)
    p0 = w - 1 - some[:, ::-1].argmax(axis=1)
    return np.where(some.any(axis=1), (w - 1 - p0) - longest[np.arange(N), p0], w)


def occurrences(W: np.ndarray, head: int, tail: tuple) -> np.ndarray:
    """(N, w - k), k = len(tail): the restart sequence has its head at position p of the window and its tail
    after it (every complete occurrence; empty when the tail does not fit)."""
    N, w = W.shape
    k = len(tail)
    if k >= w:
        return np.zeros((N, 0), dtype=bool)
    hit = np.equal(W[:, :w - k], head)
    for off, t in enumerate(tail):
        hit &= np.equal(W[:, 1 + off:w - k + 1 + off], t)
    return hit


def _completes(W: np.ndarray, i: int, head: int, tail: tuple) -> np.ndarray:
    """Per window: the restart sequence (head, tail) has its head i tokens from the end and its tail after it."""
    w = W.shape[1]
    hit = W[:, w - 1 - i] == head
    for off in range(len(tail)):
        hit &= W[:, w - i + off] == tail[off]
    return hit


@cached_when_hashable
def _sequence_bytes(seqs) -> tuple | None:
    """Each restart sequence as bytes, head then tail; None when some id is outside 0..255."""
    try:
        return tuple(bytes((head, *tail)) for head, tail in seqs)
    except ValueError:
        return None


# For one window, a complete occurrence of a restart sequence (its head at distance i from the end, its k tail
# tokens after it, k <= i) is an occurrence of its bytes inside the window's bytes, starting at p = w - 1 - i;
# the rightmost one of each sequence is bytes.rfind. None: ids outside 0..255 (the callers scan instead).

def _rep_limit_single(window, seqs) -> int | None:
    """rep_limits for one window: the head nearest the end that completes a sequence (the largest start of
    any sequence), the longest sequence starting there; rep_limit = i0 - k0."""
    text, seq_bytes = bytes_or_none(window), _sequence_bytes(seqs)
    if text is None or seq_bytes is None:
        return None
    starts = list(map(text.rfind, seq_bytes))
    p0 = max(starts, default=-1)
    if p0 < 0:
        return len(text)
    k0 = max(len(b) for b, p in zip(seq_bytes, starts) if p == p0) - 1
    return (len(text) - 1 - p0) - k0


def effective_last_n(penalty_last_n: int, n_ctx_train: int, abi: int = 7) -> int:
    """The window cap the shipped model sees. The 7-argument init_dry (llama.cpp since PR #26524) clamps a
    negative penalty_last_n to 0 (DRY off). The 8-argument one reads -1 as n_ctx_train and caps every window
    at n_ctx_train (apply: min(history, last_n, total_context_size)); a cap <= 0 is DRY off. Where that
    release instead enables DRY with a ring buffer of capacity <= 0 (penalty_last_n < -1, or -1 with
    n_ctx_train <= 0) it throws on the first accept and the process dies: the model says DRY off, and the
    verdict reports the crash."""
    if abi == 8:
        eff = n_ctx_train if penalty_last_n == -1 else max(penalty_last_n, 0)
        return min(eff, n_ctx_train)
    return penalty_last_n


FLT_MAX32 = np.finfo(np.float32).max


@dataclass(frozen=True)
class Config:
    """The sampler's parameters, as llama_sampler_init_dry receives them (float32 values)."""
    multiplier: float
    base: float
    allowed_length: int
    penalty_last_n: int
    seqs: tuple  # restart sequences, (head, tail) pairs
    # A real vocabulary's configuration: what the text-level promise needs (dryz.vocab_cases.VocabText); None
    # for the symbol vocabulary. Not part of equality (seqs already differ between vocabularies).
    text: object = field(default=None, compare=False)
    # Another engine's documented deviations from llama.cpp (dryz.oracle.deviations), modelled here. llama.cpp's
    # own semantics are the defaults: no match cap, single-token breakers exempt from the penalty (Step 4), a
    # window of 0 or below is DRY off, base < 1 is DRY off, Step 4 clamps the exponent, every occurrence counts.
    match_cap: int | None = None
    exempt_breakers: bool = True
    window_zero_unlimited: bool = False      # penalty_last_n == 0: the whole history (not DRY off)
    window_negative_unlimited: bool = False  # penalty_last_n < 0: the whole history (not DRY off)
    base_below_one_applied: bool = False     # base < 1 penalizes with base^k (not DRY off)
    clamp: bool = True                       # Step 4's exponent clamp (FLOAT_MAX_LOG / ln base)
    saturate: bool = False                   # a fix's: a finite logit past the float range is -+FLT_MAX
    # The scan's own rules (dryz.oracle.composed, which evaluates a Config that sets any of them; the vectorised
    # model here has none of them): llama.cpp's are the defaults.
    occurrence_cap: int | None = None        # only the latest occurrences of the last token are read
    early_exit: int | None = None            # the scan stops after the first repeat this long
    last_breaker_checked: bool = True        # Step 1 looks at the last token too
    repeat_min: int = 0                      # a repeat shorter than this is never penalized
    threshold: bool = True                   # only L >= allowed_length is penalized
    exit_rule: str = ""                      # "window": exit when min(rep_limit, window - 1) <= allowed_length;
                                             # "tail": when rep_limit - 1 <= allowed_length
    arithmetic: str = "double"               # Step 4's: multiplier * pow(double) rounded once; "float32": powf
    times_count: bool = False                # the penalty times the occurrences the token followed
    longest_only: bool = False               # only the followers of the longest repeated suffix
    last_follower: bool = True               # the last token can be a repeat's follower
    suffix_cap: int | None = None            # a repeat this long or longer penalizes nothing
    window_extra: int = 0                    # the window holds this many tokens more than penalty_last_n
    multiplier_negative_off: bool = False    # a negative multiplier switches DRY off
    raises: tuple = ()                       # ((exception, condition, k), ...): the engine raises instead
    overflow_raises: bool = False            # a penalty's power past the double range raises
    # (class, Config) pairs: the semantics a subject declares beside llama.cpp's (dryz.oracle.deviations); an
    # output that matches one of them bit for bit is that class, not a mismatch. Not part of equality.
    variants: tuple = field(default=(), compare=False)

    def __post_init__(self):
        # Derived once per Config (one is made per checked case; cached_property locks on Python 3.11).
        # llama_sampler_init_dry: penalty_last_n = max(penalty_last_n, 0); disabled -> an empty sampler.
        n = self.penalty_last_n
        unlimited = (n == 0 and self.window_zero_unlimited) or (n < 0 and self.window_negative_unlimited)
        enabled = self.multiplier != 0.0 and (self.base >= 1.0 or self.base_below_one_applied) \
            and (max(n, 0) != 0 or unlimited)
        heads, multi = _sequence_facts(self.seqs)
        object.__setattr__(self, "enabled", enabled)
        object.__setattr__(self, "window_cap", ((1 << 31) - 1 if unlimited else max(n, 0)) if enabled else 0)
        object.__setattr__(self, "single_token_heads", heads)  # sorted ids of the single-token sequences
        object.__setattr__(self, "multi_token", multi)          # some restart sequence has a tail
        if isinstance(self.seqs, RestartSeqs):  # a real vocabulary's: the heads also as a table over the ids
            heads = HeadTuple(heads, len(self.seqs.is_head))
            object.__setattr__(self, "single_token_heads", heads)

    @property
    def composed(self) -> bool:
        """Some rule of the scan's own is set: dryz.oracle.composed evaluates this configuration."""
        return (self.occurrence_cap, self.early_exit, self.last_breaker_checked, self.repeat_min, self.threshold,
                self.exit_rule, self.arithmetic, self.times_count, self.longest_only, self.last_follower,
                self.suffix_cap, self.window_extra, self.multiplier_negative_off, self.raises,
                self.overflow_raises) != _LLAMA_SCAN

    def normal(self) -> "Config":
        """This configuration with every flag its parameters never reach reset to llama.cpp's: window_zero_unlimited
        where penalty_last_n is not 0, window_negative_unlimited where it is not negative, base_below_one_applied
        where base >= 1, multiplier_negative_off where the multiplier is not negative. Two configurations with
        equal normal forms give the same output (deviations.variants drops a declared variant that is the
        configuration itself, or another variant, for the case at hand)."""
        n, reset = self.penalty_last_n, {}
        if self.window_zero_unlimited and n != 0:
            reset["window_zero_unlimited"] = False
        if self.window_negative_unlimited and n >= 0:
            reset["window_negative_unlimited"] = False
        if self.base_below_one_applied and self.base >= 1.0:
            reset["base_below_one_applied"] = False
        if self.multiplier_negative_off and not self.multiplier < 0:
            reset["multiplier_negative_off"] = False
        return replace(self, **reset) if reset else self

    def window_length(self, n: int) -> int:
        return min(n, self.window_cap)  # the last penalty_last_n tokens; none when disabled

    def single_token_breakers(self) -> set[int]:
        return set(self.single_token_heads) if self.exempt_breakers else set()


_LLAMA_SCAN = (None, None, True, 0, True, "", "double", False, False, True, None, 0, False, (), False)


def _step3(oracles, W, cands, cfg: Config, eligible, ran, rep) -> list[Prediction]:
    """Step 3 for each oracle: its match lengths capped by rep_limit (and a declared match cap), kept where the
    candidate is eligible and the length reaches allowed_length. The oracles match only the windows with an
    eligible candidate when some have none (another window's L is 0 and unpenalized whatever its M:
    Prediction.M_rows says which rows M holds, the others being 0), and at least two have one (one row of a
    ragged batch would reach the one-window layouts with its PAD)."""
    cap = rep[:, None] if cfg.match_cap is None else np.minimum(rep, cfg.match_cap)[:, None]
    rows = eligible.any(axis=1)
    some = np.flatnonzero(rows)
    if len(some) == len(rows) or len(some) == 1:
        some, rows = None, None
    out = []
    for oracle in oracles:
        if some is None:
            M = oracle(W, cands)
        else:
            M = np.zeros(eligible.shape, dtype=np.int64)
            if len(some):
                M[some] = oracle.M[some] if isinstance(oracle, Matched) else oracle(W[some], cands)
        L = np.minimum(M, cap)
        penalized = eligible & np.greater_equal(L, cfg.allowed_length)
        out.append(Prediction(np.where(penalized, L, 0), penalized, ran, rep, M, rows))
    return out


class Matched:
    """An oracle whose match lengths for the batch's rows are already known (M, (N, C)): the promised model
    clamps the shipped model's M again instead of matching the windows again (check.Batch._promised_predictions)."""

    def __init__(self, M: np.ndarray):
        self.M = M

    def __call__(self, W: np.ndarray, cands: np.ndarray) -> np.ndarray:
        return self.M


@cached_when_hashable
def _sequence_facts(seqs) -> tuple[tuple[int, ...], bool]:
    return tuple(sorted({h for h, t in seqs if not t})), any(tail for _, tail in seqs)


@dataclass
class Prediction:
    """What the shipped sampler should do to a batch: per history and candidate."""
    L: np.ndarray          # (N, C) the audited length (0 where no penalty applies)
    penalized: np.ndarray  # (N, C) bool: a penalty is subtracted
    ran: np.ndarray        # (N,) bool: apply reached Step 4 (and so clears the sorted flag)
    rep: np.ndarray | None = None  # (N,) rep_limit from Step 1; None when apply exits before Step 1
    # (N, C) the oracle's match lengths before any clamping, where it ran (None: it did not run): a model that
    # differs only in Step 1 (the promised one) clamps these again instead of matching the windows again
    M: np.ndarray | None = None
    M_rows: np.ndarray | None = None  # (N,) bool: the rows M holds (the others were not matched); None: every row


def shipped_lengths(H: np.ndarray, cands: np.ndarray, cfg: Config, oracle=match_lengths_A, rep_fn=None):
    """Apply the shipped configuration model to the histories H (N, n) using one oracle for M: a Prediction."""
    return shipped_lengths_each(H, cands, cfg, (oracle,), rep_fn)[0]


def shipped_lengths_each(H: np.ndarray, cands: np.ndarray, cfg: Config, oracles, rep_fn=None,
                         lengths=None) -> list:
    """shipped_lengths for several oracles at once: the configuration part (window, rep_limit, presence,
    breaker candidates) is computed once and each oracle's M is clamped by it. [Prediction, ...]

    lengths: a ragged batch (shipped_lengths_ragged): row r's history is its last lengths[r] entries."""
    if lengths is not None:
        return shipped_lengths_ragged(H, cands, cfg, oracles, rep_fn, lengths)
    N, n = H.shape
    C = len(cands)
    w = cfg.window_length(n)
    W = H[:, n - w:]
    if not cfg.enabled or w <= cfg.allowed_length:
        return [Prediction(np.zeros((N, C), dtype=np.int64), np.zeros((N, C), dtype=bool), np.zeros(N, dtype=bool))
                for _ in oracles]
    rep = (rep_fn or rep_limits)(W, cfg.seqs)  # rep_fn: promised_rep_limits for the promise check
    if N == 1:
        return _shipped_lengths_single(W, cands, cfg, oracles, rep)
    ran = rep >= cfg.allowed_length
    # Step 3 only looks at tokens that follow some position, i.e. W[1:], and keeps lengths >= allowed.
    present = np.equal(W[:, 1:, None], cands[None, None, :]).any(axis=1)
    heads = cfg.single_token_breakers()
    breaker = np.array([c in heads for c in cands.tolist()], dtype=bool)
    return _step3(oracles, W, cands, cfg, ran[:, None] & present & ~breaker[None, :], ran, rep)


def shipped_lengths_ragged(H: np.ndarray, cands: np.ndarray, cfg: Config, oracles, rep_fn, lengths) -> list:
    """shipped_lengths_each for histories of different lengths, each row computed as in a batch of its own
    length: row r's history is H[r, n - lengths[r]:], right-aligned, the entries before it PAD (-1, equal to no
    token: the match lengths of both oracles end at a window's first token, lengths.py). Per row: its window
    (the last min(length, cap) tokens), the early exits on that window, rep_limit from the padded window (an
    occurrence of a restart sequence lies inside the window, its distance from the end unchanged; none: that
    window's length), presence after the window's first token, then the clamping of every oracle. A row that
    exits early predicts nothing (as an exiting batch does) and keeps its rep_limit, which nothing reads."""
    if cfg.text is not None or isinstance(cfg.seqs, RestartSeqs):
        raise ValueError("ragged batches are for the symbol vocabulary")
    N, n = H.shape
    if N == 1:  # one history: the batch of its own length (the one-window layouts never see PAD)
        return shipped_lengths_each(H[:, n - int(lengths[0]):].astype(np.uint8), cands, cfg, oracles, rep_fn)
    C = len(cands)
    widths = np.minimum(np.asarray(lengths, dtype=np.int64), cfg.window_cap)
    w = int(widths.max()) if N else 0
    live = np.greater(widths, cfg.allowed_length)  # past the early exits (window_cap is 0 when DRY is off)
    if not cfg.enabled or not live.any():
        return [Prediction(np.zeros((N, C), dtype=np.int64), np.zeros((N, C), dtype=bool), np.zeros(N, dtype=bool))
                for _ in oracles]
    W = H[:, n - w:]
    rep = ragged_rep((rep_fn or rep_limits)(W, cfg.seqs), w, widths)
    ran = live & np.greater_equal(rep, cfg.allowed_length)
    # Step 3 only looks at tokens that follow some position: the columns after each window's first token.
    idx = candidate_index(W, np.asarray(cands))
    n_i, col = np.nonzero(np.greater_equal(idx, 0) & np.greater(np.arange(w)[None, :], (w - widths)[:, None]))
    present = np.zeros((N, C), dtype=bool)
    present[n_i, idx[n_i, col]] = True
    heads = cfg.single_token_heads if cfg.exempt_breakers else ()
    breaker = np.isin(cands, np.array(heads, dtype=np.int64)) if heads else np.zeros(C, dtype=bool)
    return _step3(oracles, W, cands, cfg, ran[:, None] & present & ~breaker[None, :], ran, rep)


def ragged_rep(rep: np.ndarray, w: int, widths: np.ndarray) -> np.ndarray:
    """Step 1's rep_limit of padded windows (width w) for windows of these widths: a found occurrence's value
    (at most w - 1) stands; none found (w) is the row's own window length."""
    return np.where(np.equal(rep, w), widths, rep)


def _shipped_lengths_single(W: np.ndarray, cands: np.ndarray, cfg: Config, oracles, rep: np.ndarray) -> list:
    """shipped_lengths_each's clamping for one window (the same rules in fewer array calls: the oracles'
    lengths are clamped together). The oracles run only when some candidate is eligible: otherwise no M can
    reach the output."""
    limit, allowed = int(rep[0]), cfg.allowed_length
    ran = np.array([limit >= allowed])
    if cfg.match_cap is not None:
        limit = min(limit, cfg.match_cap)
    c = np.asarray(cands)
    eligible = None
    if ran[0] and len(c) and W.shape[1] > 1:
        eligible = _eligible(W[0], c, cfg.single_token_heads if cfg.exempt_breakers else ())
    if eligible is None or not np.count_nonzero(eligible):
        return [Prediction(np.zeros((1, len(c)), dtype=np.int64), np.zeros((1, len(c)), dtype=bool), ran, rep)
                for _ in oracles]
    M = np.concatenate([oracle(W, cands) for oracle in oracles])  # (oracles, C)
    L = np.minimum(M, limit)
    penalized = eligible & np.greater_equal(L, allowed)
    L = np.where(penalized, L, 0)
    return [Prediction(L[i:i + 1], penalized[i:i + 1], ran, rep, M[i:i + 1]) for i in range(len(oracles))]


def _eligible(window: np.ndarray, c: np.ndarray, breaker_heads: tuple) -> np.ndarray:
    """Per candidate: it follows some position (Step 3 reads window[1:]) and is not a single-token breaker."""
    if type(breaker_heads) is HeadTuple:  # a real vocabulary's configuration (any ids)
        return _eligible_table(window, c, breaker_heads.table)
    if not (all_bytes(c) and all_bytes(window)):
        if np.count_nonzero(np.less(c, 0)) or np.count_nonzero(np.less(window, 0)):
            raise ValueError("token ids must be non-negative")
        top = max(int(window.max()), int(c.max()), 255) + 1  # ids past a byte: a table that holds them
    else:
        top = 256
    if breaker_heads and breaker_heads[-1] >= top:  # sorted ids
        top = breaker_heads[-1] + 1
    follows = np.zeros(top, dtype=bool)
    follows[window[1:]] = True
    follows[list(breaker_heads)] = False
    return follows[c]


class HeadTuple(tuple):
    """A real vocabulary's single-token heads (sorted ids), with .table: a boolean per id of the vocabulary."""

    def __new__(cls, heads, n: int):
        self = super().__new__(cls, heads)
        self.table = np.zeros(max([n] + [h + 1 for h in heads]), dtype=bool)
        self.table[list(heads)] = True
        return self


def _eligible_table(window: np.ndarray, c: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """_eligible for a real vocabulary: ids up to its size, single-token heads as a table over the ids."""
    if np.count_nonzero(np.less(c, 0)) or np.count_nonzero(np.less(window, 0)):
        raise ValueError("token ids must be non-negative")
    after = set(window[1:].tolist())
    cl = c.tolist()
    n = len(heads)
    return np.array([t in after and not (t < n and heads[t]) for t in cl], dtype=bool)


# -- Step 4 arithmetic, as the C++ computes it -------------------------------------------------------

_libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
_logf = _libm.logf
_logf.argtypes, _logf.restype = [ctypes.c_float], ctypes.c_float
_pow = _libm.pow
_pow.argtypes, _pow.restype = [ctypes.c_double, ctypes.c_double], ctypes.c_double

FLOAT_MAX_LOG = np.float32(88.7228391)
_BASE_MIN = float(np.float32(1.000001))  # the source's 1.000001f, exactly


@lru_cache(maxsize=4096)
def max_exponent(base: float) -> int:
    """int max_exponent = FLOAT_MAX_LOG / std::log(base) (float / float, truncated), when base > 1.000001f."""
    b = np.float32(base)
    if float(b) > _BASE_MIN:
        q = FLOAT_MAX_LOG / np.float32(_logf(b))
        return int(q)  # C float->int conversion truncates toward zero
    return 0


def penalties(L: np.ndarray, cfg: Config) -> np.ndarray:
    """float penalty = multiplier * std::pow(base, repeat_exp): pow(double, double), double product,
    rounded to float. repeat_exp = L - allowed_length, clamped to max_exponent when that is positive."""
    exp = L.astype(np.int64) - cfg.allowed_length
    mx = max_exponent(cfg.base) if cfg.clamp else 0
    if mx > 0:
        exp = np.minimum(exp, mx)
    if exp.size <= 32:  # a case's few penalties (np.unique costs more than these few lookups)
        flat = exp.ravel().tolist()
        return np.array([penalty_at(cfg.multiplier, cfg.base, e) for e in flat], dtype=np.float32).reshape(exp.shape)
    distinct, inverse = np.unique(exp, return_inverse=True)  # a batch's: one evaluation per distinct exponent
    table = np.array([penalty_at(cfg.multiplier, cfg.base, e) for e in distinct.tolist()], dtype=np.float32)
    return table[inverse].reshape(exp.shape)


@lru_cache(maxsize=1 << 16)
def penalty_at(multiplier: float, base: float, exponent: int) -> float:
    """Step 4's float penalty for one (already clamped) exponent: multiplier * pow(double(base), exponent) in
    double (a Python float product is the C double product), rounded to float as the C conversion does (inf
    past the float range, as the C++ gets)."""
    return f32(multiplier * _pow(base, float(exponent)))


def clamped_exponent(L: int, allowed_length: int, base: float) -> int:
    """repeat_exp = L - allowed_length, clamped to max_exponent when that is positive (Step 4)."""
    e = L - allowed_length
    mx = max_exponent(base)
    return min(e, mx) if mx > 0 else e


def output_logits(initial: np.ndarray, pred: Prediction, cfg: Config) -> np.ndarray:
    """The logits the shipped sampler leaves: logit -= penalty (float32) where penalized, untouched elsewhere."""
    if pred.L.shape[0] == 1:
        out = np.array(initial, dtype=np.float32).reshape(1, -1)
    else:
        out = np.array(np.broadcast_to(initial, pred.L.shape), dtype=np.float32)
    if np.count_nonzero(pred.penalized):
        pen = penalties(pred.L[pred.penalized], cfg)
        before = out[pred.penalized]
        after = before - pen
        if cfg.saturate:  # a finite logit the penalty pushes past the float range saturates (penalty < 0: up)
            over = np.isfinite(before) & ~np.isfinite(after)
            after[over] = np.where(np.less(pen[over], 0), FLT_MAX32, -FLT_MAX32)
        out[pred.penalized] = after
    return out


def output_logits_zero(pred: Prediction, cfg: Config) -> np.ndarray:
    """output_logits(zeros, pred, cfg) for a whole batch: evaluated once per distinct (L, penalized) pair (it
    is elementwise in them) and gathered back, as the enumerator needs it for millions of cases."""
    L = pred.L.astype(np.int64)
    if L.size and L.min() < 0:
        raise ValueError("the model predicted a negative L")
    top = int(L.max()) + 1 if L.size else 1
    table_L = np.tile(np.arange(top, dtype=np.int64), 2)[None, :]
    table_pen = np.repeat(np.array([False, True]), top)[None, :]
    table = output_logits(np.zeros(2 * top, dtype=np.float32),
                          Prediction(table_L, table_pen, np.ones(1, dtype=bool)), cfg)[0]
    return table[pred.penalized.astype(np.int64) * top + L]
