"""Bytes -> Case: the one decoder the fuzz harness and `dryz minimize` share.

The same bytes always decode to the same Case, so a libFuzzer crash file is its Case. Bytes that start with
'{' and parse as Case JSON decode to that Case (this is how corpus/ seeds the campaign); anything else is read
with atheris' FuzzedDataProvider.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from ..case import Case, CaseError, f32
from ..symbols import MAX_ALPHABET, SYMBOLS

MAX_FUZZ_HISTORY = 1024
MAX_BREAKERS = 4
MAX_BREAKER_LEN = 3
MAX_ALLOWED = 8
LOGIT_BOUND = f32(1e30)  # initial logits are drawn within +-1e30 (or -inf)
TYPICAL_FLOATS = tuple(f32(x) for x in (1.0, 2.0, 0.8, 1.75, 1.1, 0.5, 3.0, 1.000001))


def decode(data: bytes) -> Case:
    if data[:1] == b"{":
        try:
            return Case.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, CaseError):
            pass  # not a seed: read the bytes like any other input
    import atheris
    fdp = atheris.FuzzedDataProvider(data)
    k = fdp.ConsumeIntInRange(1, MAX_ALPHABET)
    history = _history(fdp, k)
    n = len(history)
    last_n = fdp.ConsumeIntInRange(1, n + 8)
    breakers = tuple(  # input exhausted: an empty draw reads as "a", as exhausted integer draws read as 0
        fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, MAX_BREAKER_LEN)).translate(_SPELL[k]).decode().ljust(1, "a")
        for _ in range(fdp.ConsumeIntInRange(0, MAX_BREAKERS)))
    allowed = fdp.ConsumeIntInRange(0, MAX_ALLOWED)
    multiplier = _positive_float(fdp)
    base = _positive_float(fdp)
    candidates, sorted_flag = _candidates(fdp)
    # Valid by construction (tests/test_decode.py validates decoded cases), so not validated again here.
    return Case(history=tuple(history), alphabet=k, penalty_last_n=last_n, breakers=breakers,
                multiplier=multiplier, base=base, allowed_length=allowed, candidates=candidates,
                sorted=sorted_flag, skip_validation=True)


# Byte -> token id (b % k) and byte -> symbol character (SYMBOLS[b % k]), per alphabet size, for bytes.translate.
_MOD = [b""] + [bytes(b % k for b in range(256)) for k in range(1, MAX_ALPHABET + 1)]
_SPELL = [b""] + [bytes(ord(SYMBOLS[b % k]) for b in range(256)) for k in range(1, MAX_ALPHABET + 1)]


def _history(fdp, k: int) -> list[int]:
    """Raw tokens, or structure that random bytes rarely produce: periodic runs and repeated blocks."""
    n = fdp.ConsumeIntInRange(0, MAX_FUZZ_HISTORY)
    shape = fdp.ConsumeIntInRange(0, 2)
    if shape == 0:  # raw
        return list(fdp.ConsumeBytes(n).translate(_MOD[k]))
    if shape == 1:  # periodic, with a few substitutions
        period = list(fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 12)).translate(_MOD[k])) or [0]
        hist = (period * (n // len(period) + 1))[:n]
        for _ in range(fdp.ConsumeIntInRange(0, 4)):
            if hist:
                hist[fdp.ConsumeIntInRange(0, n - 1)] = fdp.ConsumeIntInRange(0, k - 1)
        return hist
    # a block, something, the block again (possibly cut): long matches that end anywhere
    block = list(fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 64)).translate(_MOD[k]))
    gap = list(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 16)).translate(_MOD[k]))
    cut = fdp.ConsumeIntInRange(0, len(block))
    return (gap + block + gap[: len(gap) // 2] + block[:cut])[:MAX_FUZZ_HISTORY]


def _positive_float(fdp) -> float:
    """Arbitrary positive finite float32: a typical value, or any bit pattern that is one."""
    if fdp.ConsumeBool():
        return TYPICAL_FLOATS[fdp.ConsumeIntInRange(0, len(TYPICAL_FLOATS) - 1)]
    bits = fdp.ConsumeIntInRange(0, 0xFFFFFFFF)
    x = abs(struct.unpack("<f", struct.pack("<I", bits))[0])
    return x if math.isfinite(x) and x > 0 else 1.0


def _candidates(fdp):
    """None (every symbol, logit 0) or a random subset of the vocabulary in random order, random logits:
    per candidate -inf, 0, or a float32 from the input (NaN read as 0, clamped to +-1e30)."""
    if not fdp.ConsumeBool():
        return None, False
    size = fdp.ConsumeIntInRange(1, MAX_ALPHABET)
    # Drawn in bulk, no per-candidate Python loop: that loop cost more than the rest of the decoder, and
    # several times more under atheris' instrumentation (a traced branch per iteration).
    keys = np.frombuffer(fdp.ConsumeBytes(MAX_ALPHABET).ljust(MAX_ALPHABET, b"\0"), dtype=np.uint8)
    ids = np.argsort(keys, kind="stable")[:size].tolist()  # ordered by a key byte each, ties by id
    raw = fdp.ConsumeBytes(5 * size).ljust(5 * size, b"\0")  # a kind byte, then a float32, per candidate
    kinds = np.bitwise_and(np.frombuffer(raw, dtype=np.uint8, count=size), 7)
    logits = np.frombuffer(raw, dtype="<f4", count=size, offset=size).astype(np.float32)
    np.copyto(logits, 0.0, where=np.isnan(logits))
    np.minimum(logits, LOGIT_BOUND, out=logits)
    np.maximum(logits, -LOGIT_BOUND, out=logits)
    np.copyto(logits, 0.0, where=np.equal(kinds, 1))  # kind 1: 0.0, kind 0: -inf, else the float
    np.copyto(logits, -np.inf, where=np.equal(kinds, 0))
    return tuple(zip(ids, logits.tolist())), fdp.ConsumeBool()
