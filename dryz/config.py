"""The DRY parameters: a sampler's configuration as the oracles see it (Config, built once per parameter set from
a Case or a named space, with restart sequences from its breaker strings), and the named spaces of
`dryz exhaustive` (base, window4, breaker, windowW, the parameter axis)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from . import vocab_cases
from .case import Case, f32, seed_parameters
from .oracle.deviations import variants
from .oracle.restarts import restart_sequences, restart_sequences_one, tokens_by_char
from .oracle.shipped import Config, effective_last_n  # noqa: F401 (effective_last_n: read here by the modes)
from .symbols import SYMBOLS, from_symbols, symbol_texts


def symbol_tokenize(text: str) -> list[int]:
    # In the symbol vocabulary no merge applies, so a string tokenizes to one token per character.
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


def case_config(case: Case, abi: int = 7, deviations=(), vocabulary=None) -> Config:
    """The oracles' configuration for a case on a subject's semantics, given as plain data: its init_dry ABI, the
    deviations it declares (as variants, dryz.oracle.deviations), and for a case over a real vocabulary that
    vocabulary as the subject's tokenizer gives it (dryz.vocab_cases.vocab_of)."""
    if case.vocab is not None:
        if vocabulary is None:
            raise ValueError(f"a case over vocabulary {case.vocab} needs that vocabulary")
        cfg = vocab_config(case, abi, vocabulary)
    else:
        cfg = config_of(case.multiplier, case.base, case.allowed_length,
                        effective_last_n(case.penalty_last_n, case.n_ctx_train, abi), case.breakers)
    if not deviations:
        return cfg
    tokenize = vocabulary.tokenize if case.vocab is not None else symbol_tokenize
    printed = vocab_cases.printed_sequences(vocabulary, case.breakers) \
        if case.vocab is not None and vocab_cases.PRINTED in deviations else None
    return with_deviations(cfg, deviations, case.breakers, tokenize, printed)


@dataclass(frozen=True)
class Semantics:
    """What the judge takes of a subject for the oracles, as plain data: the subject's kind (for messages), its
    init_dry ABI, the deviations it declares, its request layer ("" when DRY runs what the case says), and
    `vocabulary(case)`, the loaded vocabulary a real-vocabulary case names, as the subject's tokenizer gives it."""
    kind: str
    abi: int = 7
    deviations: tuple = ()
    request_layer: str = ""
    vocabulary: object = None  # case -> the loaded vocabulary (dryz.judge.semantics: vocab_of on the subject)

    def config(self, case: Case):
        """The oracles' configuration for the case (dryz.config.case_config), on this subject's semantics."""
        return case_config(case, self.abi, self.deviations,
                           self.vocabulary(case) if case.vocab is not None and self.vocabulary else None)


def with_deviations(cfg: Config, declared, breakers=(), tokenize=symbol_tokenize, printed=None) -> Config:
    """cfg with the models of the declared deviations as its variants (dryz.oracle.deviations; printed: a real
    vocabulary's restart sequences of the printed-text fix)."""
    if tokenize is symbol_tokenize and printed is None:  # plain data: the same every time (a fuzz job's hot path)
        return _with_deviations_symbols(cfg, tuple(declared), tuple(breakers))
    return replace(cfg, variants=variants(cfg, declared, breakers, tokenize, printed))


@lru_cache(maxsize=4096)  # as _config: a campaign's configurations repeat (Config is frozen)
def _with_deviations_symbols(cfg: Config, declared: tuple, breakers: tuple) -> Config:
    return replace(cfg, variants=variants(cfg, declared, breakers, symbol_tokenize, None))


def vocab_config(case: Case, abi: int, vocabulary) -> Config:
    """A real vocabulary's configuration: restart sequences from restart_model (dryz.oracle.restarts_vocab) over
    the case's vocabulary (loaded: dryz.vocab_cases.vocab_of) and breakers (cached per pair, dryz.vocab_cases),
    with what the text-level promise needs."""
    seqs, text = vocab_cases.restart_sequences(vocabulary, case.breakers)
    return _vocab_config(case.multiplier, case.base, case.allowed_length,
                         effective_last_n(case.penalty_last_n, case.n_ctx_train, abi), seqs, text)


@lru_cache(maxsize=4096)
def _vocab_config(multiplier, base, allowed_length, penalty_last_n, seqs, text) -> Config:
    return Config(multiplier, base, allowed_length, penalty_last_n, seqs, text)


