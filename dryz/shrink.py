"""DRY reduction passes on a failing Case, built on the generic minimize/ core, run to a fixpoint; then a
search of every shorter history that either proves the reproducer shortest or continues from a shorter one.

"Fails the same way" = the same verdict signature: the verdict class plus the directions in which candidates
differ (the library penalizing more or less than the model), or the same crash.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from dataclasses import replace

from minimize import ddmin, shrink_towards

from .case import Case, CaseError
from .subject.symbols import SYMBOLS

PROOF_BUDGET = 60_000   # histories the shortest-search may check
PROOF_MAX_LENGTH = 64  # the budget is the real bound; this only keeps the count itself cheap
SUBPROCESS_TIMEOUT = 30.0


def signature_in_process(case: Case) -> tuple:
    from .check import check
    klass, differing = check(case).signature()
    return (klass, tuple(sorted(direction for _, direction in differing)))


def signature_isolated(case: Case, timeout: float = SUBPROCESS_TIMEOUT) -> tuple:
    """The signature computed in a child process, so a case that aborts libllama cannot take us with it."""
    try:
        p = subprocess.run([sys.executable, "-m", "dryz", "signature"], input=case.dumps(), text=True,
                           capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return ("crash", ("timeout",))
    if p.returncode < 0:
        return ("crash", (f"signal {-p.returncode}",))
    try:
        klass, directions = json.loads(p.stdout) if p.returncode == 0 else (None, None)
    except ValueError:
        klass = None
    if klass is None:  # the child could not judge it: dryz's failure, never the library's crash
        last = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        return ("error", (last[:200],))
    return (klass, tuple(directions))


class Reducer:
    def __init__(self, target: tuple, signature=signature_in_process, log=None):
        self.target = target
        self.signature = signature
        self.log = log or (lambda msg: None)
        self.calls = 0
        self.cache: dict[str, bool] = {}

    def fails(self, case: Case) -> bool:
        key = case.dumps()
        if key not in self.cache:
            self.calls += 1
            self.cache[key] = self.signature(case) == self.target
        return self.cache[key]

    def _try(self, case: Case, **changes) -> Case | None:
        try:
            c = replace(case, **changes)
        except CaseError:
            return None
        return c if self.fails(c) else None

    # -- passes -------------------------------------------------------------------------------------
    def history(self, case):
        r = ddmin(list(case.history), lambda h: self.fails(case.with_history(h)),
                  on_progress=lambda size, calls: self.log(f"history {size} tokens"))
        return case.with_history(r.items)

    def breakers(self, case):
        if case.breakers:
            r = ddmin(list(case.breakers), lambda b: self.fails(replace(case, breakers=tuple(b))))
            case = replace(case, breakers=tuple(r.items))
        for i, b in enumerate(case.breakers):
            if len(b) > 1:
                def with_b(chars, i=i):
                    if not chars:
                        return False
                    bs = list(case.breakers)
                    bs[i] = "".join(chars)
                    return self.fails(replace(case, breakers=tuple(bs)))
                r = ddmin(list(b), with_b)
                bs = list(case.breakers)
                bs[i] = "".join(r.items)
                case = replace(case, breakers=tuple(bs))
        return case

    def window(self, case):
        # The smallest penalty_last_n that still fails (searched upward: failures need not be monotone).
        # Past the history's length the window no longer changes, so the search stops there (every
        # candidate value is still judged by the predicate; nothing is assumed about the library).
        for n in range(1, min(case.penalty_last_n, len(case.history) + 1)):
            c = self._try(case, penalty_last_n=n)
            if c:
                return c
        return case

    def allowed_length(self, case):
        # Towards 0 from either side (a negative allowed_length is a parameter edge too).
        a = case.allowed_length
        values = range(0, a) if a > 0 else range(0, a, -1)
        c = shrink_towards([replace(case, allowed_length=v) for v in values], self.fails)
        return c or case

    def n_ctx_train(self, case):
        # The default (4096) when the failure does not need another value, else the smallest that fails.
        from .case import N_CTX_TRAIN
        if case.n_ctx_train == N_CTX_TRAIN:
            return case
        c = self._try(case, n_ctx_train=N_CTX_TRAIN)
        if c:
            return c
        for v in range(0, min(case.n_ctx_train, 64)):
            c = self._try(case, n_ctx_train=v)
            if c:
                return c
        return case

    def parameters(self, case):
        for changes in ({"multiplier": 1.0, "base": 2.0}, {"multiplier": 1.0}, {"base": 2.0}):
            if any(getattr(case, k) != v for k, v in changes.items()):
                c = self._try(case, **changes)
                if c:
                    return c
        return case

    def candidates(self, case):
        if case.candidates is None:
            return case
        c = self._try(case, candidates=None, sorted=False)
        if c:
            return c
        r = ddmin(list(case.candidates), lambda cs: bool(cs) and self.fails(replace(case, candidates=tuple(cs))))
        case = replace(case, candidates=tuple(r.items))
        zeroed = tuple((t, 0.0) for t, _ in case.candidates)
        return self._try(case, candidates=zeroed) or case

    def merge_symbols(self, case):
        used = sorted(set(case.history) | {SYMBOLS.index(ch) for b in case.breakers for ch in b})
        for a, b in itertools.combinations(used, 2):
            c = rename(case, {b: a})
            if c is not None and c != case and self.fails(c):
                return c
        return case

    def canonical(self, case):
        c = canonical_form(case)
        return c if c != case and self.fails(c) else case

    PASSES = ("history", "breakers", "candidates", "window", "allowed_length", "n_ctx_train", "parameters",
              "merge_symbols", "canonical")

    def fixpoint(self, case: Case) -> Case:
        while True:
            before = case
            for name in self.PASSES:
                new = getattr(self, name)(case)
                if new != case:
                    self.log(f"{name}: length {len(new.history)}, calls {self.calls}")
                case = new
            if case == before:
                return case

    # -- proof of shortness ---------------------------------------------------------------------------
    def shorter(self, case: Case):
        """Every history shorter than case's, under its configuration: the first that fails the same way,
        or None (proven shortest). Returns 'budget' when the search would exceed PROOF_BUDGET."""
        n, k = len(case.history), case.alphabet
        sym_free = not case.breakers and case.candidates is None
        total = sum(count_histories(k, m, sym_free) for m in range(n))
        if n > PROOF_MAX_LENGTH or total > PROOF_BUDGET:
            return "budget"
        for m in range(n):
            for h in (restricted_growth(m, k) if sym_free else itertools.product(range(k), repeat=m)):
                c = case.with_history(h)
                if self.fails(c):
                    return c
        return None


def rename(case: Case, mapping: dict[int, int]) -> Case | None:
    """Apply a symbol renaming everywhere a symbol appears (history, breakers, candidate ids)."""
    f = lambda t: mapping.get(t, t)  # noqa: E731
    cands = case.candidates
    if cands is not None:
        ids = [f(t) for t, _ in cands]
        if len(set(ids)) != len(ids):
            return None
        cands = tuple((f(t), lg) for t, lg in cands)
    try:
        return replace(case, history=tuple(f(t) for t in case.history), candidates=cands,
                       breakers=tuple("".join(SYMBOLS[f(SYMBOLS.index(ch))] for ch in b) for b in case.breakers))
    except CaseError:
        return None


def canonical_form(case: Case) -> Case:
    """Symbols renamed in first-occurrence order (history, then breakers, then candidates), alphabet cut
    to what is used when the candidate array is the default one."""
    order: list[int] = []
    for t in list(case.history) + [SYMBOLS.index(ch) for b in case.breakers for ch in b] + \
            (case.candidate_ids() if case.candidates is not None else []):
        if t not in order:
            order.append(t)
    mapping = {t: i for i, t in enumerate(order)}
    rest = [t for t in range(case.alphabet) if t not in mapping]
    for t in rest:
        mapping[t] = len(mapping)
    c = rename(replace(case, alphabet=max(case.alphabet, len(mapping))), mapping)
    if c is None:
        return case
    if case.candidates is None:
        try:
            c = replace(c, alphabet=max(len(order), 1))
        except CaseError:
            pass
    return c


def count_histories(k: int, n: int, symmetric: bool) -> int:
    if not symmetric:
        return k ** n
    # restricted-growth strings of length n with at most k distinct symbols: sum_{j<=k} S(n, j)
    S = [[0] * (k + 1) for _ in range(n + 1)]
    S[0][0] = 1
    for i in range(1, n + 1):
        for j in range(1, k + 1):
            S[i][j] = j * S[i - 1][j] + S[i - 1][j - 1]
    return sum(S[n])


def restricted_growth(n: int, k: int):
    """Histories in first-occurrence canonical form: one per equality pattern (with <= k symbols)."""
    def rec(prefix, m):
        if len(prefix) == n:
            yield tuple(prefix)
            return
        for t in range(min(m + 1, k)):
            prefix.append(t)
            yield from rec(prefix, max(m, t + 1))
            prefix.pop()
    yield from rec([], 0)


def reduce_case(case: Case, target: tuple, signature=signature_in_process, log=None):
    """Passes to a fixpoint, then the shortest-search; returns (case, shortest status, predicate calls)."""
    r = Reducer(target, signature, log)
    if not r.fails(case):
        raise ValueError(f"the case does not fail as {target}: nothing to minimize")
    while True:
        case = r.fixpoint(case)
        found = r.shorter(case)
        if found is None:
            return case, "proven", r.calls
        if found == "budget":
            return case, "1-minimal", r.calls
        r.log(f"shortest-search found a shorter history ({len(found.history)} tokens); continuing")
        case = found
