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
from dataclasses import dataclass, field, replace

from minimize import BUDGET, ddmin, first_shorter, fixpoint, shortest, shrink_towards

from .case import Case, CaseError
from .requests import Requests, RequestsError
from .space import Space, canonical_strings
from .symbols import SYMBOLS
from .case import N_CTX_TRAIN
from .check import fault
from .corpus import crash_entry, entry_json, trace_entry_json
from .judge import check, check_in
from .oracle.reference import divergences, threshold_length
from .subject.answers import Unsupported
from .subject.isolation import Worker
from .trace import TraceError
from .trace_check import check_trace, check_trace_in
from .trace_space import count_traces_of_length, iter_traces_of_length
from .verdict import MEMORY

PROOF_BUDGET = 60_000   # histories the shortest-search may check
PROOF_MAX_LENGTH = 64  # the budget is the real bound; this only keeps the count itself cheap


def verdict_signature(v) -> tuple:
    """'Fails the same way' for a Case: the verdict class and the directions in which candidates differ (the
    library penalizing more or less than the model); for a crash, how the subject died; for class memory (a
    sanitizer report), the same kind of error in the same function."""
    klass, differing = v.signature()
    return (klass, tuple(sorted(direction for _, direction in differing)))


def signature_in(subject):
    """The signature of a case judged on `subject` in this process."""
    return lambda case: verdict_signature(check(case, subject))


def signature_isolated(worker):
    """The signature of a case judged in an isolation worker (dryz.subject.isolation), so a case that aborts
    libllama cannot take the minimizer with it: a crash is its own signature."""
    return lambda case: verdict_signature(check_in(worker, case))


def same_failure(target: tuple, signature):
    """The predicate "fails the same way as target"."""
    return lambda case: signature(case) == target


def shows_divergence(klass: str, sole: bool, subject, lib_check: bool = True):
    """The predicate "check() on subject agrees (lib_check) and the reference design diverges from the
    library's output in klass" (the only divergence when sole)."""

    def pred(case: Case) -> bool:
        v = check(case, subject)
        if lib_check and v.klass != "agree":
            return False
        d = divergences(case, v)
        return d == [klass] if sole else klass in d
    return pred


class Shrinker:
    """What the Case and the Trace reducers share: one predicate, each evaluation cached by the item's JSON and
    counted; a candidate that cannot be built (an invalid Case or Trace) counts as not failing, and so does one
    the subject cannot express (its capabilities: counted, with why, in not_judged); the passes over the DRY
    configuration; the named passes run to a fixpoint with per-pass statistics (minimize.fixpoint)."""

    PASSES: tuple = ()
    INVALID: tuple = (CaseError,)

    def __init__(self, predicate, log=None):
        self.predicate = predicate
        self.log = log or (lambda msg: None)
        self.calls = 0
        self.cache: dict[str, bool] = {}
        self.stats: dict = {}
        self.not_judged: dict[str, int] = {}  # why the subject could not express a candidate -> how many

    def fails(self, item) -> bool:
        if item is None:
            return False
        key = item.dumps()
        if key not in self.cache:
            self.calls += 1
            try:
                self.cache[key] = bool(self.predicate(item))
            except Unsupported as why:  # not judged: it does not show the failure
                self.not_judged[str(why)] = self.not_judged.get(str(why), 0) + 1
                self.cache[key] = False
        return self.cache[key]

    def make(self, item, **changes):
        try:
            return replace(item, **changes)
        except self.INVALID:
            return None

    def _try(self, item, **changes):
        c = self.make(item, **changes)
        return c if self.fails(c) else None

    def describe(self, item) -> str:
        return f"calls {self.calls}"

    def fixpoint(self, item):
        item, stats = fixpoint(item, [(name, getattr(self, name)) for name in self.PASSES], lambda: self.calls,
                               self.log, self.describe)
        _add_stats(self.stats, stats)
        return item

    # -- the configuration's passes -------------------------------------------------------------------
    def window_bound(self, item) -> int:
        """Window caps past this change nothing (the search stops there; every value is still judged)."""
        raise NotImplementedError

    def window(self, item):
        # The smallest penalty_last_n that still fails (searched upward: failures need not be monotone).
        for n in range(1, min(item.penalty_last_n, self.window_bound(item))):
            c = self._try(item, penalty_last_n=n)
            if c:
                return c
        return item

    def allowed_length(self, item):
        # Towards 0 from either side (a negative allowed_length is a parameter edge too).
        a = item.allowed_length
        values = range(0, a) if a > 0 else range(0, a, -1)
        return shrink_towards([c for c in (self.make(item, allowed_length=v) for v in values) if c is not None],
                              self.fails) or item

    def parameters(self, item):
        for changes in ({"multiplier": 1.0, "base": 2.0}, {"multiplier": 1.0}, {"base": 2.0}):
            if any(getattr(item, k) != v for k, v in changes.items()):
                c = self._try(item, **changes)
                if c:
                    return c
        return item


