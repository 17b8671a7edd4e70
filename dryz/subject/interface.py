"""What dryz audits: a subject is anything that runs llama.cpp's DRY sampler on a Case.

The oracles never see a subject; `dryz.check` compares what a subject returns with them. A second kind of
subject (another packaging, a remote build) implements this interface and nothing else changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Output:
    """What the sampler left in the candidate array after one apply."""
    ids: tuple[int, ...]
    logits: np.ndarray  # float32, in array order
    sorted: bool
    size: int


class Subject:
    """The interface: identity, one case, a walk of a tree of histories."""

    kind = "abstract"
    abi: int  # llama_sampler_init_dry's argument count (7 since llama.cpp PR #26524, 8 before)

    @property
    def identity(self) -> dict:
        """Path, sha256 of the file mapped, the llama.cpp commit it reports, the init_dry ABI, build facts."""
        raise NotImplementedError

    def label(self) -> str:
        raise NotImplementedError

    def run(self, case) -> Output:
        """A fresh sampler for the case's configuration, its history accepted, one apply on its candidates."""
        raise NotImplementedError

    def walk(self, tree, max_len: int, sampler_args, sink, prefixes=((),)) -> int:
        """Every history of a tree below the prefixes, in batches to sink(n, m, H, logits, cands)
        (dryz.subject.walker.walk for a libllama)."""
        raise NotImplementedError
