"""`dryz export ENTRY --as issue` (one witness's report) and `dryz --subject SPEC export --as issue --reports DIR`
(a subject's every cause: one report per cause).

Where a subject's causes come from: `--result FILE`, a `dryz properties` or `dryz conformance` result (--json)
with a row for the subject (its cells' causes; conformance's minimized witnesses where it made them), or else the
subject is run now: `dryz properties` on it (a dryz child), then each cause's first probe minimized keeping the
cause (`dryz minimize --cause`, a child each, as conformance minimizes them). Either way one command.

Each report is DIR/ENGINE-CAUSE.md with its script beside it, DIR/ENGINE-CAUSE.py, and its witness,
DIR/ENGINE-CAUSE.case.json (a Case, trace or request sequence JSON: `dryz --subject SPEC check` reads it). Where the engine is installed
here, each script is run with the engine alone (a child process, no dryz on its path of imports) and its output
goes into the report; a script that does not show the difference it reports is the harness in doubt (exit 2).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..corpus import dumps_readable
from ..files import fail
from ..output import write_text
from . import report, scripts
from .witness import IssueError, Witness, from_entry, from_row, read_result, rows_of

SCRIPT_TIMEOUT = 600


def run_script(path: Path, w: Witness) -> tuple[int, str]:
    """The script run with the engine alone (its own process; the environment the engine needs here), (exit,
    output)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRYZ_")}
    env.update(getattr(scripts.part(w), "environment", lambda _: {})(w))
    p = subprocess.run([sys.executable, path.name], capture_output=True, text=True, timeout=SCRIPT_TIMEOUT, env=env,
                       cwd=str(path.parent))
    return p.returncode, p.stdout + (p.stderr if p.returncode not in (0, 1) else "")


def write(w: Witness, directory: Path, run: bool, log) -> tuple[Path, str | None]:
    """The witness's report and script written into directory (the script run where run is true): (the report's
    path, the script's output or None)."""
    name = w.slug()
    witness = directory / f"{name}.case.json"  # the witness beside its report (dryz check reads it)
    write_text(witness, dumps_readable((w.trace or w.requests or w.case).to_json()))
    w.source = witness.name
    text = scripts.script(w, report.title(w))
    py = directory / f"{name}.py"
    write_text(py, text)
    output = None
    if run:
        rc, output = run_script(py, w)
        log(f"  {py.name}: exit {rc}")
        if rc != 1 or "DIFFERS:" not in output or ", as reported" not in output:
            fail(f"{py}: the script does not show the difference it reports (exit {rc}): "
                 + (output.strip().splitlines() or ["no output"])[-1][:200])
    md = directory / f"{name}.md"
    write_text(md, report.markdown(w, text, py.name, output))
    return md, output


def entry_command(entry: str, output: str | None, reports: str | None, echo) -> int:
    """One entry's report: printed, or written to --output (the Markdown) or into --reports DIR (with its script)."""
    try:
        w = from_entry(_rel(entry))
        if reports:
            md, _ = write(w, Path(reports), False, lambda m: None)
            echo(f"written   {md}, {md.with_suffix('.py').name} and {md.with_suffix('.case.json').name}")
            return 0
        text = report.markdown(w, scripts.script(w, report.title(w)), f"{w.slug()}.py")
    except IssueError as e:
        fail(str(e))
    if output:
        write_text(output, text)
    else:
        echo(text, nl=False)
    return 0


def _rel(path: str) -> str:
    """A path as the report names it: relative to the working directory when under it."""
    p = os.path.abspath(path)
    return os.path.relpath(p) if p.startswith(os.getcwd() + os.sep) else p


