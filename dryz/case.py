"""The Case: one history plus one DRY configuration (and the candidate array), with one JSON form.

Every path (exhaustive, fuzz, minimize, replay) describes what it tests as a Case and judges it with check().
"""

from __future__ import annotations

import array
import json
import math
import re
from dataclasses import InitVar, dataclass, field, replace
from typing import Any


from .symbols import MAX_ALPHABET, SYMBOLS, from_symbols, to_symbols

from .params import N_CTX_TRAIN, DryParams, f32, is_int as _is_int, is_number as _is_number
from .errors import DryzError

CASE_SCHEMA = "dryz.case/1"
MAX_HISTORY = 1 << 16
# A real vocabulary's size (Case.alphabet of a vocab case): llama_token is int32; the largest vendored one has
# 262,144 tokens.
MAX_VOCAB = (1 << 31) - 1


class CaseError(ValueError, DryzError):
    """A Case (or its JSON) that dryz refuses, with a one-line reason."""


_SYMBOL_SET = frozenset(SYMBOLS)


def seed_parameters(multiplier: float, base: float, allowed_length: int) -> bool:
    """(1, 2, 1): the penalty 1 * 2^(L-1) inverts to L exactly (from 0 logits); every other parameter set is
    compared bit-exactly with the output model."""
    return multiplier == 1.0 and base == 2.0 and allowed_length == 1


