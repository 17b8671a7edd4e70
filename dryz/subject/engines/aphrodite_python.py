"""`--subject engine:aphrodite-python`: Aphrodite 0.24.1's DRY through its Python fallback (DryRequestState and
_compute_dry_penalties, aphrodite/v1/sample/ops/dry.py), the path SamplingOps.apply_dry takes when the metadata
carries no token history (0.24.1's Metal runner); `engine:aphrodite` audits the compiled scan its CUDA runner calls.
One adapter for both: dryz/subject/engines/aphrodite.py."""

import sys

from . import aphrodite
from .aphrodite import main


def make(patch=None):
    """(handshake, run): the Python path's adapter (dryz.subject.engines.aphrodite.make), with a patch."""
    return aphrodite.make("python", patch)


if __name__ == "__main__":
    sys.exit(main("python"))
