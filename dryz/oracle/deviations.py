"""Other engines' documented deviations from llama.cpp's DRY, as alternative models (pure: no subject runs here).

An engine adapter (dryz.subject.command, `--subject cmd:"..."`) declares the deviations its engine documents;
dryz still judges it against llama.cpp's semantics, and an output that differs from llama.cpp's model but
matches, bit for bit, the model with a declared deviation is class `declared-<name>` (listed, not a finding);
a difference no declared deviation explains is a mismatch. Each deviation is a change to the configuration the
shipped model (dryz.oracle.shipped) runs:

  single-token-breakers   only breakers that are one token restart a repeat: every restart sequence with a tail
                          is dropped (vLLM PR #50584, exllamav3)
  match-cap:N             a repeat counts at most N tokens: L = min(L, N) (exllamav3: 2048; mistral.rs and
                          text-generation-webui: 50; Aphrodite's dry_max_ngram)
  breakers-not-exempt     a single-token breaker is penalized like any token (koboldcpp)

`variants(cfg, declared)` gives the (class, Config) pairs check_batch tries: each deviation alone, and all of
them together when more than one is declared.
"""

from __future__ import annotations

import re
from dataclasses import replace
from ..errors import DryzError

KNOWN = ("single-token-breakers", "match-cap:N", "breakers-not-exempt")


class DeviationError(ValueError, DryzError):
    """A declared deviation dryz does not model (one-line reason)."""


def parse(name: str) -> tuple[str, int | None]:
    """(deviation, its number or None); DeviationError for one dryz does not model."""
    if name in ("single-token-breakers", "breakers-not-exempt"):
        return name, None
    m = re.fullmatch(r"(match-cap|max-ngram):(\d+)", name)
    if m and int(m.group(2)) >= 1:
        return "match-cap", int(m.group(2))
    raise DeviationError(f"unknown deviation {name!r} (dryz models: {', '.join(KNOWN)})")


def apply(cfg, name: str):
    """The configuration with one declared deviation."""
    kind, n = parse(name)
    if kind == "single-token-breakers":
        seqs = tuple((h, t) for h, t in cfg.seqs if not t)
        return replace(cfg, seqs=seqs, variants=())
    if kind == "match-cap":
        return replace(cfg, match_cap=n if cfg.match_cap is None else min(n, cfg.match_cap), variants=())
    return replace(cfg, exempt_breakers=False, variants=())


def variants(cfg, declared) -> tuple:
    """(class, Config) for each declared deviation, and for all of them together."""
    declared = tuple(declared)
    out = [(f"declared-{d}", apply(cfg, d)) for d in declared]
    if len(declared) > 1:
        both = cfg
        for d in declared:
            both = apply(both, d)
        out.append(("declared-" + "+".join(declared), both))
    return tuple(out)
