"""The one verdict: check(case) runs the library and both oracles and compares them.

The comparison itself (compare_lengths, invert_deltas) is shared with the enumerator's batch path.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache

import numpy as np

from .case import Case
from .oracle.restarts import restart_sequences, restart_sequences_one, tokens_by_char
from .subject.symbols import MAX_ALPHABET, symbol_texts
from .oracle.shipped import Config, Prediction, output_logits, shipped_lengths_each
from .oracle.lengths import match_lengths_A, match_lengths_B
from .oracle.promised import is_interior_factor, promised_lengths, promised_rep_limits, restart_divergence
from .oracle.shipped import rep_limits

AGREE, MISMATCH, ORACLE_DISAGREEMENT, HARNESS_ERROR = "agree", "mismatch", "oracle-disagreement", "harness-error"
# A broken promise's class is "promise-" + its name, except the limitation the source documents itself.
PROMISE_CLASSES = {"contained-restart": "documented-contained-restart"}

# Fault injection for positive controls (fuzz campaign, minimizer demo): DRYZ_FAULT=off-by-one makes the
# reference claim one more than the true length wherever that length is >= 2, in both oracles;
# DRYZ_FAULT=abort kills the process (as a crashing subject would) wherever a length is >= 3.
FAULTS = ("off-by-one", "abort")


def fault() -> str | None:
    f = os.environ.get("DRYZ_FAULT") or None
    if f is not None and f not in FAULTS:
        raise ValueError(f"unknown DRYZ_FAULT {f!r} (known: {', '.join(FAULTS)})")
    return f


def _inject(p: Prediction) -> Prediction:
    bump = p.penalized & np.greater_equal(p.L, 2)
    return replace(p, L=p.L + bump)


def subject():
    """The process's one subject (dryz.subject.current(): the library --lib / DRYZ_LIB selects)."""
    from .subject import current
    return current()


def symbol_tokenize(text: str) -> list[int]:
    # In the symbol vocabulary no merge applies, so a string tokenizes to one token per character.
    from .subject.symbols import from_symbols
    return from_symbols(text)


@lru_cache(maxsize=4096)
def restart_sequences_of(breakers: tuple) -> tuple:
    return tuple(restart_sequences(breakers, symbol_texts(), symbol_tokenize, _restart_sequences_one))


@lru_cache(maxsize=4096)
def _restart_sequences_one(s: str) -> list:
    return restart_sequences_one(s, _SYMBOL_TEXTS, symbol_tokenize, _SYMBOLS_BY_CHAR)


_SYMBOL_TEXTS = symbol_texts()
_SYMBOLS_BY_CHAR = tokens_by_char(_SYMBOL_TEXTS)


def config_of(multiplier, base, allowed_length, penalty_last_n, breakers) -> Config:
    return _config(multiplier, base, allowed_length, penalty_last_n, tuple(breakers))


@lru_cache(maxsize=4096)  # a fuzz campaign's mutations keep ~3 in 4 configurations (measured); Config is frozen
def _config(multiplier, base, allowed_length, penalty_last_n, breakers: tuple) -> Config:
    return Config(multiplier, base, allowed_length, penalty_last_n, restart_sequences_of(breakers))


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


def case_config(case: Case, abi: int = 7) -> Config:
    return config_of(case.multiplier, case.base, case.allowed_length,
                     effective_last_n(case.penalty_last_n, case.n_ctx_train, abi), case.breakers)


if MAX_ALPHABET > 256:
    raise ImportError("case_arrays holds token ids in uint8: the alphabet must fit a byte")


