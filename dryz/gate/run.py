"""Running a plan: each lane's modes in order, the lanes side by side, every mode a dryz child (dryz.children) on
the subject with its timeout, so a subject that crashes or hangs costs that mode, never the gate. A timed mode's
seconds are its planned share rescaled to what its lane has left when it starts. Each mode's result is read from
the JSON it wrote (its record's reader, dryz.gate.modes). Then, with a base, every difference the differential
found is a behaviour change judged against the declarations (dryz.gate.changes), and each failing mode's first
finding is minimized and explained (dryz.gate.witnesses).

Exit: 0 every mode passed and the changes are exactly the declared ones; 1 a finding, or a change not declared,
or a declaration not seen; 2 a mode could not conclude (bad input, a harness control, a timeout); 130 Ctrl-C
(every mode's process group stopped; the result so far, marked interrupted).
"""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

from ..children import Child
from .changes import changes
from .plan import MIN_SECONDS, Mode
from .result import GateResult, ModeResult
from .witnesses import witnesses

STOPPED = ("cancelled", "interrupted")


class Runs:
    """The children a run has going, so that a stop (a finding with stop_on_finding, Ctrl-C) reaches them all."""

    def __init__(self):
        self.stop = threading.Event()
        self.interrupted = False
        self._lock = threading.Lock()
        self._children: dict[str, Child] = {}

    def started(self, name: str, child: Child) -> None:
        with self._lock:
            self._children[name] = child

    def ended(self, name: str) -> None:
        with self._lock:
            self._children.pop(name, None)

    def cancel(self, sig=signal.SIGTERM) -> None:
        self.stop.set()
        with self._lock:
            children = list(self._children.values())
        for c in children:
            c.signal(sig)


def run_mode(m: Mode, work: Path, given: float, runs: Runs | None = None, t0: float | None = None,
             timeout: float | None = None) -> ModeResult:
    """One mode as a dryz child, given `given` seconds (a timed mode's --time), its output in work/NAME.out and
    .err; its result read from the JSON it wrote. runs: the run it belongs to (a stop reaches it). timeout:
    when its process group is stopped (default: the mode's own, Mode.timeout)."""
    t0 = time.monotonic() if t0 is None else t0
    if m.not_expressible:
        return ModeResult(m.name, "not expressible", None, 0.0, None, m.not_expressible, [])
    args = m.args(work, given)
    if "--kept" in args:  # the differential reads the symbol campaign's kept inputs: none when it did not run
        Path(args[args.index("--kept") + 1]).mkdir(parents=True, exist_ok=True)
    timeout = m.timeout(given) if timeout is None else timeout
    child = Child(m.spec, args, work, work / f"{m.name}.out", work / f"{m.name}.err")
    if runs is not None:
        runs.started(m.name, child)
    try:
        done = child.wait(timeout)
    finally:
        if runs is not None:
            runs.ended(m.name)
    r = ModeResult(m.name, done.outcome, done.exit, done.seconds, round(given, 1) if m.timed else None, "",
                   child.argv, started=round(child.started - t0, 1), ended=round(child.started + done.seconds - t0, 1))
    if r.verdict == "timeout":
        r.text = f"no result within {timeout:.0f} s (the subject hung, or the machine is too slow)"
    elif runs is not None and runs.stop.is_set() and done.exit not in (0, 1):
        r.verdict = "interrupted" if runs.interrupted else "cancelled"
        r.text = "stopped"
    elif r.verdict == "crash":
        r.text = f"{done.why()} (the subject crashed it)"
    elif r.verdict in ("error", "interrupted"):
        r.text = done.why()
    else:
        try:
            m.record.read(r, json.loads((work / f"{m.name}.json").read_text()), work)
        except Exception as e:  # noqa: BLE001 (a result this gate cannot read: the harness is in doubt)
            r.verdict, r.text = "error", f"could not read the mode's result ({type(e).__name__}: {e})"
    return r


class _Lanes:
    def __init__(self, modes, work: Path, budget: float, log, stop_on_finding: bool):
        self.modes, self.work, self.budget, self.log = modes, work, budget, log
        self.stop_on_finding = stop_on_finding
        self.t0 = time.monotonic()
        self.runs = Runs()
        self.results: dict[str, ModeResult] = {}

    def given(self, mode: Mode) -> float:
        """A timed mode's seconds: its planned share rescaled to what its lane has left of the budget (after the
        estimates of the fixed modes still to run in it: a plan may put a campaign first)."""
        waiting = [m for m in self.modes if m.lane == mode.lane and m.name not in self.results
                   and not m.not_expressible]
        lane = [m for m in waiting if m.timed]
        left = self.budget - (time.monotonic() - self.t0) - sum(m.overhead for m in lane) \
            - sum(m.seconds for m in waiting if not m.timed)
        planned = sum(m.seconds for m in lane)
        return max(MIN_SECONDS, mode.seconds * left / planned if planned > 0 else left)

    def lane(self, i: int):
        for m in [m for m in self.modes if m.lane == i]:
            if self.runs.stop.is_set():
                self.results[m.name] = ModeResult(m.name, "interrupted" if self.runs.interrupted else "cancelled",
                                                  None, 0.0, None, "not run", [])
                continue
            given = self.given(m) if m.timed else m.seconds
            self.log(f"[{time.monotonic() - self.t0:5.0f}s] {m.name}: start" + (f" ({given:.0f} s)" if m.timed else ""))
            r = run_mode(m, self.work, given, self.runs, self.t0)
            self.log(f"[{r.ended:5.0f}s] {m.name}: {r.verdict} ({r.seconds:.0f} s): {r.text}")
            self.results[m.name] = r
            if r.verdict in ("finding", "crash") and self.stop_on_finding:
                self.runs.cancel()


