"""A request sequence (dryz.requests) judged: its requests sent in turn to one fresh instance of the subject
(Subject.run_sequence, in an isolation worker: a sequence that kills the subject's process is class crash for each
request), and each request judged on its own (judge.judge_output), as llama.cpp's semantics make requests
independent. The sequence's class is its first request's class that is a finding (else agree); a request the
subject cannot express or whose answer cannot be read back is not judged, with why."""

from __future__ import annotations

from dataclasses import dataclass, field

from .judge import judge_output, semantics
from .requests import Requests
from .subject.answers import Crash, Unsupported
from .subject.isolation import Worker
from .verdict import AGREE, crash_verdict, is_finding


@dataclass
class RequestsVerdict:
    """Per request its verdict (or why it is not judged), and the sequence's class."""
    requests: Requests
    verdicts: list                       # per request: a Verdict, or None (not judged)
    answers: list                        # per request: what the subject answered
    not_judged: dict = field(default_factory=dict)  # request index -> why

    @property
    def klass(self) -> str:
        return next((v.klass for v in self.verdicts if v is not None and is_finding(v.klass)), AGREE)

    def to_json(self) -> dict:
        return {"class": self.klass, "requests": [
            {"request": i + 1, "not_judged": self.not_judged[i]} if v is None else {"request": i + 1, **v.to_json()}
            for i, v in enumerate(self.verdicts)]}


def sequence_op(subject, requests: Requests) -> list:
    """What the subject answers for each request of the sequence, as a call an isolation worker runs; a sequence it
    cannot run (no sequences capability, a request it cannot express) raises Unsupported."""
    why = subject.runs_sequences() or next(filter(None, map(subject.caps.lacks, requests.requests)), None)
    if why is not None:
        raise Unsupported(f"{subject.kind} subject: {why}")
    return subject.run_sequence(requests)


def judge_answers(requests: Requests, answers: list, sem) -> RequestsVerdict:
    """Each request's answer judged on its own, on the subject's semantics."""
    verdicts, why = [], {}
    for i, (case, out) in enumerate(zip(requests.requests, answers)):
        try:
            verdicts.append(crash_verdict(case, out) if isinstance(out, Crash) else judge_output(case, sem, out))
        except Unsupported as e:
            verdicts.append(None)
            why[i] = str(e)
    return RequestsVerdict(requests, verdicts, list(answers), why)


def answers_in(worker, requests: Requests) -> list:
    """Every request's answer from the subject in an isolation worker (a Crash for each where the worker died)."""
    out = worker.call(sequence_op, requests)
    return [out] * len(requests) if isinstance(out, Crash) else out


def check_requests_in(worker, subject, requests: Requests) -> RequestsVerdict:
    return judge_answers(requests, answers_in(worker, requests), semantics(subject))


def check_requests(requests: Requests, subject, isolate: bool = True) -> RequestsVerdict:
    """The sequence on the subject, judged (in an isolation worker unless isolate is False)."""
    if not isolate:
        return judge_answers(requests, sequence_op(subject, requests), semantics(subject))
    with Worker(subject.spec, subject) as w:
        return check_requests_in(w, subject, requests)


def requests_report(requests: Requests, kind: str, subject, isolate: bool = True) -> dict:
    """What `dryz check` prints for a request sequence: the input's kind, the sequence, the verdict per request and
    the subject."""
    v = check_requests(requests, subject, isolate)
    return {"input": kind, "requests": requests.to_json(), "verdict": v.to_json(), "subject": subject.identity}
