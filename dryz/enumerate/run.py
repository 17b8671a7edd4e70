"""Exhaustive enumeration: every history of length 1..N over k symbols, every symbol as candidate.

The library's side walks the history tree with llama_sampler_clone (Subject.walk); each batch of its
output is judged with the same model and comparison check() uses (check.check_batch).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..case import Case
from ..check import check_batch
from ..verdict import crash_fields
from ..config import SpaceConfig, case_config
from ..space import PlainSpace, canonical_slices, plain_slices, space_for
from ..subject.answers import Crash, SubjectCrashed
from ..symbols import MAX_ALPHABET
from . import dask_exec
from ..subject.isolation import Pool
from ..subject.registry import opened

MAX_EXAMPLES = 5

def shard_tasks(tasks: list, index: int, count: int) -> list[int]:
    """Shard `index` of `count` (1-based): every count-th task, a deterministic slice of the task list."""
    return [j for j in range(len(tasks)) if j % count == index - 1]


def shard_slicing(count: int) -> int:
    """The worker count the slice list of a sharded run is made for: fixed by the shard count alone, so
    every shard (whatever its --workers) cuts the space the same way."""
    return max(2, 2 * count)


def histogram_add(hist: dict, values: np.ndarray, weight: int = 1) -> None:
    """hist[v] += weight for every v in values (non-negative integers)."""
    u, c = np.unique(values, return_counts=True)
    for v, cnt in zip(u.tolist(), c.tolist()):
        hist[int(v)] = hist.get(int(v), 0) + cnt * weight


@dataclass
class ConfigResult:
    config: SpaceConfig
    cases: int = 0
    histories: int = 0
    mismatches: int = 0
    oracle_disagreements: int = 0
    off_by_one_flagged: int = 0
    penalized_cases: int = 0
    max_L: int = 0
    by_length: dict = field(default_factory=dict)
    examples: list = field(default_factory=list)  # first few disagreeing Cases
    seconds: float = 0.0
    L_histogram: dict = field(default_factory=dict)  # library L -> cases (a checksum of the whole output)
    # Canonical mode (dryz.space.Space): the counts above are covered concrete counts (multiplicity-weighted);
    # these are the canonical ones actually run.
    mode: str = "plain"
    canonical_cases: int = 0
    canonical_histories: int = 0
    canonical_mismatches: int = 0
    fresh_violations: int = 0  # a fresh (absent) candidate got L != 0; counted in the mismatches too
    canonical_by_length: dict = field(default_factory=dict)  # histories per length
    # Bit-exact configurations (not the invertible seed parameters): the library's output logits, float32
    # bits as an unsigned integer -> cases (the checksum of the output; L_histogram then holds the model's L
    # of the cases whose bits agree).
    logit_bits_histogram: dict = field(default_factory=dict)
    # Histories whose class (check()'s, per history) is not agree, beside the per-case counts above:
    # mismatch, oracle-disagreement, and every broken promise ("promise-..." a finding, "documented-..." the
    # source's own limitation), weighted by the histories each stands for.
    history_classes: dict = field(default_factory=dict)
    # Slices whose walk the subject did not survive (its worker process died or hung): a finding; the slice's
    # cases are not counted.
    crashes: list = field(default_factory=list)
    # Histories the subject cannot express (an engine without a window parameter, a refusal, an answer that
    # cannot be read back exactly): asked, not judged, counted like the judged ones (cases weighted), with why.
    not_judged_cases: int = 0
    not_judged_histories: int = 0
    canonical_not_judged_cases: int = 0
    not_judged_why: dict = field(default_factory=dict)  # why -> histories
    # Histories the subject raised on and survived (an engine's exception: class crash, a finding), counted as
    # covered like the judged ones (cases weighted), with what it raised; the rest of the slice is judged.
    raised_cases: int = 0
    raised_histories: int = 0
    canonical_raised_cases: int = 0
    raised_why: dict = field(default_factory=dict)  # what the subject raised -> histories

    @classmethod
    def crashed(cls, spec: SpaceConfig, canonical: bool, slice_: dict, crash: Crash) -> "ConfigResult":
        r = cls(spec, mode="canonical" if canonical else "plain")
        r.crashes.append({"slice": {k: [list(p) for p in v] if k == "prefixes" else
                                    (list(v) if isinstance(v, tuple) else v) for k, v in slice_.items()},
                          "signal": crash.signal, "detail": crash.detail, "stderr": crash.stderr[-500:],
                          **crash_fields(crash)})  # a sanitizer report: class memory
        return r

    def tally(self, n: int, b, weights: np.ndarray, history_weight: int = 1, fresh: int | None = None,
              alphabet: int | None = None) -> None:
        """Add one batch's verdict (check.check_batch) to the counts: every case weighted by the concrete
        (history, candidate) cases it stands for (1 in a plain run), every history by history_weight. fresh:
        the column of a canonical history's fresh candidate, which must come back bit-identical +0.0."""
        codes = b.codes
        if fresh is not None:
            viol = np.not_equal(b.bits[:, fresh], 0)
            if viol.any():
                self.fresh_violations += int(viol.sum())
                codes = codes.copy()
                codes[:, fresh] = np.where(viol & (codes[:, fresh] == 0), 1, codes[:, fresh])
        nh = len(b.H)
        covered = nh * int(weights.sum())
        self.histories += nh * history_weight
        self.cases += covered
        self.by_length[n] = self.by_length.get(n, 0) + covered
        if self.mode == "canonical":
            self.canonical_histories += nh
            self.canonical_cases += codes.size
            self.canonical_by_length[n] = self.canonical_by_length.get(n, 0) + nh
            self.canonical_mismatches += int((codes == 1).sum()) if codes.any() else 0
        w = [int(x) for x in weights]
        if codes.any():
            self.mismatches += _weighted(codes == 1, w)
            self.oracle_disagreements += _weighted(codes == 2, w)
        self.penalized_cases += _weighted(b.penalized, w)
        self.off_by_one_flagged += _weighted(b.flagged, w)
        L = b.L
        for wj in set(w):
            cols = [j for j, x in enumerate(w) if x == wj]
            sub = L if len(cols) == len(w) else L[:, cols]
            for v, c in enumerate(np.bincount(sub[sub >= 0]).tolist()):  # L is a small non-negative int
                if c:
                    self.L_histogram[v] = self.L_histogram.get(v, 0) + c * wj
            if not b.invertible:
                histogram_add(self.logit_bits_histogram, b.bits[:, cols], wj)
        if L.size:
            self.max_L = max(self.max_L, int(L.max()))
        odd = b.odd_rows()
        if fresh is not None:  # a fresh-symbol violation makes its history a mismatch
            known = {r for r, _ in odd}
            odd = sorted(odd + [(r, "mismatch") for r in np.nonzero((codes == 1).any(axis=1))[0].tolist()
                                if r not in known])
        for r, klass in odd:
            self.history_classes[klass] = self.history_classes.get(klass, 0) + history_weight
        for r, klass in odd[:max(0, MAX_EXAMPLES - len(self.examples))]:
            kind = "oracle-disagreement" if (codes[r] == 2).any() else klass
            k = alphabet if alphabet is not None else int(max(b.cands)) + 1
            self.examples.append((kind, self.config.case(k, b.H[r])))

    def tally_not_judged(self, n: int, nh: int, weights: np.ndarray, why: str, history_weight: int = 1) -> None:
        """nh histories of length n the subject cannot express: counted as covered, never judged."""
        self.not_judged_cases += nh * int(weights.sum())
        self.not_judged_histories += nh * history_weight
        self.not_judged_why[why] = self.not_judged_why.get(why, 0) + nh * history_weight
        if self.mode == "canonical":
            self.canonical_not_judged_cases += nh * len(weights)
            self.canonical_by_length[n] = self.canonical_by_length.get(n, 0) + nh

    def tally_raised(self, n: int, H: np.ndarray, weights: np.ndarray, why: str, history_weight: int = 1,
                     alphabet: int | None = None) -> None:
        """Histories of length n the subject raised on (and survived): class crash, covered, each an example
        until MAX_EXAMPLES."""
        nh = len(H)
        self.raised_cases += nh * int(weights.sum())
        self.raised_histories += nh * history_weight
        self.raised_why[why] = self.raised_why.get(why, 0) + nh * history_weight
        self.history_classes["crash"] = self.history_classes.get("crash", 0) + nh * history_weight
        if self.mode == "canonical":
            self.canonical_raised_cases += nh * len(weights)
            self.canonical_by_length[n] = self.canonical_by_length.get(n, 0) + nh
        k = alphabet if alphabet is not None else int(H.max(initial=0)) + 1
        for h in H[:max(0, MAX_EXAMPLES - len(self.examples))]:
            self.examples.append(("crash", self.config.case(k, tuple(int(x) for x in h))))

    def to_json(self) -> dict:
        d = self.config.to_json()
        d.update(cases=self.cases, histories=self.histories, mismatches=self.mismatches,
                 oracle_disagreements=self.oracle_disagreements, penalized_cases=self.penalized_cases,
                 max_L=self.max_L, off_by_one_flagged=self.off_by_one_flagged,
                 cases_by_length={str(n): c for n, c in sorted(self.by_length.items())},
                 L_histogram={str(L): c for L, c in sorted(self.L_histogram.items())},
                 history_classes=dict(sorted(self.history_classes.items())),
                 examples=[{"kind": kind, "case": c.to_json()} for kind, c in self.examples],
                 seconds=round(self.seconds, 3))
        if self.crashes:
            d["crashes"] = self.crashes
        if self.raised_histories:
            d.update(raised_cases=self.raised_cases, raised_histories=self.raised_histories,
                     raised_why=dict(sorted(self.raised_why.items())))
            if self.mode == "canonical":
                d["canonical_raised_cases"] = self.canonical_raised_cases
        if self.not_judged_histories:
            d.update(not_judged_cases=self.not_judged_cases, not_judged_histories=self.not_judged_histories,
                     not_judged_why=dict(sorted(self.not_judged_why.items())))
            if self.mode == "canonical":
                d["canonical_not_judged_cases"] = self.canonical_not_judged_cases
        if not self.config.invertible:
            d["logit_bits_histogram"] = {str(b): c for b, c in sorted(self.logit_bits_histogram.items())}
        if self.mode == "canonical":
            d.update(mode="canonical", canonical_cases=self.canonical_cases,
                     canonical_histories=self.canonical_histories,
                     canonical_mismatches=self.canonical_mismatches, fresh_violations=self.fresh_violations,
                     canonical_histories_by_length={str(n): c for n, c in
                                                    sorted(self.canonical_by_length.items())})
        return d


    @classmethod
    def from_json(cls, spec: SpaceConfig, d: dict) -> "ConfigResult":
        """The inverse of to_json (a partial result being resumed)."""
        r = cls(spec, mode=d.get("mode", "plain"))
        for key in ("cases", "histories", "mismatches", "oracle_disagreements", "off_by_one_flagged",
                    "penalized_cases", "max_L", "canonical_cases", "canonical_histories", "canonical_mismatches",
                    "fresh_violations", "not_judged_cases", "not_judged_histories", "canonical_not_judged_cases",
                    "raised_cases", "raised_histories", "canonical_raised_cases"):
            setattr(r, key, int(d.get(key, 0)))
        r.not_judged_why = dict(d.get("not_judged_why", {}))
        r.raised_why = dict(d.get("raised_why", {}))
        r.seconds = float(d.get("seconds", 0.0))
        r.by_length = {int(n): c for n, c in d.get("cases_by_length", {}).items()}
        r.L_histogram = {int(n): c for n, c in d.get("L_histogram", {}).items()}
        r.logit_bits_histogram = {int(n): c for n, c in d.get("logit_bits_histogram", {}).items()}
        r.canonical_by_length = {int(n): c for n, c in d.get("canonical_histories_by_length", {}).items()}
        r.history_classes = dict(d.get("history_classes", {}))
        r.examples = [(e["kind"], Case.from_json(e["case"])) for e in d.get("examples", [])]
        r.crashes = list(d.get("crashes", []))
        return r

    def merge(self, other: "ConfigResult") -> None:
        for key in ("cases", "histories", "mismatches", "oracle_disagreements", "off_by_one_flagged",
                    "penalized_cases", "canonical_cases", "canonical_histories", "canonical_mismatches",
                    "fresh_violations", "not_judged_cases", "not_judged_histories", "canonical_not_judged_cases",
                    "raised_cases", "raised_histories", "canonical_raised_cases"):
            setattr(self, key, getattr(self, key) + getattr(other, key))
        for mine, theirs in ((self.not_judged_why, other.not_judged_why), (self.raised_why, other.raised_why)):
            for why, c in theirs.items():
                mine[why] = mine.get(why, 0) + c
        self.max_L = max(self.max_L, other.max_L)
        self.mode = other.mode
        for mine, theirs in ((self.by_length, other.by_length), (self.L_histogram, other.L_histogram),
                             (self.canonical_by_length, other.canonical_by_length),
                             (self.logit_bits_histogram, other.logit_bits_histogram),
                             (self.history_classes, other.history_classes)):
            for n, c in theirs.items():
                mine[n] = mine.get(n, 0) + c
        self.examples.extend(other.examples[:MAX_EXAMPLES - len(self.examples)])
        self.crashes.extend(other.crashes)
        self.seconds += other.seconds