class Reducer(Shrinker):
    """The DRY passes over one predicate (Case -> bool), each evaluation cached and counted."""

    def window_bound(self, case) -> int:
        return len(case.history) + 1  # past the history's length the window no longer changes

    def describe(self, case) -> str:
        return f"length {len(case.history)}, calls {self.calls}"

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

    def n_ctx_train(self, case):
        # The default (4096) when the failure does not need another value, else the smallest that fails.
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


def reduce_case(case: Case, target: tuple, signature, log=None, not_judged: dict | None = None):
    """A failing case shrunk to a shortest one that fails the same way: (case, shortest status, calls). The
    candidates the subject could not express (not judged: shortest is among the cases it can express) are counted
    by reason into not_judged."""
    r = Reducer(same_failure(target, signature), log)
    if not r.fails(case):
        raise ValueError(f"the case does not fail as {target}: nothing to minimize")
    out = r.minimize(case)
    if not_judged is not None:
        not_judged.update(r.not_judged)
    return out


class NothingToMinimize(Exception):
    """The input agrees with the oracles (one-line reason)."""


@dataclass
class Minimized:
    case: Case            # the reproducer
    verdict: object       # its check() verdict on the subject (None for a crash: the subject died on it)
    first_class: str      # the input's class as dryz check names it
    shortest: str         # "proven", or why not
    calls: int            # predicate calls
    seconds: float
    isolated: bool        # every evaluation ran in an isolation worker
    original: Case | None = None   # the case it was shrunk from
    sanitizer: dict | None = None  # class memory: the reproducer's sanitizer report (kind, summary, frames)
    not_judged: dict = field(default_factory=dict)  # candidates the subject could not express: why -> how many

    def entry(self, source: str, kind: str, identity: dict) -> dict:
        """The reproducer as a corpus entry (dryz minimize writes it): where it came from, the subject it fails on."""
        provenance = {"found_by": "minimize", "minimized_from": source, "input_kind": kind,
                      "original_length": len(self.original.history), "predicate_calls": self.calls,
                      "seconds": round(self.seconds, 2), "fault": fault(),
                      **({"not_judged": self.not_judged} if self.not_judged else {})}
        if getattr(self, "cause", None):  # minimized keeping a cause (minimize_cause): the subject's answer kept
            provenance["cause"], provenance["causes"] = self.cause[0], list(self.cause[1])
        if self.verdict is None:
            out = crash_entry(self.case, self.shortest, provenance, identity, self.sanitizer)
        else:
            out = entry_json(self.case, self.verdict, expect=self.verdict.klass, shortest=self.shortest,
                             provenance=provenance, subject=identity)
        if getattr(self, "cause", None):
            from .causes import answer_json  # on use
            out["answer"] = answer_json(self.cause[2])
        return out


