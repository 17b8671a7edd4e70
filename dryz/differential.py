"""Two subjects, the same Case: does DRY's output differ, or does one of them crash?

Each subject runs in its own isolation worker (dryz.subject.isolation, spawned from its spec: two libllamas never
share a process), and every evaluation is the one verdict, check(), on that subject: the output (logit bits,
sorted flag) and its class. A subject that crashes, aborts or hangs on a case costs that case (its result says
which) and its worker is started again for the next one.

A difference is classed by what the two sides show:
- `crash`: one side died (or hung) on the case, the other did not;
- `promise-broken-in-one`: the outputs differ and one side's verdict is not agree (a mismatch against the
  model of its own ABI, or a broken promise) while the other's is;
- `semantic-change`: the outputs differ and each side agrees with the model of its own ABI (the release changed
  what DRY does, e.g. what penalty_last_n = -1 means).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .case import Case, CaseError
from .subject.isolation import Worker
from .subject.answers import Crash, Unsupported
from .decode.cases import decode
from .judge import check

# The classes of a difference (classify), which the gate declares as changes.
CLASSES = ("crash", "promise-broken-in-one", "semantic-change")

CASE_TIMEOUT = 30.0  # seconds one evaluation may take before the subject counts as hung


@dataclass(frozen=True)
class Result:
    kind: str          # "ok", "crash", "hang", "error"
    klass: str = ""    # check()'s class when ok
    bits: tuple = ()   # float32 logit bits
    sorted: bool = False
    detail: str = ""

    def output(self) -> tuple:
        """What the library did, for comparing two subjects."""
        return (self.kind, self.bits, self.sorted) if self.kind == "ok" else (self.kind,)


def judge_op(subject, case: Case) -> Result:
    """check() on the subject, as a Result (runs in the subject's isolation worker)."""
    try:
        v = check(case, subject)
    except Unsupported as e:  # the subject cannot express the case: not judged on it, never guessed
        return Result("not-judged", detail=str(e))
    except CaseError as e:
        return Result("error", detail=str(e))
    if v.status == "crash":
        return Result("crash", detail=v.detail)
    bits = np.asarray(v.observed_array, dtype=np.float32).view(np.uint32).tolist()
    return Result("ok", v.klass, tuple(bits), bool(v.observed_sorted))


class Judge:
    """One subject in its own isolation worker, judging Cases with check()."""

    def __init__(self, spec: str):
        self.spec = spec
        self.worker = Worker(spec, timeout=CASE_TIMEOUT)
        self.evaluations = 0

    @property
    def restarts(self) -> int:
        return self.worker.restarts

    def run(self, case: Case) -> Result:
        self.evaluations += 1
        try:
            out = self.worker.call(judge_op, case)
        except Exception as e:  # noqa: BLE001 (dryz could not judge it there: an error, no difference claimed)
            return Result("error", detail=f"{type(e).__name__}: {e}")
        if isinstance(out, Crash):
            last = (out.stderr.strip().splitlines() or [""])[-1].strip()
            return Result("hang" if out.signal == "hang" else "crash", detail=f"{out.signal}: {last}")
        return out

    def close(self) -> None:
        self.worker.close()


def classify(a: Result, b: Result) -> str | None:
    """None when the two subjects did the same; else the class of the difference ("not-judged" when one side
    cannot express the case, "error" when dryz could not judge it on one side: no difference is claimed)."""
    if a.kind == "error" or b.kind == "error":
        return "error"
    if a.kind == "not-judged" or b.kind == "not-judged":
        return "not-judged"
    if a.output() == b.output():
        return None
    if a.kind != "ok" or b.kind != "ok":
        return "crash"
    if (a.klass == "agree") != (b.klass == "agree"):
        return "promise-broken-in-one"
    return "semantic-change"


def edge_cases() -> list[Case]:
    """Small histories across the parameters' edges, where releases are most likely to differ: windows around
    0 and -1, n_ctx_train small and zero, allowed_length around 0, multipliers and bases around their
    enabling thresholds, breakers single and multi-token (2,268 cases)."""
    out = []
    for h in ((0, 0), (0, 1, 0, 1, 0), (0, 1, 2, 0, 1)):
        for last_n in (-5, -2, -1, 0, 1, 3, 64):
            for n_ctx in (0, 3, 4096):
                for allowed in (-1, 0, 1):
                    for mult, base in ((1.0, 2.0), (0.0, 2.0), (-1.0, 2.0), (1.0, 0.5)):
                        for brk in ((), ("b",), ("ab",)):
                            out.append(Case(history=h, alphabet=3, penalty_last_n=last_n, n_ctx_train=n_ctx,
                                            allowed_length=allowed, multiplier=mult, base=base, breakers=brk))
    return out


def random_cases(n: int, seed: int = 0) -> list[Case]:
    """Cases the fuzz decoder makes from random bytes (long histories, random windows and parameters)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [decode(rng.integers(0, 256, int(rng.integers(0, 3000))).astype(np.uint8).tobytes())
            for _ in range(n)]


def compare(servers: dict[str, Judge], cases, reference: str, log=None, budget_s: float | None = None,
            always: int = 0):
    """Every case on every subject; yields (case, other, class, results) for each difference from the
    reference subject. budget_s: no case starts after it, except the first `always` ones."""
    t0 = time.monotonic()
    for i, case in enumerate(cases):
        if budget_s is not None and i >= always and time.monotonic() - t0 > budget_s:
            if log:
                log(f"differential: time budget reached after {i} cases")
            return
        res = {name: s.run(case) for name, s in servers.items()}
        for name, r in res.items():
            if name == reference:
                continue
            k = classify(res[reference], r)
            if k is not None:
                yield case, name, k, res


def where(case) -> tuple[str, str]:
    """Where a case sits on the window's edges: (-1 | <-1 | 0 | >0, n_ctx_train<window | n_ctx_train<=0 | -)."""
    last_n = case.penalty_last_n
    window = "-1" if last_n == -1 else "<-1" if last_n < -1 else "0" if last_n == 0 else ">0"
    cap = "n_ctx_train<window" if 0 < case.n_ctx_train < min(max(last_n, 0) or 1 << 30, len(case.history)) \
        else "n_ctx_train<=0" if case.n_ctx_train <= 0 else "-"
    return window, cap