def case_arrays(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """(candidate ids, history as a (1, n) batch), as uint8 arrays: every id is below MAX_ALPHABET <= 256, and
    the one-window model reads uint8 ids without the conversions and range checks wider ids need."""
    return (np.frombuffer(bytes(case.ids), dtype=np.uint8),
            np.frombuffer(bytes(case.history), dtype=np.uint8).reshape(1, -1))


# -- shared comparison ------------------------------------------------------------------------------


def invert_deltas(delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """L from a penalty 1 * 2^(L-1) by exact float equality: 0 -> 0, 2^(k-1) -> k.

    Returns (L, bad) where bad marks deltas that are neither 0 nor an exact power of two (harness errors).
    """
    mant, expo = np.frexp(delta.astype(np.float64))
    # ufuncs, not operators: this runs per fuzz input (see the note in model.py)
    power = np.greater(delta, 0) & np.equal(mant, 0.5) & np.greater_equal(expo, 1)
    L = np.where(power, expo, 0).astype(np.int64)
    bad = ~(power | np.equal(delta, 0))
    return L, bad


def compare_lengths(lib_L: np.ndarray, a_L: np.ndarray, b_L: np.ndarray) -> np.ndarray:
    """Per case: 0 agree, 1 mismatch (A == B != library), 2 oracle self-disagreement (A != B)."""
    return np.where(a_L != b_L, 2, np.where(lib_L != a_L, 1, 0)).astype(np.int8)


def predict_both(H: np.ndarray, cands: np.ndarray, cfg: Config) -> tuple[Prediction, Prediction]:
    pa, pb = shipped_lengths_each(H, cands, cfg, (match_lengths_A, match_lengths_B))
    return pa, pb


# -- the verdict -------------------------------------------------------------------------------------


def _list_of(array_field: str) -> cached_property:
    """A Verdict field's list form, made when first read."""
    return cached_property(lambda v: getattr(v, array_field).tolist())


@dataclass
class Verdict:
    case: Case
    status: str
    # Per candidate, in array order, as arrays; the list forms below are made when first read (most fuzz
    # inputs' verdicts are only classified).
    oracle_L_array: np.ndarray    # int64
    oracle_B_L_array: np.ndarray  # int64
    expected_array: np.ndarray    # float32
    observed_array: np.ndarray    # float32
    expected_sorted: bool
    observed_sorted: bool
    library_L: list | None = None  # None when the configuration does not invert to L; None entries: overflow
    detail: str = ""
    multi_token: bool = False
    differing: list[dict] = field(default_factory=list)  # per differing candidate: id, expected, observed
    broken_promises: list[str] = field(default_factory=list)  # promises the shipped output breaks

    @cached_property
    def candidates(self) -> list[int]:
        return list(self.case.ids)

    oracle_L = _list_of("oracle_L_array")
    oracle_B_L = _list_of("oracle_B_L_array")
    expected_logits = _list_of("expected_array")
    observed_logits = _list_of("observed_array")

    @property
    def klass(self) -> str:
        """The verdict's class: what replay compares with a corpus entry's `expect`."""
        if self.status == MISMATCH and self.multi_token:
            return "mismatch-multi-token"
        if self.status != AGREE:
            return self.status
        if self.broken_promises:
            return PROMISE_CLASSES.get(self.broken_promises[0], "promise-" + self.broken_promises[0])
        return AGREE

    @property
    def ok(self) -> bool:
        return self.status == AGREE

    def signature(self) -> tuple:
        """The disagreement class, for 'fails the same way': status plus, per differing candidate,
        the direction of the error (the library penalizing more or less than expected)."""
        # A multi-token mismatch that survives without the multi-token breaker is the same failure.
        klass = MISMATCH if self.klass == "mismatch-multi-token" else self.klass
        return (klass, tuple(sorted((d["id"], d["direction"]) for d in self.differing)))

    def to_json(self) -> dict:
        return {
            "class": self.klass,
            "status": self.status,
            "detail": self.detail,
            "candidates": self.candidates,
            "oracle_L": self.oracle_L,
            "oracle_B_L": self.oracle_B_L,
            "library_L": self.library_L,
            "expected_logits": [_f(x) for x in self.expected_logits],
            "observed_logits": [_f(x) for x in self.observed_logits],
            "expected_sorted": self.expected_sorted,
            "observed_sorted": self.observed_sorted,
            "multi_token_breakers": self.multi_token,
            "differing": self.differing,
            "broken_promises": self.broken_promises,
        }


def _f(x: float):
    return x if math.isfinite(x) else ("-inf" if x < 0 else ("inf" if x > 0 else "nan"))


def _bits(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32).view(np.uint32)


def check(case: Case, lib=None) -> Verdict:
    """Run the case through the shipped library and both oracles; the one verdict everything uses."""
    lib = lib or subject()
    cfg = case_config(case, lib.abi)
    cands, H = case_arrays(case)
    pa, pb = predict_both(H, cands, cfg)
    planted = fault()
    if planted == "off-by-one":
        pa, pb = _inject(pa), _inject(pb)
    elif planted == "abort" and np.greater_equal(pa.L, 3).any():
        os.abort()
    initial = np.array(case.logits, dtype=np.float32)
    expected = output_logits(initial, pa, cfg)[0]
    expected_sorted = False if pa.ran[0] else case.sorted
    out = lib.run(case)

    v = Verdict(case=case, status=AGREE, oracle_L_array=pa.L[0], oracle_B_L_array=pb.L[0],
                expected_array=expected, observed_array=out.logits,
                expected_sorted=expected_sorted, observed_sorted=out.sorted, multi_token=cfg.multi_token)

    if out.size != len(cands) or out.ids != case.ids:
        # DRY only changes logits: a changed array is the library's doing (reading it is checked at load).
        v.status, v.detail = MISMATCH, "the sampler changed the candidate array's size or ids"
        v.differing.append({"id": -1, "expected": "unchanged ids and size", "observed": "changed",
                            "direction": "array"})
        return v
    if case.invertible():
        delta = -out.logits
        L, bad = invert_deltas(delta)
        # None: not 0 nor 2^(L-1) (past the float range, or not a power of two at all); the bit-exact
        # comparison below judges it.
        v.library_L = [None if b else int(x) for x, b in zip(L, bad)]
    if pa.L.tobytes() != pb.L.tobytes() or pa.penalized.tobytes() != pb.penalized.tobytes():
        v.status, v.detail = ORACLE_DISAGREEMENT, "oracles A and B disagree; the library is not judged"
        return v
    if out.logits.tobytes() != expected.tobytes():  # bit-exact (both float32)
        diff = np.not_equal(_bits(out.logits), _bits(expected))  # a ufunc: see the note in model.py
        for i in np.nonzero(diff)[0]:
            obs, exp = float(out.logits[i]), float(expected[i])
            # Lower logit than expected = the library penalized more.
            direction = "more" if obs < exp or (math.isnan(exp) and not math.isnan(obs)) else "less"
            v.differing.append({"id": int(cands[i]), "expected": _f(exp), "observed": _f(obs),
                                "direction": direction})
        v.status = MISMATCH
        v.detail = f"{int(diff.sum())} candidate logit(s) differ from the exact model"
    elif out.sorted != expected_sorted:
        v.status, v.detail = MISMATCH, f"sorted flag {out.sorted}, expected {expected_sorted}"
        v.differing.append({"id": -1, "expected": expected_sorted, "observed": out.sorted,
                            "direction": "sorted"})
    else:
        v.broken_promises = broken_promises(initial, out.logits, pa)
        v.broken_promises += restart_promise(case, cfg, H, cands, initial, out, pa.rep)
        if v.broken_promises:
            v.detail = "the shipped output agrees with the model but breaks: " + ", ".join(v.broken_promises)
    return v


def broken_promises(initial: np.ndarray, observed: np.ndarray, pred: Prediction) -> list[str]:
    """Promises the source makes that the shipped output breaks (the as-shipped model agreed).

    finite-penalty: Step 4 clamps the exponent "to prevent floating point overflow in pow(penalty_base,
    exponent)"; a penalized candidate with a finite logit must keep a finite logit.
    """
    pen = pred.penalized[0]
    if np.count_nonzero(pen) and np.count_nonzero(pen & np.isfinite(initial) & ~np.isfinite(observed)):
        return ["finite-penalty"]
    return []


def restart_promise(case: Case, cfg: Config, H: np.ndarray, cands: np.ndarray, initial: np.ndarray, out,
                    shipped_rep=None) -> list[str]:
    """Step 1's promise: "the most recently completed restart sequence limits the repetition". When the
    output (which agreed with the as-shipped model) differs from the promised model's, the window shows
    contained-restart (the documented limitation: the sequence the shipped scan stops at lies strictly inside
    the one completed closer to the end, 'ni' in 'amniotic') or restart-order (anything else: new)."""
    if not cfg.multi_token:
        return []  # single-token sequences only: the shipped and promised scans pick the same head (PREREG.md)
    n = H.shape[1]
    w = cfg.window_length(n)
    if not cfg.enabled or w <= cfg.allowed_length:
        return []  # apply exits before Step 1 in both models
    W = H[:, n - w:]
    rep = rep_limits(W, cfg.seqs) if shipped_rep is None else shipped_rep
    if rep.tobytes() == promised_rep_limits(W, cfg.seqs).tobytes():  # both int64 (N,)
        return []  # the two models differ only through rep_limit: nothing to compare
    pp = promised_lengths(H, cands, cfg, match_lengths_A)
    promised = output_logits(initial, pp, cfg)[0]
    promised_sorted = False if pp.ran[0] else case.sorted
    if _bits(out.logits).tobytes() == _bits(promised).tobytes() and out.sorted == promised_sorted:
        return []
    return [restart_promise_class(H[0, H.shape[1] - cfg.window_length(H.shape[1]):], cfg.seqs)]


def restart_promise_class(window, seqs) -> str:
    """contained-restart or restart-order for a window whose shipped and promised rep_limit differ."""
    d = restart_divergence(window, seqs)
    if d is not None and is_interior_factor(d[0][2], d[1][2]):
        return "contained-restart"
    return "restart-order"