def minimize_case(case: Case, subject, isolate: bool | None = None, log=None, announce=None) -> Minimized:
    """A failing case (or one that crashes the subject) shrunk to a shortest one that fails the same way on
    `subject`. The first evaluation always runs in an isolation worker; the rest too when the input crashes
    (or isolate is True). announce(class, isolated) is called once the input is judged."""
    import time

    t0 = time.perf_counter()
    with Worker(subject.spec, subject) as w:
        first = signature_isolated(w)(case)
        if first[0] == "agree":
            raise NothingToMinimize("the case agrees with the oracles; nothing to minimize")
        crashed = first[0] in ("crash", "memory")  # memory: the worker died with a sanitizer report
        isolated = crashed if isolate is None else isolate
        sig = signature_isolated(w) if isolated else signature_in(subject)
        # The class as dryz check names it (the signature merges mismatch-multi-token into mismatch: a
        # multi-token mismatch that survives without its multi-token breaker is the same failure).
        shown = first[0] if crashed else check(case, subject).klass
        if announce:
            announce(shown, isolated)
        not_judged: dict = {}
        reduced, shortest, calls = reduce_case(case, first, sig, log=log, not_judged=not_judged)
        reduced = replace(reduced, note="")  # a seed's note does not describe its reduction
        report = None
        if first[0] == "memory":  # the reproducer's own report (its frames), judged as any crash
            final = check_in(w, reduced)
            report = final.crash if final.klass == MEMORY else None
    verdict = None if crashed else check(reduced, subject)
    return Minimized(reduced, verdict, shown, shortest, calls, time.perf_counter() - t0, isolated, case, report,
                     not_judged)


def minimize_divergence(case: Case, klass: str, subject, *, sole: bool | None = None, lib_check: bool = True,
                        log=None) -> tuple[Case, str, int]:
    """A case showing reference divergence `klass` shrunk to a shortest witness (for its configuration):
    the same passes and search as reduce_case, with the predicate shows_divergence (sole: klass must be the
    only divergence; default: when the input already has it alone). For the classes that only depend on one
    match length reaching a threshold, oracle.reference.threshold_length proves shortness analytically."""
    if sole is None:
        sole = divergences(case, check(case, subject)) == [klass]
    r = Reducer(shows_divergence(klass, sole, subject, lib_check), log)
    if not r.fails(case):
        raise ValueError(f"the case does not show {klass!r}" + (" alone" if sole else ""))
    return r.minimize(case, proven=lambda c: threshold_length(klass, c) == len(c.history))


def shows_cause(cause: str, fitted: tuple, answer, abi: int = 7, sorted_flag: bool = True):
    """The predicate "the subject's answer shows this cause": llama.cpp's DRY composed with the fitted causes
    explains it and without this cause does not (dryz.causes); for the cause UNEXPLAINED, no composition of the
    fitted causes explains it (a residual difference). answer(case): what the subject answers."""
    shows = _shows(cause, fitted, abi, sorted_flag)
    return lambda case: shows(case, answer(case))


def _shows(cause: str, fitted: tuple, abi: int, sorted_flag: bool):
    """shows(probe, answer): the answer to the probe (a case, or a request of a sequence) shows the cause."""
    from .causes import explains  # on use: the cause-keeping minimizer only
    from .oracle.deviations import BY_PATTERN, pattern  # on use: the cause-keeping minimizer only
    from .subject.answers import Output, Unrecoverable  # on use: the cause-keeping minimizer only

    rest = tuple(m for m in fitted if m != cause)
    # a model of what DRY leaves keeps a witness the subject answers (not one where it raises or refuses for
    # another cause)
    answered = cause != UNEXPLAINED and BY_PATTERN[pattern(cause)].kind not in ("raise", "refusal")

    def shows(probe, a) -> bool:
        if isinstance(a, Unrecoverable):  # not judged (a case the engine cannot take): shows nothing
            return False
        if explains(probe, a, (), sorted_flag, abi):  # what llama.cpp does: no difference to witness
            return False
        if cause == UNEXPLAINED:
            return not explains(probe, a, fitted, sorted_flag, abi)
        if answered and not isinstance(a, Output):
            return False
        return explains(probe, a, fitted, sorted_flag, abi) and not explains(probe, a, rest, sorted_flag, abi)
    return shows


