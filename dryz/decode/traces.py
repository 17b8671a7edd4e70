"""Bytes -> Trace: the decoder of `dryz fuzz --traces`, for fuzzing the sampler as a generation loop drives it.

decode_trace(data) reads the bytes with a tiny reader of its own (no atheris: the same bytes decode to the same
Trace anywhere; an exhausted input reads as zeros). Bytes that start with '{' and parse as trace JSON decode to
that Trace. Otherwise:

  configuration  alphabet (2, 3, 4, 8, 26 or 64 symbols, or any 1..64), penalty_last_n (small, medium, up to
                 300, or an edge: 0, -1, 1), 0-3 breakers of 1-3 symbols, allowed_length 0-4, multiplier and
                 base (typical values, or any positive finite float32)
  events         until the input or the budget ends, each an opcode byte:
                   generate  a generation loop: R times (apply, accept one token), the tokens raw or periodic
                   accept    a prompt: up to 64 tokens, raw or periodic
                   apply     every symbol, or a candidate subset in any order with chosen logits and sorted flag
                   reset     mid-stream
                   clone     continue on the clone (clones of clones follow from repetition)
                   free      ends the trace
A trace without an apply gets one at the end. Budgets: MAX_EVENTS events, MAX_TOKENS tokens, MAX_APPLIES
applies, MAX_CLONES clones.
"""

from __future__ import annotations

import math
import struct

from ..case import f32
from ..symbols import MAX_ALPHABET, SYMBOLS
from ..trace import Program, Trace, TraceError

MAX_EVENTS = 512
MAX_TOKENS = 2048
MAX_APPLIES = 128
MAX_CLONES = 16
ALPHABETS = (2, 3, 4, 8, 26, 64)
TYPICAL_FLOATS = tuple(f32(x) for x in (1.0, 2.0, 0.8, 1.75, 1.1, 0.5, 3.0, 1.000001))
LOGITS = (0.0, 0.0, 1.5, -3.25, 10.0, f32(1e30), -math.inf)


class _Reader:
    """Bytes as small integers; past the end every read is 0."""

    def __init__(self, data: bytes):
        self.data, self.i = data, 0

    def left(self) -> int:
        return len(self.data) - self.i

    def byte(self) -> int:
        if self.i < len(self.data):
            self.i += 1
            return self.data[self.i - 1]
        return 0

    def int_in(self, lo: int, hi: int) -> int:
        """lo..hi inclusive, from as few bytes as the range needs."""
        span = hi - lo
        if span <= 0:
            return lo
        v, nbytes = 0, (span.bit_length() + 7) // 8
        for _ in range(nbytes):
            v = (v << 8) | self.byte()
        return lo + v % (span + 1)

    def take(self, n: int) -> bytes:
        b = self.data[self.i:self.i + n]
        self.i += len(b)
        return b


_APPLY_ALL = ("apply", None)
_MOD = {}  # k -> bytes.translate table b -> b % k


def _mod(k: int) -> bytes:
    t = _MOD.get(k)
    if t is None:
        t = _MOD[k] = bytes(b % k for b in range(256))
    return t


