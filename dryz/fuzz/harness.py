"""atheris harness: bytes -> Case -> check(); a verdict that is not a known class raises, so libFuzzer
writes the input as a crash file. Run it through `dryz fuzz` (which writes a launcher calling main()), or
fuzz/dry_fuzz.py from a checkout, with libFuzzer flags."""

import gc
import importlib
import os
import sys
import types

import atheris

# Python coverage comes from the model (the oracles and the shipped configuration, where repeats, windows and
# restart sequences take the code), branch coverage only. The rest of dryz is left uninstrumented: the
# decoder's branches (the input's shape) are few and reached at once (a 30 s campaign instrumenting only the
# decoder reached 24 of its 25 edges within 307 inputs), the others are bookkeeping (the verdict, whose
# disagreements raise anyway, the Case type, the corpus reader). Comparisons are not traced: their operands
# are derived lengths, not input bytes libFuzzer could splice in. Each traced branch or comparison costs
# ~3,000 instructions (atheris' pybind11 hooks; counted with bench/fuzz_instructions.py).
INSTRUMENTED = ("dryz.oracle.lengths", "dryz.oracle.lengths_b", "dryz.oracle.shipped", "dryz.oracle.promised")
# The trace target (DRYZ_FUZZ_TARGET=traces) adds its state model: reset, clone and the ring buffer's wrap.
INSTRUMENTED_TRACES = INSTRUMENTED + ("dryz.oracle.trace_model",)
# Left untraced within them: B's per-window, per-candidate text search and its length search (loops whose every
# branch the first inputs reach, run once per window of a trace: traced, they cost more than the search).
UNTRACED = frozenset({"_search_as_text", "_longest_suffix"})


def instrument(modules) -> None:
    """Branch coverage for every function of these (imported) modules but UNTRACED, methods, closures and
    cached functions included: each function's code is replaced in place, so every reference sees it."""
    files = {m.__file__ for m in modules}
    for f in gc.get_objects():
        if isinstance(f, types.FunctionType) and f.__code__.co_filename in files and f.__name__ not in UNTRACED:
            f.__code__ = atheris.patch_code(f.__code__, trace_dataflow=False)


def prepare():
    """Everything before libFuzzer starts: the coverage instrumentation, the subject and the decoder."""
    if os.environ.get("DRYZ_INSTRUMENT", "1") != "0":  # 0: no Python coverage (for benchmarks)
        names = INSTRUMENTED_TRACES if os.environ.get("DRYZ_FUZZ_TARGET") == "traces" else INSTRUMENTED
        extra = ("dryz.oracle.seqindex",) if os.environ.get("DRYZ_FUZZ_VOCAB") else ()  # real-vocabulary Step 1
        instrument([importlib.import_module(name) for name in names + extra])
    from dryz.fuzz.target import load_subject  # on use: imported after the oracles are instrumented (atheris)
    load_subject()  # libllama loaded before libFuzzer starts: its native counters are registered and reported


def warm():
    """What the first inputs would do (dryz.fuzz.target.warm): for the fork server, done once for every job."""
    from dryz.fuzz.target import warm  # on use: imported after the oracles are instrumented (atheris)
    warm()


def run(argv):
    """libFuzzer with these flags on the target the campaign asked for (never returns)."""
    from dryz.fuzz.target import entry_point  # on use: imported after the oracles are instrumented (atheris)
    atheris.Setup(argv, entry_point())
    atheris.Fuzz()


def main():
    prepare()
    run(sys.argv)
