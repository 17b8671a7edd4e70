"""atheris harness: bytes -> Case -> check(); a verdict that is not a known class raises, so libFuzzer
writes the input as a crash file. Run it through `dryz fuzz` (which writes a launcher calling main()), or
fuzz/dry_fuzz.py from a checkout, with libFuzzer flags."""

import gc
import importlib
import os
import signal
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


# -- stopping: no alarm during libFuzzer's shutdown ----------------------------------------------------------------
#
# libFuzzer ends a process on SIGTERM (and on SIGINT where it installs its handler: when SIGINT was ignored) from
# inside its signal handler (Fuzzer::InterruptCallback), which allocates; atheris's SIGALRM handler
# (atheris::HandleAlarm, armed on the first input with a periodic timer) allocates too (std::to_string) once the
# current input is older than -timeout. One interrupting the other deadlocks on the allocator's lock: a harness
# was found asleep 61 minutes after a SIGTERM. So from its first input the harness takes those signals itself,
# at Python's level (a flag the interpreter reads between bytecodes, not code run in a signal handler): it turns
# the timer off and ignores SIGALRM, puts libFuzzer's own handler back and sends itself the signal again, and
# libFuzzer stops exactly as it would have, with no alarm left to fire. (A harness stuck in native code never
# reaches that point: whatever stops it escalates to SIGKILL, dryz.fuzz.forkserver and the campaign.)

SIGACTION_BYTES = 512  # more than sizeof(struct sigaction) on every Linux ABI (152 on x86-64): kept opaque


def disarm_alarm() -> None:
    """No SIGALRM from now on: the interval timer off, and one already pending ignored."""
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_IGN)


class StopGuard:
    """The stop signals taken before libFuzzer's handlers (module comment above); install() once libFuzzer has
    set them (the first input)."""

    def __init__(self):
        self.saved: dict = {}
        self.installed = False

    def install(self) -> None:
        import ctypes
        self.installed = True
        libc = ctypes.CDLL(None, use_errno=True)
        for sig in (signal.SIGTERM, signal.SIGINT):
            if signal.getsignal(sig) not in (signal.SIG_DFL, signal.SIG_IGN, None):
                continue  # Python's own handler (a Ctrl-C is a KeyboardInterrupt, caught by the target's wrapper)
            buf = ctypes.create_string_buffer(SIGACTION_BYTES)
            if libc.sigaction(int(sig), None, buf) != 0 or (ctypes.c_void_p.from_buffer(buf).value or 0) in (0, 1):
                continue  # no native handler: the default (or ignored) stays
            self.saved[sig] = (libc, buf)
            signal.signal(sig, self.stop)

    def stop(self, signum, frame) -> None:
        disarm_alarm()
        libc, buf = self.saved[signum]
        libc.sigaction(int(signum), buf, None)  # libFuzzer's handler back
        os.kill(os.getpid(), signum)            # and libFuzzer stops as it would have


def guarded(target, guard: StopGuard | None = None):
    """The target, with the stop guard installed on its first input and the alarm disarmed when a Ctrl-C (a
    KeyboardInterrupt, which atheris turns into the process's end) leaves it."""
    guard = guard or StopGuard()

    def test_one_input(data):
        if not guard.installed:
            guard.install()
        try:
            return target(data)
        except KeyboardInterrupt:
            disarm_alarm()
            raise
    return test_one_input


def run(argv):
    """libFuzzer with these flags on the target the campaign asked for (never returns)."""
    from dryz.fuzz.target import entry_point  # on use: imported after the oracles are instrumented (atheris)
    atheris.Setup(argv, guarded(entry_point()))
    atheris.Fuzz()


def main():
    prepare()
    run(sys.argv)