def subject_command(spec: str, result: str | None, reports: str, workdir: str | None, log, echo) -> int:
    """The subject's every cause as a report (the module docstring)."""
    try:
        if result:
            row = rows_of(read_result(result), spec)
            where = _rel(result)
        else:
            row, where = _run_now(spec, workdir, log)
        witnesses = from_row(row, where)
    except IssueError as e:
        fail(str(e))
    if not witnesses:
        fail(f"{spec}: no cause to report (every property conforms, or none could be judged)")
    directory = Path(reports)
    installed = _installed(spec)
    made, skipped = [], []
    for w in witnesses:
        w.source = _rel(w.source) if os.path.exists(w.source) else w.source
        try:
            md, _ = write(w, directory, installed, log)
        except IssueError as e:
            skipped.append(f"{w.cause}: {e}")
            continue
        made.append(md)
    for md in made:
        echo(f"written   {md} (+ {md.with_suffix('.py').name}, {md.with_suffix('.case.json').name})")
    for s in skipped:
        echo(f"no report {s}")
    if not installed:
        echo(f"(the scripts were not run: {spec.split('+', 1)[0]} is not installed here)")
    return 0 if made else 2


def _installed(spec: str) -> bool:
    """The engine can run here (its package installed): the scripts are run and their output reported."""
    from ..subject.registry import open_subject  # on use
    from ..subject.binding import SubjectError  # on use
    try:
        open_subject(spec).close()
    except SubjectError:
        return False
    return True


def _run_now(spec: str, workdir: str | None, log) -> tuple[dict, str]:
    """The subject's row made now: dryz properties, then each cause's witness minimized keeping its cause."""
    from ..conformance.audit import minimize_witness  # on use: a subject run now
    from ..gate.witnesses import properties  # on use: a subject run now
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="dryz-issue-"))
    work.mkdir(parents=True, exist_ok=True)
    log(f"{spec}: dryz properties (its causes fitted)")
    props, why = properties(spec, work.resolve(), (), (), log, "issue")
    if props is None:
        raise IssueError(f"dryz properties on {spec} could not conclude: {why}")
    fitted = props["fit"]["models"]
    log(f"{spec}: llama.cpp with {' + '.join(fitted) or 'nothing'}, residual {props['fit']['residual']:,}")
    abi = int(props["subject"].get("init_dry_abi") or 7)
    for key, c in props["cells"].items():
        for cause in c.get("causes", []):
            minimize_witness(spec, work.resolve(), key, cause, fitted, spec, log, abi)
    out = work / "properties-issue.json"  # with the minimized witnesses: --result reads it again
    write_text(out, json.dumps(props, indent=1) + "\n")
    return rows_of(props, spec), str(out)


def command(entry, form: str, output, reports, result, workdir, spec: str, log, echo) -> int:
    """`dryz export`: a test of an entry (dryz.export), or --as issue an entry's report or the selected subject's
    every cause's (the module docstring). Options that do not go together: one line, exit 2."""
    if form != "issue":
        for name, v in (("--reports", reports), ("--result", result), ("--workdir", workdir)):
            if v:
                fail(f"{name}: only with --as issue")
        if entry is None:
            fail(f"--as {form}: give the ENTRY to export")
        from ..export import export  # on use: a test's form
        text = export(entry, form)
        if output:
            write_text(output, text)
        else:
            echo(text, nl=False)
        return 0
    if entry is not None:
        for name, v in (("--result", result), ("--workdir", workdir)):
            if v:
                fail(f"{name}: only without ENTRY (the selected subject's causes)")
        if output and reports:
            fail("--output and --reports: give one (the report alone, or the report and its script)")
        return entry_command(entry, output, reports, echo)
    if output:
        fail("--output: an ENTRY's report; the subject's reports go to --reports DIR")
    if not reports:
        fail("--as issue without ENTRY: give --reports DIR (one report per cause of the selected subject)")
    if result and workdir:
        fail("--workdir: only when the subject is run now (without --result)")
    kind = spec.split(":", 1)[0]
    if kind not in ("engine", "cmd", "ik-llama"):
        fail(f"--as issue: the selected subject is {spec}: an issue report is for another engine's DRY (--subject "
             "engine:NAME or ik-llama:); a llama.cpp finding is exported --as test-sampling, pytest or c")
    return subject_command(spec, result, reports, workdir, log, echo)
