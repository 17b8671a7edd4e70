"""`dryz mutate`, everything but option parsing (cli.py parses and calls `main`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .modes import lanes_of, mode_names as gate_modes
from .order import default_matrix, kill_first, kill_matrix, load_matrix
from .operators import OPERATORS, generate, sdist_source
from .report import TriageError, default_triage, load_triage, markdown, summarize
from .runner import Killer, MutateError, prepare, run, sample
from ..output import write_json, write_text

EXIT_OK, EXIT_FINDING, EXIT_ERROR = 0, 1, 2


def select(version: str, operators: list[str] | None, ids: list[str] | None, n: int | None, log=print):
    """(every mutant of the version's DRY code, the ones this run takes, the source's sha256)."""
    source = sdist_source(version, log)
    every = generate(source)
    chosen = every
    if operators:
        bad = sorted(set(operators) - set(OPERATORS))
        if bad:
            raise MutateError(f"--operators: unknown {', '.join(bad)} (known: {', '.join(OPERATORS)})")
        chosen = [m for m in chosen if m.operator in operators]
    if ids:
        known = {m.id for m in every}
        bad = [i for i in ids if i not in known]
        if bad:
            raise MutateError(f"--ids: no mutant {', '.join(bad)} in {version}'s DRY code")
        chosen = [m for m in chosen if m.id in set(ids)]
    return every, sample(chosen, n), hashlib.sha256(source.encode()).hexdigest()


def order_of(version: str, kill_order: str | None, budget: float, mode_names, lanes: int) -> tuple[str, ...]:
    """The modes' order (Killer.order): kill-first from the given kill matrix, or the release's shipped one when
    there is one; `gate` (or no matrix): the gate's own order (empty)."""
    if kill_order == "gate":
        return ()
    path = Path(kill_order) if kill_order else default_matrix(version)
    if not kill_order and not path.exists():
        return ()
    if kill_order and not path.is_file():
        raise MutateError(f"--kill-order: no file {kill_order} (a kill matrix, an earlier run's --json, or gate)")
    try:
        matrix = load_matrix(path)
    except TriageError as e:
        raise MutateError(f"--kill-order: {e}") from None
    return tuple(kill_first(lanes_of(budget, mode_names, lanes), matrix))


def main(version: str, workdir: Path, n: int | None, operators, ids, mode_names, budget: float,
         scheduler, upstream: bool, keep_builds: bool, triage_path, json_path, md_path, list_only: bool,
         echo=print, log=print, sanitize: tuple = (), lanes: int = 2, first_kill: bool = False,
         kill_order: str | None = None, test_set: Path | None = None) -> int:
    """`dryz mutate`: select the mutants, build and kill each with the gate's modes on `budget` seconds, report
    the score; exit 1 when a survivor is not shown equivalent (untriaged, or triaged as a gap)."""
    try:
        names = gate_modes(budget, mode_names, lanes)
    except ValueError as e:
        raise MutateError(str(e)) from None
    if test_set is not None and not upstream:
        raise MutateError("--test-set measures test-sampling with and without the vectors: drop --no-upstream")
    if test_set is not None and sanitize:
        raise MutateError("--test-set runs on the plain builds: drop --sanitize")
    killer = Killer(tuple(names), float(budget), lanes, first_kill, order_of(version, kill_order, budget,
                                                                             mode_names, lanes))
    every, chosen, source_sha = select(version, operators, ids, n, log)
    if list_only:
        for m in chosen:
            echo(json.dumps(m.to_json()))
        log(f"{len(chosen)} of {len(every)} mutants of {version}'s DRY code")
        return EXIT_OK
    try:
        triage = load_triage(Path(triage_path) if triage_path else default_triage(version))
    except TriageError as e:
        raise MutateError(str(e)) from None
    log(f"dryz mutate: {len(chosen)} of the {len(every)} mutants of llama-cpp-python {version}'s DRY code; modes "
        f"{', '.join(names)} (dryz gate, {budget:g} s each){' + upstream test-sampling' if upstream else ''}")
    settings = {"sample": n, "operators": sorted(operators) if operators else None, "ids": ids}
    if sanitize:  # sanitized builds have a work tree of their own already
        settings["sanitize"] = list(sanitize)
        plan = prepare(version, killer, workdir, chosen, source_sha, settings, upstream, log, tree=None,
                       sanitize=sanitize)
    else:
        plan = prepare(version, killer, workdir, chosen, source_sha, settings, upstream, log)
    results = run(plan, chosen, killer, workdir, scheduler, keep_builds, log)
    summary = summarize(results, len(chosen), names, triage)
    summary.update(version=version, all_generated=len(every), workdir=str(workdir),
                   control=plan["control"]["results"])
    summary["killer"] = killer.to_json()
    if not first_kill:  # every mode on every mutant: the next run's kill-first order (--kill-order)
        summary["kill_matrix"] = kill_matrix(results, version, f"dryz mutate ({len(results)} mutants, every mode "
                                                               f"on each, {budget:g} s)")
    md = markdown(summary, results, {m.id: m for m in chosen}, names)
    if json_path:
        write_json(json_path, {"summary": summary, "results": results})
    if md_path:
        write_text(md_path, md)
    echo(md)
    if test_set is not None:
        from .testset import TestSetError, select_and_measure, sentence  # on use: only --test-set needs it
        if len(results) < len(chosen):
            raise MutateError(f"--test-set: {len(chosen) - len(results)} mutants not done yet (run again to resume)")
        try:
            ts = select_and_measure(version, results, plan["control"], {m.id: m.diff for m in chosen},
                                    plan["control"].get("tree") or "mutate", test_set, summary["denominator"],
                                    sdist_source(version, log), log)
        except TestSetError as e:
            raise MutateError(f"--test-set: {e}") from None
        echo(sentence(ts))
    untriaged = [s for s in summary["survivors"] if not s["triage"]]
    if test_set is not None and ts["survivors_killed_after"]:  # a triage the measurement contradicts
        untriaged += [s for s in summary["survivors"] if s["id"] in ts["survivors_killed_after"]]
    gaps = [s for s in summary["survivors"] if s["triage"] and s["triage"]["verdict"] == "gap"]
    echo(f"dryz mutate: score {summary['score']}, {summary['killed']} killed, {len(summary['survivors'])} "
         f"survived ({len(untriaged)} not triaged, {len(gaps)} triaged as gaps), {summary['stillborn']} "
         f"stillborn, {summary['equivalent_proven']} equivalent by object code")
    if summary["errors"]:  # the score leaves them out: say so, and that the harness was in doubt
        echo(f"dryz mutate: {len(summary['errors'])} mutant(s) not judged (a mode could not judge and none "
             f"killed: the harness in doubt): {', '.join(summary['errors'])}; run again to retry them")
        return EXIT_ERROR
    return EXIT_FINDING if untriaged or gaps else EXIT_OK