@dataclass(frozen=True)
class Case:
    history: tuple[int, ...]
    alphabet: int
    penalty_last_n: int
    breakers: tuple[str, ...] = ()
    multiplier: float = 1.0
    base: float = 2.0
    allowed_length: int = 1
    # Initial candidate array in array order: (token id, logit). None = every symbol of the alphabet, logit 0.
    candidates: tuple[tuple[int, float], ...] | None = None
    sorted: bool = False
    # The 8-argument init_dry (llama.cpp before PR #26524) takes the model's training context; it is the window
    # when penalty_last_n is -1. Ignored by the 7-argument ABI. Written to JSON only when not the default.
    n_ctx_train: int = 4096
    # The vocabulary: None = dryz's symbol vocabulary (alphabet = how many of its symbols are used, ids 0..63);
    # else a vendored name (`llama-bpe`, dryz.subject.vendored_vocabs) or a GGUF path, and then alphabet is the
    # vocabulary's size (every id below it; checked against the loaded file with vocab_sha256, when given,
    # by dryz.vocab_cases.vocab_of). Breakers are then any UTF-8 strings. Written to JSON only when set.
    vocab: str | None = None
    vocab_sha256: str | None = None
    # Provenance-free annotations never enter the verdict; kept out of equality.
    note: str = field(default="", compare=False)
    # multiplier and base as the user wrote them, when that is not a float32 value: the Case holds the float32
    # llama.cpp's float parameter receives (round to nearest), and records both. (name, value) pairs.
    as_written: tuple = field(default=(), compare=False)
    # Not a field: True only from the fuzz decoder, whose cases are valid by construction (validating each
    # cost ~45,000 instructions per fuzz input; tests/test_decode.py validates the decoder's output instead).
    # Every other construction, dataclasses.replace included, validates.
    skip_validation: InitVar[bool] = False

    def __post_init__(self, skip_validation: bool):
        if not skip_validation:
            written = dict(self.as_written)
            for name in ("multiplier", "base"):
                v = getattr(self, name)
                if _is_number(v) and not isinstance(v, float) or isinstance(v, float) and math.isfinite(v) \
                        and f32(v) != v:
                    try:
                        r = f32(float(v))
                    except OverflowError:
                        raise CaseError(f"{name} {str(v)[:24]}... is too large for a float32") from None
                    written.setdefault(name, v)
                    object.__setattr__(self, name, r)
            # Keep only what still describes the field (a replace() that changed it drops its old spelling).
            written = {k: v for k, v in written.items() if _f32_or_none(v) == getattr(self, k)}
            if written or self.as_written:
                object.__setattr__(self, "as_written", tuple(sorted(written.items())))
            validate(self)
        # Derived views, kept out of the fields (equality, JSON); frozen, so set through object.
        if self.candidates is None:
            ids, logits = tuple(range(self.alphabet)), (0.0,) * self.alphabet
        else:
            ids, logits = zip(*self.candidates)  # validate() checked every entry is a pair
        object.__setattr__(self, "_ids", ids)
        object.__setattr__(self, "_logits", logits)

    # -- derived views ------------------------------------------------------------------------
    def params(self) -> DryParams:
        """The DRY parameters (the same type a Trace holds)."""
        return DryParams(self.penalty_last_n, self.breakers, self.multiplier, self.base, self.allowed_length,
                         self.n_ctx_train)

    def candidate_ids(self) -> list[int]:
        return list(self.ids)

    def initial_logits(self) -> list[float]:
        return list(self.logits)

    @property
    def ids(self) -> tuple[int, ...]:
        """Candidate ids in array order (made once, in __post_init__)."""
        return self._ids

    @property
    def logits(self) -> tuple[float, ...]:
        """Initial logits in array order (made once, in __post_init__)."""
        return self._logits

    def invertible(self) -> bool:
        """The seed configuration whose penalty inverts exactly to L: 1 * 2^(L-1), logits all 0."""
        return seed_parameters(self.multiplier, self.base, self.allowed_length) and not any(self.logits)

    def with_history(self, history) -> "Case":
        return replace(self, history=tuple(int(t) for t in history))

    @property
    def symbols(self) -> str:
        """The history spelled in the symbol vocabulary ("" for a real-vocabulary case: its text needs the
        vocabulary, dryz.vocab_cases.history_text)."""
        return "" if self.vocab is not None else to_symbols(self.history)

    # -- JSON -----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "schema": CASE_SCHEMA,
            "history": list(self.history),
        }
        if self.vocab is None:
            d["history_symbols"] = self.symbols
        d.update({
            "alphabet": self.alphabet,
            "penalty_last_n": self.penalty_last_n,
            "breakers": list(self.breakers),
            "multiplier": self.multiplier,
            "base": self.base,
            "allowed_length": self.allowed_length,
        })
        if self.vocab is not None:
            d["vocab"] = self.vocab
            if self.vocab_sha256 is not None:
                d["vocab_sha256"] = self.vocab_sha256
        if self.candidates is not None:
            d["candidates"] = [[t, _logit_to_json(lg)] for t, lg in self.candidates]
            d["sorted"] = self.sorted
        elif self.sorted:
            d["sorted"] = True
        if self.n_ctx_train != N_CTX_TRAIN:
            d["n_ctx_train"] = self.n_ctx_train
        if self.note:
            d["note"] = self.note
        if self.as_written:
            d["as_written"] = {k: v for k, v in self.as_written}
        return d

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(", ", ": "))

    @classmethod
    def from_json(cls, d: Any) -> "Case":
        if not isinstance(d, dict):
            raise CaseError("a case must be a JSON object")
        schema = d.get("schema", CASE_SCHEMA)
        if schema != CASE_SCHEMA:
            raise CaseError(f"unknown case schema {schema!r} (this dryz reads {CASE_SCHEMA!r})")
        known = {"schema", "history", "history_symbols", "alphabet", "penalty_last_n", "breakers",
                 "multiplier", "base", "allowed_length", "candidates", "sorted", "note", "n_ctx_train", "as_written", "vocab", "vocab_sha256"}
        extra = sorted(set(d) - known)
        if extra:
            raise CaseError(f"unknown case field(s): {', '.join(extra)}")
        for key in ("history", "alphabet", "penalty_last_n"):
            if key not in d:
                raise CaseError(f"case is missing required field {key!r}")
        history = d["history"]
        if not isinstance(history, list) or not all(_is_int(t) for t in history):
            raise CaseError("'history' must be a list of integer token ids")
        vocab, vocab_sha = d.get("vocab"), d.get("vocab_sha256")
        if vocab is not None and (not isinstance(vocab, str) or not vocab):
            raise CaseError("'vocab' must be a vocabulary name or a GGUF path (a non-empty string)")
        if vocab_sha is not None and (vocab is None or not isinstance(vocab_sha, str)
                                      or not re.fullmatch(r"[0-9a-f]{64}", vocab_sha)):
            raise CaseError("'vocab_sha256' must be 64 lowercase hex digits, beside a 'vocab'")
        if "history_symbols" in d and vocab is not None:
            raise CaseError("'history_symbols' spells the symbol vocabulary; a case with a 'vocab' has none")
        if "history_symbols" in d:
            try:
                spelled = from_symbols(d["history_symbols"])
            except (ValueError, TypeError) as e:
                raise CaseError(f"'history_symbols': {e}") from None
            if spelled != history:
                raise CaseError("'history_symbols' does not spell 'history'")
        cands = d.get("candidates")
        if cands is not None:
            if not isinstance(cands, list) or not all(
                    isinstance(c, list) and len(c) == 2 and _is_int(c[0]) for c in cands):
                raise CaseError("'candidates' must be a list of [token id, logit] pairs")
            cands = tuple((int(t), _logit_from_json(lg)) for t, lg in cands)
        if not _is_int(d["alphabet"]):
            raise CaseError("'alphabet' must be an integer")
        params = DryParams.read_json(d, CaseError)
        written = d.get("as_written", {})
        if not isinstance(written, dict) or not set(written) <= {"multiplier", "base"} or not all(
                _is_number(v) for v in written.values()):
            raise CaseError("'as_written' must map multiplier/base to the numbers as first written")
        if "sorted" in d and not isinstance(d["sorted"], bool):
            raise CaseError("'sorted' must be true or false")
        return cls(
            history=tuple(int(t) for t in history),
            alphabet=int(d["alphabet"]),
            **params,
            candidates=cands,
            sorted=bool(d.get("sorted", False)),
            note=str(d.get("note", "")),
            as_written=tuple(sorted(written.items())),
            vocab=vocab,
            vocab_sha256=vocab_sha,
        )

    @classmethod
    def loads(cls, text: str) -> "Case":
        try:
            return cls.from_json(json.loads(text))
        except json.JSONDecodeError as e:
            raise CaseError(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None


def validate(c: Case) -> None:
    """Refuse a Case outside what dryz can run, with a one-line reason. A symbol-vocabulary case is first checked
    in bulk (this runs for every Case made, minimizer candidates included); any other case, and one that fails
    the bulk checks, is walked field by field (_refuse), which names the first thing refused."""
    h = c.history
    if (c.vocab is None and c.vocab_sha256 is None and isinstance(c.alphabet, int)
            and 1 <= c.alphabet <= MAX_ALPHABET and len(h) <= MAX_HISTORY and _ids_below(h, c.alphabet)
            and DryParams.fits(c)
            and (not c.breakers or _SYMBOL_SET.issuperset("".join(c.breakers)))
            and (c.candidates is None or _candidates_ok(c.candidates))):
        return
    _refuse(c)
    if c.vocab is None:
        raise CaseError("invalid case")  # not reached: _refuse names what failed


def _refuse(c: Case) -> None:
    """Raise CaseError naming the first thing validate() refuses; return for a valid case. The symbol
    vocabulary: ids below alphabet (at most 64), breakers of its symbols. A real one (vocab): ids below its size
    (alphabet), breakers any UTF-8 strings without NUL (init_dry reads C strings). The DRY parameters are checked
    by DryParams.check, as a Trace's are."""
    if c.vocab is not None:
        if not (_is_int(c.alphabet) and 1 <= c.alphabet <= MAX_VOCAB):
            raise CaseError(f"alphabet (the vocabulary's size) must be an integer in 1..{MAX_VOCAB}, got "
                            f"{c.alphabet!r}")
        if not isinstance(c.vocab, str) or not c.vocab:
            raise CaseError(f"vocab must be a vocabulary name or GGUF path, got {c.vocab!r}")
        if c.vocab_sha256 is not None and not (isinstance(c.vocab_sha256, str)
                                               and re.fullmatch(r"[0-9a-f]{64}", c.vocab_sha256)):
            raise CaseError(f"vocab_sha256 must be 64 lowercase hex digits, got {c.vocab_sha256!r}")
        where, id_limit = f"the vocabulary {c.vocab} (ids 0..{c.alphabet - 1})", c.alphabet
    else:
        if c.vocab_sha256 is not None:
            raise CaseError("vocab_sha256 without a vocab (the symbol vocabulary has no sha256 in a case)")
        if not (_is_int(c.alphabet) and 1 <= c.alphabet <= MAX_ALPHABET):
            raise CaseError(f"alphabet must be an integer in 1..{MAX_ALPHABET}, got {c.alphabet!r}")
        where, id_limit = f"the vocabulary 0..{MAX_ALPHABET - 1}", MAX_ALPHABET
    if len(c.history) > MAX_HISTORY:
        raise CaseError(f"history has {len(c.history)} tokens; at most {MAX_HISTORY} are supported")
    if not all(_is_int(t) for t in c.history):
        raise CaseError(f"history token {next(t for t in c.history if not _is_int(t))!r} is not an integer")
    if c.history and (min(c.history) < 0 or max(c.history) >= c.alphabet):
        t = next(t for t in c.history if not (0 <= t < c.alphabet))
        raise CaseError(f"history token {t} is outside " + (where if c.vocab is not None else
                                                             f"the alphabet 0..{c.alphabet - 1}"))
    DryParams.check(c, CaseError, dict(c.as_written))
    for b in c.breakers:
        if c.vocab is None:
            bad = sorted(set(b) - _SYMBOL_SET)
            if bad:
                raise CaseError(f"breaker {b!r} has characters outside the dryz alphabet: {''.join(bad)!r}")
            continue
        if "\0" in b:
            raise CaseError(f"breaker {b!r} holds a NUL character (init_dry reads C strings)")
        try:
            b.encode()
        except UnicodeEncodeError:
            raise CaseError(f"breaker {b!r} is not encodable as UTF-8") from None
    if c.candidates is not None:
        if not c.candidates:
            raise CaseError("candidates, when given, must not be empty")
        seen = set()
        for entry in c.candidates:
            if not isinstance(entry, (tuple, list)) or len(entry) != 2:
                raise CaseError("candidates must be (token id, logit) pairs")
            t, lg = entry
            if not _is_int(t):
                raise CaseError(f"candidate id {t!r} is not an integer")
            if not (0 <= t < id_limit):
                raise CaseError(f"candidate id {t} is outside {where}")
            if t in seen:
                raise CaseError(f"candidate id {t} appears twice")
            seen.add(t)
            if not _float32_logits([lg]):
                raise CaseError(f"candidate logit {lg!r} must be a finite float32 or -inf")


def _candidates_ok(candidates) -> bool:
    try:
        shapes = set(map(len, candidates))  # map/zip, not a Python loop
    except TypeError:
        return False
    if shapes != {2}:
        return False
    ids, logits = zip(*candidates)
    return _ids_below(ids, MAX_ALPHABET) and len(set(ids)) == len(ids) and _float32_logits(list(logits))


# Per k, the bytes 0..k-1: deleting them from ids-as-bytes leaves nothing iff every id is below k.
_BELOW = [bytes(range(k)) for k in range(MAX_ALPHABET + 1)]


def _ids_below(ids, k: int) -> bool:
    """Every id is an integer in 0..k-1 (k <= MAX_ALPHABET), checked in C: bytes() refuses anything outside
    0..255, translate deletes the ids below k."""
    try:
        return not bytes(ids).translate(None, _BELOW[k])
    except (TypeError, ValueError):
        return False


def _float32_logits(logits: list[float]) -> bool:
    """Every logit is a float32 value or -inf (no NaN, no +inf): a float32 round trip keeps the list equal."""
    try:
        return math.inf not in logits and array.array("f", logits).tolist() == logits
    except (OverflowError, TypeError):
        return False


def _f32_or_none(v):
    try:
        return f32(float(v))
    except (OverflowError, TypeError, ValueError):
        return None


def json_number(x):
    """A float as JSON: itself when finite, else "inf", "-inf" or "nan" (JSON has no such numbers); a value that is
    already one of those three (a verdict read back from JSON) stays as it is."""
    if isinstance(x, str) and x in ("inf", "-inf", "nan"):
        return x
    return x if math.isfinite(x) else ("-inf" if x < 0 else ("inf" if x > 0 else "nan"))


def _logit_to_json(x: float):
    return "-inf" if x == -math.inf else x


def _logit_from_json(x) -> float:
    if x == "-inf":
        return -math.inf
    if not _is_number(x):
        raise CaseError(f"candidate logit {x!r} must be a number or \"-inf\"")
    return float(x)