def _weighted(mask: np.ndarray, weights: list[int]) -> int:
    """sum over columns j of weights[j] * (cases marked in column j)."""
    per = mask.sum(axis=0).tolist()
    return sum(c * w for c, w in zip(per, weights))


def run_slice(lib, k, max_len: int, spec: SpaceConfig, canonical: bool = False, prefix=(), top=None,
              prefixes=None) -> ConfigResult:
    """One slice of a configuration's space (plain: every history over k symbols; canonical: one history per
    equality pattern, k None meaning every alphabet size): the subtrees below `prefixes` (or one `prefix`),
    or (top=d) every history of length 1..d. The library's output and the oracles meet in check_batch, batch
    by batch, and ConfigResult.tally weighs each case by the concrete cases it stands for."""
    space = space_for(spec, k, max_len) if canonical else PlainSpace(k, max_len)
    res = ConfigResult(spec, mode="canonical" if canonical else "plain")
    cfg = case_config(spec.case(k or MAX_ALPHABET, ()), lib.abi, lib.caps.deviations)
    weights = {}
    t0 = time.perf_counter()

    def sink(n, m, H, logits, cands):
        if m not in weights:
            weights[m] = np.array(space.weights(m), dtype=object)
        b = check_batch(cfg, H, np.asarray(cands, dtype=np.int64), logits)
        res.tally(n, b, weights[m], space.history_weight(m), m if canonical and space.fresh(m) else None, k)

    def not_judged(n, m, H, why):
        if m not in weights:
            weights[m] = np.array(space.weights(m), dtype=object)
        res.tally_not_judged(n, len(H), weights[m], why, space.history_weight(m))

    def raised(n, m, H, why):
        if m not in weights:
            weights[m] = np.array(space.weights(m), dtype=object)
        res.tally_raised(n, H, weights[m], why, space.history_weight(m), k)

    sink.not_judged = not_judged
    sink.raised = raised

    lib.walk(space, top if top is not None else max_len, spec.sampler_args(), sink,
         [()] if top is not None else [tuple(p) for p in (prefixes if prefixes is not None else [prefix])])
    res.seconds = time.perf_counter() - t0
    return res