def run(modes: list[Mode], work: Path | str | None = None, budget: float | None = None, log=None,
        stop_on_finding: bool = False, minimize: bool = True, expect=(), base_identity=None,
        subject_identity=None, causes=None) -> GateResult:
    """Run a plan: each lane's modes in order, the lanes side by side. budget: the seconds the plan was made
    for (default: the sum of the largest lane's planned seconds). stop_on_finding: cancel the rest at the first
    finding (dryz mutate). minimize: minimize and explain each failing mode's first finding. expect: the
    declared change classes (with a differential mode). causes: an engine gate's causes (dryz.gate.causes), which
    judge the changes. Ctrl-C stops every mode's process and returns what ran, verdict interrupted."""
    log = log or (lambda m: None)
    work = Path(work) if work is not None else Path(tempfile.mkdtemp(prefix="dryz-gate-"))
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    _clean(work, modes)
    if budget is None:
        budget = max(sum(m.seconds + m.overhead for m in modes if m.lane == i) for i in {m.lane for m in modes})
    lanes = _Lanes(modes, work, budget, log, stop_on_finding)
    threads = [threading.Thread(target=lanes.lane, args=(i,), daemon=True) for i in sorted({m.lane for m in modes})]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.2)
    except KeyboardInterrupt:
        lanes.runs.interrupted = True
        lanes.runs.cancel(signal.SIGINT)  # the modes write their partial states (fuzz keeps its crash files)
        for t in threads:
            t.join(timeout=30)
        lanes.runs.cancel(signal.SIGKILL)
        for t in threads:
            t.join(timeout=10)
    interrupted = lanes.runs.interrupted
    results = [lanes.results.get(m.name) or ModeResult(m.name, "interrupted", None, 0.0, None, "not run", [])
               for m in modes]
    res = GateResult("", 0, budget, len({m.lane for m in modes}), 0.0, results, work=str(work),
                     subject=subject_identity or _identity_from(work), base=base_identity,
                     declared=sorted(set(expect)))
    diff = res.mode("differential")
    if diff is not None and diff.verdict in ("pass", "finding"):
        changes(res, work)
    if causes is not None and not interrupted:
        try:
            causes.judge(res, work)
        except KeyboardInterrupt:  # (its children are stopped: dryz.gate.causes.Causes.fit)
            interrupted = True
    if minimize and not interrupted:
        t = time.monotonic()
        try:
            witnesses(res, work, modes[0].spec if modes else "", max(30.0, 0.1 * budget))
        except KeyboardInterrupt:
            interrupted = True
        res.witness_seconds = round(time.monotonic() - t, 1)
    res.seconds = round(time.monotonic() - lanes.t0, 1)
    _judge(res, interrupted)
    return res


def _clean(work: Path, modes) -> None:
    """Remove what an earlier gate left in the work directory (only the files and folders a gate writes), so
    every result read is this run's."""
    for m in modes:
        for suffix in (".json", ".out", ".err"):
            (work / f"{m.name}{suffix}").unlink(missing_ok=True)
        if m.name.startswith("fuzz"):
            shutil.rmtree(work / m.name, ignore_errors=True)
    for d in ("inputs", "witnesses", "changes"):
        shutil.rmtree(work / d, ignore_errors=True)


def _judge(res: GateResult, interrupted: bool) -> None:
    verdicts = {m.verdict for m in res.modes}
    if interrupted:
        res.verdict, res.exit = "interrupted", 130
        return
    undeclared = [c for c in res.changes if not c.declared]
    failed = verdicts & {"finding", "crash"} or undeclared or res.declared_unseen
    if verdicts & {"error", "timeout"}:
        res.verdict, res.exit = "error", 2
    elif failed:
        res.verdict, res.exit = "fail", 1
    else:
        res.verdict, res.exit = "pass", 0


def _identity_from(work: Path) -> dict:
    for name in ("certificate", "parameters", "window-caps", "traces", "fuzz", "restarts", "replay"):
        p = work / f"{name}.json"
        if p.exists():
            try:
                return json.loads(p.read_text())["subject"]
            except (ValueError, KeyError):
                continue
    return {}
