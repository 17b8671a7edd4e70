"""Driving a subject and judging what it answered: check(case, subject) runs the case on the subject (in an
isolation worker with judge_case/check_in, so a case that kills the subject's process is class crash) and judges
the answer with check_batch on a batch of one (dryz.check). Where the subject has a request layer of its own
(llama-server), the judge asks that layer's model (dryz.oracle.served) what the layer makes of the case and judges
the answer against it. What the oracles take of the subject is plain data (`Semantics`): its init_dry ABI, the
deviations it declares, and the vocabulary a case names as the subject's tokenizer gives it."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .case import Case, json_number
from .check import DECLARED, Batch, _bits, case_arrays, invert_deltas
from .config import case_config
from .oracle.served import LAYERS, Refused as Predicted, class_of
from .subject.answers import Crash, Refused, Unrecoverable, Unsupported
from .subject.isolation import Worker
from .symbols import symbol_bytes
from .verdict import AGREE, MISMATCH, ORACLE_DISAGREEMENT, Verdict, crash_verdict, refused_verdict
from .vocab_cases import vocab_of


@dataclass(frozen=True)
class Semantics:
    """What the judge takes of a subject for the oracles, as plain data: the subject's kind (for messages), its
    init_dry ABI, the deviations it declares, its request layer ("" when DRY runs what the case says), and
    `vocabulary(case)`, the loaded vocabulary a real-vocabulary case names, as the subject's tokenizer gives it."""
    kind: str
    abi: int = 7
    deviations: tuple = ()
    request_layer: str = ""
    vocabulary: object = None  # case -> the loaded vocabulary (dryz.vocab_cases.vocab_of on the subject)

    @classmethod
    def of(cls, lib) -> "Semantics":
        caps = lib.caps
        return cls(lib.kind, lib.abi, tuple(caps.deviations), caps.request_layer, lambda case: vocab_of(case, lib))

    def config(self, case: Case):
        """The oracles' configuration for the case (dryz.config.case_config), on this subject's semantics."""
        return case_config(case, self.abi, self.deviations,
                           self.vocabulary(case) if case.vocab is not None and self.vocabulary else None)


def check(case: Case, lib) -> Verdict:
    """Run the case on the subject and judge it: check_batch on a batch of one."""
    why = lib.caps.lacks(case)
    if why is not None:
        raise Unsupported(f"{lib.kind} subject: {why}")
    return judge_output(case, Semantics.of(lib), lib.run(case))


def judge_output(case: Case, sem: Semantics, out) -> Verdict:
    """The verdict on what the subject answered for the case (its run's Output, Crash, Refused or
    Unrecoverable), on its semantics `sem`. Where the subject has a request layer of its own (llama-server), the
    answer is judged against the case that layer makes of this one (dryz.oracle.served), and each documented
    difference from the library's semantics is its served-* class."""
    if isinstance(out, Crash):
        return crash_verdict(case, out)
    if isinstance(out, Unrecoverable):
        raise Unsupported(f"{sem.kind} subject: what DRY did cannot be read back exactly: {out.detail}")
    if sem.request_layer:
        outcome = LAYERS[sem.request_layer](case, None if case.vocab is not None else symbol_bytes())
        return _judge_served(case, sem, out, outcome)
    if isinstance(out, Refused):
        return refused_verdict(case, f"the subject refused the case (HTTP {out.status}: {out.message}); its "
                                     "semantics say nothing about refusing it")
    cfg = sem.config(case)
    cands, H = case_arrays(case)
    initial = np.array(case.logits, dtype=np.float32)
    if out.size != len(cands) or out.ids != case.ids:
        b = Batch(cfg, H, cands, np.zeros((1, len(cands)), dtype=np.float32), initial, case.sorted)
        v = _verdict(case, b, out.logits, out.sorted)
        # DRY only changes logits: a changed array is the library's doing (reading it is checked at load).
        v.status, v.detail = MISMATCH, "the sampler changed the candidate array's size or ids"
        v.differing.append({"id": -1, "expected": "unchanged ids and size", "observed": "changed",
                            "direction": "array"})
        return v
    b = Batch(cfg, H, cands, out.logits.reshape(1, -1), initial, case.sorted,  # float32 C order
              None if out.sorted is None else (out.sorted,))  # None: a subject without the flag
    v = _verdict(case, b, out.logits, out.sorted)
    if case.invertible():
        L, bad = invert_deltas(-out.logits)
        # None: not 0 nor 2^(L-1) (past the float range, or not a power of two at all); the bit-exact
        # comparison judges it.
        v.library_L = [None if x else int(y) for y, x in zip(L, bad)]
    status = b.row_status(0)
    if status == DECLARED:
        v.declared = b.declared[0]
        v.detail = f"the output differs from llama.cpp's model as the deviation the subject declares: {v.declared}"
        return v
    if status == ORACLE_DISAGREEMENT:
        v.status, v.detail = status, "oracles A and B disagree; the library is not judged"
    elif status == MISMATCH:
        v.status = MISMATCH
        expected = v.expected_array
        diff = np.not_equal(_bits(out.logits), _bits(expected))  # a ufunc: see the note in oracle/lengths.py
        for i in np.nonzero(diff)[0]:
            obs, exp = float(out.logits[i]), float(expected[i])
            # Lower logit than expected = the library penalized more.
            direction = "more" if obs < exp or (math.isnan(exp) and not math.isnan(obs)) else "less"
            v.differing.append({"id": int(cands[i]), "expected": json_number(exp), "observed": json_number(obs),
                                "direction": direction})
        if v.differing:
            v.detail = f"{int(diff.sum())} candidate logit(s) differ from the exact model"
        else:
            v.detail = f"sorted flag {out.sorted}, expected {v.expected_sorted}"
            v.differing.append({"id": -1, "expected": v.expected_sorted, "observed": out.sorted,
                                "direction": "sorted"})
    else:
        v.broken_promises = b.promises(0)
        if v.broken_promises:
            v.detail = "the shipped output agrees with the model but breaks: " + ", ".join(v.broken_promises)
    return v


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


def _verdict(case: Case, b: Batch, observed: np.ndarray, observed_sorted: bool) -> Verdict:
    return Verdict(case=case, status=AGREE, oracle_L_array=b.pa.L[0],
                   other_L_arrays=tuple(p.L[0] for p in b.preds[1:]), expected_array=b.expected[0], observed_array=observed,
                   expected_sorted=b.row_sorted(0), observed_sorted=observed_sorted,
                   multi_token=b.cfg.multi_token)