def _run_task(subject, args):
    """One slice on the subject (a call an isolation worker runs); a subject that crashes on one of its cases
    (an out-of-process subject reports it: SubjectCrashed) makes the slice's answer that Crash."""
    k, max_len, spec, sl, canonical = args
    try:
        return run_slice(subject, k, max_len, spec, canonical, **sl)
    except SubjectCrashed as e:
        if e.case is not None:
            return Crash(f"{e.crash.detail} (on {e.case.dumps()})", e.crash.signal, e.crash.stderr)
        return e.crash


def _dask_task(args):
    """One slice in a Dask worker process: the subject reopened there from its spec (once per process)."""
    spec, task = args
    return _run_task(opened(spec), task)


def config_slices(k, max_len: int, spec: SpaceConfig, workers: int, canonical: bool = False) -> list[dict]:
    if canonical:
        return canonical_slices(space_for(spec, k, max_len), max_len, workers)
    return plain_slices(k, max_len, workers)


class Interrupted(Exception):
    """Ctrl-C during run_configs: what was merged so far and which tasks it covers."""

    def __init__(self, results, done):
        super().__init__("interrupted")
        self.results, self.done = results, done


def run_configs(lib, k, max_len: int, specs, workers: int = 1, progress=None, canonical: bool = False,
                tasks=None, scheduler=None, partial=None, on_done=None) -> list[ConfigResult]:
    """Every configuration's space, split into slices run by `workers` isolation workers (dryz.subject.isolation:
    processes forked from this one, which holds the subject). Slices are merged in their fixed order, so results do not depend on the number of workers.
    canonical: enumerate equality patterns (dryz.space.Space); k None there means every alphabet size.
    tasks: an explicit list of (config index, slice) to run (a shard, or what a resumed run has left); default
    every slice. partial: ConfigResults to merge into (a resumed run's). on_done(i): called with the position
    in `tasks` of each merged slice.
    scheduler: a Dask scheduler address or distributed.Client (dryz.enumerate.dask_exec): the same slices run as Dask
    tasks instead (workers then only cuts the slice list). A slice whose worker dies is recorded as a crash
    (ConfigResult.crashes), a finding. Ctrl-C ends the workers at once and raises Interrupted with the results
    merged so far."""
    if tasks is None:
        tasks = [(ci, sl) for ci, spec in enumerate(specs)
                 for sl in config_slices(k, max_len, spec, workers, canonical)]
    tasks = [(ci, (k, max_len, specs[ci], sl, canonical)) for ci, sl in tasks]
    results = partial or [ConfigResult(spec, mode="canonical" if canonical else "plain") for spec in specs]
    own_client = None
    done = []
    pool = None
    if scheduler is not None:
        client = dask_exec.connect(scheduler)
        own_client = client if client is not scheduler else None  # made here from an address: closed here
        try:
            dask_exec.require_subject(client, lib.spec, lib.identity)
        except BaseException:
            if own_client is not None:
                own_client.close()
            raise
        outs = dask_exec.map_in_order(client, _dask_task, [(lib.spec, t) for _, t in tasks])
    else:
        # Every slice in an isolation worker (forked from this process, which holds the subject): a slice that
        # kills the subject's process is a crash finding, and the other slices go on.
        pool = Pool(lib.spec, lib, max(1, min(workers, len(tasks) or 1)),
                    timeout=None)
        outs = pool.map(_run_task, [(t,) for _, t in tasks])
    import signal
    interrupted = False
    failed = True
    try:
        for i, ((ci, t), part) in enumerate(zip(tasks, outs)):
            if isinstance(part, Crash):
                part = ConfigResult.crashed(specs[ci], canonical, t[3], part)
            # A slice's merge and its bookkeeping are one step: Ctrl-C waits for both (never counted, unrecorded).
            old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                results[ci].merge(part)
                done.append(i)
                if on_done:
                    on_done(i)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
            if progress:
                progress(part.canonical_histories if canonical else part.histories)
        failed = False
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if pool is not None:
            if failed:  # Ctrl-C, or a slice that raised: the rest is not waited for
                pool.terminate()
            else:
                pool.close()
        if scheduler is not None:
            outs.close()  # cancels what is still pending
        if own_client is not None:
            own_client.close()
    if interrupted:
        raise Interrupted(results, done)
    return results
