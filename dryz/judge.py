"""Driving a subject and judging what it answered: check(case, subject) runs the case on the subject (in an
isolation worker with judge_case/check_in, so a case that kills the subject's process is class crash) and judges
the answer with check_batch on a batch of one (dryz.check). Where the subject has a request layer of its own
(llama-server), the judge asks that layer's model (dryz.oracle.served) what the layer makes of the case and judges
the answer against it. What the oracles take of the subject is plain data (`Semantics`): its init_dry ABI, the
deviations it declares, and the vocabulary a case names as the subject's tokenizer gives it."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from .case import Case
from .check import answer_verdict
from .config import Semantics
from .oracle.deviations import REQUEST_LAYER
from .oracle.served import LAYERS, Refused as Predicted, class_of, with_layer_fixes
from .subject.answers import Crash, Refused, Unrecoverable, Unsupported
from .subject.isolation import Worker
from .symbols import symbol_bytes
from .verdict import AGREE, Verdict, crash_verdict, refused_verdict
from .vocab_cases import vocab_of


@lru_cache(maxsize=16)
def semantics(lib) -> Semantics:
    """The subject's semantics as the oracles take them (plain data), once per subject."""
    return Semantics(lib.kind, lib.abi, tuple(lib.caps.deviations), lib.caps.request_layer,
                     lambda case: vocab_of(case, lib))


def check(case: Case, lib) -> Verdict:
    """Run the case on the subject and judge it: check_batch on a batch of one."""
    sem = semantics(lib)
    why = lib.caps.lacks(case)
    if why is not None:
        raise Unsupported(f"{sem.kind} subject: {why}")
    out = lib.run(case)
    return judge_output(case, sem, out)


def judge_output(case: Case, sem: Semantics, out) -> Verdict:
    """The verdict on what the subject answered for the case (its run's Output, Crash, Refused or
    Unrecoverable), on its semantics `sem`. Where the subject has a request layer of its own (llama-server), the
    answer is judged against the case that layer makes of this one (dryz.oracle.served), and each documented
    difference from the library's semantics is its served-* class. Where the subject declares a fix of its
    request layer (dryz.oracle.deviations.REQUEST_LAYER) and the answer is a finding against the layer as shipped,
    it is judged against the layer with the fix: agreeing there, it is class declared-<fix>."""
    if sem.request_layer and not isinstance(out, (Crash, Unrecoverable)):
        layer, texts = LAYERS[sem.request_layer], None if case.vocab is not None else symbol_bytes()
        fixes = tuple(d for d in sem.deviations if d in REQUEST_LAYER)
        v, declared = with_layer_fixes(lambda f: _judge_served(case, sem, out, layer(case, texts, fixes=f)), fixes,
                                       lambda w: w.klass)
        if declared:
            v.declared = declared
            v.detail = f"the server ran the case as the fix it declares ({declared.removeprefix('declared-')}) makes it"
        return v
    return answer_verdict(case, sem, out)


def check_op(subject, case: Case) -> Verdict:
    """check() as a call an isolation worker runs (dryz.subject.isolation: fn(subject, *args))."""
    return check(case, subject)


def judge_case(case: Case, lib, isolate: bool = True) -> Verdict:
    """check(case, lib), in an isolation worker unless isolate is False: a case that kills or hangs the
    subject's process is class crash, with the signal and the library's last words."""
    if not isolate:
        return check(case, lib)
    with Worker(lib.spec, lib) as w:
        return check_in(w, case)


def case_report(case: Case, kind: str, lib, isolate: bool = True) -> dict:
    """What `dryz check` prints for a case (judge_case on the subject): the input's kind, the case, the verdict
    and the subject."""
    v = judge_case(case, lib, isolate)
    return {"input": kind, "case": case.to_json(), "verdict": v.to_json(), "subject": lib.identity}


def check_in(worker, case: Case) -> Verdict:
    """check() in an isolation worker (another process holding the subject): a case that kills or hangs the
    subject's process is a verdict of class crash."""
    out = worker.call(check_op, case)
    return crash_verdict(case, out) if isinstance(out, Crash) else out


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
    v = judge_output(outcome.effective_case, replace(sem, request_layer=""), out)
    v.case = case
    if v.klass == AGREE and klass:
        v.served = klass
        v.detail = f"the server ran {outcome.served}"
    return v
