"""DRY shrink passes on a Case, run to a fixpoint by the generic minimize/ core; then a search of every shorter
history that either proves the result shortest or continues from a shorter one.

One Reducer, two predicates:
- "fails the same way" (same_failure): the same verdict signature: the verdict class plus the directions in
  which candidates differ (the library penalizing more or less than the model), or the same crash;
- "shows this reference divergence" (shows_divergence): check() agrees with the shipped model and the
  reference design (oracle/reference.py) differs from the library in the given class.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from dataclasses import replace

from minimize import BUDGET, ddmin, first_shorter, fixpoint, shortest, shrink_towards

from .case import Case, CaseError
from .space import Space, canonical_strings
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


def same_failure(target: tuple, signature=signature_in_process):
    """The predicate "fails the same way as target"."""
    return lambda case: signature(case) == target


def shows_divergence(klass: str, sole: bool, lib_check: bool = True):
    """The predicate "check() agrees (lib_check) and the reference design diverges in klass" (the only
    divergence when sole)."""
    from .oracle.reference import divergences

    def pred(case: Case) -> bool:
        if lib_check:
            from .check import check
            v = check(case)
            if v.klass != "agree":
                return False
            d = divergences(case, v)
        else:
            d = divergences(case)
        return d == [klass] if sole else klass in d
    return pred


class Reducer:
    """The DRY passes over one predicate (Case -> bool), each evaluation cached and counted."""

    def __init__(self, predicate, log=None):
        self.predicate = predicate
        self.log = log or (lambda msg: None)
        self.calls = 0
        self.cache: dict[str, bool] = {}
        self.stats: dict = {}

    def fails(self, case: Case) -> bool:
        key = case.dumps()
        if key not in self.cache:
            self.calls += 1
            self.cache[key] = bool(self.predicate(case))
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
        # (a real vocabulary's "every token" is tens of thousands of candidates: not simpler, not tried)
        c = None if case.vocab is not None else self._try(case, candidates=None, sorted=False)
        if c:
            return c
        r = ddmin(list(case.candidates), lambda cs: bool(cs) and self.fails(replace(case, candidates=tuple(cs))))
        case = replace(case, candidates=tuple(r.items))
        zeroed = tuple((t, 0.0) for t, _ in case.candidates)
        return self._try(case, candidates=zeroed) or case

    def merge_symbols(self, case):
        if case.vocab is not None:  # a real vocabulary's ids are not interchangeable symbols
            return case
        used = sorted(set(case.history) | {SYMBOLS.index(ch) for b in case.breakers for ch in b})
        for a, b in itertools.combinations(used, 2):
            c = rename(case, {b: a})
            if c is not None and c != case and self.fails(c):
                return c
        return case

    def canonical(self, case):
        if case.vocab is not None:
            return case
        c = canonical_form(case)
        return c if c != case and self.fails(c) else case

    PASSES = ("history", "breakers", "candidates", "window", "allowed_length", "n_ctx_train", "parameters",
              "merge_symbols", "canonical")

    def fixpoint(self, case: Case) -> Case:
        case, stats = fixpoint(case, [(name, getattr(self, name)) for name in self.PASSES], lambda: self.calls,
                               self.log, lambda c: f"length {len(c.history)}, calls {self.calls}")
        for name, s in stats.items():
            mine = self.stats.setdefault(name, type(s)())
            mine.runs, mine.wins, mine.calls = mine.runs + s.runs, mine.wins + s.wins, mine.calls + s.calls
        return case

    # -- proof of shortness ---------------------------------------------------------------------------
    def shorter(self, case: Case):
        """Every history shorter than case's, under its configuration: the first that fails the same way,
        or None (proven shortest). Returns 'budget' when the search would exceed PROOF_BUDGET."""
        n, k = len(case.history), case.alphabet
        if case.vocab is not None:  # every shorter history over a real vocabulary: far past any budget
            return BUDGET
        sym_free = not case.breakers and case.candidates is None
        if n > PROOF_MAX_LENGTH:
            return BUDGET
        return first_shorter(
            n, lambda m: (case.with_history(h) for h in (restricted_growth(m, k) if sym_free else
                                                         itertools.product(range(k), repeat=m))),
            lambda m: count_histories(k, m, sym_free), self.fails, PROOF_BUDGET)

    def minimize(self, case: Case, proven=lambda c: False) -> tuple[Case, str, int]:
        """Passes to a fixpoint, then the shortest-search (skipped where proven(case) already settles it);
        returns (case, "proven" | "1-minimal", predicate calls)."""
        case, status = shortest(case, self.fixpoint, lambda c: f"{len(c.history)} tokens",
                                lambda c: None if proven(c) else self.shorter(c), self.log)
        return case, status, self.calls


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
    """Histories of length n over k symbols, or (symmetric) their equality patterns with <= k symbols."""
    if not symmetric:
        return k ** n
    return sum(Space(k, None, n).counts(n).get(n, {0: 1}).values())


def restricted_growth(n: int, k: int):
    """Histories in first-occurrence canonical form: one per equality pattern (with <= k symbols): the
    canonical tree's histories of length n (space.canonical_strings)."""
    return canonical_strings(Space(k, None, max(n, 1)), n)


def reduce_case(case: Case, target: tuple, signature=signature_in_process, log=None):
    """A failing case shrunk to a shortest one that fails the same way: (case, shortest status, calls)."""
    r = Reducer(same_failure(target, signature), log)
    if not r.fails(case):
        raise ValueError(f"the case does not fail as {target}: nothing to minimize")
    return r.minimize(case)


def minimize_divergence(case: Case, klass: str, *, sole: bool | None = None, lib_check: bool = True,
                        log=None) -> tuple[Case, str, int]:
    """A case showing reference divergence `klass` shrunk to a shortest witness (for its configuration):
    the same passes and search as reduce_case, with the predicate shows_divergence (sole: klass must be the
    only divergence; default: when the input already has it alone). For the classes that only depend on one
    match length reaching a threshold, oracle.reference.threshold_length proves shortness analytically."""
    from .oracle.reference import divergences, threshold_length
    if sole is None:
        sole = divergences(case) == [klass]
    r = Reducer(shows_divergence(klass, sole, lib_check), log)
    if not r.fails(case):
        raise ValueError(f"the case does not show {klass!r}" + (" alone" if sole else ""))
    return r.minimize(case, proven=lambda c: threshold_length(klass, c) == len(c.history))
