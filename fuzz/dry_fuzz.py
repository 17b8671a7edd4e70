#!/usr/bin/env python3
"""atheris harness: bytes -> Case -> check(); a verdict that is not a known class raises, so libFuzzer
writes the input as a crash file. Run it through `dryz fuzz`, or directly with libFuzzer flags."""

import pkgutil
import sys

import atheris
import numpy  # noqa: F401  (imported before instrumentation: only dryz's own code is instrumented)

import dryz

# Python coverage comes from the decoder (the input's shape) and the model (the oracles and the shipped
# configuration: where repeats, windows and restart sequences take the code). The other modules are left
# uninstrumented: their branches are bookkeeping (the verdict, whose disagreements raise anyway, the Case
# type, the corpus reader, the symbol table), and each traced branch or comparison costs ~3,000
# instructions (atheris' pybind11 hooks): a third of a campaign's time while they were instrumented.
# (atheris includes whole top-level packages, so the rest of dryz is listed as excluded.)
INSTRUMENTED = ("dryz.decode", "dryz.model")
with atheris.instrument_imports(include=["dryz"], exclude=[
        f"dryz.{m.name}" for m in pkgutil.iter_modules(dryz.__path__) if f"dryz.{m.name}" not in INSTRUMENTED]):
    from dryz.fuzzing import load_subject, test_one_input


def main():
    load_subject()  # libllama loaded before libFuzzer starts: its native counters are registered and reported
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
