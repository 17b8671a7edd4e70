"""Aphrodite's part of a reproduction script: SamplingOps.apply_dry on a logits row with the SamplingMetadata its
runner builds (engine:aphrodite-python: no token history, the Python fallback DryRequestState /
_compute_dry_penalties; engine:aphrodite: the token history its V1 CUDA runner's input batch fills, the compiled
op torch.ops._C.dry_scan_penalties), the breaker strings resolved as SamplingParams.update_from_tokenizer does,
the refusals of SamplingParams._verify_args, and the engine's defaults for dry_max_ngram, dry_max_occurrences and
dry_early_exit_match_len (12, 8, 8)."""

NAME = "Aphrodite"
INSTALL = ("pip install aphrodite-engine==0.24.1",)
HOW = ("It calls SamplingOps.apply_dry with a SamplingMetadata as Aphrodite's runner builds it. Where the "
       "aphrodite package does not import (no GPU, or its dependencies missing), it reads the three files of "
       "its DRY (aphrodite/v1/sample/metadata.py, ops/dry.py, ops/__init__.py) from the wheel given as "
       "APHRODITE_WHEEL (pip download aphrodite-engine==0.24.1 --no-deps) and runs them as they are, with empty "
       "stand-ins for the sampling ops they import and DRY does not use.")
ISOLATE = True  # the compiled op is native code: a crash is an answer
IMPORTS = """
import ctypes
import types
import zipfile

import torch
"""

BODY = '''
MAX_NGRAM, MAX_OCCURRENCES, EARLY_EXIT = 12, 8, 8  # SamplingParams' defaults (sampling_params.py:399-403)


def _from_wheel(wheel):
    """(SamplingOps, SamplingMetadata) run from the wheel's files, the unused sampling ops stood in for."""
    stand_in = {n: types.ModuleType(n) for n in ("aphrodite", "aphrodite.v1", "aphrodite.v1.sample",
                                                 "aphrodite.v1.sample.ops")}
    for m in stand_in.values():
        m.__path__ = []
    for n, cls in (("aphrodite.v1.sample.logits_processor", "LogitsProcessors"),
                   ("aphrodite.v1.sample.thinking_budget_state", "ThinkingBudgetStateHolder")):
        stand_in[n] = types.ModuleType(n)
        setattr(stand_in[n], cls, type(cls, (), {}))
    for op, fn in (("bad_words", "apply_bad_words"), ("penalties", "apply_all_penalties"), ("epsilon_cutoff", None),
                   ("eta_cutoff", None), ("min_p", None), ("mirostat", None), ("no_repeat_ngram", None),
                   ("quadratic", None), ("skew", None), ("tfs", None), ("top_a", None), ("top_nsigma", None),
                   ("typical_p", None), ("xtc", None)):
        m = stand_in[f"aphrodite.v1.sample.ops.{op}"] = types.ModuleType(f"aphrodite.v1.sample.ops.{op}")
        setattr(m, fn or op, None)
    sys.modules.update(stand_in)
    loaded = {}
    with zipfile.ZipFile(wheel) as z:
        for member, name in (("aphrodite/v1/sample/metadata.py", "aphrodite.v1.sample.metadata"),
                             ("aphrodite/v1/sample/ops/dry.py", "aphrodite.v1.sample.ops.dry"),
                             ("aphrodite/v1/sample/ops/__init__.py", "aphrodite_sampling_ops")):
            m = sys.modules[name] = types.ModuleType(name)
            m.__file__ = f"{wheel}!/{member}"
            exec(compile(z.read(member).decode(), m.__file__, "exec"), m.__dict__)
            loaded[name] = m
    return loaded["aphrodite_sampling_ops"].SamplingOps, loaded["aphrodite.v1.sample.metadata"].SamplingMetadata


def engine():
    wheel = os.environ.get("APHRODITE_WHEEL")
    if wheel:
        ops, meta = _from_wheel(wheel)
    else:
        from aphrodite.v1.sample.metadata import SamplingMetadata as meta
        from aphrodite.v1.sample.ops import SamplingOps as ops
    if COMPILED:  # the op the V1 runner calls: the wheel's library (its CUDA runtime and driver must load)
        for lib in filter(None, os.environ.get("APHRODITE_PRELOAD", "").split(":")):
            ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
        library = os.environ.get("APHRODITE_LIBRARY")
        if library:
            torch.ops.load_library(library)
        else:
            import aphrodite._C_stable_libtorch  # noqa: F401 (registers torch.ops._C.dry_scan_penalties)
    return ops(), meta


def metadata(Metadata, history, breakers, V):
    f32 = lambda x: torch.tensor([x], dtype=torch.float32)  # noqa: E731
    i32 = lambda x: torch.tensor([x], dtype=torch.int32)  # noqa: E731
    br = lambda: (torch.tensor([breakers], dtype=torch.long) if breakers  # noqa: E731
                  else torch.empty((1, 0), dtype=torch.long))
    md = Metadata(
        temperature=None, all_greedy=True, all_random=False, top_p=None, top_k=None, generators={},
        max_num_logprobs=None, no_penalties=True, prompt_token_ids=torch.tensor([history or [V]], dtype=torch.long),
        frequency_penalties=torch.zeros(1), presence_penalties=torch.zeros(1), repetition_penalties=torch.ones(1),
        output_token_ids=[[]], allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=None,
        dry_multiplier=f32(MULTIPLIER), dry_base=f32(BASE), dry_allowed_length=i32(ALLOWED_LENGTH),
        dry_sequence_breaker_ids=br(), dry_ranges=i32(PENALTY_LAST_N), dry_max_ngram=i32(MAX_NGRAM),
        dry_max_occurrences=i32(MAX_OCCURRENCES), dry_early_exit_match_len=i32(EARLY_EXIT))
    md.persistent_data = {}
    if not COMPILED:  # no token history: apply_dry's Python fallback (as Aphrodite's Metal runner builds it)
        md.token_history_ids_cpu = None
        return md
    buffer = torch.zeros((1, len(history) + 1), dtype=torch.int32)  # as the V1 input batch's token buffer
    buffer[0, :len(history)] = torch.tensor(history, dtype=torch.int32)
    md.token_history_ids_cpu, md.token_history_lens_cpu = buffer[:1, :len(history)], i32(len(history))
    md.dry_multiplier_cpu, md.dry_allowed_length_cpu, md.dry_sequence_breaker_ids_cpu = \\
        f32(MULTIPLIER), i32(ALLOWED_LENGTH), br()
    md.dry_ranges_cpu, md.dry_max_ngram_cpu = i32(PENALTY_LAST_N), i32(MAX_NGRAM)
    md.dry_max_occurrences_cpu, md.dry_early_exit_match_len_cpu = i32(MAX_OCCURRENCES), i32(EARLY_EXIT)
    return md


def answer():
    torch.set_num_threads(1)
    # SamplingParams._verify_args (sampling_params.py:779-786): what the API answers
    for bad, message in ((MULTIPLIER < 0, "dry_multiplier must be non-negative."),
                         (BASE <= 1.0, "dry_base must be greater than 1."),
                         (ALLOWED_LENGTH < 0, "dry_allowed_length must be non-negative."),
                         (PENALTY_LAST_N < 0, "dry_range must be non-negative.")):
        if bad:
            return ("refused", message)
    ops, Metadata = engine()
    V = len(SYMBOLS)
    logits = torch.zeros((1, V), dtype=torch.float32)
    for t, before in CANDIDATES:
        logits[0, t] = before
    # each breaker string: the last id of tokenizer.encode("a" + string) (SamplingParams.update_from_tokenizer)
    breakers = [SYMBOLS.index(("a" + b)[-1]) for b in BREAKERS]
    try:
        if MULTIPLIER > 0.0:  # a request enables DRY with a positive multiplier (gpu_input_batch.py:606)
            logits = ops.apply_dry(logits, metadata(Metadata, HISTORY, breakers, V))
    except Exception as e:  # noqa: BLE001 (what the engine raises is its answer)
        return ("raised", f"{type(e).__name__}: {e}")
    return ("logits", [float(logits[0, t]) for t, _ in CANDIDATES])
'''


