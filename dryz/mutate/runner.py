"""`dryz mutate`: build each mutant with `dryz subject build --patch` and run it through the killer.

One mutant is one task (`run_one`): write its patch, build it (a build that fails is *stillborn*), compare its
DRY object code with the pristine build's (identical: *equivalent*, proven, nothing run), run llama.cpp's
test-sampling on it (the baseline) and the gate's modes (dryz.gate.plan and run, dryz/mutate/modes.py); the result
is one JSON. Tasks are
independent: they run here one after another, or as Dask tasks on a cluster (`--scheduler`, each worker builds
its mutants), and each result is written to WORKDIR/results/ID.json as it finishes, so an interrupted run
resumes where it stopped. Before any mutant, the same killer runs on the pristine build (the control): a mode
that is not clean there cannot kill anything meaningfully and the run is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from dataclasses import asdict, dataclass

from ..subject.build import BuildError, build
from ..subject.cache import BuildKilled
from .modes import DEFAULT_BUDGET, ModeResult, run_gate
from .operators import Mutant
from ..errors import DryzError
from ..enumerate import dask_exec
from ..subject.build import runtime_env
from .objcode import differing, fingerprint
from .upstream import build_test_sampling, run_test_sampling

PLAN_SCHEMA = "dryz.mutate-plan/1"
TREE = "mutate"  # mutants (and their pristine reference) build in a work tree of their own (subject.build)
RESULT_SCHEMA = "dryz.mutant/1"


class MutateError(RuntimeError, DryzError):
    """Bad input or the harness in doubt (exit 2)."""


@dataclass(frozen=True)
class Killer:
    """What kills a mutant: the gate's modes (names, in the gate's plan; modes.modes_for) on a budget of
    `budget` seconds per library, in `lanes` lanes; stop_on_finding: the rest cancelled at the first kill;
    order: the order the modes run in, lane by lane (dryz.mutate.order; empty: the gate's)."""
    modes: tuple[str, ...]
    budget: float = DEFAULT_BUDGET
    lanes: int = 2
    stop_on_finding: bool = False
    order: tuple[str, ...] = ()

    def to_json(self) -> dict:
        d = dict(asdict(self), modes=list(self.modes), order=list(self.order))
        if not self.order:  # a plan written before modes had an order reads the same
            del d["order"]
        return d


def _rank(m: Mutant) -> str:
    return hashlib.sha256(m.id.encode()).hexdigest()


def sample(mutants: list[Mutant], n: int | None) -> list[Mutant]:
    """A deterministic sample of n mutants, stratified: each function gets its share of n (largest remainders
    first, at least one each while n allows), and within a function the operators take turns, each giving its
    mutants in the order of their id's sha256. Returned in source order. None or n >= len: all of them."""
    if n is None or n >= len(mutants):
        return list(mutants)
    by_fn: dict[str, list[Mutant]] = {}
    for m in mutants:
        by_fn.setdefault(m.function, []).append(m)
    exact = {fn: n * len(ms) / len(mutants) for fn, ms in by_fn.items()}
    quota = {fn: min(len(by_fn[fn]), max(1, int(x))) if n >= len(by_fn) else int(x) for fn, x in exact.items()}
    order = sorted(exact, key=lambda f: (-(exact[f] - int(exact[f])), f))
    while sum(quota.values()) > n:  # the minimum of one each went over: take from the largest
        quota[max(quota, key=lambda f: (quota[f], f))] -= 1
    i = 0
    while sum(quota.values()) < n:
        fn = order[i % len(order)]
        if quota[fn] < len(by_fn[fn]):
            quota[fn] += 1
        i += 1
    chosen = set()
    for fn, ms in by_fn.items():
        by_op: dict[str, list[Mutant]] = {}
        for m in sorted(ms, key=_rank):
            by_op.setdefault(m.operator, []).append(m)
        ops = sorted(by_op)
        k = 0
        while len([c for c in chosen if c in {m.id for m in ms}]) < quota[fn]:
            op = ops[k % len(ops)]
            if by_op[op]:
                chosen.add(by_op[op].pop(0).id)
            k += 1
    return [m for m in mutants if m.id in chosen]


def run_killer(lib: Path, killer: Killer, work: Path, upstream_exe: Path | None, log=lambda m: None) \
        -> list[ModeResult]:
    """test-sampling (when given) and the gate's modes on one library."""
    out = []
    if upstream_exe is not None:
        r = run_test_sampling(upstream_exe, lib, runtime_env(lib))
        log(f"    upstream {r.status} {r.seconds:.1f} s")
        out.append(r)
    for r in run_gate(lib, killer.budget, list(killer.modes), work, killer.lanes, killer.stop_on_finding,
                      order=list(killer.order)):
        log(f"    {r.mode} {r.status} {r.seconds:.1f} s{(': ' + r.detail) if r.detail else ''}")
        out.append(r)
    return out


def run_one(mutant: dict, version: str, killer: Killer, pristine_code: dict, upstream_exe: str | None,
            keep_build: bool = False, jobs: int | None = None, log=lambda m: None, tree: str | None = TREE,
            sanitize: tuple = ()) -> dict:
    """One mutant, start to end (a Dask task: everything it needs is in its arguments; it builds on the
    machine it runs on). tree: the work tree it builds in (subject.build), the one its pristine_code came from;
    sanitize: build it with these sanitizers (a sanitizer report kills it as `memory`)."""
    t0 = time.monotonic()
    res = {"schema": RESULT_SCHEMA, "id": mutant["id"], "operator": mutant["operator"],
           "function": mutant["function"], "line": mutant["line"], "description": mutant["description"]}
    with tempfile.TemporaryDirectory(prefix=f"dryz-mutant-{mutant['id']}-") as tmp:
        tmp = Path(tmp)
        patch = tmp / f"{mutant['id']}.diff"
        patch.write_text(mutant["diff"])
        build_log = []
        tb = time.monotonic()
        try:
            lib = build(version, patch, jobs=jobs, log=build_log.append, tree=tree, sanitize=tuple(sanitize))
        except BuildKilled as e:  # the machine killed the compiler: not the mutant's doing; tried again on resume
            res.update(status="error", build_error=str(e)[-300:], seconds=round(time.monotonic() - t0, 1))
            return res
        except BuildError as e:
            res.update(status="stillborn", build_seconds=round(time.monotonic() - tb, 1),
                       build_error=str(e).splitlines()[-1][-300:] if str(e) else "",
                       seconds=round(time.monotonic() - t0, 1))
            return res
        res["build_seconds"] = round(time.monotonic() - tb, 1)
        res["cached_build"] = any(m.startswith("cached") for m in build_log)
        try:
            code = fingerprint(lib / "libllama.so")
            res["object_code"] = {"sha256": code["sha256"], "differs_in": differing(pristine_code, code)}
            if code["sha256"] == pristine_code["sha256"]:
                res.update(status="equivalent", equivalence="identical object code of every DRY function",
                           seconds=round(time.monotonic() - t0, 1))
                return res
            results = run_killer(lib, killer, tmp / "gate", Path(upstream_exe) if upstream_exe else None, log)
        finally:
            if not keep_build:
                shutil.rmtree(lib, ignore_errors=True)
    upstream = [r for r in results if r.mode == "upstream"]
    dryz = [r for r in results if r.mode != "upstream"]
    res["upstream"] = upstream[0].to_json() if upstream else None
    res["modes"] = [r.to_json() for r in dryz]
    res["killed_by"] = [r.mode for r in dryz if r.kills]
    # not killed, and some mode could not judge (the harness in doubt): not a survivor; a resumed run tries again
    res["status"] = "killed" if res["killed_by"] else "error" if any(r.status == "error" for r in dryz) \
        else "survived"
    res["seconds"] = round(time.monotonic() - t0, 1)
    return res


def _write(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def prepare(version: str, killer: Killer, workdir: Path, mutants: list[Mutant], source_sha: str,
            settings: dict, with_upstream: bool = True, log=print, tree: str | None = TREE,
            sanitize: tuple = ()) -> dict:
    """The run's plan and control: the pristine build, its DRY object code, test-sampling, and the killer on the
    pristine build (every mode must be clean there). A workdir holding another plan is refused (MutateError),
    one holding this plan is resumed (its control is reused)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "results").mkdir(exist_ok=True)
    plan = {"schema": PLAN_SCHEMA, "version": version, "source_sha256": source_sha,
            "killer": killer.to_json(), "upstream": with_upstream, "settings": settings,
            "mutants": [m.id for m in mutants]}
    plan_path, old_control = workdir / "plan.json", None
    if plan_path.exists():
        old = json.loads(plan_path.read_text())
        old_control = old.pop("control", None)
        unordered = lambda k: {x: v for x, v in k.items() if x != "order"}  # noqa: E731
        if old.get("killer", {}).get("order") != plan["killer"].get("order") and \
                unordered(old.get("killer", {})) == unordered(plan["killer"]) and \
                {**old, "killer": plan["killer"]} == plan:  # only the order: who is credited, not the verdicts
            log(f"{workdir}: the modes' order differs from its run's; resuming in the new order")
            old["killer"] = plan["killer"]
        if old != plan:
            raise MutateError(f"{workdir} holds another run (other mutants, modes, version or settings): give "
                              "another --workdir, or the same options to resume it")
        if old_control is not None and _here(old_control):
            log(f"resuming {workdir}: {len(done_ids(workdir))} of {len(mutants)} mutants done")
            return dict(plan, control=old_control)
        if old_control is not None:  # committed elsewhere: this machine builds and runs its own control
            log(f"resuming {workdir} ({len(done_ids(workdir))} of {len(mutants)} mutants done) on a machine "
                "without its control's builds: the control again")
    log(f"the pristine {version} build, its DRY object code and the control run of the gate's modes")
    try:
        pristine = build(version, None, log=lambda m: log(f"  {m}"), tree=tree, sanitize=tuple(sanitize))
        exe = build_test_sampling(version, pristine, log=lambda m: log(f"  {m}")) if with_upstream else None
    except BuildError as e:
        raise MutateError(f"the pristine build: {e}") from None
    code = fingerprint(pristine / "libllama.so")
    if old_control is not None and old_control["object_code"]["sha256"] != code["sha256"]:
        raise MutateError(f"{workdir} was run where the pristine DRY object code was "
                          f"{old_control['object_code']['sha256'][:12]}, here it is {code['sha256'][:12]} (another "
                          "compiler): its 'equivalent by object code' would not hold here; give another --workdir")
    with tempfile.TemporaryDirectory(prefix="dryz-mutate-control-") as tmp:
        results = run_killer(pristine, killer, Path(tmp), exe, log)
    bad = [r for r in results if r.status != "survived"]
    control = {"pristine": str(pristine), "tree": tree, "sanitize": list(sanitize), "object_code": code,
               "upstream_exe": str(exe) if exe else None,
               "results": [r.to_json() for r in results]}
    if bad:
        raise MutateError("the killer is not clean on the pristine build: " + "; ".join(
            f"{r.mode} {r.status}{(' (' + r.detail + ')') if r.detail else ''}" for r in bad))
    plan["control"] = control
    _write(plan_path, plan)
    return plan


def _here(control: dict) -> bool:
    """Whether a recorded control's builds (the pristine library, test-sampling) are on this machine."""
    return (Path(control["pristine"]) / "libllama.so").exists() and \
        (not control.get("upstream_exe") or Path(control["upstream_exe"]).exists())


def done_ids(workdir: Path) -> set[str]:
    """The mutants whose result is written (status error: not done, a resumed run tries them again)."""
    out = set()
    for p in (workdir / "results").glob("*.json"):
        try:
            r = json.loads(p.read_text())
            # a survivor some mode could not judge, written before such a result became status error: not done
            unjudged = r.get("status") == "survived" and any(m.get("status") == "error" for m in r.get("modes", []))
            if r.get("status") not in (None, "error") and not unjudged:
                out.add(p.stem)
        except (OSError, ValueError):
            continue
    return out


def run(plan: dict, mutants: list[Mutant], killer: Killer, workdir: Path, scheduler=None,
        keep_builds: bool = False, log=print) -> list[dict]:
    """Every mutant not yet done, locally or on a Dask cluster; each result written as it finishes."""
    done = done_ids(workdir)
    todo = [m for m in mutants if m.id not in done]
    control = plan["control"]
    from functools import partial
    one = partial(run_one, version=plan["version"], killer=killer, pristine_code=control["object_code"],
                  upstream_exe=control["upstream_exe"], keep_build=keep_builds, tree=control.get("tree", TREE),
                  sanitize=tuple(control.get("sanitize") or ()))
    t_run = time.monotonic()

    def record(i: int, res: dict) -> None:
        _write(workdir / "results" / f"{res['id']}.json", res)
        killers = ", ".join(res.get("killed_by") or []) or "-"
        log(f"[{i}/{len(todo)}] {res['id']}: {res['status']} ({res.get('seconds', 0):.0f} s; killed by "
            f"{killers}; {time.monotonic() - t_run:.0f} s so far)")

    if scheduler is None:
        for i, m in enumerate(todo, 1):
            log(f"[{i}/{len(todo)}] {m.id}: {m.description}")
            record(i, one(m.to_json(), log=log))
    else:
        client = dask_exec.connect(scheduler)
        own = client is not scheduler
        try:
            from distributed import as_completed
            futures = {client.submit(one, m.to_json(), key=f"dryz-mutant-{m.id}", pure=False): m
                       for m in todo}
            # the client's own loop: dryz's client is not the default one (dask_exec.connect)
            for i, fut in enumerate(as_completed(list(futures), loop=client.loop), 1):
                record(i, fut.result())
        finally:
            if own:
                client.close()
    return load_results(workdir, mutants)


def load_results(workdir: Path, mutants: list[Mutant]) -> list[dict]:
    out = []
    for m in mutants:
        p = workdir / "results" / f"{m.id}.json"
        if p.exists():
            out.append(json.loads(p.read_text()))
    return out
