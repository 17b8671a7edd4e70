"""DRY's parameters, as a Case and a Trace both hold them: one type, read from JSON and validated in one place.

`llama_sampler_init_dry(vocab, n_ctx_train, multiplier, base, allowed_length, penalty_last_n, breakers, n)`
takes these; a Case adds a history and a candidate array, a Trace a sequence of calls. Both read their DRY fields
with `DryParams.read_json` and validate them with `DryParams.check` (the history, candidates and events are
their own).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
# L - allowed_length is computed in C int; keep it far from overflow.
MAX_ABS_ALLOWED = 1 << 20
# libllama allocates two arrays of penalty_last_n ints per sampler: refuse gigabytes up front.
MAX_PENALTY_LAST_N = 1 << 20
MAX_BREAKER_CHARS = 1000
N_CTX_TRAIN = 4096  # the default n_ctx_train (the 8-argument init_dry's window when penalty_last_n is -1)

_F32 = struct.Struct("f")


def f32(x: float) -> float:
    """The float32 value nearest x, as a Python float (exact: every float32 is a float64); inf past
    the float32 range, as a C float conversion gives."""
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@dataclass(frozen=True)
class DryParams:
    """What init_dry is called with, besides the vocabulary."""
    penalty_last_n: int
    breakers: tuple[str, ...] = ()
    multiplier: float = 1.0
    base: float = 2.0
    allowed_length: int = 1
    n_ctx_train: int = N_CTX_TRAIN

    def sampler_args(self) -> tuple:
        """(multiplier, base, allowed_length, penalty_last_n, breakers): a subject's sampler configuration."""
        return (self.multiplier, self.base, self.allowed_length, self.penalty_last_n, tuple(self.breakers))

    @staticmethod
    def read_json(d: dict, error) -> dict[str, Any]:
        """The DRY fields of a Case or Trace JSON object (defaults where absent), type-checked: `error(msg)` is
        raised for the first field of the wrong type. The values are checked by DryParams.check."""
        if "penalty_last_n" not in d:
            raise error("missing required field 'penalty_last_n'")
        for key in ("penalty_last_n", "allowed_length", "n_ctx_train"):
            if key in d and not is_int(d[key]):
                raise error(f"'{key}' must be an integer")
        for key in ("multiplier", "base"):
            if key in d and not is_number(d[key]):
                raise error(f"'{key}' must be a number")
        breakers = d.get("breakers", [])
        if not isinstance(breakers, list) or not all(isinstance(b, str) for b in breakers):
            raise error("'breakers' must be a list of strings")
        return {"penalty_last_n": int(d["penalty_last_n"]), "breakers": tuple(breakers),
                "multiplier": d.get("multiplier", 1.0), "base": d.get("base", 2.0),
                "allowed_length": int(d.get("allowed_length", 1)),
                "n_ctx_train": int(d.get("n_ctx_train", N_CTX_TRAIN))}

    @staticmethod
    def fits(p) -> bool:
        """check(p) passes, tested in bulk (no message): the fast path of a Case's validation."""
        m, b = p.multiplier, p.base
        return (INT32_MIN <= p.penalty_last_n <= MAX_PENALTY_LAST_N
                and INT32_MIN <= p.n_ctx_train <= MAX_PENALTY_LAST_N
                and -MAX_ABS_ALLOWED <= p.allowed_length <= MAX_ABS_ALLOWED
                and isinstance(m, float) and isinstance(b, float)
                and math.isfinite(m) and math.isfinite(b) and f32(m) == m and f32(b) == b
                and (not p.breakers or max(map(len, p.breakers)) <= MAX_BREAKER_CHARS))

    @staticmethod
    def check(p, error, as_written: dict | None = None) -> None:
        """The value checks every holder of DRY parameters shares (p: a Case, a Trace or a DryParams): the
        window, n_ctx_train, allowed_length, multiplier and base, the breakers' length. `error(msg)` is raised
        for the first that fails; as_written gives multiplier/base as the user wrote them, for the message."""
        if not (is_int(p.penalty_last_n) and INT32_MIN <= p.penalty_last_n <= INT32_MAX):
            raise error(f"penalty_last_n {p.penalty_last_n} does not fit the C int32 parameter")
        if p.penalty_last_n > MAX_PENALTY_LAST_N:
            raise error(f"penalty_last_n {p.penalty_last_n} is above {MAX_PENALTY_LAST_N:,} "
                        f"(libllama would allocate {8 * p.penalty_last_n:,} bytes per sampler)")
        if not (is_int(p.n_ctx_train) and INT32_MIN <= p.n_ctx_train <= MAX_PENALTY_LAST_N):
            raise error(f"n_ctx_train must be an integer in {INT32_MIN}..{MAX_PENALTY_LAST_N:,} (it becomes the "
                        f"window when penalty_last_n is -1 on the 8-argument init_dry), got {p.n_ctx_train!r}")
        if not (is_int(p.allowed_length) and -MAX_ABS_ALLOWED <= p.allowed_length <= MAX_ABS_ALLOWED):
            raise error(f"allowed_length must be within +-{MAX_ABS_ALLOWED}, got {p.allowed_length}")
        for name in ("multiplier", "base"):
            v = getattr(p, name)
            if not (isinstance(v, float) and math.isfinite(v) and f32(v) == v):
                was = (as_written or {}).get(name)
                raise error(f"{name} must be a finite float32 (at most 3.4028235e+38 in magnitude), got "
                            f"{was if was is not None else v!r}"
                            + (" (it rounds to inf as a float32)" if was is not None else ""))
        for b in p.breakers:
            if not isinstance(b, str):
                raise error(f"breaker {b!r} is not a string")
            if len(b) > MAX_BREAKER_CHARS:
                raise error(f"breaker of {len(b)} characters; at most {MAX_BREAKER_CHARS}")
