"""dryz's adapter for Aphrodite's DRY (pip install 'dryz[aphrodite]': torch; the engine's wheel is fetched once):
`--subject engine:aphrodite`.

Aphrodite (aphrodite-engine 0.24.1, AGPL-3.0) is a CUDA wheel; its DRY is plain Python in
aphrodite/v1/sample/ops/dry.py (DryRequestState, _compute_dry_penalties) applied by SamplingOps.apply_dry
(aphrodite/v1/sample/ops/__init__.py) to the logits with a SamplingMetadata (aphrodite/v1/sample/metadata.py). Those
three files are read from the wheel (fetched with `pip download --no-deps` into dryz's cache, never installed) and
executed at run time with stand-ins for the modules they import and do not use here; nothing of Aphrodite is copied
into dryz. SamplingOps.apply_dry takes its Python path (DryRequestState: no token_history_ids_cpu in the metadata);
the GPU runner takes a C++ kernel (csrc/cpu/dry.cpp) that the wheel ships only for CUDA.

The request's parameters go into the metadata by their documented meaning (SamplingParams, sampling_params.py:387):
dry_multiplier, dry_base, dry_allowed_length, dry_range = penalty_last_n ("Token window used by DRY."), the
breakers as the token ids whose pieces contain them (dry_sequence_breaker_ids: "Token ids that split DRY repetition
windows."; the string form is resolved by the API, outside the DRY function), and the engine's own defaults for what
llama.cpp has no parameter for: dry_max_ngram 12, dry_max_occurrences 8, dry_early_exit_match_len 8. The history is
the prompt. Parameters the API refuses (SamplingParams._verify_args: its error messages are what a user sees) are
answered as that refusal.

Declared, each cited from sampling_params.py of 0.24.1 (SamplingParams' attribute docs and its validation
messages): breakers are token ids (single-token-breakers), the n-gram cap, the occurrence cap and the early exit,
and the four refusals. Nothing else: what only the code does is judged as a finding.
"""

from __future__ import annotations

import subprocess
import sys
import types
import zipfile
from pathlib import Path

from .serve import NotExpressible, Refusal, containing, engine, serve, stand_ins, symbol_pieces

VERSION = "0.24.1"
MAX_NGRAM, MAX_OCCURRENCES, EARLY_EXIT = 12, 8, 8  # SamplingParams' defaults (sampling_params.py:399-403)
CITED = "aphrodite-engine 0.24.1, aphrodite/sampling_params.py:{line}, SamplingParams: {text}"
DECLARED = [
    {"name": "single-token-breakers",
     "cited": CITED.format(line=396, text='dry_sequence_breaker_ids: "Token ids that split DRY repetition windows."')},
    {"name": f"match-cap:{MAX_NGRAM}",
     "cited": CITED.format(line=400, text=f'dry_max_ngram = {MAX_NGRAM}: "Maximum n-gram length checked by DRY."')},
    {"name": f"occurrence-cap:{MAX_OCCURRENCES}",
     "cited": CITED.format(line=402, text=f'dry_max_occurrences = {MAX_OCCURRENCES}: "Maximum occurrences DRY '
                                           'scans."')},
    {"name": f"early-exit:{EARLY_EXIT}",
     "cited": CITED.format(line=404, text=f'dry_early_exit_match_len = {EARLY_EXIT}: "DRY early-exit match '
                                           'threshold."')},
    {"name": "base-below-one:refused",
     "cited": CITED.format(line=782, text='"dry_base must be greater than 1."')},
    {"name": "multiplier-negative:refused",
     "cited": CITED.format(line=780, text='"dry_multiplier must be non-negative."')},
    {"name": "allowed-negative:refused",
     "cited": CITED.format(line=784, text='"dry_allowed_length must be non-negative."')},
    {"name": "window-negative:refused",
     "cited": CITED.format(line=786, text='"dry_range must be non-negative."')},
]


