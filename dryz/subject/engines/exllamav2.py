"""dryz's adapter for exllamav2 (pip install 'dryz[exllamav2]'): `--subject engine:exllamav2`.

exllamav2's DRY is `ExLlamaV2Sampler.apply_dry(settings, tokenizer, sequence_ids, logits)` in the installed
exllamav2/generator/sampler.py (Python + torch). Importing that module imports exllamav2's package, its filters and
`exllamav2.ext`, which builds or loads the CUDA extension; apply_dry needs none of them, so the installed file is
executed unmodified under a private name with stand-ins for those imports, placed in sys.modules only while its
body runs. Each request runs on a fresh `ExLlamaV2Sampler.Settings` (the engine keeps DRY's trie in it), with the
engine's own defaults for what llama.cpp has no parameter for (dry_max_ngram 20), as the generator calls it: only
when dry_multiplier > 0 (sampler.py:433), on the whole sequence (prompt and generated), on a float32 logits row.

The request's parameters are passed by their documented meaning: dry_multiplier, dry_base, dry_allowed_length,
dry_range = penalty_last_n ("dry_range: int = 0  # 0 for unlimited reange"), and the breaker strings as the token
ids whose pieces contain them (dry_sequence_breakers is a set of token ids, sampler.py:89; containment is how
exllamav2 builds its own default set, get_dry_default_sequence_breaker_tokens).

Declared (exllamav2/generator/sampler.py of 0.3.2, the public Settings dataclass): breakers are token ids (one
token each: single-token-breakers), and dry_range 0 is unlimited (window-zero:unlimited). Nothing else is declared:
what only the code does is judged as a finding.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import numpy as np

from .serve import NotExpressible, containing, engine, initial_logits, stand_ins, symbol_pieces

VERSION = "0.3.2"
CITED = "exllamav2 0.3.2, exllamav2/generator/sampler.py:{line}, ExLlamaV2Sampler.Settings (the public API): {text}"
DECLARED = [
    {"name": "single-token-breakers",
     "cited": CITED.format(line=89, text="dry_sequence_breakers: set[int] | None = None (breakers are token ids)")},
    {"name": "window-zero:unlimited",
     "cited": CITED.format(line=90, text="dry_range: int = 0  # 0 for unlimited reange")},
]


SRC = "exllamav2/generator/sampler.py:{line} (0.3.2): {text}"
# The engine's code behind each deviation model dryz may fit (dryz.causes): what the conformance page cites.
SOURCES = [
    {"name": "last-follower:unseen", "source": SRC.format(line=210, text="seq_len = max(len(sequence_list) - 1, 0): "
                                                           "the n-gram trie is built without the last token")},
    {"name": "suffix:longest-only", "source": SRC.format(line=253, text="for i in range(beg, end): ... else: "
                                                          "penalty_tokens = node.children; break (the first, longest "
                                                          "suffix found)")},
    {"name": "penalty:times-count", "source": SRC.format(line=271, text="penalty * node.value for node in "
                                                          "penalty_tokens.values()")},
    {"name": "suffix-cap:N", "source": SRC.format(line=217, text="for j in range(i, min(i + settings.dry_max_ngram, "
                                                   "seq_len)): n-grams of at most dry_max_ngram = 20 tokens")},
    {"name": "window:one-wider", "source": SRC.format(line=214, text="new_beg = max(new_beg, new_end - "
                                                       "settings.dry_range), new_end = len(sequence) - 1")},
    {"name": "raises-window:N", "source": SRC.format(line=232, text="assert settings.dry_range > "
                                                      "settings.dry_max_ngram")},
    {"name": "raises-history:N", "source": SRC.format(line=234, text="while settings.ngram_history[0] < tail_index: "
                                                       "an empty deque when one token was seen")},
    {"name": "base-below-one:applied", "source": SRC.format(line=270, text="penalty = -settings.dry_multiplier * "
                                                             "settings.dry_base ** exc_length (base not checked)")},
    {"name": "multiplier-negative:off", "source": SRC.format(line=433, text="if settings.dry_multiplier > 0.0: "
                                                              "apply_dry")},
    {"name": "no-clamp", "source": SRC.format(line=270, text="settings.dry_base ** exc_length (no exponent clamp)")},
    {"name": "raises-overflow", "source": SRC.format(line=270, text="settings.dry_base ** exc_length: Python's float "
                                                      "power raises OverflowError past the largest double")},
]
# exllamav2's generator refuses an empty sequence (its jobs start from the prompt's ids): histories of one token or more
DOMAIN = {"min_history": 1, "cited": 'exllamav2/generator/dynamic.py:1718 (0.3.2): assert ids.shape[-1] > 0, '
                                      '"Input IDs cannot be empty."'}


def sampler_module(patch=None):
    """The installed exllamav2/generator/sampler.py as a module, without exllamav2's package or CUDA extension;
    patch: a patching.Patched applied to its source as it is loaded (engine:exllamav2+patch=FILE)."""
    import torch
    spec = importlib.util.find_spec("exllamav2")
    path = Path(spec.submodule_search_locations[0]) / "generator" / "sampler.py"
    source = path.read_text()
    if patch is not None:
        source = patch.source(MEMBER, source)
        patch.done()
    names = ("exllamav2", "exllamav2.generator", "exllamav2.generator.filters", "exllamav2.generator.hooks",
             "exllamav2.ext")
    stubs = {n: types.ModuleType(n) for n in names}
    stubs["exllamav2"].__path__ = []
    stubs["exllamav2.generator"].__path__ = []
    stubs["exllamav2"].ExLlamaV2Tokenizer = type("ExLlamaV2Tokenizer", (), {})
    stubs["exllamav2.generator.filters"].ExLlamaV2Filter = type("ExLlamaV2Filter", (), {})
    stubs["exllamav2.generator.hooks"].ExLlamaV2PostSamplingHook = object

    class _NoExtension:
        def __getattr__(self, name):
            raise RuntimeError(f"exllamav2_ext.{name}: the CUDA extension is not loaded by dryz's adapter")

    stubs["exllamav2.ext"].exllamav2_ext = _NoExtension()
    stubs["exllamav2.ext"].none_tensor = torch.empty((1, 1), device="meta")
    with stand_ins(stubs):
        mod = types.ModuleType("_dryz_exllamav2_sampler")
        mod.__file__ = str(path)
        sys.modules[mod.__name__] = mod  # dataclasses resolve annotations through sys.modules[__module__]
        exec(compile(source, str(path), "exec"), mod.__dict__)
    return mod


MEMBER = "exllamav2/generator/sampler.py"  # the file a patch changes (ENGINES["exllamav2"].patchable)


class Tokenizer:
    """What apply_dry reads of an ExLlamaV2Tokenizer: actual_vocab_size (ids at or past it break n-grams)."""

    def __init__(self, pieces):
        self.pieces = list(pieces)
        self.actual_vocab_size = len(self.pieces)
        self.extended_id_to_piece = {}

    def get_id_to_piece_list(self, include_special_tokens=False):
        return list(self.pieces)


class Adapter:
    def __init__(self, patch=None):
        import torch
        torch.set_num_threads(1)
        self.torch = torch
        self.sampler = sampler_module(patch).ExLlamaV2Sampler
        self.pieces = symbol_pieces()
        self.tokenizer = Tokenizer(self.pieces)

    def run(self, req):
        torch = self.torch
        if req["vocab"]["name"] != "symbols":
            raise NotExpressible("the adapter runs dryz's symbol vocabulary")
        p = req["params"]
        s = self.sampler.Settings()
        s.dry_multiplier, s.dry_base = float(p["multiplier"]), float(p["base"])
        s.dry_allowed_length, s.dry_range = int(p["allowed_length"]), int(p["penalty_last_n"])
        s.dry_sequence_breakers = set().union(*(containing(self.pieces, b) for b in p["breakers"]))
        # (tensors over numpy arrays: torch.tensor of a list cost a fuzz job's exec more than the rest of this call)
        logits = torch.from_numpy(np.array(initial_logits(req, len(self.pieces)), dtype=np.float32)).view(1, 1, -1)
        if s.dry_multiplier > 0.0:  # the engine's own condition (ExLlamaV2Sampler.sample)
            ids = torch.from_numpy(np.array(req["history"], dtype=np.int64)).view(1, -1)
            engine(self.sampler.apply_dry, s, self.tokenizer, ids, logits)
        row = logits[0, 0].tolist()
        return [row[t] for t, _ in req["candidates"]], bool(req["sorted"])


def hello(patch=None) -> dict:
    from importlib.metadata import version  # on use: the adapter's start-up
    return {"engine": "exllamav2", "version": version("exllamav2") + (patch.label() if patch else ""),
            "deviations": DECLARED, "sources": SOURCES,
            "domain": DOMAIN,
            "vocabularies": ["symbols"], "initial_logits": True, "candidate_arrays": True, "sorted_flag": False,
            "batch": 64}


def make(adapter_class=None, patch: str | None = None):
    """(handshake, run): the adapter, in whatever process asks (the adapter's own, or a fuzz job's); patch: a patch
    file applied to sampler.py as it is loaded (engine:exllamav2+patch=FILE; patching.PatchError when it does
    not apply)."""
    from .patching import Patched  # on use: the adapter's start-up
    p = Patched(patch, (MEMBER,), "exllamav2")
    adapter = (adapter_class or Adapter)(p) if patch else (adapter_class or Adapter)()
    return hello(p if patch else None), adapter.run


def main(adapter_class=None) -> int:
    """The adapter's process (adapter_class: an Adapter of one's own, e.g. a test's planted bug)."""
    from .patching import adapter_main  # on use: the adapter's start-up
    return adapter_main(make, "exllamav2", adapter_class)


if __name__ == "__main__":
    sys.exit(main())
