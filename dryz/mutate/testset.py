"""A minimal upstream test set: the fewest `test_dry(...)` vectors that, added to llama.cpp's own
tests/test-sampling.cpp, kill what dryz kills among the mutants that form can express.

1. The pool: every case `dryz export --as test-sampling` can express from a bounded space (no subject run):
   histories of length 0..POOL_LENGTH over the symbols a b c, one history per equality pattern (the breaker
   fixed), under the exhaustive certificate's configurations (base, window4, breaker, the parameter axis and every
   window cap) and the restart sweep's multi-token breaker sets (dryz.enumerate.restarts.CONFIGS).
2. The kill matrix: each mutant's library (the run's, rebuilt from the cache) runs every pool case in an
   isolation worker (a case that kills or hangs it is isolated by halving its chunk); a vector kills the mutant
   when test_dry would fail on it: the probabilities its tester reads differ from the oracles' by at least the
   tester's tolerance (export.tester_probabilities), or the library dies.
3. Greedy set cover (said so: not proven minimal): among the mutants dryz killed that test-sampling as shipped
   does not, and that some pool vector kills, repeatedly the vector that kills the most not yet killed (ties:
   the shortest history, then pool order), until each is killed or MAX_VECTORS are chosen.
4. The measure: test-sampling compiled with the chosen vectors (export's test_dry calls, after its own), run
   on the pristine build (it must pass: else the expected values are in doubt, exit 2) and on every mutant that
   ran; upstream's score before and after, beside dryz's.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import re
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..case import Case
from ..check import expected_output
from ..config import ALLOWED_LENGTHS, CONFIG_NAMES, parameter_names, space_config, window_cap_names
from ..corpus import PROJECT_DIR, entries, load_entry
from ..enumerate.restarts import CONFIGS as RESTART_CONFIGS
from ..export import TOLERANCE, call_of_test_dry, refusal_of_test_dry, tester_probabilities
from ..subject.answers import Crash
from ..subject.build import build, runtime_env
from ..subject.cache import cache_dir
from ..subject.isolation import Worker
from ..errors import DryzError
from .report import KILLING
from .upstream import build_test_sampling, run_test_sampling, with_calls

POOL_LENGTH = 6   # the pool's longest history
MAX_VECTORS = 25  # the budget of added vectors
CHUNK = 400       # pool cases per call of the isolation worker
CHUNK_TIMEOUT = 5.0  # seconds; a chunk takes milliseconds on a working library
MAX_RESTARTS = 64  # deaths of the worker per library before the rest of the pool is left unrun
MAX_HANGS = 12     # of them hangs (each costs CHUNK_TIMEOUT; enough to halve one chunk to its case)
AFTER_TIMEOUT = 30.0  # seconds of test-sampling with the vectors on a mutant (it takes about one): past it, a hang
SCHEMA = "dryz.upstream-test-set/1"


class TestSetError(RuntimeError, DryzError):
    """The harness in doubt (exit 2): test-sampling with the chosen vectors fails on the pristine build."""


def _canonical(h: tuple[int, ...], fixed: int | None) -> bool:
    """One history per equality pattern: symbols other than `fixed` appear in first-occurrence order a, b, ..."""
    nxt = 0
    for t in h:
        if t == fixed:
            continue
        if t > nxt:
            return False
        if t == nxt:
            nxt += 1
            if nxt == fixed:
                nxt += 1
    return True


def pool(max_len: int = POOL_LENGTH, k: int = 3, corpus: Path | None = PROJECT_DIR) -> list[Case]:
    """The candidate vectors (module docstring, 1), each a case test_dry expresses: the short histories first,
    then the cases of the project corpus's entries test_dry expresses (their history's length may be any)."""
    names = list(CONFIG_NAMES) + parameter_names(CONFIG_NAMES) + window_cap_names(max_len) + [
        f"window{w}/allowed{a}" for w in range(1, max_len + 1) for a in ALLOWED_LENGTHS if a != 1]
    configs = [space_config(name, k, max_len) for name in names]
    out, seen = [], set()

    def add(c: Case) -> None:  # each case once (a window cap's or the parameter axis's may repeat another's)
        if c not in seen:
            seen.add(c)
            out.append(c)

    for n in range(0, max_len + 1):  # the empty history too
        for h in itertools.product(range(k), repeat=n):
            for cfg in configs:
                if _canonical(h, k - 1 if cfg.breakers else None):
                    add(cfg.case(k, h))
            for _, breakers in RESTART_CONFIGS:
                add(Case(history=h, alphabet=k, penalty_last_n=max(64, max_len), breakers=tuple(breakers)))
    for path in entries(corpus) if corpus is not None else []:
        e = load_entry(path)
        if e.case is None or e.data.get("http") or (e.data.get("provenance") or {}).get("fault"):
            continue
        c = replace(e.case, note="")
        if refusal_of_test_dry(c) is None and int((e.data.get("subject") or {}).get("init_dry_abi") or 7) == 7:
            add(c)
    return out


def _run_cases(subject, cases: list[Case]) -> list[np.ndarray]:
    """(An isolation worker's call) each case's output logits on the subject."""
    return [np.asarray(o.logits, dtype=np.float32) for o in subject.run_batch(cases)]


def expectations(cases: list[Case]) -> list[np.ndarray]:
    return [tester_probabilities(c, expected_output(c).logits) for c in cases]


def kills(spec: str, cases: list[Case], want: list[np.ndarray]) -> set[int]:
    """The pool indices whose test_dry would fail on the subject `spec` (module docstring, 2). A chunk the library
    dies (or hangs) on is halved, the left half first, until the case it dies on is alone (a kill); every other
    case is still run. After MAX_RESTARTS deaths (MAX_HANGS of them hangs) the chunks left are not run (a library
    that dies on so much of the pool is killed by any of those found; test-sampling dies with it)."""
    out: set[int] = set()
    queue = [list(range(i, min(i + CHUNK, len(cases)))) for i in range(0, len(cases), CHUNK)]
    deaths = hangs = 0
    with Worker(spec, timeout=CHUNK_TIMEOUT) as w:  # started again after a death
        while queue and deaths <= MAX_RESTARTS and hangs <= MAX_HANGS:
            idx = queue.pop(0)
            got = w.call(_run_cases, [cases[i] for i in idx])
            if not isinstance(got, Crash):
                _tally(cases, want, idx, got, out)
                continue
            deaths += 1
            hangs += got.signal == "hang"  # each costs the whole timeout
            if len(idx) == 1:
                out.add(idx[0])  # it dies (or hangs) on this vector: test-sampling would too
            else:
                queue[:0] = [idx[:len(idx) // 2], idx[len(idx) // 2:]]
    return out


def _tally(cases, want, idx, got, out) -> None:
    """Each case of an answered chunk whose tester would fail is a kill."""
    for i, logits in zip(idx, got):
        if len(logits) != len(cases[i].ids):  # another array size: the tester's size assertion fails
            out.add(i)
            continue
        p = tester_probabilities(cases[i], logits)
        if p.shape != want[i].shape or not np.all(np.abs(p - want[i]) < TOLERANCE):
            out.add(i)  # NaN compares false: a failing assert too


def cover(universe: set[str], kill_sets: dict[int, set[str]], cases: list[Case], limit: int = MAX_VECTORS) \
        -> list[int]:
    """Greedy set cover (module docstring, 3): the chosen pool indices, in the order chosen."""
    left, chosen = set(universe), []
    while left and len(chosen) < limit:
        best = max(kill_sets, key=lambda i: (len(kill_sets[i] & left), -len(cases[i].history), -i))
        if not kill_sets[best] & left:
            break
        chosen.append(best)
        left -= kill_sets[best]
    return chosen


def unreachable_by_test_dry(mutant: dict, source: str) -> bool:
    """Whether test_dry never runs the mutated line: its sampler comes from llama_sampler_init_dry_testing, which
    calls init_dry with no breaker strings (NULL, 0) and hands over the token sequences itself, so neither
    get_overlapping_token_sequences nor init's loop over the breaker strings runs. (The pool's cases run through
    init_dry with the strings, which do run them: a kill there says nothing of test_dry.)"""
    if mutant["function"] == "overlap":
        return True
    if mutant["function"] != "init":
        return False
    lines = source.splitlines()
    head = next((i for i, ln in enumerate(lines) if "seq_breakers != nullptr" in ln and ln.strip().startswith("if")),
                None)
    if head is None:
        return False
    depth, end = 0, head
    for end in range(head, len(lines)):
        depth += lines[end].count("{") - lines[end].count("}")
        if depth == 0 and end > head:
            break
    if head + 1 <= mutant["line"] <= end + 1:
        return True
    # a constant of init used only inside that loop (MAX_CHAR_LEN, MAX_SEQ_LEN): its line runs to no effect
    m = re.search(r"\bconst\s+\w+\s+(\w+)\s*=", lines[mutant["line"] - 1])
    if m is None:
        return False
    start = next(i for i in range(mutant["line"] - 1, -1, -1) if lines[i].startswith("struct llama_sampler * "
                                                                                         "llama_sampler_init_dry("))
    stop = next((i for i in range(end + 1, len(lines)) if lines[i].startswith("}")), len(lines))  # init's end
    uses = [i for i in [*range(start, head), *range(end + 1, stop)]
            if re.search(rf"\b{m.group(1)}\b", lines[i]) and i != mutant["line"] - 1]
    return not uses


def calls(cases: list[Case]) -> str:
    return "".join(call_of_test_dry(c, f"dryz vector {i + 1} of {len(cases)}") for i, c in enumerate(cases))


def select_and_measure(version: str, results: list[dict], control: dict, mutant_diffs: dict[str, str],
                       tree: str, out_dir: Path, denominator: int, source: str, log=print) -> dict:
    """The whole of it (module docstring): the test set, its patch and the scores, written to out_dir
    (test-sampling-dryz.diff, test-set.json); returns the summary. denominator: the mutation score's (the
    mutants run, less those argued equivalent)."""
    t0 = time.monotonic()
    cases = pool()
    want = expectations(cases)
    pristine = Path(control["pristine"])
    doubt = kills(f"libllama:{pristine}", cases, want)  # the control: none should fail on the pristine build
    if doubt:
        log(f"{len(doubt)} pool vectors fail on the pristine build: left out")
        keep = [i for i in range(len(cases)) if i not in doubt]
        cases, want = [cases[i] for i in keep], [want[i] for i in keep]
    log(f"the pool: {len(cases)} vectors test_dry can express (histories up to {POOL_LENGTH} over a b c, and "
        "the corpus's)")
    ran = [r for r in results if r["status"] in ("killed", "survived")]
    key = hashlib.sha256(json.dumps([c.to_json() for c in cases], sort_keys=True).encode()).hexdigest()[:16]
    memo = cache_dir() / "testset" / f"{version}-{key}"
    memo.mkdir(parents=True, exist_ok=True)
    kill_sets: dict[int, set[str]] = {}
    per_mutant: dict[str, int | str] = {}
    killed = [r for r in ran if r["status"] == "killed"]
    with tempfile.TemporaryDirectory(prefix="dryz-testset-") as tmp:
        for j, r in enumerate(killed, 1):
            mid = r["id"]
            if unreachable_by_test_dry(r, source):
                per_mutant[mid] = "unreachable"  # test_dry never runs the mutated line
                continue
            patch = Path(tmp) / f"{mid}.diff"
            patch.write_text(mutant_diffs[mid])
            cached = memo / f"{mid}.json"
            try:
                if cached.exists():  # an interrupted --test-set resumes: each mutant's kills, per pool
                    ks = set(json.loads(cached.read_text()))
                else:
                    lib = build(version, patch, tree=tree, log=lambda m: None)
                    ks = kills(f"libllama:{lib}", cases, want)
                    cached.write_text(json.dumps(sorted(ks)))
            except DryzError as e:  # this mutant only: said, not guessed
                per_mutant[mid] = f"error: {str(e).splitlines()[0][:200]}"
                log(f"[{j}/{len(killed)}] {mid}: {per_mutant[mid]}")
                continue
            per_mutant[mid] = len(ks)
            for i in ks:
                kill_sets.setdefault(i, set()).add(mid)
            log(f"[{j}/{len(killed)}] {mid}: {len(ks)} of the pool's vectors kill it")
    upstream_killed = {r["id"] for r in ran if (r.get("upstream") or {}).get("status") in KILLING}
    expressible = {m for m, n in per_mutant.items() if isinstance(n, int) and n}
    universe = expressible - upstream_killed
    chosen = cover(universe, kill_sets, cases)
    covered = set().union(*(kill_sets[i] for i in chosen)) if chosen else set()
    chosen_cases = [cases[i] for i in chosen]
    added = calls(chosen_cases)
    exe_before = Path(control["upstream_exe"])
    exe_after = build_test_sampling(version, pristine, log, calls=added)
    ok = run_test_sampling(exe_after, pristine, runtime_env(pristine))
    if ok.status != "survived":
        raise TestSetError(f"test-sampling with the chosen vectors fails on the pristine build: {ok.detail}")
    after: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="dryz-testset-") as tmp:
        for j, r in enumerate(ran, 1):
            patch = Path(tmp) / f"{r['id']}.diff"
            patch.write_text(mutant_diffs[r["id"]])
            try:
                lib = build(version, patch, tree=tree, log=lambda m: None)
            except DryzError as e:
                after[r["id"]] = f"error: {str(e).splitlines()[0][:200]}"
                continue
            after[r["id"]] = run_test_sampling(exe_after, lib, runtime_env(lib), timeout=AFTER_TIMEOUT).status
    before_k = {r["id"] for r in ran if (r.get("upstream") or {}).get("status") in KILLING}
    after_k = {m for m, s in after.items() if s in KILLING}
    dryz_k = {r["id"] for r in ran if r["status"] == "killed"}
    src = exe_before.parent / "src"
    original = next(src.glob("*/vendor/llama.cpp/tests/test-sampling.cpp")).read_text()
    patched = with_calls(original, added)
    diff = "".join(difflib.unified_diff(original.splitlines(True), patched.splitlines(True),
                                        "a/tests/test-sampling.cpp", "b/tests/test-sampling.cpp"))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "test-sampling-dryz.diff").write_text(diff)
    summary = {
        "schema": SCHEMA, "version": version, "pool": len(cases), "pool_length": POOL_LENGTH,
        "pool_failing_on_pristine": len(doubt),
        "unreachable": sorted(m for m, n in per_mutant.items() if n == "unreachable"),
        "errors": {m: n for m, n in per_mutant.items() if isinstance(n, str) and n.startswith("error")},
        "mutants_ran": len(ran), "dryz_killed": len(dryz_k), "expressible": len(expressible),
        "upstream_killed_before": len(before_k), "upstream_killed_after": len(after_k),
        "target": len(universe), "covered_by_choice": len(covered & universe), "vectors": len(chosen),
        "expressible_killed_after": len(after_k & expressible), "denominator": denominator,
        "after_not_predicted": sorted(after_k - before_k - covered),
        "predicted_not_after": sorted((covered - after_k)),
        # a mutant dryz left alive that the vectors kill: its triage (equivalent, or a gap dryz cannot see) is wrong
        "survivors_killed_after": sorted(after_k - dryz_k),
        "chosen": [{"case": cases[i].to_json(), "kills": sorted(kill_sets[i] & universe)} for i in chosen],
        "per_mutant": {m: {"pool_vectors": per_mutant.get(m), "before": (r.get("upstream") or {}).get("status"),
                           "after": after.get(m), "dryz": r["status"]} for r in ran for m in [r["id"]]},
        "seconds": round(time.monotonic() - t0, 1),
    }
    (out_dir / "test-set.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def sentence(s: dict) -> str:
    """One line: upstream's score before and after, the vectors, and the target (module docstring)."""
    d = s["denominator"]
    pct = lambda k: f"{100 * k / d:.1f}%" if d else "-"  # noqa: E731
    share = s["expressible_killed_after"] / s["expressible"] if s["expressible"] else 0.0
    return (f"test-sampling kills {s['upstream_killed_before']} of {d} mutants ({pct(s['upstream_killed_before'])}) "
            f"as shipped, {s['upstream_killed_after']} ({pct(s['upstream_killed_after'])}) with {s['vectors']} "
            f"vectors from dryz; dryz kills {s['dryz_killed']} ({pct(s['dryz_killed'])}); of the "
            f"{s['expressible']} dryz kills that test_dry can express, test-sampling with the vectors kills "
            f"{s['expressible_killed_after']} ({100 * share:.1f}%)"
            + (f"; the vectors kill {len(s['survivors_killed_after'])} mutant(s) dryz left alive, against their "
               f"triage: {', '.join(s['survivors_killed_after'])}" if s.get("survivors_killed_after") else ""))