def wheel() -> Path:
    """The aphrodite-engine wheel in dryz's cache, fetched once with pip download (not installed)."""
    from ..cache import cache_dir  # on use: the adapter's start-up (run as its own process)
    d = cache_dir() / "engines" / f"aphrodite-{VERSION}"
    found = sorted(d.glob("aphrodite_engine-*.whl"))
    if not found:
        d.mkdir(parents=True, exist_ok=True)
        p = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                            f"aphrodite-engine=={VERSION}", "-d", str(d)], capture_output=True, text=True)
        found = sorted(d.glob("aphrodite_engine-*.whl"))
        if p.returncode or not found:
            raise SystemExit(f"cannot fetch aphrodite-engine=={VERSION}: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return found[-1]


def _run_member(zf, member: str, name: str, path: Path):
    mod = types.ModuleType(name)
    mod.__file__ = f"{path}!/{member}"
    sys.modules[name] = mod  # dataclasses look the module up while its body runs
    exec(compile(zf.read(member).decode(), mod.__file__, "exec"), mod.__dict__)
    return mod


def load(path: Path):
    """(SamplingOps, SamplingMetadata) executed from the wheel, with stand-ins for what they import and do not use."""
    pkgs = ["aphrodite", "aphrodite.v1", "aphrodite.v1.sample", "aphrodite.v1.sample.ops"]
    stubs = {n: types.ModuleType(n) for n in pkgs}
    for n in pkgs:
        stubs[n].__path__ = []
    for n, cls in (("aphrodite.v1.sample.logits_processor", "LogitsProcessors"),
                   ("aphrodite.v1.sample.thinking_budget_state", "ThinkingBudgetStateHolder")):
        stubs[n] = types.ModuleType(n)
        setattr(stubs[n], cls, type(cls, (), {}))

    def unused(*a, **k):
        raise RuntimeError("not loaded by dryz's adapter (only DRY is)")
    for op, fn in (("bad_words", "apply_bad_words"), ("penalties", "apply_all_penalties"), ("epsilon_cutoff", None),
                   ("eta_cutoff", None), ("min_p", None), ("mirostat", None), ("no_repeat_ngram", None),
                   ("quadratic", None), ("skew", None), ("tfs", None), ("top_a", None), ("top_nsigma", None),
                   ("typical_p", None), ("xtc", None)):
        m = types.ModuleType(f"aphrodite.v1.sample.ops.{op}")
        setattr(m, fn or op, unused)
        stubs[m.__name__] = m
    own = ["aphrodite.v1.sample.metadata", "aphrodite.v1.sample.ops.dry", "_dryz_aphrodite_ops"]
    with stand_ins(stubs, own), zipfile.ZipFile(path) as zf:
        meta = _run_member(zf, "aphrodite/v1/sample/metadata.py", own[0], path)
        _run_member(zf, "aphrodite/v1/sample/ops/dry.py", own[1], path)
        ops = _run_member(zf, "aphrodite/v1/sample/ops/__init__.py", own[2], path)
    return ops.SamplingOps, meta.SamplingMetadata


class Adapter:
    def __init__(self):
        import torch
        torch.set_num_threads(1)
        self.torch = torch
        self.path = wheel()
        ops, self.Metadata = load(self.path)
        self.ops = ops()
        self.pieces = symbol_pieces()

    def run(self, req):
        torch = self.torch
        if req["vocab"]["name"] != "symbols":
            raise NotExpressible("the adapter runs dryz's symbol vocabulary")
        p = req["params"]
        m, base, allowed, window = float(p["multiplier"]), float(p["base"]), int(p["allowed_length"]), \
            int(p["penalty_last_n"])
        # SamplingParams._verify_args (sampling_params.py:779-786): what the API answers a user
        if m < 0.0:
            raise Refusal("dry_multiplier must be non-negative.")
        if base <= 1.0:
            raise Refusal("dry_base must be greater than 1.")
        if allowed < 0:
            raise Refusal("dry_allowed_length must be non-negative.")
        if window < 0:
            raise Refusal("dry_range must be non-negative.")
        V = len(self.pieces)
        logits = torch.zeros((1, V), dtype=torch.float32)
        for t, lg in req["candidates"]:
            logits[0, t] = float("-inf") if lg == "-inf" else float(lg)
        if m > 0.0:  # a request enables DRY with a positive multiplier (gpu_input_batch.py)
            breakers = sorted(set().union(*(containing(self.pieces, b) for b in p["breakers"])))
            md = self.metadata(req["history"], m, base, allowed, breakers, window, V)
            logits = engine(self.ops.apply_dry, logits, md)
        return [float(logits[0, t]) for t, _ in req["candidates"]], bool(req["sorted"])

    def metadata(self, history, m, base, allowed, breakers, window, V):
        torch = self.torch
        f32 = lambda x: torch.tensor([x], dtype=torch.float32)  # noqa: E731
        i32 = lambda x: torch.tensor([x], dtype=torch.int32)  # noqa: E731
        md = self.Metadata(
            temperature=None, all_greedy=True, all_random=False, top_p=None, top_k=None, generators={},
            max_num_logprobs=None, no_penalties=True,
            prompt_token_ids=torch.tensor([list(history) or [V]], dtype=torch.long),
            frequency_penalties=torch.zeros(1), presence_penalties=torch.zeros(1), repetition_penalties=torch.ones(1),
            output_token_ids=[[]], allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=None,
            dry_multiplier=f32(m), dry_base=f32(base), dry_allowed_length=i32(allowed),
            dry_sequence_breaker_ids=(torch.tensor([breakers], dtype=torch.long) if breakers
                                      else torch.empty((1, 0), dtype=torch.long)),
            dry_ranges=i32(window), dry_max_ngram=i32(MAX_NGRAM), dry_max_occurrences=i32(MAX_OCCURRENCES),
            dry_early_exit_match_len=i32(EARLY_EXIT))
        md.persistent_data = {}
        md.token_history_ids_cpu = None  # the Python path (DryRequestState)
        return md


def main() -> int:
    from .serve import answers_stream  # on use: the adapter's start-up
    out = answers_stream()
    adapter = Adapter()
    hello = {"engine": "aphrodite", "version": f"{VERSION} ({adapter.path.name})", "deviations": DECLARED,
             "vocabularies": ["symbols"], "initial_logits": True, "candidate_arrays": True, "sorted_flag": False,
             "batch": 64}
    return serve(hello, adapter.run, out)


if __name__ == "__main__":
    sys.exit(main())