CONFIG_NAMES = ("base", "window4", "breaker")
# The parameter axis (--parameters): every allowed_length 0..3 with each (multiplier, base) pair (float32
# values), judged bit-exactly against the as-shipped output model; (1, 2) with allowed_length 1 is the
# invertible seed configuration itself.
ALLOWED_LENGTHS = (0, 1, 2, 3)
PARAMETER_PAIRS = ((f32(1.0), f32(2.0)), (f32(0.8), f32(1.75)), (f32(2.0), f32(1.1)), (f32(1.0), f32(1.0)))


@dataclass(frozen=True)
class SpaceConfig:
    name: str
    penalty_last_n: int
    breakers: tuple[str, ...] = ()
    multiplier: float = 1.0
    base: float = 2.0
    allowed_length: int = 1

    def case(self, alphabet: int, history) -> Case:
        return Case(history=tuple(int(t) for t in history), alphabet=alphabet,
                    penalty_last_n=self.penalty_last_n, breakers=self.breakers, multiplier=self.multiplier,
                    base=self.base, allowed_length=self.allowed_length)

    def sampler_args(self):
        return (self.multiplier, self.base, self.allowed_length, self.penalty_last_n, self.breakers)

    @property
    def invertible(self) -> bool:
        return seed_parameters(self.multiplier, self.base, self.allowed_length)

    def to_json(self) -> dict:
        return {"name": self.name, "penalty_last_n": self.penalty_last_n, "breakers": list(self.breakers),
                "multiplier": self.multiplier, "base": self.base, "allowed_length": self.allowed_length,
                "comparison": "L" if self.invertible else "bits"}


def space_config(name: str, alphabet: int, max_len: int) -> SpaceConfig:
    """base, window4, breaker, or windowW (penalty_last_n = W >= 1), optionally with parameters
    NAME/allowedA/mM/bB (allowed_length A >= 0, multiplier M, base B, as float32; any subset, in any order).
    alphabet: its last symbol is the breaker (64 for every alphabet: the breaker is '#')."""
    if "/" in name:
        head, *parts = name.split("/")
        spec = space_config(head, alphabet, max_len)
        kw = {}
        for part in parts:
            m = re.fullmatch(r"(allowed)(\d{1,4})|(m|b)([0-9.eE+-]+)", part)
            field_ = None if m is None else ("allowed_length" if m.group(1) else
                                              {"m": "multiplier", "b": "base"}[m.group(3)])
            if field_ is None or field_ in kw:
                raise ValueError(f"unknown configuration {name!r}: bad or repeated parameter {part!r}")
            try:
                kw[field_] = int(m.group(2)) if m.group(1) else f32(float(m.group(4)))
            except ValueError:
                raise ValueError(f"unknown configuration {name!r}: bad parameter {part!r}") from None
            if field_ != "allowed_length" and not np.isfinite(kw[field_]):
                raise ValueError(f"unknown configuration {name!r}: parameter {part!r} is not finite")
        return SpaceConfig(name, spec.penalty_last_n, spec.breakers, kw.get("multiplier", spec.multiplier),
                           kw.get("base", spec.base), kw.get("allowed_length", spec.allowed_length))
    uncapped = max(64, max_len)  # the window never cuts the history
    if name == "base":
        return SpaceConfig("base", uncapped)
    if name == "breaker":
        return SpaceConfig("breaker", uncapped, (SYMBOLS[alphabet - 1],))
    if name.startswith("window") and name[6:].isdigit() and int(name[6:]) >= 1 and name[6] != "0":
        return SpaceConfig(name, int(name[6:]))
    raise ValueError(f"unknown configuration {name!r} (known: {', '.join(CONFIG_NAMES)}, windowW)")


def parameter_name(name: str, allowed_length: int, multiplier: float, base: float) -> str:
    def short(x):  # the shortest decimal that reads back to the same float32
        return np.format_float_positional(np.float32(x), trim="-")
    return f"{name}/allowed{allowed_length}/m{short(multiplier)}/b{short(base)}"


def parameter_names(names) -> list[str]:
    """The parameter axis for each configuration name: allowed_length 0..3 x PARAMETER_PAIRS, without the
    seed combination (1, 2, 1), which is the configuration itself."""
    out = []
    for name in names:
        for a in ALLOWED_LENGTHS:
            for m, b in PARAMETER_PAIRS:
                if (m, b, a) != (1.0, 2.0, 1):
                    out.append(parameter_name(name, a, m, b))
    return out


def window_cap_names(max_len: int) -> list[str]:
    """Every window cap 1..N: penalty_last_n < len(history) wraps the ring buffer, for every cap."""
    return [f"window{w}" for w in range(1, max_len + 1)]