UNEXPLAINED = "unexplained"


def minimize_cause(case: Case, cause: str, fitted: tuple, subject, log=None, announce=None) -> Minimized:
    """A case showing a cause (a deviation model of the fitted set, or UNEXPLAINED) shrunk to a shortest one that
    still shows it, every answer asked in an isolation worker: a witness that stays the cause's own (its
    property's) and is explained by none of the other causes."""
    import time

    from .judge import answer_op  # on use
    t0 = time.perf_counter()
    with Worker(subject.spec, subject) as w:
        def answer(c):
            return w.call(answer_op, c)  # (a Crash where the subject's process died)
        pred = shows_cause(cause, tuple(fitted), answer, subject.abi, bool(subject.caps.sorted_flag))
        r = Reducer(pred, log)
        if not r.fails(case):
            raise NothingToMinimize(f"the case does not show {cause} (with the causes {', '.join(fitted) or 'none'})")
        first = check_in(w, case)
        if announce:
            announce(first.klass, True)
        reduced, shortest, calls = r.minimize(case)
        reduced = replace(reduced, note="")
        final = check_in(w, reduced)
        said = answer(reduced)
    verdict = None if final.klass in ("crash", "memory") else final
    m = Minimized(reduced, verdict, first.klass, shortest, calls, time.perf_counter() - t0, True, case, None,
                  r.not_judged)
    m.cause = (cause, tuple(fitted), said)
    return m


# -- request sequences --------------------------------------------------------------------------------------
#
# A sequence (dryz/requests.py) shrinks by the same machinery: requests dropped (ddmin), each request's history
# shrunk (ddmin), symbols merged and renamed in order of appearance, the candidates cut to the symbols used; then
# every sequence with fewer tokens (over all requests), each request at least one token of the same symbols under
# the witness's configuration, is checked: none shows it, the witness is proven shortest.

SEQUENCE_PROOF_BUDGET = 400  # sequences the shortest-search may check (each is a run of the subject's instance)


class RequestsReducer(Shrinker):
    """The sequence passes over one predicate (Requests -> bool), each evaluation cached and counted."""

    PASSES = ("requests", "histories", "merge_symbols", "canonical", "alphabet")

    @property
    def INVALID(self):
        return (CaseError, RequestsError)

    def describe(self, s) -> str:
        return f"{len(s)} requests, {s.tokens()} tokens, calls {self.calls}: {s.spelled()}"

    def requests(self, s):
        r = ddmin(list(s.requests), lambda rs: bool(rs) and self.fails(self.make(s, requests=tuple(rs))),
                  on_progress=lambda size, calls: self.log(f"requests {size}"))
        return self.make(s, requests=tuple(r.items))

    def histories(self, s):
        for i in range(len(s)):
            case = s.requests[i]
            r = ddmin(list(case.history), lambda h: bool(h) and self.fails(_with_request(s, i, case.with_history(h))),
                      on_progress=lambda size, calls: self.log(f"request {i + 1}: {size} tokens"))
            s = _with_request(s, i, case.with_history(r.items)) or s
        return s

    def merge_symbols(self, s):
        used = sorted({t for c in s.requests for t in c.history} |
                      {SYMBOLS.index(ch) for c in s.requests for b in c.breakers for ch in b})
        for a, b in itertools.combinations(used, 2):
            c = _renamed(s, {b: a})
            if c is not None and c != s and self.fails(c):
                return c
        return s

    def canonical(self, s):
        order = list(dict.fromkeys(t for c in s.requests for t in c.history))
        c = _renamed(s, {t: i for i, t in enumerate(order)})
        return c if c is not None and c != s and self.fails(c) else s

    def alphabet(self, s):
        k = max((t for c in s.requests for t in c.history), default=0) + 1
        if all(c.candidates is not None or c.alphabet <= k for c in s.requests):
            return s
        c = self.make(s, requests=tuple(replace(c, alphabet=k) if c.candidates is None else c for c in s.requests))
        return c if c is not None and self.fails(c) else s

    def shorter(self, s):
        """Every sequence with fewer tokens under the witness's configuration: the first that shows it, None (the
        witness is proven shortest), or BUDGET."""
        config = {replace(c, history=(), note="") for c in s.requests}
        if len(config) > 1 or any(c.vocab is not None for c in s.requests):
            return BUDGET  # requests of several configurations, or a real vocabulary: not searched
        base = s.requests[-1]
        k = base.alphabet if base.candidates is None else max(max(base.ids), *(t for c in s.requests
                                                                               for t in c.history)) + 1

        def sequences(m: int):
            for parts in _compositions(m):
                for toks in itertools.product(range(k), repeat=m):
                    out, i = [], 0
                    for p in parts:
                        out.append(base.with_history(toks[i:i + p]))
                        i += p
                    yield Requests(tuple(out))
        count = lambda m: (2 ** (m - 1) * k ** m) if m else 0  # noqa: E731
        return first_shorter(s.tokens(), lambda m: sequences(m) if m else iter(()), count, self.fails,
                             SEQUENCE_PROOF_BUDGET)

    def minimize(self, s):
        s, status = shortest(s, self.fixpoint, lambda x: f"{x.tokens()} tokens", self.shorter, self.log)
        return s, status, self.calls


