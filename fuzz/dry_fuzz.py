#!/usr/bin/env python3
"""atheris harness: bytes -> Case -> check(); a verdict that is not a known class raises, so libFuzzer
writes the input as a crash file. Run it through `dryz fuzz`, or directly with libFuzzer flags."""

import pkgutil
import sys

import atheris
import numpy  # noqa: F401  (imported before instrumentation: only dryz's own code is instrumented)

import dryz

# Python coverage comes from the model (dryz.model: the oracles and the shipped configuration, where
# repeats, windows and restart sequences take the code). The rest of dryz is left uninstrumented: the
# decoder's branches (the input's shape) are few and reached at once (a 30 s campaign instrumenting only the
# decoder reached 24 of its 25 edges within 307 inputs), the others are bookkeeping (the
# verdict, whose disagreements raise anyway, the Case type, the corpus reader), and each traced branch or
# comparison costs ~3,000 instructions (atheris' pybind11 hooks; measured with callgrind, bench/README).
# atheris includes whole top-level packages, so the rest of dryz is listed as excluded.
INSTRUMENTED = ("dryz.model",)
with atheris.instrument_imports(include=["dryz"], exclude=[
        f"dryz.{m.name}" for m in pkgutil.iter_modules(dryz.__path__) if f"dryz.{m.name}" not in INSTRUMENTED]):
    from dryz.fuzzing import load_subject, test_one_input


def main():
    load_subject()  # libllama loaded before libFuzzer starts: its native counters are registered and reported
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
