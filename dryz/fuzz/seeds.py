"""Seed entries for corpus/: llama.cpp's own DRY unit cases, the source's worked example, and structured
histories that steer the fuzzer (periodic, breaker near the end, window just above allowed_length).

`python -m dryz.fuzz.seeds [DIR]` (re)writes them, each checked through the shipped library; every one must agree.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..case import Case, f32
from ..oracle.shipped import _logf
from ..symbols import SYMBOLS, from_symbols
from ..corpus import DEFAULT_DIR, entry_json, write_entry
from ..judge import check
from ..subject.registry import open_subject, selected_spec

# vendor/llama.cpp/tests/test-sampling.cpp, test_dry: (probs, last_tokens, expected_probs, multiplier, base,
# allowed_length, penalty_last_n, token breakers). The tester's logits are logf(p).
UPSTREAM_TEST_DRY = [
    ([0.25, 0.25, 0.25, 0.25], [0, 1], [0.25, 0.25, 0.25, 0.25], 1.0, 1.1, 2, 4, []),
    ([0.25, 0.25, 0.25, 0.25], [0, 1, 2, 0, 1], [0.296923, 0.296923, 0.109232, 0.296923], 1.0, 1.1, 2, 5, []),
    ([0.2] * 5, [0, 1, 3, 4, 0, 1], [0.2] * 5, 1.0, 1.1, 2, 6, [[3]]),
    ([0.2] * 5, [0, 1, 2, 0, 1], [0.241818, 0.241818, 0.032727, 0.241818, 0.241818], 2.0, 1.1, 2, 5, []),
    ([0.2] * 5, [0, 1, 2, 3, 4, 0, 1], [0.2] * 5, 1.0, 1.1, 4, 7, []),
]


def upstream_cases() -> list[tuple[Case, list[float]]]:
    out = []
    for i, (probs, hist, expected, mult, base, allowed, last_n, brk) in enumerate(UPSTREAM_TEST_DRY):
        cands = tuple((t, float(_logf(f32(p)))) for t, p in enumerate(probs))
        # Token breakers [[t]] are single-token restart sequences: in the symbol vocabulary, the string SYMBOLS[t].
        breakers = tuple("".join(SYMBOLS[t] for t in b) for b in brk)
        case = Case(history=tuple(hist), alphabet=len(probs), penalty_last_n=last_n, breakers=breakers,
                    multiplier=f32(mult), base=f32(base), allowed_length=allowed, candidates=cands,
                    note=f"llama.cpp tests/test-sampling.cpp test_dry #{i + 1}")
        out.append((case, expected))
    return out


def structured_cases() -> list[Case]:
    def c(symbols, alphabet, note, **kw):
        return Case(history=tuple(from_symbols(symbols)), alphabet=alphabet,
                    penalty_last_n=kw.pop("penalty_last_n", 64), note=note, **kw)
    return [
        c("abccbcyabc", 26, "the source's worked example (Step 2/3 comment): c:3 b:1 y:2"),
        c("abc" * 20, 3, "periodic, period 3: the next symbol has L = n - 3"),
        c("ab" * 40, 2, "periodic, period 2, window 17 (ring buffer wraps)", penalty_last_n=17),
        c("a" * 30, 1, "one symbol repeated: matches overlap the suffix"),
        c("abcabcabcd" * 4 + "abc", 4, "breaker d near the end limits the match", breakers=("d",)),
        c("abcdabcdab", 4, "window just above allowed_length", penalty_last_n=4, allowed_length=3),
        c("abab" * 10, 2, "multi-token breaker 'ab' (head a, tail b)", breakers=("ab",)),
    ]


def main(argv=None) -> int:
    lib = open_subject(selected_spec())
    args = sys.argv[1:] if argv is None else argv
    d = Path(args[0]) / "seeds" if args else DEFAULT_DIR / "seeds"
    ident = lib.identity
    cases = [(c, "llama.cpp upstream unit test") for c, _ in upstream_cases()] + \
            [(c, "dryz seed") for c in structured_cases()]
    for case, source in cases:
        v = check(case, lib)
        if not v.ok:
            print(f"seed does not agree ({v.klass}): {case.dumps()}", file=sys.stderr)
            return 1
        data = entry_json(case, v, expect="agree", shortest="not-minimized",
                          provenance={"found_by": source}, subject=ident, note=case.note)
        print(write_entry(d, data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
