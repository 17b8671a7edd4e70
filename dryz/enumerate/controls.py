"""The controls every exhaustive run carries: multiplier 0 (negative: every logit untouched), the periodic
closed forms and the ABI confirmation case (the oracles must reproduce them, else the harness is in doubt; the
library must too, else a finding). The off-by-one reference is check_batch's own (Batch.flagged), counted by
every tally."""

from __future__ import annotations

import numpy as np

from ..case import Case
from ..space import PlainSpace, space_for
from ..oracle import verdict_keys
from ..subject.answers import SubjectCrashed, Unsupported


def multiplier_zero_control(lib, k, max_len: int, specs, canonical: bool = False) -> dict:
    """Negative control: with multiplier 0 the sampler must leave every logit at exactly 0 (walked over the
    same tree as the run: plain, or canonical with k None for every alphabet size). A subject that crashes on
    it (SubjectCrashed from a walk through its protocol) is answered as that Crash."""
    nonzero = 0
    cases = 0
    not_judged = 0

    def sink(n, m, H, logits, cands):
        nonlocal nonzero, cases
        nonzero += int(np.count_nonzero(logits))
        cases += logits.size

    def skipped(n, m, H, why):  # histories the subject cannot express: counted, not judged
        nonlocal not_judged
        not_judged += len(H)
    sink.not_judged = skipped
    for spec in specs:
        space = space_for(spec, k, max_len) if canonical else PlainSpace(k, max_len)
        try:
            lib.walk(space, max_len, (0.0,) + spec.sampler_args()[1:], sink)
        except SubjectCrashed as e:
            return e.crash
    out = {"max_length": max_len, "cases": cases, "nonzero_deltas": nonzero}
    if not_judged:
        out["not_judged_histories"] = not_judged
    if canonical:
        out["canonical"] = True
    out["passed"] = nonzero == 0 and cases > 0
    return out


PERIODIC_CONTROLS = ((1, 6, None), (2, 9, None), (3, 11, None), (3, 11, 4), (2, 10, 5), (5, 23, None),
                     (7, 40, 20))


def periodic_control(check_fn) -> dict:
    """A history (0 1 .. p-1) repeated to length n; with window W (or none), the next symbol in the period has
    L = min(n, W) - p, every other symbol 0. Two checks in one: both oracles must give the closed form (a
    harness check: if they do not, the run is void), and so must the library (a check of the subject: if it
    does not, that is a finding, with the case printed and counted like any mismatch). The off-by-one
    reference must flag every one of these cases' penalized candidates (non-vacuity that no space can lack).
    check_fn(case) -> Verdict: check() on the subject (in an isolation worker: a crash is a finding); a case the
    subject cannot express (Unsupported) is a row marked not judged."""
    rows, findings = [], []
    oracles_ok, library_ok, flagged = True, True, 0
    for p, n, W in PERIODIC_CONTROLS:
        hist = [i % p for i in range(n)]
        case = Case(history=tuple(hist), alphabet=p + 1, penalty_last_n=W if W else max(64, n))
        expected = [0] * (p + 1)
        expected[n % p] = min(n, W or n) - p
        try:
            v = check_fn(case)
        except Unsupported as why:  # a case the subject cannot express (an engine without a window): not judged
            rows.append({"period": p, "length": n, "window": W, "expected_L": expected, "library_L": None,
                         "not_judged": str(why)})
            continue
        if v.status == "crash":  # the subject died on it: a finding; the oracles are not judged on this row
            library_ok = False
            findings.append({"kind": "crash", "case": case.to_json(), "verdict_class": v.klass,
                             "detail": v.detail})
            rows.append({"period": p, "length": n, "window": W, "expected_L": expected, "library_L": None,
                         "crash": v.detail, "library_passed": False})
            continue
        o_ok = all(L == expected for L in v.oracle_Ls.values())  # every registered oracle
        l_ok = v.ok and v.library_L == expected
        oracles_ok &= o_ok
        library_ok &= l_ok
        if v.library_L is not None:
            flagged += sum(1 for a, b in zip(v.library_L, v.oracle_L) if a != b + (b > 0))
        if o_ok and not l_ok:
            findings.append({"kind": "mismatch", "case": case.to_json(), "verdict_class": v.klass})
        rows.append({"period": p, "length": n, "window": W, "expected_L": expected,
                     "library_L": v.library_L, **v.oracle_Ls,
                     "oracles_passed": o_ok, "library_passed": l_ok})
    return {"passed": library_ok, "oracles_passed": oracles_ok, "off_by_one_flagged": flagged,
            "library_failures": len(findings), "findings": findings, "cases": rows}


# The case dryz once confirmed the init_dry ABI with after its probe: allowed_length 1, window 64, history `a a`,
# candidate `a`: L 1, so the logit drops by 1 * 2^(1 - 1) = 1. The ABI is now read off the kind of sampler
# init_dry returns (dryz/subject/binding.py), and this case is judged like any case: a library that fails it has
# a finding with this case as its reproducer (exit 1), never a library that cannot load.
ABI_CONFIRMATION = {"history": (0, 0), "alphabet": 1, "penalty_last_n": 64, "allowed_length": 1}


def abi_confirmation_case() -> Case:
    return Case(**ABI_CONFIRMATION)


def abi_confirmation_control(judge) -> dict:
    """The ABI confirmation case judged by judge(case) -> the verdict as `dryz check` prints it (Verdict.to_json(),
    or class crash from a child process that died): both oracles must give L 1 and logit -1 (a harness check:
    else the run is void) and so must the library (a check of the subject: else a finding, the case printed and
    counted like the periodic control's)."""
    case = abi_confirmation_case()
    v = judge(case)
    crashed = v["class"] in ("crash", "memory")  # memory: a crash with a sanitizer report
    oracles_ok = crashed or (all(v[k] == [1] for k in verdict_keys()) and v["expected_logits"] == [-1.0])
    library_ok = v["class"] == "agree" and v["observed_logits"] == [-1.0]
    out = {"case": case.to_json(), "expected_logit": -1.0,
           "observed_logit": "crash" if crashed else v["observed_logits"][0],
           "library_L": None if crashed else v.get("library_L"), "class": v["class"], "oracles_passed": oracles_ok,
           "passed": library_ok, "findings": []}
    if oracles_ok and not library_ok:
        out["findings"].append({"kind": "crash" if crashed else "mismatch", "case": case.to_json(),
                                "verdict_class": v["class"]})
    return out
