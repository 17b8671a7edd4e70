"""The oracles: match lengths A and B (lengths.py), the shipped model (shipped.py: Steps 1-4 as the source
writes them), the promised Step 1 (promised.py), restart sequences from breaker strings over the symbol
vocabulary (restarts.py) and over a real vocabulary (restarts_vocab.py), the text-level promise
(promise_text.py), the sampler's state across a trace of calls (trace_model.py), the reference design
(reference.py). None of them sees a subject: dryz.check compares the subject with them."""

# -- the one registration point of the match-length oracles ------------------------------------------------------
# (name, function(H, cands, ...) -> L) in order: every judged row is predicted by each through the shipped model;
# the first is the primary (the verdict's oracle_L and the expected output), any two that differ are an
# oracle-disagreement, and every other one appears in a verdict as oracle_<name>_L. A new oracle is its module
# plus one line here; check.py, the controls and explain read this tuple.
from .lengths import match_lengths_A  # noqa: E402
from .lengths_b import match_lengths_B  # noqa: E402

MATCH_LENGTHS = (("A", match_lengths_A), ("B", match_lengths_B))
PRIMARY = MATCH_LENGTHS[0][1]


def verdict_keys() -> list[str]:
    """The JSON keys of the oracles' L in a verdict, in MATCH_LENGTHS order."""
    return ["oracle_L"] + [f"oracle_{name}_L" for name, _ in MATCH_LENGTHS[1:]]