def _compositions(m: int):
    """Every way to cut m tokens into requests of at least one token, in order."""
    if m == 0:
        yield ()
        return
    for first in range(1, m + 1):
        for rest in _compositions(m - first):
            yield (first,) + rest


def _with_request(s, i: int, case):
    try:
        return Requests(s.requests[:i] + (case,) + s.requests[i + 1:])
    except RequestsError:
        return None


def _renamed(s, mapping: dict):
    cases = [rename(c, mapping) for c in s.requests]
    return None if any(c is None for c in cases) else Requests(tuple(cases))


@dataclass
class MinimizedRequests:
    requests: object      # the reproducer (Requests)
    verdict: object       # its RequestsVerdict on the subject
    first_class: str
    shortest: str
    calls: int
    seconds: float
    original: object
    cause: tuple | None = None  # (cause, fitted), when minimized keeping a cause
    not_judged: dict = field(default_factory=dict)

    def entry(self, source: str, kind: str, identity: dict) -> dict:
        """The reproducer as a corpus entry: the sequence, per request what the subject answered and what
        llama.cpp gives, its class."""
        from .causes import answer_json, predicted_json  # on use
        from .corpus import requests_entry  # on use
        abi = identity.get("init_dry_abi", 7) or 7
        provenance = {"found_by": "minimize", "minimized_from": source, "input_kind": kind,
                      "original_requests": len(self.original), "original_tokens": self.original.tokens(),
                      "predicate_calls": self.calls, "seconds": round(self.seconds, 2), "fault": fault(),
                      **({"not_judged": self.not_judged} if self.not_judged else {})}
        if self.cause:
            provenance["cause"], provenance["causes"] = self.cause[0], list(self.cause[1])
        per = [{"class": v.klass if v is not None else "not judged", "llama.cpp": predicted_json(item, (), abi),
                "subject": answer_json(a)}
               for item, a, v in zip(self.requests.items(), self.verdict.answers, self.verdict.verdicts)]
        return requests_entry(self.requests, self.verdict.klass, self.shortest, provenance, identity, per,
                              verdict=self.verdict.to_json())


