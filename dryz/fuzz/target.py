"""The fuzz target's logic (the harness in fuzz/ only wires it to atheris)."""

from __future__ import annotations

import os

from ..check import AGREE, check
from .decode import decode


class Finding(Exception):
    """A verdict that is neither agreement nor a documented class: libFuzzer keeps the input."""


def known_classes() -> frozenset[str]:
    """Classes documented by a corpus entry (expect != agree) are known findings, not new ones."""
    from ..corpus import DEFAULT_DIR, CorpusError, entries, load_entry
    d = os.environ.get("DRYZ_CORPUS", str(DEFAULT_DIR))
    out = set()
    try:
        for p in entries(d):
            try:
                e = load_entry(p)
            except CorpusError:
                continue
            if e.expect != AGREE:
                out.add(e.expect)
    except CorpusError:
        pass
    return frozenset(out)


KNOWN = known_classes()


def load_subject() -> None:
    from ..check import subject
    subject()


def test_one_input(data: bytes) -> None:
    case = decode(data)
    v = check(case)
    if v.klass != AGREE and v.klass not in KNOWN:
        raise Finding(f"{v.klass}: {v.detail}\n{case.dumps()}")