def decode_trace(data: bytes) -> Trace:
    if data[:1] == b"{":
        try:
            return Trace.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, TraceError):
            pass
    r = _Reader(data)
    sel = r.byte()
    k = ALPHABETS[sel % len(ALPHABETS)] if sel < 224 else r.int_in(1, MAX_ALPHABET)
    mode = r.byte() % 8
    if mode < 4:
        last_n = r.int_in(1, 16)
    elif mode < 6:
        last_n = r.int_in(1, 64)
    elif mode == 6:
        last_n = r.int_in(1, 300)
    else:
        last_n = (0, -1, 1, 2)[r.byte() % 4]
    breakers = tuple("".join(SYMBOLS[r.byte() % k] for _ in range(r.int_in(1, 3)))
                     for _ in range(r.int_in(0, 3) if r.byte() % 2 else 0))
    allowed = r.int_in(0, 4)
    multiplier, base = (_float(r), _float(r)) if r.byte() % 4 == 3 else (1.0, 2.0)
    events: list = []
    tokens = applies = clones = 0
    # the Program's parts, collected on the way (trace.Program.of_parts)
    ops, toks_all, counts, apply_events = bytearray(), [], [], []
    mod = _mod(k)

    def tok_run(n: int) -> tuple:
        if r.byte() % 2:  # periodic: a short period repeated, long matches a generation loop would make
            period = tuple(r.take(r.int_in(1, 6)).translate(mod)) or (0,)
            return (period * (n // len(period) + 1))[:n]
        raw = tuple(r.take(n).translate(mod))
        return raw + (0,) * (n - len(raw))

    while r.left() > 0 and len(events) < MAX_EVENTS - 2:
        op = r.byte() % 16
        if op < 5:  # generate: R rounds of apply then accept one token, while the budgets allow
            rounds = r.int_in(1, 32)
            toks = tok_run(rounds)
            room = MAX_EVENTS - 3 - len(events)
            take = min(len(toks), MAX_APPLIES - applies, MAX_TOKENS - tokens, (room + 1) // 2 if room > 0 else 0)
            if take > 0:
                toks = toks[:take]
                events += [e for t in toks for e in (_APPLY_ALL, ("accept", (t,)))]
                ops += b"pa" * take
                toks_all += toks
                counts += [1] * take
                apply_events += [_APPLY_ALL] * take
                applies += take
                tokens += take
        elif op < 8:  # a prompt
            n = min(r.int_in(1, 64), MAX_TOKENS - tokens)
            if n > 0:
                run = tok_run(n)
                events.append(("accept", run))
                ops += b"a"
                toks_all += run
                counts.append(n)
                tokens += n
        elif op < 11:
            if applies < MAX_APPLIES:
                e = _apply(r, k)
                events.append(e)
                ops += b"p"
                apply_events.append(e)
                applies += 1
        elif op < 13:
            events.append(("reset",))
            ops += b"r"
        elif op < 15:
            if clones < MAX_CLONES:
                events.append(("clone",))
                ops += b"c"
                clones += 1
        else:
            if applies == 0:
                events.append(_APPLY_ALL)
                ops += b"p"
                apply_events.append(_APPLY_ALL)
                applies += 1
            events.append(("free",))
            ops += b"f"
            break
    if applies == 0:
        events.append(_APPLY_ALL)
        ops += b"p"
        apply_events.append(_APPLY_ALL)
    # Valid and in normal form by construction (tests/test_traces.py validates the decoder's traces again)
    return Trace.trusted(events=tuple(events), alphabet=k, penalty_last_n=last_n, breakers=breakers,
                         multiplier=multiplier, base=base, allowed_length=allowed,
                         program=Program.of_parts(k, ops, toks_all, counts, apply_events))


def _apply(r: _Reader, k: int) -> tuple:
    if r.byte() % 2 == 0:
        return ("apply", None)
    ids = list(range(k))
    n = r.int_in(1, k)
    for i in range(n):  # a partial Fisher-Yates: n distinct ids in a chosen order
        j = r.int_in(i, k - 1)
        ids[i], ids[j] = ids[j], ids[i]
    cands = tuple((t, LOGITS[r.byte() % len(LOGITS)]) for t in ids[:n])
    return ("apply", cands, True) if r.byte() % 2 else ("apply", cands)


def _float(r: _Reader) -> float:
    """A positive finite float32: typical, or any bit pattern that is one."""
    if r.byte() % 2:
        return TYPICAL_FLOATS[r.byte() % len(TYPICAL_FLOATS)]
    bits = int.from_bytes(r.take(4).ljust(4, b"\0"), "little") & 0x7FFFFFFF
    v = struct.unpack("<f", struct.pack("<I", bits))[0]
    return v if math.isfinite(v) and v > 0 else 1.0