def minimize_requests(s, subject, cause: str | None = None, fitted: tuple = (), log=None,
                      announce=None) -> MinimizedRequests:
    """A request sequence shrunk on the subject (every run in an isolation worker) to a shortest one that fails
    the same way (a request with the same verdict signature), or, with a cause, that still shows the cause on one
    of its requests (a difference of that cause that no other fitted cause explains)."""
    import time

    from .judge import semantics  # on use
    from .requests_check import answers_in, judge_answers  # on use
    t0 = time.perf_counter()
    sem = semantics(subject)
    with Worker(subject.spec, subject) as w:
        answers = {}

        def answer(x):
            key = x.dumps()
            if key not in answers:
                answers[key] = answers_in(w, x)
            return answers[key]
        first = judge_answers(s, answer(s), sem)
        shows = _shows(cause, tuple(fitted), subject.abi, bool(subject.caps.sorted_flag)) if cause else None
        target = next((verdict_signature(v) for v in first.verdicts if v is not None and v.klass != "agree"), None)
        if cause is None and target is None:
            raise NothingToMinimize("every request agrees with the oracles; nothing to minimize")

        def pred(x) -> bool:  # a request shows the cause; without one, fails as the input's first failing request
            if shows is not None:
                return any(shows(item, a) for item, a in zip(x.items(), answer(x)))
            return target in {verdict_signature(v) for v in judge_answers(x, answer(x), sem).verdicts
                              if v is not None}
        what = f"{cause} (with the causes {', '.join(fitted) or 'none'})" if cause else f"class {target[0]}"
        r = RequestsReducer(pred, log)
        if not r.fails(s):
            raise NothingToMinimize(f"the sequence does not show {what}")
        if announce:
            announce(first.klass, True)
        reduced, shortest_, calls = r.minimize(s)
        reduced = replace(reduced, note="")
        final = judge_answers(reduced, answer(reduced), sem)
    return MinimizedRequests(reduced, final, first.klass, shortest_, calls, time.perf_counter() - t0, s,
                             (cause, tuple(fitted)) if cause is not None else None, r.not_judged)


# -- traces -----------------------------------------------------------------------------------------------
#
# The same machinery on a Trace (dryz/trace.py): named passes run to a fixpoint by minimize.fixpoint, then
# minimize.first_shorter over every shorter trace of the trace enumerator's space (dryz/enumerate/traces.py:
# one-token accepts, applies over every symbol, reset, clone, free last) under the reduced configuration.
# "Shortest" is the number of events with one token per accept (the reducer works on that flat form; adjacent
# accepts are merged back at the end, the same libllama calls, checked with the predicate).

TRACE_PROOF_BUDGET = 20_000  # traces the shortest-search may check


def flatten(trace):
    """Every accept of n tokens as n one-token accepts (the same libllama calls)."""
    ev = []
    for e in trace.events:
        if e[0] == "accept":
            ev.extend(("accept", (t,)) for t in e[1])
        else:
            ev.append(e)
    return trace.with_events(ev)


def merge(trace):
    """Adjacent accepts as one event (the same libllama calls)."""
    ev: list = []
    for e in trace.events:
        if e[0] == "accept" and ev and ev[-1][0] == "accept":
            ev[-1] = ("accept", ev[-1][1] + e[1])
        else:
            ev.append(e)
    return trace.with_events(ev)


