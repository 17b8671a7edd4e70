#!/usr/bin/env python3
"""atheris harness: bytes -> Case -> check(); a verdict that is not a known class raises, so libFuzzer
writes the input as a crash file. Run it through `dryz fuzz`, or directly with libFuzzer flags."""

import sys

import atheris
import numpy  # noqa: F401  (imported before instrumentation: only dryz's own code is instrumented)

# dryz's code is instrumented for Python coverage, except modules whose branches do not depend on the
# input's structure: the Case type's validation (every decoded case passes it the same way), the corpus
# reader and the symbol table. Instrumenting them cost ~10 us per input for no guidance.
with atheris.instrument_imports(include=["dryz"], exclude=["dryz.case", "dryz.corpus", "dryz.symbols"]):
    from dryz.fuzzing import load_subject, test_one_input


def main():
    load_subject()  # libllama loaded before libFuzzer starts: its native counters are registered and reported
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
