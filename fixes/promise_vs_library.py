"""The text promise for sequence breakers, judged against the library alone: `dryz restarts --vocab V --check
promise` classes a window `construction-mismatch` wherever the library's rep_limit is not the shipped
construction model's, before it asks whether the library keeps the promise. A fix to the construction
(fixes/spm-breaker-matching.diff) is such a mismatch by definition; this script says, for those windows too,
whether the library's rep_limit is the promised one. It uses dryz's own sweep, probes and promise model
unchanged (nothing in dryz is modified; the wrapper only splits the construction-mismatch class).

    python fixes/promise_vs_library.py LIBLLAMA_FOLDER VOCAB [VOCAB ...]
"""

from __future__ import annotations

import json
import sys

from dryz.enumerate import promise_sweep as ps
from dryz.subject import open_subject

_classify = ps.classify


def classify(window, pieces, texts_of, breakers, model, observed_rep, tokenize=None):
    cls, info = _classify(window, pieces, texts_of, breakers, model, observed_rep, tokenize)
    if cls == "construction-mismatch":
        cls = ("construction-mismatch, promise kept" if info["library"] == info["promised"] else
               "construction-mismatch, promise broken")
    return cls, info


ps.classify = classify


def main(argv) -> int:
    lib = open_subject(f"libllama:{argv[0]}")
    out = {}
    for name in argv[1:]:
        r = ps.promise_sweep(name, lib=lib)
        out[name] = {"windows": dict(sorted(r.counts.items())), "vocabulary_histories": dict(sorted(r.vocab_counts.items())),
                     "complete": r.complete}
        print(f"{name}: windows {out[name]['windows']}; vocabulary histories {out[name]['vocabulary_histories']}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
