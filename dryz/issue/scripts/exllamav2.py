"""exllamav2's part of a reproduction script: ExLlamaV2Sampler.apply_dry with a fresh ExLlamaV2Sampler.Settings,
as its generator calls it (only when dry_multiplier > 0, on the whole sequence, a float32 logits row); the
breaker strings as the ids of the tokens whose pieces contain them (exllamav2's own rule for its default set)."""

NAME = "exllamav2"
INSTALL = ("pip install exllamav2==0.3.2",)
HOW = ("It calls ExLlamaV2Sampler.apply_dry with a fresh ExLlamaV2Sampler.Settings, as the generator does (only "
       "when dry_multiplier > 0), on a logits row of the 64 one-character tokens; on a machine without CUDA, "
       "where importing exllamav2 fails on its extension, the installed exllamav2/generator/sampler.py is executed "
       "unmodified with empty stand-ins for the imports apply_dry does not use.")
ISOLATE = False
IMPORTS = """
import importlib.util
import types
from pathlib import Path

import torch
"""

BODY = '''

def sampler():
    """ExLlamaV2Sampler: imported where exllamav2's CUDA extension loads, else its installed file executed as is."""
    if torch.cuda.is_available():
        from exllamav2.generator.sampler import ExLlamaV2Sampler
        return ExLlamaV2Sampler
    path = Path(importlib.util.find_spec("exllamav2").submodule_search_locations[0]) / "generator" / "sampler.py"
    names = ("exllamav2", "exllamav2.generator", "exllamav2.generator.filters", "exllamav2.generator.hooks",
             "exllamav2.ext")
    stand_in = {n: types.ModuleType(n) for n in names}
    stand_in["exllamav2"].__path__ = stand_in["exllamav2.generator"].__path__ = []
    stand_in["exllamav2"].ExLlamaV2Tokenizer = type("ExLlamaV2Tokenizer", (), {})
    stand_in["exllamav2.generator.filters"].ExLlamaV2Filter = type("ExLlamaV2Filter", (), {})
    stand_in["exllamav2.generator.hooks"].ExLlamaV2PostSamplingHook = object
    stand_in["exllamav2.ext"].exllamav2_ext = None
    stand_in["exllamav2.ext"].none_tensor = torch.empty((1, 1), device="meta")
    sys.modules.update(stand_in)
    module = types.ModuleType("exllamav2_generator_sampler")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return module.ExLlamaV2Sampler


class Tokenizer:
    """What apply_dry reads of an ExLlamaV2Tokenizer."""
    actual_vocab_size = len(SYMBOLS)
    extended_id_to_piece = {}

    def get_id_to_piece_list(self, include_special_tokens=False):
        return list(SYMBOLS)


def answer():
    S = sampler()
    s = S.Settings()
    s.dry_multiplier, s.dry_base, s.dry_allowed_length, s.dry_range = MULTIPLIER, BASE, ALLOWED_LENGTH, PENALTY_LAST_N
    s.dry_sequence_breakers = {i for i, p in enumerate(SYMBOLS) for b in BREAKERS if b and b in p}
    logits = torch.zeros((1, 1, len(SYMBOLS)), dtype=torch.float32)
    for t, before in CANDIDATES:
        logits[0, 0, t] = before
    try:
        if s.dry_multiplier > 0.0:  # the generator's own condition (ExLlamaV2Sampler.sample)
            S.apply_dry(s, Tokenizer(), torch.tensor([HISTORY], dtype=torch.long), logits)
    except Exception as e:  # noqa: BLE001 (what the engine raises is its answer)
        return ("raised", f"{type(e).__name__}: {e}")
    return ("logits", [float(logits[0, 0, t]) for t, _ in CANDIDATES])
'''


def refuses(w) -> str | None:
    """Why the witness cannot be run with exllamav2 alone, or None."""
    if w.trace is not None:
        return "a trace: exllamav2's DRY has no reset or clone (each request a fresh Settings)"
    return None
