"""Driving a subject and judging what it answered: check(case, subject) runs the case on the subject (in an
isolation worker with judge_case/check_in, so a case that kills the subject's process is class crash) and judges
the answer with check_batch on a batch of one (dryz.check). Where the subject has a request layer of its own
(llama-server), the judge asks that layer's model (dryz.oracle.served) what the layer makes of the case and judges
the answer against it. What the oracles take of the subject is plain data (`Semantics`): its init_dry ABI, the
deviations it declares, and the vocabulary a case names as the subject's tokenizer gives it."""

from __future__ import annotations

from functools import lru_cache

from .case import Case
from .check import answer_verdict
from .config import Semantics
from .subject.answers import Crash, Unrecoverable, Unsupported
from .subject.isolation import Worker
from .verdict import Verdict, crash_verdict
from .vocab_cases import vocab_of


@lru_cache(maxsize=16)
def semantics(lib) -> Semantics:
    """The subject's semantics as the oracles take them (plain data), once per subject."""
    return Semantics(lib.kind, lib.abi, tuple(lib.caps.deviations), lib.caps.request_layer,
                     lambda case: vocab_of(case, lib))


def check(case: Case, lib) -> Verdict:
    """Run the case on the subject and judge it: check_batch on a batch of one."""
    return check_answer(case, lib)[0]


def check_answer(case: Case, lib):
    """check(), with what the subject answered: (verdict, answer)."""
    sem = semantics(lib)
    why = lib.caps.lacks(case)
    if why is not None:
        raise Unsupported(f"{sem.kind} subject: {why}")
    out = lib.run(case)
    return judge_output(case, sem, out), out


def judge_output(case: Case, sem: Semantics, out) -> Verdict:
    """The verdict on what the subject answered for the case (its run's Output, Crash, Refused or
    Unrecoverable), on its semantics `sem`. Where the subject has a request layer of its own (llama-server), the
    answer is judged against the case that layer makes of this one (dryz.oracle.served), and each documented
    difference from the library's semantics is its served-* class. Where the subject declares a fix of its
    request layer (dryz.oracle.deviations.REQUEST_LAYER) and the answer is a finding against the layer as shipped,
    it is judged against the layer with the fix: agreeing there, it is class declared-<fix>."""
    if sem.request_layer and not isinstance(out, (Crash, Unrecoverable)):
        from .judge_served import judge_served  # on use: only a subject with a request layer loads its model
        return judge_served(case, sem, out)
    return answer_verdict(case, sem, out)


def answer_op(subject, case: Case):
    """What the subject answers for the case (Output, Crash, Refused, Unrecoverable), as a call an isolation worker
    runs; a case it cannot express raises Unsupported."""
    why = subject.caps.lacks(case)
    if why is not None:
        raise Unsupported(f"{subject.kind} subject: {why}")
    return subject.run(case)


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
