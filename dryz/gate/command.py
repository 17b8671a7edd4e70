"""`dryz gate`, everything but option parsing: the subject's and the base's identities (read by a dryz child:
this process loads no library), the plan, the run, the result written (gate.json, --json, --markdown) and the
summary printed; the gate's exit code. The HTML report is `dryz report` over the gate's JSON and what it names
(dryz.gate.summary.report_inputs)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from ..children import run as run_child
from ..output import write_json, write_text
from ..render import dryz_on, ending, here
from ..subject.binding import SubjectError, resolve
from ..subject.registry import resolve_base, split_declared, with_declared
from ..oracle.deviations import fix_for
from .causes import DEFAULT_MODES, Causes, applies, check_declarations
from .changes import declared_changes, fixes_declared, unfixable
from .plan import LANES, plan
from .result import GateError, GateResult
from .run import run
from .summary import markdown


def identity(spec: str, work: Path) -> dict:
    """The subject's identity, read by `dryz --subject SPEC subject show` in a child (this process loads no
    library); GateError when it cannot be loaded."""
    p = run_child(spec, ["subject", "show"], 300, work)
    if p.timed_out or p.exit != 0:
        why = "no answer within 300 s" if p.timed_out else p.last_error()
        raise GateError(f"subject --subject {spec}: {why.removeprefix('dryz: error: ')}")
    return json.loads(p.stdout)


def gate(spec: str, seconds: float, base: str | None = None, expect=(), work: Path | str = "gate-work",
         modes=None, lanes: int = LANES, log=None) -> GateResult:
    """`dryz gate`: plan and run every mode on the subject `spec`, with the differential against `base` (a
    release, a subject spec or a libllama path) when given; the result judged against the declared changes
    `expect`."""
    log = log or (lambda m: None)
    if expect and base is None:  # (before anything is made)
        raise GateError("--expect-change and --expect-file declare changes against a base: give --base")
    work = Path(work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    base_spec = resolve_base(base, log) if base is not None else None
    check_declarations(expect, spec, base_spec)
    fixes = fixes_declared(expect)
    if fixes:  # a declared change that is a fix dryz models: the subject is judged declaring it
        spec = with_declared(spec, fixes)
        fixed = [d for d in expect if fix_for(d.split("@", 1)[0])]
        log(f"the subject is judged declaring the fix {', '.join(fixes)} (--expect-change {', '.join(fixed)})")
    unmodelled = [d for d in expect if unfixable(d)]
    if unmodelled:
        log(f"dryz models no fix of {', '.join(unmodelled)}: where the subject no longer shows it, the new output is "
            "judged against the shipped model (a finding), and the declaration is not seen")
    ident = identity(spec, work)
    caps = ident.pop("capabilities", None)
    base_ident = identity(base_spec, work) if base_spec is not None else None
    if base_ident is not None:
        base_ident.pop("capabilities", None)
    causes = None
    if applies(spec, base_spec):  # two engines' DRY: judged by their causes (dryz.gate.causes)
        causes = Causes(spec, base_spec, expect, work, log)
        causes.fit()
        modes = modes or list(DEFAULT_MODES)
    planned = plan(spec, seconds, base_spec, modes, lanes, caps)
    if causes is not None:
        planned = causes.campaigns(planned)
    return run(planned, work, seconds, log, expect=expect, base_identity=base_ident, subject_identity=ident,
               causes=causes)


def command(gate_lib, selected: str, seconds, base, expect, expect_file, workdir, modes, lanes, md_path, json_path,
            log, echo) -> GateResult:
    """`dryz gate`: the subject (the gate's --lib, else `selected`, the spec the command line selected), run,
    gate.json (and --json, --markdown) written, the Markdown summary printed; the result (its exit is the
    gate's)."""
    declared = declared_changes(expect, expect_file)
    try:
        # the gate's own --lib names the library; what the command line declares (--declare) still holds
        spec = with_declared(f"libllama:{resolve(gate_lib)}", split_declared(selected)[1]) if gate_lib else selected
    except SubjectError as e:
        raise GateError(f"subject: {e}") from None
    res = gate(spec, seconds, base, declared, Path(workdir), list(modes) or None, lanes, log=log)
    md = markdown(res)
    data = res.to_json()
    write_json(Path(res.work) / "gate.json", data)
    if json_path:
        write_json(json_path, data)
    if md_path:
        write_text(md_path, md)
    echo(md, nl=False)
    echo("\n" + gate_ending(res, spec, json_path, md_path), err=True)  # (stdout: the summary, as --markdown writes it)
    return res


def gate_ending(res: GateResult, spec: str, json_path, md_path) -> str:
    """How the gate ends, as every command does (dryz.render.ending): its findings and changes by class, what it
    wrote, and the witness to look at first."""
    classes: dict = {}
    for k in [f.klass for f in res.findings] + [f"change {c.klass}" for c in res.changes]:
        classes[k] = classes.get(k, 0) + 1
    work = Path(res.work)
    written = [f"{here(work / 'gate.json')} (every mode's result)"] + \
        ([f"{here(work / 'witnesses')}/ (the minimized witnesses)"] if (work / "witnesses").is_dir() else []) + \
        [f"{here(p)} ({what})" for p, what in ((json_path, "the result"), (md_path, "the summary")) if p]
    first = next((f for f in res.findings if f.minimized or f.witness), None)
    steps = []
    if first is not None:
        w = shlex.quote(here(first.minimized or first.witness))
        steps.append((f"{dryz_on(spec)} explain {w}", f"the first finding's witness ({first.mode}: {first.klass}) "
                                                      "laid out"))
    steps.append((f"dryz report {shlex.quote(here(work / 'gate.json'))} --html gate.html",
                  "every mode's result on one page"))
    return ending(classes, written, steps, unit="findings and changes")
