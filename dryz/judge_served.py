"""The judge of a subject with a request layer of its own (llama-server): what the layer makes of the case
(dryz.oracle.served) and the answer judged against that, each documented difference from the library's semantics
its served-* class. dryz.judge.judge_output hands such an answer here; a subject without a request layer never
loads the served model (tests/test_startup.py)."""

from __future__ import annotations

from dataclasses import replace

from .case import Case
from .check import answer_verdict
from .config import Semantics
from .oracle.deviations import REQUEST_LAYER
from .oracle.served import LAYERS, Refused as Predicted, class_of, with_layer_fixes
from .subject.answers import Refused
from .symbols import symbol_bytes
from .verdict import AGREE, Verdict, refused_verdict


def judge_served(case: Case, sem: Semantics, out) -> Verdict:
    """judge_output for a subject with a request layer, on an answer that is not a crash: judged against the case
    that layer makes of this one; where the subject declares a fix of its request layer
    (dryz.oracle.deviations.REQUEST_LAYER) and the answer is a finding against the layer as shipped, it is judged
    against the layer with the fix: agreeing there, it is class declared-<fix>."""
    layer, texts = LAYERS[sem.request_layer], None if case.vocab is not None else symbol_bytes()
    fixes = tuple(d for d in sem.deviations if d in REQUEST_LAYER)
    v, declared = with_layer_fixes(lambda f: _judge_served(case, sem, out, layer(case, texts, fixes=f)), fixes,
                                   lambda w: w.klass)
    if declared:
        v.declared = declared
        v.detail = f"the server ran the case as the fix it declares ({declared.removeprefix('declared-')}) makes it"
    return v


def _judge_served(case: Case, sem: Semantics, out, outcome) -> Verdict:
    """judge_output for a subject with a request layer: a refusal must be the one predicted (its served-*
    class), an answer is judged against the case the layer runs (a served-* class where that differs from the
    library's semantics and the answer agrees with it)."""
    klass = class_of(outcome.classes)
    if isinstance(out, Refused):
        p = outcome.served
        if isinstance(p, Predicted) and (p.status, p.message) == (out.status, out.message) and klass:
            v = refused_verdict(case, f"HTTP {out.status}: {out.message}")
            v.status, v.served = AGREE, klass
            return v
        return refused_verdict(case, f"HTTP {out.status} {out.message!r}; the served model predicts "
                                     f"{outcome.served}")
    if isinstance(outcome.served, Predicted):
        v = refused_verdict(case, f"answered where the served model predicts HTTP {outcome.served.status} "
                                  f"{outcome.served.message!r}")
        return v
    # the answer judged as the library's semantics on the case the layer runs (no request layer of its own)
    v = answer_verdict(outcome.effective_case, replace(sem, request_layer=""), out)
    v.case = case
    if v.klass == AGREE and klass:
        v.served = klass
        v.detail = f"the server ran {outcome.served}"
    return v
