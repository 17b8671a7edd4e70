"""The killer: `dryz gate`'s modes on the mutant's library, planned by dryz.gate.plan and run by dryz.gate.run
with a small budget (no copy of the mode list here: a mode added to the gate kills mutants too), and the
baseline, llama.cpp's own tests/test-sampling.cpp (dryz/mutate/upstream.py).

A mode's status on a library, from the gate's verdict: `survived` (pass), `killed` (finding), `crash` (the
mode's dryz process died of a signal), `memory` (a finding or crash with a sanitizer report: a subject built with
--sanitize), `timeout` (no answer within the gate's timeout for the mode: a hang), `error` (the harness in doubt;
not a kill) or `not run` (cancelled: with stop_on_finding, a mode still waiting when another killed the mutant).
Killed, crash, memory and timeout kill the mutant.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path

from .. import gate
from ..subject.sanitizer import report
from .report import KILLING

DEFAULT_BUDGET = 120.0  # seconds of gate budget per mutant (the gate's --time)
STATUS = {"pass": "survived", "finding": "killed", "crash": "crash", "timeout": "timeout", "error": "error",
          "cancelled": "not run", "interrupted": "not run", "not run": "not run", "not expressible": "not run"}


@dataclass
class ModeResult:
    mode: str
    status: str
    exit: int | None
    seconds: float
    detail: str = ""
    frames: list[str] = field(default_factory=list)

    @property
    def kills(self) -> bool:
        return self.status in KILLING

    def to_json(self) -> dict:
        d = {"mode": self.mode, "status": self.status, "exit": self.exit, "seconds": round(self.seconds, 2)}
        if self.detail:
            d["detail"] = self.detail
        if self.frames:
            d["frames"] = self.frames
        return d


def subject_spec(lib) -> str:
    return f"libllama:{lib}"


def modes_for(budget: float = DEFAULT_BUDGET, only: list[str] | None = None, lanes: int = gate.LANES,
              lib: str | Path = "LIB", order: list[str] | None = None) -> list[gate.Mode]:
    """The gate's plan for one mutant's library (no base: no differential), its lanes in `order`; ValueError for
    an unknown mode."""
    try:
        return gate.plan(subject_spec(lib), budget, modes=only, lanes=lanes, order=order)
    except gate.GateError as e:
        raise ValueError(str(e)) from None


def mode_names(budget: float = DEFAULT_BUDGET, only: list[str] | None = None, lanes: int = gate.LANES) -> list[str]:
    return [m.name for m in modes_for(budget, only, lanes)]


def lanes_of(budget: float = DEFAULT_BUDGET, only: list[str] | None = None, lanes: int = gate.LANES) \
        -> list[list[str]]:
    """The plan's mode names, lane by lane (what dryz.mutate.order orders)."""
    plan = modes_for(budget, only, lanes)
    return [[m.name for m in plan if m.lane == i] for i in sorted({m.lane for m in plan})]


def classify(rc: int | None, stderr: str, timed_out: bool) -> tuple[str, str, list[str]]:
    """(status, detail, sanitizer frames) of a finished process that ran a library (test-sampling, a mode)."""
    rep = report(stderr)
    if timed_out:
        return "timeout", "no exit within the timeout", []
    if rep is not None:
        return "memory", rep["summary"], rep["frames"]
    if rc is not None and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return "crash", f"died of {name}", []
    if rc == 0:
        return "survived", "", []
    if rc == 1:
        return "killed", "", []
    last = (stderr.strip().splitlines() or [f"exit {rc}"])[-1]
    return "error", last[-300:], []


def from_gate(r: gate.ModeResult) -> ModeResult:
    """A gate mode's result as a kill (or not): a finding of class memory, or a sanitizer report on the mode's
    stderr, is memory."""
    status = STATUS.get(r.verdict, "error")
    detail = r.text[:300] if r.text else ""
    frames: list[str] = []
    mem = next((f for f in r.findings if f.klass == "memory"), None)
    if status in ("killed", "crash") and mem is not None:
        status, detail = "memory", mem.detail[:300]
    return ModeResult(r.name, status, r.exit, r.seconds, detail, frames)


def run_gate(lib: str | Path, budget: float, only: list[str] | None, work: Path, lanes: int = gate.LANES,
             stop_on_finding: bool = False, log=lambda m: None, order: list[str] | None = None) -> list[ModeResult]:
    """The gate's modes on one library (gate.plan, gate.run; no witnesses minimized: a kill is all a mutant
    needs). stop_on_finding: the other modes are cancelled at the first kill (faster; the kill matrix then
    shows the first killer only). Ctrl-C: KeyboardInterrupt (the mutant is not recorded)."""
    modes = modes_for(budget, only, lanes, lib, order)
    res = gate.run(modes, work, budget, log=log, stop_on_finding=stop_on_finding, minimize=False)
    if res.verdict == "interrupted":
        raise KeyboardInterrupt
    out = []
    for r in res.modes:
        m = from_gate(r)
        if m.status in ("killed", "crash", "error"):  # a sanitizer report on the mode's stderr: memory
            err = Path(res.work) / f"{r.name}.err"
            try:
                text = err.read_text(errors="replace")
            except OSError:
                text = ""
            status, detail, frames = classify(r.exit, text, False)
            if status == "memory":
                m.status, m.detail, m.frames = status, detail, frames
        out.append(m)
    return out
