"""Exhaustive enumeration: every history of length 1..N over k symbols, every symbol as candidate.

The library's side walks the history tree with llama_sampler_clone (subject.TreeRunner); each batch of its
output is judged with the same model and comparison check() uses (check.predict_both, compare_lengths).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import numpy as np

from ..oracle import shipped as model
from ..case import Case, f32
from ..check import case_config, compare_lengths, invert_deltas, predict_both
from ..oracle.shipped import Prediction
from ..subject.symbols import SYMBOLS

CONFIG_NAMES = ("base", "window4", "breaker")
MAX_EXAMPLES = 5
# The parameter axis (--parameters): every allowed_length 0..3 with each (multiplier, base) pair (float32
# values), judged bit-exactly against the as-shipped output model; (1, 2) with allowed_length 1 is the
# invertible seed configuration itself.
ALLOWED_LENGTHS = (0, 1, 2, 3)
PARAMETER_PAIRS = ((f32(1.0), f32(2.0)), (f32(0.8), f32(1.75)), (f32(2.0), f32(1.1)), (f32(1.0), f32(1.0)))


class HarnessError(RuntimeError):
    pass


@dataclass(frozen=True)
class SpaceConfig:
    name: str
    penalty_last_n: int
    breakers: tuple[str, ...] = ()
    multiplier: float = 1.0
    base: float = 2.0
    allowed_length: int = 1

    def case(self, alphabet: int, history) -> Case:
        return Case(history=tuple(int(t) for t in history), alphabet=alphabet,
                    penalty_last_n=self.penalty_last_n, breakers=self.breakers, multiplier=self.multiplier,
                    base=self.base, allowed_length=self.allowed_length)

    def sampler_args(self):
        return (self.multiplier, self.base, self.allowed_length, self.penalty_last_n, self.breakers)

    @property
    def invertible(self) -> bool:
        """The seed parameters (1, 2, 1), whose penalty 2^(L-1) inverts to L; any other configuration is
        compared bit-exactly with the output model (exact_batch)."""
        return self.multiplier == 1.0 and self.base == 2.0 and self.allowed_length == 1

    def to_json(self) -> dict:
        return {"name": self.name, "penalty_last_n": self.penalty_last_n, "breakers": list(self.breakers),
                "multiplier": self.multiplier, "base": self.base, "allowed_length": self.allowed_length,
                "comparison": "L" if self.invertible else "bits"}


def space_config(name: str, alphabet: int, max_len: int) -> SpaceConfig:
    """base, window4, breaker, or windowW (penalty_last_n = W >= 1), optionally with parameters
    NAME/allowedA/mM/bB (allowed_length A >= 0, multiplier M, base B, as float32; any subset, in any order).
    alphabet: its last symbol is the breaker (64 for every alphabet: the breaker is '#')."""
    if "/" in name:
        head, *parts = name.split("/")
        spec = space_config(head, alphabet, max_len)
        kw = {}
        for part in parts:
            m = re.fullmatch(r"(allowed)(\d{1,4})|(m|b)([0-9.eE+-]+)", part)
            field_ = None if m is None else ("allowed_length" if m.group(1) else
                                              {"m": "multiplier", "b": "base"}[m.group(3)])
            if field_ is None or field_ in kw:
                raise ValueError(f"unknown configuration {name!r}: bad or repeated parameter {part!r}")
            try:
                kw[field_] = int(m.group(2)) if m.group(1) else f32(float(m.group(4)))
            except ValueError:
                raise ValueError(f"unknown configuration {name!r}: bad parameter {part!r}") from None
            if field_ != "allowed_length" and not np.isfinite(kw[field_]):
                raise ValueError(f"unknown configuration {name!r}: parameter {part!r} is not finite")
        return SpaceConfig(name, spec.penalty_last_n, spec.breakers, kw.get("multiplier", spec.multiplier),
                           kw.get("base", spec.base), kw.get("allowed_length", spec.allowed_length))
    uncapped = max(64, max_len)  # the window never cuts the history
    if name == "base":
        return SpaceConfig("base", uncapped)
    if name == "breaker":
        return SpaceConfig("breaker", uncapped, (SYMBOLS[alphabet - 1],))
    if name.startswith("window") and name[6:].isdigit() and int(name[6:]) >= 1 and name[6] != "0":
        return SpaceConfig(name, int(name[6:]))
    raise ValueError(f"unknown configuration {name!r} (known: {', '.join(CONFIG_NAMES)}, windowW)")


def parameter_name(name: str, allowed_length: int, multiplier: float, base: float) -> str:
    def short(x):  # the shortest decimal that reads back to the same float32
        return np.format_float_positional(np.float32(x), trim="-")
    return f"{name}/allowed{allowed_length}/m{short(multiplier)}/b{short(base)}"


def parameter_names(names) -> list[str]:
    """The parameter axis for each configuration name: allowed_length 0..3 x PARAMETER_PAIRS, without the
    seed combination (1, 2, 1), which is the configuration itself."""
    out = []
    for name in names:
        for a in ALLOWED_LENGTHS:
            for m, b in PARAMETER_PAIRS:
                if (m, b, a) != (1.0, 2.0, 1):
                    out.append(parameter_name(name, a, m, b))
    return out


def window_cap_names(max_len: int) -> list[str]:
    """Every window cap 1..N: penalty_last_n < len(history) wraps the ring buffer, for every cap."""
    return [f"window{w}" for w in range(1, max_len + 1)]


def shard_tasks(tasks: list, index: int, count: int) -> list[int]:
    """Shard `index` of `count` (1-based): every count-th task, a deterministic slice of the task list."""
    return [j for j in range(len(tasks)) if j % count == index - 1]


def shard_slicing(count: int) -> int:
    """The worker count the slice list of a sharded run is made for: fixed by the shard count alone, so
    every shard (whatever its --workers) cuts the space the same way."""
    return max(2, 2 * count)


def histories(k: int, n: int, rows: np.ndarray) -> np.ndarray:
    """The histories with lexicographic indices `rows` among all length-n histories over k symbols."""
    powers = k ** np.arange(n - 1, -1, -1, dtype=np.int64)
    return (rows[:, None] // powers[None, :]) % k


def case_count(k: int, max_len: int) -> int:
    return k * sum(k ** n for n in range(1, max_len + 1))


def model_logits(pred: Prediction, cfg) -> np.ndarray:
    """model.output_logits(zeros, pred, cfg): the as-shipped output model with initial logits 0, evaluated
    once per distinct (L, penalized) pair (it is elementwise in them) and gathered back."""
    L = pred.L.astype(np.int64)
    top = int(L.max()) + 1 if L.size else 1
    if L.size and L.min() < 0:
        raise HarnessError("the model predicted a negative L")
    table_L = np.tile(np.arange(top, dtype=np.int64), 2)[None, :]
    table_pen = np.repeat(np.array([False, True]), top)[None, :]
    table = model.output_logits(np.zeros(2 * top, dtype=np.float32),
                                Prediction(table_L, table_pen, np.ones(1, dtype=bool)), cfg)[0]
    return table[pred.penalized.astype(np.int64) * top + L]


@dataclass
class ExactBatch:
    """A batch judged bit-exactly: per case, codes (0 agree, 1 mismatch, 2 oracle self-disagreement), L (the
    model's L where the library's bits equal the model's, -1 where they differ), changed (the library's
    logit is not +0.0: it penalized), flagged (the off-by-one reference, L + 1 where penalized, differs from
    the library's bits) and bits (the library's float32 logits as uint32)."""
    codes: np.ndarray
    L: np.ndarray
    changed: np.ndarray
    flagged: np.ndarray
    bits: np.ndarray


def exact_batch(cfg, logits: np.ndarray, pa: Prediction, pb: Prediction) -> ExactBatch:
    """Compare the library's output logits bit for bit with the output model. A and B must agree on L and on
    which candidates are penalized first; where they do not, the case is an oracle self-disagreement."""
    agree = (pa.L == pb.L) & (pa.penalized == pb.penalized)
    bits = np.ascontiguousarray(logits, dtype=np.float32).view(np.uint32)
    expected = model_logits(pa, cfg).view(np.uint32)
    codes = np.where(~agree, 2, np.where(bits != expected, 1, 0)).astype(np.int8)
    off = Prediction(pa.L + pa.penalized, pa.penalized, pa.ran)
    flagged = bits != model_logits(off, cfg).view(np.uint32)
    L = np.where(bits == expected, pa.L, -1)
    return ExactBatch(codes, L, bits != 0, flagged, bits)


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
    # Canonical mode (dryz.enumerate.canonical): the counts above are covered concrete counts (multiplicity-weighted);
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

    def to_json(self) -> dict:
        d = self.config.to_json()
        d.update(cases=self.cases, histories=self.histories, mismatches=self.mismatches,
                 oracle_disagreements=self.oracle_disagreements, penalized_cases=self.penalized_cases,
                 max_L=self.max_L, off_by_one_flagged=self.off_by_one_flagged,
                 cases_by_length={str(n): c for n, c in sorted(self.by_length.items())},
                 L_histogram={str(L): c for L, c in sorted(self.L_histogram.items())},
                 examples=[{"kind": kind, "case": c.to_json()} for kind, c in self.examples],
                 seconds=round(self.seconds, 3))
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
                    "fresh_violations"):
            setattr(r, key, int(d.get(key, 0)))
        r.seconds = float(d.get("seconds", 0.0))
        r.by_length = {int(n): c for n, c in d.get("cases_by_length", {}).items()}
        r.L_histogram = {int(n): c for n, c in d.get("L_histogram", {}).items()}
        r.logit_bits_histogram = {int(n): c for n, c in d.get("logit_bits_histogram", {}).items()}
        r.canonical_by_length = {int(n): c for n, c in d.get("canonical_histories_by_length", {}).items()}
        r.examples = [(e["kind"], Case.from_json(e["case"])) for e in d.get("examples", [])]
        return r

    def merge(self, other: "ConfigResult") -> None:
        for key in ("cases", "histories", "mismatches", "oracle_disagreements", "off_by_one_flagged",
                    "penalized_cases", "canonical_cases", "canonical_histories", "canonical_mismatches",
                    "fresh_violations"):
            setattr(self, key, getattr(self, key) + getattr(other, key))
        self.max_L = max(self.max_L, other.max_L)
        self.mode = other.mode
        for mine, theirs in ((self.by_length, other.by_length), (self.L_histogram, other.L_histogram),
                             (self.canonical_by_length, other.canonical_by_length),
                             (self.logit_bits_histogram, other.logit_bits_histogram)):
            for n, c in theirs.items():
                mine[n] = mine.get(n, 0) + c
        self.examples.extend(other.examples[:MAX_EXAMPLES - len(self.examples)])
        self.seconds += other.seconds


def run_slice(lib, k: int, max_len: int, spec: SpaceConfig, prefix=(), top: int | None = None) -> ConfigResult:
    """One slice of a configuration's space: the histories below `prefix`, or (top=d) every history of
    length 1..d. Library output and oracles meet in the sink, batch by batch."""
    res = ConfigResult(spec)
    cfg = case_config(spec.case(k, ()))
    cands = np.arange(k, dtype=np.int64)
    t0 = time.perf_counter()

    def exact_sink(n: int, rows: np.ndarray, logits: np.ndarray):
        H = histories(k, n, rows)
        pa, pb = predict_both(H, cands, cfg)
        eb = exact_batch(cfg, logits, pa, pb)
        codes = eb.codes
        res.cases += codes.size
        res.histories += len(rows)
        res.by_length[n] = res.by_length.get(n, 0) + codes.size
        res.mismatches += int((codes == 1).sum())
        res.oracle_disagreements += int((codes == 2).sum())
        res.penalized_cases += int(eb.changed.sum())
        res.off_by_one_flagged += int(eb.flagged.sum())
        known = eb.L[eb.L >= 0]
        if known.size:
            res.max_L = max(res.max_L, int(known.max()))
        histogram_add(res.L_histogram, known)
        histogram_add(res.logit_bits_histogram, eb.bits)
        if len(res.examples) < MAX_EXAMPLES and codes.any():
            for r in np.nonzero(codes.any(axis=1))[0][:MAX_EXAMPLES - len(res.examples)]:
                kind = "oracle-disagreement" if (codes[r] == 2).any() else "mismatch"
                res.examples.append((kind, spec.case(k, H[r])))

    def sink(n: int, rows: np.ndarray, logits: np.ndarray):
        H = histories(k, n, rows)
        pa, pb = predict_both(H, cands, cfg)
        lib_L, bad = invert_deltas(-logits)
        # A delta that is neither 0 nor 2^(L-1) is the library's doing, so a mismatch: -1 equals no oracle L.
        lib_L[bad] = -1
        codes = compare_lengths(lib_L, pa.L, pb.L)
        res.cases += codes.size
        res.histories += len(rows)
        res.by_length[n] = res.by_length.get(n, 0) + codes.size
        res.mismatches += int((codes == 1).sum())
        res.oracle_disagreements += int((codes == 2).sum())
        res.penalized_cases += int((lib_L > 0).sum())
        res.max_L = max(res.max_L, int(lib_L.max()))
        for L, cnt in enumerate(np.bincount(lib_L[lib_L >= 0]).tolist()):
            if cnt:
                res.L_histogram[L] = res.L_histogram.get(L, 0) + cnt
        # Non-vacuity: a reference that is off by one wherever the oracle penalizes must be caught.
        off_by_one = pa.L + (pa.L > 0)
        res.off_by_one_flagged += int((lib_L != off_by_one).sum())
        if len(res.examples) < MAX_EXAMPLES and codes.any():
            for r in np.nonzero(codes.any(axis=1))[0][:MAX_EXAMPLES - len(res.examples)]:
                kind = "oracle-disagreement" if (codes[r] == 2).any() else "mismatch"
                res.examples.append((kind, spec.case(k, H[r])))

    if not spec.invertible:
        sink = exact_sink
    if top is not None:
        lib.run_tree(k, top, spec.sampler_args(), sink)
    else:
        lib.run_tree(k, max_len, spec.sampler_args(), sink, prefix)
    res.seconds = time.perf_counter() - t0
    return res


def slices(k: int, max_len: int, workers: int) -> list[dict]:
    """Deterministic partition of one configuration's space: histories of length <= d, then one slice per
    prefix of length d. d grows until there are enough slices to keep every worker busy."""
    if workers <= 1:
        return [{"top": max_len}]
    d = 1
    while k ** d < 8 * workers and d < max_len - 1:
        d += 1
    if d >= max_len:
        return [{"top": max_len}]
    out = [{"top": d}]
    for row in range(k ** d):
        out.append({"prefix": tuple(int(x) for x in histories(k, d, np.array([row]))[0])})
    return out


def _run_task(args):
    from ..check import subject
    k, max_len, spec, sl, canonical = args
    if canonical:
        from .canonical import run_canonical_slice
        return run_canonical_slice(subject(), k, max_len, spec, **sl)
    return run_slice(subject(), k, max_len, spec, **sl)


def config_slices(k, max_len: int, spec: SpaceConfig, workers: int, canonical: bool = False) -> list[dict]:
    if canonical:
        from .canonical import canonical_slices, space_for
        return canonical_slices(space_for(spec, k, max_len), max_len, workers)
    return slices(k, max_len, workers)


class Interrupted(Exception):
    """Ctrl-C during run_configs: what was merged so far and which tasks it covers."""

    def __init__(self, results, done):
        super().__init__("interrupted")
        self.results, self.done = results, done


def _ignore_sigint():
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and ends the pool


def run_configs(lib, k, max_len: int, specs, workers: int = 1, progress=None, canonical: bool = False,
                tasks=None, scheduler=None, partial=None, on_done=None) -> list[ConfigResult]:
    """Every configuration's space, split into slices run by `workers` forked processes (1: in-process).
    Slices are merged in their fixed order, so results do not depend on the number of workers.
    canonical: enumerate equality patterns (dryz.enumerate.canonical); k None there means every alphabet size.
    tasks: an explicit list of (config index, slice) to run (a shard, or what a resumed run has left); default
    every slice. partial: ConfigResults to merge into (a resumed run's). on_done(i): called with the position
    in `tasks` of each merged slice.
    scheduler: a Dask scheduler address or distributed.Client (dryz.dask_exec): the same slices run as Dask
    tasks instead of in the fork pool (workers then only cuts the slice list).
    Ctrl-C ends the pool at once and raises Interrupted with the results merged so far."""
    if tasks is None:
        tasks = [(ci, sl) for ci, spec in enumerate(specs)
                 for sl in config_slices(k, max_len, spec, workers, canonical)]
    tasks = [(ci, (k, max_len, specs[ci], sl, canonical)) for ci, sl in tasks]
    results = partial or [ConfigResult(spec, mode="canonical" if canonical else "plain") for spec in specs]
    own_client = None
    done = []
    if scheduler is not None:
        from . import dask_exec
        client = dask_exec.connect(scheduler)
        own_client = client if client is not scheduler else None  # made here from an address: closed here
        try:
            dask_exec.require_subject(client, lib.identity.get("libllama_sha256"))
        except BaseException:
            if own_client is not None:
                own_client.close()
            raise
        outs = dask_exec.map_in_order(client, [t for _, t in tasks])
        pool = None
    elif workers <= 1:
        outs = (_run_task(t) for _, t in tasks)
        pool = None
    else:
        import multiprocessing as mp
        pool = mp.get_context("fork").Pool(workers, initializer=_ignore_sigint)
        outs = pool.imap(_run_task, [t for _, t in tasks])
    import signal
    interrupted = False
    failed = True
    try:
        for i, ((ci, _), part) in enumerate(zip(tasks, outs)):
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
            pool.join()
        if scheduler is not None:
            outs.close()  # cancels what is still pending
        if own_client is not None:
            own_client.close()
    if interrupted:
        raise Interrupted(results, done)
    return results


def multiplier_zero_control(lib, k: int, max_len: int, specs) -> dict:
    """Negative control: with multiplier 0 the sampler must leave every logit at exactly 0."""
    nonzero = 0
    cases = 0
    for spec in specs:
        def sink(n, rows, logits):
            nonlocal nonzero, cases
            nonzero += int(np.count_nonzero(logits))
            cases += logits.size
        args = (0.0,) + spec.sampler_args()[1:]
        lib.run_tree(k, max_len, args, sink)
    return {"max_length": max_len, "cases": cases, "nonzero_deltas": nonzero,
            "passed": nonzero == 0 and cases > 0}


PERIODIC_CONTROLS = ((1, 6, None), (2, 9, None), (3, 11, None), (3, 11, 4), (2, 10, 5), (5, 23, None),
                     (7, 40, 20))


def periodic_control(check_fn) -> dict:
    """A history (0 1 .. p-1) repeated to length n; with window W (or none), the next symbol in the period has
    L = min(n, W) - p, every other symbol 0. Two checks in one: both oracles must give the closed form (a
    harness check: if they do not, the run is void), and so must the library (a check of the subject: if it
    does not, that is a finding, with the case printed and counted like any mismatch). The off-by-one
    reference must flag every one of these cases' penalized candidates (non-vacuity that no space can lack)."""
    rows, findings = [], []
    oracles_ok, library_ok, flagged = True, True, 0
    for p, n, W in PERIODIC_CONTROLS:
        hist = [i % p for i in range(n)]
        case = Case(history=tuple(hist), alphabet=p + 1, penalty_last_n=W if W else max(64, n))
        v = check_fn(case)
        expected = [0] * (p + 1)
        expected[n % p] = min(n, W or n) - p
        o_ok = v.oracle_L == expected and v.oracle_B_L == expected
        l_ok = v.ok and v.library_L == expected
        oracles_ok &= o_ok
        library_ok &= l_ok
        if v.library_L is not None:
            flagged += sum(1 for a, b in zip(v.library_L, v.oracle_L) if a != b + (b > 0))
        if o_ok and not l_ok:
            findings.append({"kind": "mismatch", "case": case.to_json(), "verdict_class": v.klass})
        rows.append({"period": p, "length": n, "window": W, "expected_L": expected,
                     "library_L": v.library_L, "oracle_L": v.oracle_L, "oracle_B_L": v.oracle_B_L,
                     "oracles_passed": o_ok, "library_passed": l_ok})
    return {"passed": library_ok, "oracles_passed": oracles_ok, "off_by_one_flagged": flagged,
            "library_failures": len(findings), "findings": findings, "cases": rows}
