"""Other engines' DRY, shipped with dryz, each as one adapter under the adapter protocol (dryz.adapter/1,
dryz.subject.command): `--subject engine:NAME` runs `python -m dryz.subject.engines.NAME` as a `cmd:` subject.

  mistralrs   mistral.rs end to end: a request as a user sends it (ChatCompletionRequest) to a Runner over dryz's
              tiny zero-logit GGUF, its prefix cache off; the penalties read back exactly from log-probabilities
              with logit_bias masking
  mistralrs-cached  the same with the prefix cache on (mistral.rs's default): each case the first request of a
              fresh Runner, a request sequence on one Runner
  exllamav2   exllamav2's ExLlamaV2Sampler.apply_dry with its own Settings, on CPU (the CUDA extension not loaded)
  aphrodite   Aphrodite's DRY (SamplingOps.apply_dry with the metadata its CUDA runner's input batch builds: the
              compiled scan torch.ops._C.dry_scan_penalties) executed from the engine's wheel, fetched once with pip
              download (AGPL-3.0: loaded at run time, never copied)
  aphrodite-python  the same, through apply_dry's Python fallback (DryRequestState: no token history in the
              metadata, as Aphrodite's Metal runner builds it)

An engine whose DRY dryz executes from its source (exllamav2, Aphrodite's Python fallback) takes a patch to it:
`--subject engine:NAME+patch=FILE` (dryz.subject.engines.patching); `dryz gate` judges the patched engine against
the unpatched one by their causes. A compiled DRY (mistral.rs, Aphrodite's wheel op) cannot be rebuilt here.

Each adapter declares only the deviations its engine's own user documentation states, with the citation; every
other difference is judged as a finding. The engine packages are extras: pip install 'dryz[NAME]'.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class Engine:
    name: str
    module: str          # the adapter: python -m MODULE
    requires: tuple      # importable packages it needs
    extra: str           # pip install 'dryz[EXTRA]'
    version: str         # the engine release dryz pins and cites
    # The adapter runs in a fuzz job's own process too (its module's make(): the same handshake and answers, no
    # pipe; dryz.subject.command.InProcessEngine): an engine in Python whose state survives the fork server's fork.
    in_process: bool = False
    patchable: tuple = ()  # the files of its DRY a patch may change (+patch=FILE: dryz.subject.engines.patching)
    compiled: str = ""     # why its DRY takes no patch: it is compiled, and dryz cannot rebuild it

    def missing(self) -> str | None:
        """Why the adapter cannot start here (a package to install), or None."""
        gone = [p for p in self.requires if importlib.util.find_spec(p) is None]
        if gone:
            return (f"engine:{self.name} needs {', '.join(gone)} ({self.name} {self.version}): "
                    f"pip install 'dryz[{self.extra}]'")
        return None


ENGINES = {
    "mistralrs": Engine("mistralrs", "dryz.subject.engines.mistralrs", ("mistralrs", "gguf"), "mistralrs", "0.9.5",
                        compiled="its DRY is Rust compiled into the mistralrs wheel, which dryz cannot rebuild"),
    "mistralrs-cached": Engine("mistralrs-cached", "dryz.subject.engines.mistralrs_cached", ("mistralrs", "gguf"),
                               "mistralrs", "0.9.5",
                               compiled="its DRY is Rust compiled into the mistralrs wheel, which dryz cannot rebuild"),
    "exllamav2": Engine("exllamav2", "dryz.subject.engines.exllamav2", ("exllamav2", "torch"), "exllamav2", "0.3.2",
                        in_process=True, patchable=("exllamav2/generator/sampler.py",)),
    "aphrodite": Engine("aphrodite", "dryz.subject.engines.aphrodite", ("torch", "nvidia"), "aphrodite", "0.24.1",
                        in_process=True,
                        compiled="its scan is the CUDA wheel's compiled op (csrc/cpu/dry.cpp), which dryz cannot "
                                 "rebuild: patch its Python fallback, engine:aphrodite-python"),
    "aphrodite-python": Engine("aphrodite-python", "dryz.subject.engines.aphrodite_python", ("torch",), "aphrodite",
                               "0.24.1", in_process=True,
                               patchable=("aphrodite/v1/sample/ops/dry.py", "aphrodite/v1/sample/ops/__init__.py",
                                          "aphrodite/v1/sample/metadata.py")),
}