class TraceReducer(Shrinker):
    """The trace passes over one predicate (Trace -> bool), each evaluation cached and counted; a candidate
    that is not a valid Trace counts as not failing."""

    PASSES = ("events", "tokens", "applies", "breakers", "allowed_length", "parameters", "window", "alphabet")

    @property
    def INVALID(self):
        return (TraceError,)

    def window_bound(self, t) -> int:
        return 65

    def describe(self, t) -> str:
        return f"{len(t.events)} events, calls {self.calls}: {t.spelled()}"

    # -- passes -------------------------------------------------------------------------------------
    def events(self, t):
        r = ddmin(list(t.events), lambda evs: self.fails(self.make(t, events=tuple(evs))),
                  on_progress=lambda size, calls: self.log(f"events {size}"))
        return t.with_events(r.items)

    def tokens(self, t):
        """Each accepted token lowered to the smallest id that still fails."""
        ev = list(t.events)
        for i, e in enumerate(ev):
            if e[0] != "accept":
                continue
            toks = list(e[1])
            for j, x in enumerate(toks):
                for v in range(x):
                    trial = toks[:j] + [v] + toks[j + 1:]
                    if self._try(t, events=tuple(ev[:i] + [("accept", tuple(trial))] + ev[i + 1:])):
                        toks = trial
                        break
            ev[i] = ("accept", tuple(toks))
            t = t.with_events(ev)
        return t

    def applies(self, t):
        """An explicit candidate array replaced by None (every symbol), else ddmin over its entries, the sorted
        flag dropped, logits to 0."""
        for i, e in enumerate(t.events):
            if e[0] != "apply" or e[1] is None:
                continue
            ev = list(t.events)

            def with_apply(a, ev=ev, i=i, t=t):
                return self.make(t, events=tuple(ev[:i] + [a] + ev[i + 1:]))

            if self.fails(with_apply(("apply", None))):
                t = with_apply(("apply", None))
                continue
            tail = e[2:]
            r = ddmin(list(e[1]), lambda c: bool(c) and self.fails(with_apply(("apply", tuple(c), *tail))))
            cands = tuple(r.items)
            if tail and self.fails(with_apply(("apply", cands))):
                tail = ()
            zeroed = tuple((tid, 0.0) for tid, _ in cands)
            if zeroed != cands and self.fails(with_apply(("apply", zeroed, *tail))):
                cands = zeroed
            t = with_apply(("apply", cands, *tail))
        return t

    def breakers(self, t):
        if not t.breakers:
            return t
        if self._try(t, breakers=()):
            return replace(t, breakers=())
        r = ddmin(list(t.breakers), lambda b: self.fails(self.make(t, breakers=tuple(b))))
        return replace(t, breakers=tuple(r.items))

    def alphabet(self, t):
        for k in range(1, t.alphabet):
            c = self._try(t, alphabet=k)
            if c:
                return c
        return t

    # -- proof of shortness ---------------------------------------------------------------------------
    def shorter(self, t):
        """Every trace of the enumerator's space with fewer events than t (flat), under t's configuration: the
        first that fails, None (t is shortest in that space), or BUDGET (too many, or t itself outside the
        space: an explicit candidate array)."""
        if any(e[0] == "apply" and e[1] is not None for e in t.events) or any(
                e[0] == "accept" and len(e[1]) != 1 for e in t.events):
            return BUDGET
        k = t.alphabet
        return first_shorter(len(t.events),
                             lambda m: (self.make(t, events=ev) for ev in iter_traces_of_length(m, k)),
                             lambda m: count_traces_of_length(m, k), self.fails, TRACE_PROOF_BUDGET)

    def minimize(self, t):
        """Flatten, passes to a fixpoint, the shortest-search, then merge adjacent accepts:
        (trace, "proven" | "1-minimal", predicate calls)."""
        flat = flatten(t)
        if flat != t and self.fails(flat):
            t = flat
        t, status = shortest(t, self.fixpoint, lambda c: f"{len(c.events)} events", self.shorter, self.log)
        merged = merge(t)
        if merged != t and self.fails(merged):
            t = merged
        return t, status, self.calls


def _add_stats(mine: dict, stats: dict) -> None:
    for name, s in stats.items():
        m = mine.setdefault(name, type(s)())
        m.runs, m.wins, m.calls = m.runs + s.runs, m.wins + s.wins, m.calls + s.calls


def trace_signature_in(subject):
    """'Fails the same way' for a Trace judged on subject in this process (TraceVerdict.signature)."""
    return lambda trace: check_trace(trace, subject).signature()


def reduce_trace(trace, target: tuple, signature, log=None):
    """A failing trace shrunk to a shortest one that fails the same way (TraceVerdict.signature):
    (trace, shortest status, calls, per-pass statistics)."""
    r = TraceReducer(lambda t: signature(t) == target, log)
    if not r.fails(trace):
        raise ValueError(f"the trace does not fail as {target}: nothing to minimize")
    t, status, calls = r.minimize(trace)
    return t, status, calls, r.stats


