"""`dryz exhaustive`: the run of a space's configurations on a subject, its controls and its certificate.

run_exhaustive walks every configuration's slices (dryz.enumerate.run: isolation workers, or a Dask cluster),
runs the controls (the periodic closed forms in an isolation worker, multiplier 0 on the same tree), judges the
result (dryz.enumerate.certificate.judge) and writes it; Ctrl-C writes a partial result marked interrupted that
--resume continues.
"""

from __future__ import annotations

import sys
import time

from ..judge import check_in
from ..verdict import crash_fields
from ..output import Progress, environment, write_json
from ..subject.isolation import Worker
from ..subject.answers import Crash
from . import certificate as cert
from .controls import abi_confirmation_control, multiplier_zero_control, periodic_control
from .run import ConfigResult, Interrupted, config_slices, run_configs, shard_slicing, shard_tasks
from ..errors import DryzError
from ..subject.identity import same_subject


class ResumeError(ValueError, DryzError):
    """--resume with a result this run cannot continue (one-line reason)."""


class ExhaustiveInterrupted(Exception):
    def __init__(self, result):
        super().__init__("interrupted")
        self.result = result


def run_exhaustive(lib, alphabet, max_length, specs, json_path, progress=True, workers=1, canonical=False,
                   shard=None, scheduler=None, resume=None, partial_path=None) -> dict:
    """alphabet None: every alphabet size (canonical). shard (I, N): only that deterministic slice.
    scheduler: a Dask scheduler address or distributed.Client that runs the slices (dryz.enumerate.dask_exec).
    resume: an interrupted run's result (same subject, space and shard): its finished slices are kept.
    json_path: where the result goes (None: nowhere). Ctrl-C writes a partial result marked interrupted to
    partial_path (default: json_path) and raises ExhaustiveInterrupted."""
    t0 = time.perf_counter()
    ident = lib.identity
    space = cert.space_json(alphabet, max_length, specs, canonical)
    slicing = shard_slicing(shard[1]) if shard else workers
    done: set[int] = set()
    partial = None
    earlier = 0.0
    if resume is not None:
        if resume.get("verdict") != "interrupted":
            raise ResumeError(f"--resume: that result is {resume.get('verdict')!r}, not an interrupted run")
        if not same_subject(resume["subject"], ident):
            raise ResumeError("--resume: that run audited another subject ("
                  f"{resume['subject'].get('libllama_sha256', resume['subject'].get('spec', '?'))[:16]}...)")
        if resume["space"] != space:
            raise ResumeError("--resume: that run covered another space (give the same -k, -n, -c and flags)")
        it = resume["interrupted"]
        if it.get("shard") != (list(shard) if shard else None):
            raise ResumeError("--resume: that run was another shard")
        slicing, done = it["slicing"], set(it["done_tasks"])
        partial = [ConfigResult.from_json(spec, c) for spec, c in zip(specs, resume["configs"])]
        earlier = float(resume.get("wall_seconds") or 0.0)
    tasks = [(ci, sl) for ci, spec in enumerate(specs)
             for sl in config_slices(alphabet, max_length, spec, slicing, canonical)]
    picked = shard_tasks(tasks, *shard) if shard else list(range(len(tasks)))
    todo = [j for j in picked if j not in done]
    if canonical:
        total = sum(sum(e["expected_histories_by_length"].values()) for e in space["canonical"])
    else:
        total = sum(alphabet ** n for n in range(1, max_length + 1)) * len(specs)
    if shard or done:
        total = max(1, total * len(todo) // max(len(tasks), 1))
    bar = Progress(total, "histories", enabled=progress)
    finished: list[int] = []

    def interrupted(results):
        bar.close()
        configs = [r.to_json() for r in results]
        part = {"tool": "dryz exhaustive", "verdict": "interrupted", "subject": ident, "space": space,
                "configs": configs, "totals": cert.totals(configs),
                "interrupted": {"done_tasks": sorted(done | set(finished)), "total_tasks": len(picked),
                                "slicing": slicing, "shard": list(shard) if shard else None,
                                "note": "counts cover only the finished slices; not a certificate. "
                                        "Resume with the same command and --resume THIS_FILE."},
                "environment": dict(environment(), workers=workers),
                "wall_seconds": round(earlier + time.perf_counter() - t0, 3)}
        write_json(partial_path or json_path, part)
        raise ExhaustiveInterrupted(part)

    try:
        results = run_configs(lib, alphabet, max_length, specs, workers, bar, canonical,
                              tasks=[tasks[j] for j in todo], scheduler=scheduler, partial=partial,
                              on_done=lambda i: finished.append(todo[i]))
    except Interrupted as e:
        interrupted(e.results)
    bar.close()
    try:
        with Worker(lib.spec, lib, timeout=None) as w:
            periodic = periodic_control(lambda case: check_in(w, case))
            confirmation = abi_confirmation_control(lambda case: check_in(w, case).to_json())
            mz = w.call(multiplier_zero_control, alphabet, min(max_length, 7), specs, canonical)
    except KeyboardInterrupt:
        interrupted(results)
    if isinstance(mz, Crash):  # the control could not run: the subject's crash, a finding (never void)
        mz = {"max_length": min(max_length, 7), "cases": 0, "nonzero_deltas": 0, "passed": None,
              "crash": {"signal": mz.signal, "detail": mz.detail, "stderr": mz.stderr[-500:],
                        **crash_fields(mz)}}
    configs = [r.to_json() for r in results]
    flagged = sum(r.off_by_one_flagged for r in results)
    result = {
        "tool": "dryz exhaustive",
        "verdict": None,
        "subject": ident,
        "space": space,
        "configs": configs,
        "totals": cert.totals(configs),
    }
    ct = cert.canonical_totals(configs)
    if ct:
        result["canonical_totals"] = ct
    if shard:
        result["shard"] = {"index": shard[0], "count": shard[1], "tasks": picked, "total_tasks": len(tasks),
                           "slicing": slicing}
    result["controls"] = {"periodic": periodic, "abi_confirmation": confirmation,
                          "off_by_one": {"flagged": flagged, "passed": flagged > 0}, "multiplier_zero": mz}
    result["verdict"], result["checks"] = cert.judge(result)
    env = dict(environment(), workers=workers)
    if scheduler is not None:
        env["executor"] = "dask.distributed"
    result.update({"environment": env, "python": sys.version.split()[0],
                   "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    result["wall_seconds"] = round(earlier + time.perf_counter() - t0, 3)
    if resume is not None:
        result["resumed"] = {"finished_before": len(done), "wall_seconds_before": earlier}
    if json_path:
        write_json(json_path, result)
    return result