def compiled(w) -> bool:
    return w.identity.get("engine") == "aphrodite"


def refuses(w) -> str | None:
    if w.trace is not None:
        return "a trace: Aphrodite's DRY has no reset or clone (each request its own state)"
    return None


def setup(w) -> str:
    """The constant choosing the path (prepended to BODY by scripts.script)."""
    return f"COMPILED = {compiled(w)!r}  # the compiled op (engine:aphrodite), else the Python fallback\n"


def related(w) -> list[str]:
    """The other path's line for the same model (the adapter's sources): the compiled scan Aphrodite's CUDA runner
    calls, for a report on the Python fallback, and the other way round."""
    from ...oracle.deviations import pattern  # on use: a report's text
    from ...subject.engines.aphrodite import SOURCES  # on use: the adapter's source lines (no engine loaded)
    if not w.model:
        return []
    other = "python" if compiled(w) else "compiled"
    lines = {d["name"]: d["source"] for d in SOURCES[other]}
    line = lines.get(w.cause) or lines.get(pattern(w.cause))
    where = ("the Python fallback (engine:aphrodite-python)" if other == "python" else
             "the compiled scan that Aphrodite's CUDA runner calls (engine:aphrodite)")
    return [f"The corresponding line of {where}: `{line}`."] if line else []


def environment(w) -> dict:
    """What the script needs in its environment to run Aphrodite here without installing it: its wheel (dryz's
    cached copy) and, for the compiled op, the wheel's library and what it loads first on this machine (CUDA's
    runtime, and stand-ins for a GPU driver and CUDA torch it lacks: dryz.subject.engines.aphrodite.runtime)."""
    from pathlib import Path

    from ...subject.engines.aphrodite import runtime, wheel  # on use: the engine's files in dryz's cache
    env = {"APHRODITE_WHEEL": str(wheel())}
    if compiled(w):
        import torch  # on use: whether this machine's torch is a CPU build
        lib, _, first, _ = runtime(Path(env["APHRODITE_WHEEL"]), torch.version.cuda is None)
        env["APHRODITE_LIBRARY"], env["APHRODITE_PRELOAD"] = str(lib), ":".join(str(x) for x in first)
    return env