def shrink_trace(trace, predicate, stats: dict | None = None, log=None):
    """A smaller trace that satisfies predicate (which must hold for the input; ValueError if not). stats, when
    given, receives calls, proved_shortest, the sizes (events, tokens) before and after, the one-token event
    count after, and the per-pass statistics."""
    r = TraceReducer(predicate, log)
    if not r.fails(trace):
        raise ValueError("shrink_trace: the predicate does not hold for the input trace")
    t, status, calls = r.minimize(trace)
    if stats is not None:
        stats.update(calls=calls, proved_shortest=status == "proven", before=trace.size(), after=t.size(),
                     after_one_token_events=len(flatten(t).events), passes=r.stats)
    return t


@dataclass
class MinimizedTrace:
    trace: object          # the shortest trace found (Trace, note cleared)
    verdict: object        # its TraceVerdict on the subject
    shortest: str
    calls: int
    passes: dict           # pass name -> {"runs", "wins", "calls"}
    seconds: float
    original: object       # the trace it was shrunk from

    def entry(self, source: str, kind: str, identity: dict) -> dict:
        """The reproducer as a trace corpus entry (dryz minimize writes it)."""
        ev, toks = self.original.size()
        provenance = {"found_by": "minimize", "minimized_from": source, "input_kind": kind, "original_events": ev,
                      "original_tokens": toks, "predicate_calls": self.calls,
                      "one_token_events": len(flatten(self.trace).events), "passes": self.passes,
                      "seconds": round(self.seconds, 2), "fault": fault()}
        return trace_entry_json(self.trace, self.verdict, expect=self.verdict.klass, shortest=self.shortest,
                                provenance=provenance, subject=identity)


def minimize_trace_input(trace, subject, log=None, announce=None) -> MinimizedTrace:
    """A trace as `dryz minimize` takes it: judged in an isolation worker first (trace_check.check_trace_in),
    refused with NothingToMinimize when it agrees, else shrunk: one that fails (minimize_trace), or one the
    subject dies on (class crash, or memory with a sanitizer report) as a crashing case is (minimize_case):
    the predicate "the same kind of error in the same function" (TraceVerdict.signature), every evaluation in
    that isolation worker. announce(class) is called once it is judged."""
    import time

    t0 = time.perf_counter()
    with Worker(subject.spec, subject) as w:
        v = check_trace_in(w, trace)
        if v.klass == "agree":
            raise NothingToMinimize("the trace agrees with the oracles; nothing to minimize")
        if v.klass in ("crash", "memory"):
            if announce:
                announce(v.klass)
            small, shortest, calls, stats = reduce_trace(trace, v.signature(),
                                                         lambda t: check_trace_in(w, t).signature(), log=log)
            small = replace(small, note="")
            final = check_trace_in(w, small)  # the reproducer's own report (its frames)
            passes = {name: {"runs": s.runs, "wins": s.wins, "calls": s.calls} for name, s in stats.items()}
            return MinimizedTrace(small, final, shortest, calls, passes, time.perf_counter() - t0, trace)
    first = check_trace(trace, subject)
    if announce:
        announce(first.klass)
    return minimize_trace(trace, first, subject, log=log)


def minimize_trace(trace, first, subject, log=None) -> MinimizedTrace:
    """Shrink a trace whose verdict `first` does not agree (events, tokens, arrays, configuration) to a
    shortest one that fails the same way (TraceVerdict.signature) on the same subject."""
    import time
    t0 = time.perf_counter()
    small, shortest, calls, stats = reduce_trace(trace, first.signature(), trace_signature_in(subject), log=log)
    small = replace(small, note="")
    passes = {name: {"runs": s.runs, "wins": s.wins, "calls": s.calls} for name, s in stats.items()}
    return MinimizedTrace(small, check_trace(small, subject), shortest, calls, passes,
                          time.perf_counter() - t0, trace)
