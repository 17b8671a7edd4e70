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


@dataclass
class Outputs:
    """What many applies left, flat (the C sequencer's form): every apply's ids (int32) and logits (float32)
    concatenated, each apply's size (int32), start in the concatenation (int64) and sorted flag (bool)."""
    ids: np.ndarray
    logits: np.ndarray
    sizes: np.ndarray
    sorted: np.ndarray
    starts: np.ndarray

    @classmethod
    def of_buffers(cls, ids: bytes, logits: bytes, sizes: bytes, sorted_flags: bytes) -> "Outputs":
        sz = np.frombuffer(sizes, dtype=np.int32)
        starts = np.zeros(len(sz), dtype=np.int64)
        np.cumsum(sz[:-1], out=starts[1:])
        return cls(np.frombuffer(ids, dtype=np.int32), np.frombuffer(logits, dtype=np.float32), sz,
                   np.frombuffer(sorted_flags, dtype=np.bool_), starts)

    @classmethod
    def of(cls, outs) -> "Outputs":
        """The flat form of a list of Output."""
        sizes = np.array([len(o.ids) for o in outs], dtype=np.int32)
        starts = np.zeros(len(outs), dtype=np.int64)
        np.cumsum(sizes[:-1], out=starts[1:])
        ids = np.array([t for o in outs for t in o.ids], dtype=np.int32)
        logits = (np.concatenate([np.asarray(o.logits, dtype=np.float32).reshape(-1) for o in outs]) if outs
                  else np.zeros(0, dtype=np.float32))
        return cls(ids, logits, sizes, np.array([bool(o.sorted) for o in outs], dtype=np.bool_), starts)

    def __len__(self) -> int:
        return len(self.sizes)

    def output(self, i: int) -> Output:
        a, n = int(self.starts[i]), int(self.sizes[i])
        return Output(tuple(self.ids[a:a + n].tolist()), self.logits[a:a + n].copy(), bool(self.sorted[i]), n)

    def outputs(self) -> list[Output]:
        return [self.output(i) for i in range(len(self))]


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

    def run_batch(self, cases) -> list[Output]:
        """run() of every case, in order."""
        return [self.run(c) for c in cases]

    def run_trace(self, trace) -> list[Output]:
        """One sampler through the trace's events (dryz/trace.py): the Output of every apply, in order."""
        raise NotImplementedError

    def walk(self, tree, max_len: int, sampler_args, sink, prefixes=((),)) -> int:
        """Every history of a tree below the prefixes, in batches to sink(n, m, H, logits, cands)
        (dryz.subject.walker.walk for a libllama)."""
        raise NotImplementedError
