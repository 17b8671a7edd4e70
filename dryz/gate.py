"""`dryz gate`: every audit mode on one subject within a time budget, one verdict, and (with a base) what the
subject does differently from the base — for a pull request that touches DRY.

The gate is a plan of named modes (`plan`), each a dryz command run in its own process on the subject with a
timeout, as `dryz matrix` runs its cells, so a subject that crashes or hangs costs that mode, never the gate.
The modes run in two lanes (two processes at a time: the project's machines have two cores):

    lane 0: parameters, certificate, window-caps, restarts, replay | construction | fuzz-traces | fuzz-vocab-random
    lane 1: traces | promise | fuzz | differential (with a base) | fuzz-vocab-dict

The fixed modes (the certificates, the restart sweep, the replay) run to completion; the timed ones take a
share of the budget as their own --time: construction 20% and promise 10% of it, the differential 15%, and
the fuzz campaigns split what is left of their lane equally (after the fixed modes' measured cost and each
campaign's measured start-up and re-check overhead). When a timed mode starts, its share is rescaled to the
time its lane actually has left, so a slow machine shortens the campaigns rather than the deadline.

`run(plan)` returns a GateResult: per mode its verdict (pass, finding, error, timeout, crash, cancelled), exit
code, seconds, findings and witnesses; then each failing mode's first finding is minimized (`dryz minimize`,
bounded by max(30 s, 10% of the budget) in all) and laid out by `dryz explain`. With a base, every difference
the comparison found is a behaviour change, classed by what it is (`crash@window<-1`, `semantic-change@
window=-1`, ...); a change on which the subject itself crashes or breaks a promise nobody documented is a
finding. A change passes only when declared (`expect`); a declared class that no change shows is reported too,
and fails the gate.

Exit: 0 every mode passed and the changes are exactly the declared ones; 1 a finding, or a change not declared,
or a declaration not seen; 2 a mode could not conclude (bad input, a harness control, a timeout).

`dryz mutate` calls plan() and run() with a small budget and stop_on_finding=True and reads which mode killed
a mutant, and how fast (GateResult.first_finding).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from .errors import DryzError

LANES = 2
VOCAB_FUZZ = "llama-bpe"  # the real vocabulary of the vocabulary campaigns (README's campaigns use it)

# Measured on the project's 2-core machine beside four other engineers' builds and campaigns (load 6; README
# "The gate"): the fixed modes' wall, and what a timed mode takes beyond its --time (start-up, seeding, the
# last fork-mode job, re-checks; the differential: the edge cases and the corpus, compared in full, and the
# minimization). They only size the timed modes' shares; the deadline is kept by rescaling at run time.
FIXED_ESTIMATE = {"certificate": 2.0, "parameters": 18.0, "window-caps": 5.0, "traces": 26.0, "restarts": 2.0,
                  "replay": 6.0}
OVERHEAD = {"fuzz": 7.0, "fuzz-traces": 15.0, "fuzz-vocab-dict": 20.0, "fuzz-vocab-random": 20.0,
            "construction": 3.0, "promise": 3.0, "differential": 35.0}
SHARE = {"construction": 0.20, "promise": 0.10, "differential": 0.15}
MIN_SECONDS = 5.0
RANDOM_CASES = 500  # fuzz-decoder cases in the differential (besides edges, the corpus and the kept inputs)

# The lanes, in order. Fixed modes first (their results come in minutes), then the timed ones; the
# differential follows the symbol campaign in its lane, so it compares on that campaign's kept inputs.
LAYOUT = (("parameters", "certificate", "window-caps", "restarts", "replay", "construction", "fuzz-traces",
           "fuzz-vocab-random"),
          ("traces", "promise", "fuzz", "differential", "fuzz-vocab-dict"))

WHAT = {
    "certificate": "every history of length 1..11 over 3 symbols, 3 configurations (dryz exhaustive)",
    "parameters": "the same space over allowed_length 0..3 x 4 (multiplier, base) pairs, bit-exact",
    "window-caps": "a configuration per window cap 1..11 (ring-buffer wrap-around)",
    "traces": "every trace of up to 7 events (accept, apply, reset, clone, free), 4 configurations",
    "restarts": "multi-token restart sequences, every history up to 7 tokens, 13 breaker sets",
    "replay": "the project corpus: every entry's verdict as recorded",
    "construction": "init_dry's restart sequences against an independent model, vendored vocabularies",
    "promise": "rep_limit against the breaker as printed, texts over the vendored vocabularies",
    "fuzz": "libFuzzer campaign, symbol vocabulary (long histories, random windows and parameters)",
    "fuzz-traces": "libFuzzer campaign over traces (reset, clone, continue)",
    "fuzz-vocab-dict": f"libFuzzer campaign over {VOCAB_FUZZ}, real-world breaker sets",
    "fuzz-vocab-random": f"libFuzzer campaign over {VOCAB_FUZZ}, random breakers",
    "differential": "the subject against the base, case by case (dryz compare: edges, corpus, kept inputs)",
}


class GateError(RuntimeError, DryzError):
    """Bad input to the gate (one line)."""


@dataclass
class Mode:
    """One mode: a dryz command on the subject. args hold {work} (the gate's work directory) and, for a timed
    mode, {time} (the seconds it is given, decided when it starts)."""
    name: str
    args: list
    lane: int
    timed: bool
    seconds: float      # planned: the estimate (fixed) or the share (timed)
    overhead: float     # expected seconds beyond `seconds`
    subject_args: list
    what: str = ""

    def timeout(self, given: float) -> float:
        """When the mode's process is killed (verdict timeout): far past what a working subject needs."""
        return max(180.0, 6 * given) if not self.timed else given + self.overhead + max(180.0, given)

    def argv(self, work: Path, given: float) -> list:
        sub = {"{work}": str(work), "{time}": f"{max(1, int(round(given)))}"}
        args = [sub.get(a, a) if isinstance(a, str) else a for a in self.args]
        args = [re.sub(r"\{work\}", str(work), a) for a in args]
        return [sys.executable, "-m", "dryz", *self.subject_args, "-q", *args]


@dataclass
class Finding:
    mode: str
    klass: str
    detail: str
    witness: str | None = None        # a file dryz check/explain/minimize read
    reader: list = field(default_factory=list)  # how they read the witness (a vocabulary campaign's crash file)
    minimized: str | None = None      # the minimized witness (a corpus entry), when minimizing succeeded
    spelled: str = ""                 # the witness in one line (history and parameters)
    shortest: str = ""                # proven | 1-minimal | not minimized (why)
    explain: list = field(default_factory=list)  # the `dryz explain` lines that show it


@dataclass
class ModeResult:
    name: str
    verdict: str          # pass | finding | error | timeout | crash | cancelled | interrupted | not run
    exit: int | None
    seconds: float
    given: float | None   # the --time it was given (timed modes)
    text: str
    command: list
    findings: list = field(default_factory=list)
    started: float = 0.0  # seconds after the gate started
    ended: float = 0.0


@dataclass
class Change:
    klass: str            # the declarable class, e.g. semantic-change@window=-1
    declared: bool
    witness: str | None   # the corpus entry dryz compare wrote
    spelled: str
    shortest: str
    base: str             # what the base did
    new: str              # what the subject did
    explain: list = field(default_factory=list)


@dataclass
class GateResult:
    verdict: str          # pass | fail | error | interrupted
    exit: int
    budget: float
    lanes: int
    seconds: float
    modes: list
    subject: dict = field(default_factory=dict)
    base: dict | None = None
    changes: list = field(default_factory=list)
    declared: list = field(default_factory=list)
    declared_unseen: list = field(default_factory=list)
    witness_seconds: float = 0.0
    work: str = ""

    @property
    def findings(self) -> list:
        return [f for m in self.modes for f in m.findings]

    @property
    def first_finding(self) -> ModeResult | None:
        """The mode whose finding ended first (the one that 'killed' the subject), or None."""
        hit = [m for m in self.modes if m.verdict in ("finding", "crash")]
        return min(hit, key=lambda m: m.ended) if hit else None

    def mode(self, name: str) -> ModeResult | None:
        return next((m for m in self.modes if m.name == name), None)

    def to_json(self) -> dict:
        d = asdict(self)
        d["tool"] = "dryz gate"
        d["overhead_seconds"] = round(self.seconds - self.budget, 1)
        return d


# -- the plan ---------------------------------------------------------------------------------------------


def _args(name: str, base: str | None) -> list:
    j = lambda n: f"--json={{work}}/{n}.json"  # noqa: E731
    # A buggy subject makes many crash files at once (the seeds); three re-checked are enough to fail.
    fuzz = ["fuzz", "--time", "{time}", "--jobs", "1", "--recheck", "3", f"--workdir={{work}}/{name}", j(name)]
    stop = ["--", "-ignore_crashes=0"]  # the first crashing job ends the campaign
    return {
        "certificate": ["exhaustive", "-j", "1", "--no-progress", j(name)],
        "parameters": ["exhaustive", "-j", "1", "--no-progress", "--parameters", j(name)],
        "window-caps": ["exhaustive", "-j", "1", "--no-progress", "--window-caps", j(name)],
        "traces": ["exhaustive", "-j", "1", "--no-progress", "--traces", "7", j(name)],
        "restarts": ["restarts", j(name)],
        "replay": ["replay"],
        "construction": ["restarts", "--vocab", "all", "--check", "construction", "--time", "{time}", j(name)],
        "promise": ["restarts", "--vocab", "all", "--check", "promise", "--time", "{time}", j(name)],
        "fuzz": fuzz + stop,
        "fuzz-traces": fuzz[:1] + ["--traces"] + fuzz[1:] + stop,
        "fuzz-vocab-dict": fuzz + ["--vocab", VOCAB_FUZZ, "--breakers", "dict"] + stop,
        "fuzz-vocab-random": fuzz + ["--vocab", VOCAB_FUZZ, "--breakers", "random"] + stop,
        "differential": ["compare", "--base", str(base), "--kept", "{work}/fuzz/corpus", "--random",
                         str(RANDOM_CASES), "--time", "{time}", "--corpus", "{work}/changes", j(name)],
    }[name]


def plan(subject_args, budget: float, base=None, modes=None, lanes: int = LANES) -> list[Mode]:
    """The modes for a gate of `budget` seconds on the subject the opaque global options `subject_args` select
    (["--subject", SPEC]); with `base` (a subject spec) the differential too. modes: only these names (in
    the layout's order); lanes: 1 or 2."""
    if lanes not in (1, 2):
        raise GateError(f"lanes must be 1 or 2, got {lanes}")
    names = [n for lane in LAYOUT for n in lane]
    wanted = set(names if modes is None else modes)
    unknown = wanted - set(names)
    if unknown:
        raise GateError(f"unknown mode(s) {', '.join(sorted(unknown))}; known: {', '.join(names)}")
    if base is None:
        wanted.discard("differential")
    layout = [[n for n in lane if n in wanted] for lane in LAYOUT]
    if lanes == 1:
        layout = [layout[0] + layout[1]]
    out = []
    for i, lane in enumerate(layout):
        fixed = sum(FIXED_ESTIMATE[n] for n in lane if n in FIXED_ESTIMATE)
        timed = [n for n in lane if n not in FIXED_ESTIMATE]
        shared = [n for n in timed if n not in SHARE]
        rest = budget - fixed - sum(SHARE[n] * budget for n in timed if n in SHARE) - sum(OVERHEAD[n] for n in timed)
        for n in lane:
            if n in FIXED_ESTIMATE:
                secs, timed_mode = FIXED_ESTIMATE[n], False
            elif n in SHARE:
                secs, timed_mode = SHARE[n] * budget, True
            else:
                secs, timed_mode = rest / len(shared), True
            out.append(Mode(n, _args(n, base), i, timed_mode, round(max(MIN_SECONDS, secs), 1) if timed_mode
                            else secs, OVERHEAD.get(n, 0.0), list(subject_args), WHAT[n]))
    return out


# -- running ----------------------------------------------------------------------------------------------


class _Runner:
    def __init__(self, modes, work: Path, budget: float, log, stop_on_finding: bool):
        self.modes, self.work, self.budget, self.log = modes, work, budget, log
        self.stop_on_finding = stop_on_finding
        self.t0 = time.monotonic()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.procs: dict[str, subprocess.Popen] = {}
        self.results: dict[str, ModeResult] = {}
        self.interrupted = False

    def given(self, mode: Mode) -> float:
        """A timed mode's seconds: its planned share rescaled to what its lane has left of the budget."""
        lane = [m for m in self.modes if m.lane == mode.lane and m.timed and m.name not in self.results]
        left = self.budget - (time.monotonic() - self.t0) - sum(m.overhead for m in lane)
        planned = sum(m.seconds for m in lane)
        return max(MIN_SECONDS, mode.seconds * left / planned if planned > 0 else left)

    def lane(self, i: int):
        for m in [m for m in self.modes if m.lane == i]:
            if self.stop.is_set():
                self.results[m.name] = ModeResult(m.name, "interrupted" if self.interrupted else "cancelled",
                                                  None, 0.0, None, "not run", [])
                continue
            self.results[m.name] = self.one(m)

    def one(self, m: Mode) -> ModeResult:
        given = self.given(m) if m.timed else m.seconds
        argv = m.argv(self.work, given)
        out, err = self.work / f"{m.name}.out", self.work / f"{m.name}.err"
        start = time.monotonic()
        self.log(f"[{start - self.t0:5.0f}s] {m.name}: start" + (f" ({given:.0f} s)" if m.timed else ""))
        env = {k: v for k, v in os.environ.items() if k not in ("DRYZ_LIB", "DRYZ_SUBJECT", "LLAMA_CPP_LIB_PATH", "DRYZ_FAULT",
                                                                 "DRYZ_QUIET")}
        with open(out, "w") as fo, open(err, "w") as fe:
            p = subprocess.Popen(argv, stdout=fo, stderr=fe, env=env, cwd=self.work, start_new_session=True)
            with self.lock:
                self.procs[m.name] = p
            timed_out = False
            try:
                p.wait(timeout=m.timeout(given))
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill(p)
            with self.lock:
                self.procs.pop(m.name, None)
        end = time.monotonic()
        rc = p.returncode
        r = ModeResult(m.name, "", rc, round(end - start, 1), round(given, 1) if m.timed else None, "", argv,
                       started=round(start - self.t0, 1), ended=round(end - self.t0, 1))
        if timed_out:
            r.verdict, r.exit = "timeout", None
            r.text = f"no result within {m.timeout(given):.0f} s (the subject hung, or the machine is too slow)"
        elif self.stop.is_set() and rc not in (0, 1):
            r.verdict = "interrupted" if self.interrupted else "cancelled"
            r.text = "stopped"
        else:
            try:
                _parse(m, r, self.work)
            except Exception as e:  # noqa: BLE001 (a result this gate cannot read: the harness is in doubt)
                r.verdict, r.text = "error", f"could not read the mode's result ({type(e).__name__}: {e})"
        self.log(f"[{end - self.t0:5.0f}s] {m.name}: {r.verdict} ({r.seconds:.0f} s): {r.text}")
        if r.verdict in ("finding", "crash") and self.stop_on_finding:
            self.cancel()
        return r

    def cancel(self, sig=signal.SIGTERM):
        self.stop.set()
        with self.lock:
            procs = list(self.procs.values())
        for p in procs:
            try:
                os.killpg(p.pid, sig)
            except OSError:
                pass


def _kill(p: subprocess.Popen):
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 30)):
        try:
            os.killpg(p.pid, sig)
        except OSError:
            return
        try:
            p.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run(modes: list[Mode], work: Path | str | None = None, budget: float | None = None, log=None,
        stop_on_finding: bool = False, witnesses: bool = True, expect=(), base_identity=None,
        subject_identity=None) -> GateResult:
    """Run a plan: each lane's modes in order, the lanes side by side. budget: the seconds the plan was made
    for (default: the sum of the largest lane's planned seconds). stop_on_finding: cancel the rest at the first
    finding (dryz mutate). witnesses: minimize and explain each failing mode's first finding. expect: the
    declared change classes (with a differential mode). Ctrl-C stops every mode's process and returns what
    ran, verdict interrupted."""
    import tempfile
    log = log or (lambda m: None)
    work = Path(work) if work is not None else Path(tempfile.mkdtemp(prefix="dryz-gate-"))
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    _clean(work, modes)
    if budget is None:
        budget = max(sum(m.seconds + m.overhead for m in modes if m.lane == i) for i in {m.lane for m in modes})
    runner = _Runner(modes, work, budget, log, stop_on_finding)
    threads = [threading.Thread(target=runner.lane, args=(i,), daemon=True) for i in sorted({m.lane for m in modes})]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.2)
    except KeyboardInterrupt:
        runner.interrupted = True
        runner.cancel(signal.SIGINT)  # the modes write their partial states (fuzz keeps its crash files)
        for t in threads:
            t.join(timeout=30)
        runner.cancel(signal.SIGKILL)
        for t in threads:
            t.join(timeout=10)
    results = [runner.results.get(m.name) or ModeResult(m.name, "interrupted", None, 0.0, None, "not run", [])
               for m in modes]
    res = GateResult("", 0, budget, len({m.lane for m in modes}), 0.0, results, work=str(work),
                     subject=subject_identity or _identity_from(results, work), base=base_identity,
                     declared=sorted(set(expect)))
    diff = res.mode("differential")
    if diff is not None and diff.verdict in ("pass", "finding"):
        _changes(res, work, modes)
    if witnesses and not runner.interrupted:
        t = time.monotonic()
        try:
            _witnesses(res, work, modes, max(30.0, 0.1 * budget))
        except KeyboardInterrupt:
            runner.interrupted = True
        res.witness_seconds = round(time.monotonic() - t, 1)
    res.seconds = round(time.monotonic() - runner.t0, 1)
    _judge(res, runner.interrupted)
    return res


def _clean(work: Path, modes) -> None:
    """Remove what an earlier gate left in the work directory (only the files and folders a gate writes), so
    every result read is this run's."""
    import shutil
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


def _identity_from(results, work: Path) -> dict:
    for name in ("certificate", "parameters", "window-caps", "traces", "fuzz", "restarts"):
        p = work / f"{name}.json"
        if p.exists():
            try:
                return json.loads(p.read_text())["subject"]
            except (ValueError, KeyError):
                continue
    return {}


# -- reading each mode's result -----------------------------------------------------------------------------


def _verdict_of(rc) -> str:
    if rc is None:
        return "error"
    if rc < 0:
        return "crash"
    return {0: "pass", 1: "finding", 130: "interrupted"}.get(rc, "error")


def _last_error(work: Path, name: str) -> str:
    lines = [ln for ln in (work / f"{name}.err").read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no message"


def _parse(m: Mode, r: ModeResult, work: Path) -> None:
    r.verdict = _verdict_of(r.exit)
    if r.verdict == "crash":
        r.text = f"the dryz process died of {signal.Signals(-r.exit).name} (the subject crashed it)"
        return
    if r.verdict in ("error", "interrupted"):
        r.text = f"exit {r.exit}: {_last_error(work, m.name)}"
        return
    n = m.name
    if n in ("certificate", "parameters", "window-caps", "traces"):
        _parse_certificate(n, r, work)
    elif n == "restarts":
        _parse_restarts(r, work)
    elif n == "replay":
        _parse_replay(r, work)
    elif n in ("construction", "promise"):
        _parse_vocab(n, r, work)
    elif n.startswith("fuzz"):
        _parse_fuzz(n, r, work)
    elif n == "differential":
        _parse_differential(r, work)


def _write(work: Path, name: str, data: dict) -> str:
    d = work / "inputs"
    d.mkdir(exist_ok=True)
    p = d / name
    p.write_text(json.dumps(data) + "\n")
    return str(p)


def _parse_certificate(n: str, r: ModeResult, work: Path) -> None:
    c = json.loads((work / f"{n}.json").read_text())
    t = c["totals"]
    text = f"{c['verdict'].upper()}: {t['cases']:,} cases, {t['mismatches']:,} mismatches"
    if n == "parameters":
        text += f", {len(c['configs'])} configurations"
    per = c["controls"]["periodic"]
    tr = c.get("traces")
    if per.get("library_failures"):
        text += f"; periodic control: the library misses {per['library_failures']} closed form(s)"
    if tr:
        text = f"{c['verdict'].upper()}: {tr['traces']:,} traces, {tr['applies']:,} applies, " \
               f"{tr['disagreements']:,} disagreements; histories {t['cases']:,} cases, {t['mismatches']:,} " \
               f"mismatches" + text.split(" mismatches", 1)[1]
        for cf in tr["configs"]:
            for ex in cf["examples"][:1]:
                r.findings.append(Finding(n, ex.get("status", "trace-disagreement"),
                                          f"{cf['config']}: first bad apply {ex['first_bad_apply']}",
                                          _write(work, f"{n}-{cf['config']}.trace.json", ex["trace"]),
                                          spelled=ex["spelled"]))
    for cf in c["configs"]:
        for ex in cf["examples"][:1]:
            r.findings.append(Finding(n, ex["kind"], f"configuration {cf['name']}",
                                      _write(work, f"{n}-{cf['name'].replace('/', '_')}.json", ex["case"])))
    for i, ex in enumerate(per.get("findings", [])[:1]):
        r.findings.append(Finding(n, ex["kind"], "periodic control: the library misses its closed form",
                                  _write(work, f"{n}-periodic-{i}.json", ex["case"])))
    r.text = text


def _parse_restarts(r: ModeResult, work: Path) -> None:
    from .verdict import is_finding
    from .enumerate.restarts import case_of
    d = json.loads((work / "restarts.json").read_text())
    counts: dict = {}
    for c in d["configs"]:
        for k, v in c["counts"].items():
            counts[k] = counts.get(k, 0) + v
        for k, h in c["examples"].items():
            if is_finding(k) and not any(f.klass == k for f in r.findings):
                case = case_of(h, c["breakers"], d["alphabet"], d["max_length"])
                r.findings.append(Finding("restarts", k, f"breaker set {c['breakers']} ({c['name']})",
                                          _write(work, f"restarts-{c['name']}.json", case.to_json())))
    r.text = ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def _parse_replay(r: ModeResult, work: Path) -> None:
    out = (work / "replay.out").read_text()
    m = re.search(r"replayed (\d+) entries: (\d+) as expected, (\d+) changed, (\d+) invalid", out)
    if not m:
        raise ValueError("no replay summary line")
    r.text = f"{m.group(2)}/{m.group(1)} as expected" + (f", {m.group(3)} changed" if int(m.group(3)) else "")
    for ln in out.splitlines():
        x = re.match(r"CHANGED (.+?): expected (\S+), now (\S+)", ln)
        if x:
            r.findings.append(Finding("replay", x.group(3), f"{Path(x.group(1)).name}: expected {x.group(2)}",
                                      x.group(1)))


def _parse_vocab(n: str, r: ModeResult, work: Path) -> None:
    d = json.loads((work / f"{n}.json").read_text())
    ran = [v for v in d["vocabularies"] if "skipped" not in v]
    cover = f"{len(ran)} of {len(d['vocabularies'])} vocabularies"
    if n == "construction":
        probes = sum(v.get("construction", {}).get("probes", 0) for v in ran)
        sets = sum(v.get("construction", {}).get("sets_complete", 0) for v in ran)
        dis = sum(v.get("construction", {}).get("disagreements", 0) for v in ran)
        r.text = f"{probes:,} probes, {sets} breaker sets complete, {cover}: {dis} disagreements"
    else:
        classes: dict = {}
        for v in ran:
            for k, c in {**v["promise"]["windows"]}.items():
                classes[k] = classes.get(k, 0) + c
        from .fuzz.target import KNOWN
        known = sorted(k for k in classes if k != "agree" and k in KNOWN and k != "construction-mismatch")
        r.text = f"{cover}, {sum(classes.values()):,} windows: {len(d['findings'])} finding(s)" + \
                 (f" (documented classes seen: {', '.join(known)})" if known else "")
    for i, f in enumerate(d["findings"][:3]):
        r.findings.append(Finding(n, f["klass"], f"{f['vocab']}: {f['detail'][:160]}",
                                  _write(work, f"{n}-{i}.json", f["case"])))


def _parse_fuzz(n: str, r: ModeResult, work: Path) -> None:
    s = json.loads((work / f"{n}.json").read_text())
    classes: dict = {}
    for f in s["findings"]:
        classes[f["klass"]] = classes.get(f["klass"], 0) + 1
    r.text = f"{s['execs']:,} execs in {s['seconds']:.0f} s, cov {s['cov']}: " + \
             (", ".join(f"{k} {v}" for k, v in classes.items()) if classes else "no findings") + \
             (f" ({len(s['slow'])} slow input(s), not findings)" if s.get("slow") else "")
    real = sorted((f for f in s["findings"] if f["reproduces"]), key=lambda f: os.path.getsize(f["file"])
                  if os.path.exists(f["file"]) else 1 << 30)
    v = s.get("vocab")
    for f in real[:1]:
        beside = f["file"] + ".case.json"  # the re-check's decoded case (none for a crash)
        w = beside if os.path.exists(beside) else f["file"]
        # A vocabulary campaign's bare crash file is read as that campaign decoded it (`--vocab --breakers`)
        reader = ["--vocab", v.get("spec") or v["path"], "--breakers", v["breakers"]] if v and w == f["file"] else []
        r.findings.append(Finding(n, f["klass"], f"crash file {Path(f['file']).name} (reproduces in a clean "
                                                 "process)", w, reader=reader))


def _parse_differential(r: ModeResult, work: Path) -> None:
    d = json.loads((work / "differential.json").read_text())
    counts = ", ".join(f"{k} {v:,}" for k, v in d["counts"].items()) or "no differences"
    r.text = f"{d['compared']:,} of {d['cases']:,} cases compared: {counts}; {len(d['differences'])} witness(es)"
    # A difference is a finding when the subject itself crashes or breaks a promise nobody documented there
    # (the rest are behaviour changes, judged against the declarations: _changes).
    r.verdict = "pass"
    for x in d["differences"]:
        if _subject_broke(x):
            r.findings.append(Finding("differential", x["class"], f"the subject: {_side(x['other'])}; the base: "
                                      f"{_side(x['reference'])}", x.get("written"), spelled=_spell(x["case"]),
                                      shortest=x["shortest"]))
    if r.findings:
        r.verdict = "finding"


def _subject_broke(x: dict) -> bool:
    """A difference where the subject crashed, hung, or broke a promise no corpus entry documents: a finding,
    not a behaviour change."""
    from .fuzz.target import KNOWN
    new = x["other"]
    return "klass" not in new or (new["klass"] != "agree" and new["klass"] not in KNOWN)


def _side(s: dict) -> str:
    return s.get("klass") or f"{s.get('kind')}: {s.get('detail', '')}"[:120]


def _spell(c: dict) -> str:
    from .case import Case
    case = Case.from_json(c)
    h = f"`{case.symbols}`" if case.vocab is None else f"{len(case.history)} tokens of {case.vocab}"
    parts = [h, f"window {case.penalty_last_n}"]
    if case.n_ctx_train != 4096:
        parts.append(f"n_ctx_train {case.n_ctx_train}")
    parts.append(f"allowed_length {case.allowed_length}")
    if case.breakers:
        parts.append(f"breakers {list(case.breakers)}")
    if (case.multiplier, case.base) != (1.0, 2.0):
        parts.append(f"multiplier {case.multiplier:g} base {case.base:g}")
    return ", ".join(parts)


# -- behaviour changes ----------------------------------------------------------------------------------


def change_class(klass: str, case) -> str:
    """The declarable class of a behaviour change: the comparison's class (crash, semantic-change,
    promise-broken-in-one) at where its minimized witness sits on the window's edges (dryz.matrix.where):
    CLASS@window=-1, CLASS@window<-1, CLASS@window>0,n_ctx_train<=0, ..."""
    from .matrix import where
    window, cap = where(case)
    w = {"-1": "window=-1", "<-1": "window<-1", "0": "window=0", ">0": "window>0"}[window]
    return f"{klass}@{w}" + (f",{cap}" if cap != "-" else "")


def declared(klass: str, declarations) -> bool:
    """A declaration covers a change class when equal, or a prefix of it ending at @ or , (`crash` covers
    every crash change, `crash@window<-1` both crashes with window below -1)."""
    return any(klass == d or klass.startswith(d) and klass[len(d)] in "@," for d in declarations)


DECLARED = re.compile(r"[a-z-]+(@window(=-1|<-1|=0|>0)(,n_ctx_train(<=0|<window))?)?")


def declared_changes(expect, expect_file) -> list[str]:
    """The classes --expect-change and --expect-file declare; GateError names the first malformed one."""
    declared = list(expect)
    if expect_file:
        if not os.path.isfile(expect_file):
            raise GateError(f"--expect-file {expect_file}: no such file")
        declared += read_expect_file(expect_file)
    bad = [d for d in declared if not DECLARED.fullmatch(d)]
    if bad:
        raise GateError(f"--expect-change {bad[0]!r}: a class is CLASS[@window=-1|<-1|=0|>0[,n_ctx_train<=0|"
                        "<window]], e.g. semantic-change@window=-1 or crash")
    return declared


def read_expect_file(path) -> list[str]:
    """Declarations, one class per line; # starts a comment."""
    out = []
    for ln in Path(path).read_text().splitlines():
        ln = ln.split("#", 1)[0].strip()
        if ln:
            out.append(ln)
    return out


def _changes(res: GateResult, work: Path, modes) -> None:
    d = json.loads((work / "differential.json").read_text())
    res.base = res.base or d["base"]["identity"]
    for x in d["differences"]:
        if _subject_broke(x):
            continue
        from .case import Case
        k = change_class(x["class"], Case.from_json(x["case"]))
        res.changes.append(Change(k, declared(k, res.declared), x.get("written"), _spell(x["case"]),
                                  x["shortest"], _side(x["reference"]), _side(x["other"])))
    res.declared_unseen = [dcl for dcl in res.declared if not any(declared(c.klass, [dcl]) for c in res.changes)]


# -- witnesses: minimized, explained ----------------------------------------------------------------------


def _dryz(subject_args, args, timeout, work) -> subprocess.CompletedProcess | None:
    env = {k: v for k, v in os.environ.items() if k not in ("DRYZ_LIB", "DRYZ_SUBJECT", "LLAMA_CPP_LIB_PATH", "DRYZ_FAULT")}
    try:
        return subprocess.run([sys.executable, "-m", "dryz", *subject_args, "-q", *args], capture_output=True,
                              text=True, timeout=timeout, env=env, cwd=work, start_new_session=True)
    except subprocess.TimeoutExpired:
        return None


def excerpt(text: str, limit: int = 4) -> list[str]:
    """The lines of `dryz explain` that show a case: its class, the candidate table's header and the rows that
    differ (or the first rows), the restart line when there is one."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    out = [ln for ln in lines if ln.startswith("class ")][:1]
    head = next((i for i, ln in enumerate(lines) if ln.startswith("candidate")), None)
    if head is not None:
        rows = [ln for ln in lines[head + 1:] if not ln.startswith("(")]
        bad = [ln for ln in rows if "DIFFERS" in ln]
        out += [lines[head]] + (bad or rows)[:limit - len(out) - 1]
    else:
        out += [ln for ln in lines if ln not in out and not ln.startswith(("subject", "dryz explain"))][:limit - 1]
    return out[:limit]


def _witnesses(res: GateResult, work: Path, modes, seconds: float) -> None:
    """Minimize each failing mode's first finding and explain it, within `seconds` in all; then explain each
    behaviour change on both subjects."""
    sub = {m.name: m.subject_args for m in modes}
    subject_args = next(iter(sub.values()))
    deadline = time.monotonic() + seconds
    todo = [m.findings[0] for m in res.modes if m.findings and m.findings[0].witness]
    out_dir = work / "witnesses"
    done: dict = {}  # the same input (several certificates stop at one history): minimized and explained once
    for i, f in enumerate(todo):
        left = deadline - time.monotonic()
        key = (f.mode == "fuzz-traces", Path(f.witness).read_bytes() if Path(f.witness).is_file() else f.witness)
        if key in done:
            g = done[key]
            f.minimized, f.shortest, f.spelled, f.explain = g.minimized, g.shortest, g.spelled, g.explain
            continue
        done[key] = f
        if f.mode == "differential" or f.mode == "replay":  # already minimized (a corpus entry)
            f.minimized, f.shortest = f.witness, f.shortest or "as recorded"
        elif left > 3:
            per = max(left / (len(todo) - i), min(left, 15.0))  # a short witness shrinks in seconds
            args = ["minimize", f.witness, "--corpus", str(out_dir)] + f.reader
            if f.mode == "fuzz-traces":
                args.append("--trace")
            p = _dryz(subject_args, args, per, work)
            m = re.search(r"written: (\S+)", p.stdout) if p is not None and p.returncode == 0 else None
            if m:
                f.minimized = m.group(1)
                s = re.search(r"shortest: ([\w-]+)", p.stdout)
                f.shortest = s.group(1) if s else "?"
            else:
                f.shortest = "not minimized (" + (f"no result within {per:.0f} s" if p is None else
                                                   (p.stderr.strip().splitlines() or ["?"])[-1][:100]) + ")"
        else:
            f.shortest = "not minimized (no time left)"
        path = f.minimized or f.witness
        f.spelled = f.spelled or _spell_file(path)
        p = _dryz(subject_args, ["explain", "--no-color", path] + (["--trace"] if f.mode == "fuzz-traces" and
                                                                   not f.minimized else []) +
                  ([] if f.minimized else f.reader), 120, work)
        if p is not None:
            f.explain = excerpt(p.stdout)
    base_args = ["--subject", res.base["spec"]] if res.base and res.base.get("spec") else None
    for c in res.changes:
        if not c.witness or not Path(c.witness).exists():
            continue
        p = _dryz(subject_args, ["explain", "--no-color", c.witness], 120, work)
        lines = [f"new:  {ln}" for ln in excerpt(p.stdout, 3)[1:]] if p is not None else []
        if base_args:
            q = _dryz(base_args, ["explain", "--no-color", c.witness], 120, work)
            if q is not None:
                lines += [f"base: {ln}" for ln in excerpt(q.stdout, 3)[1:]]
        c.explain = lines


def _spell_file(path: str) -> str:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return Path(path).name
    if data.get("schema") == "dryz.corpus/1":
        if "trace" in data:
            from .trace import Trace
            return f"trace `{Trace.from_json(data['trace']).spelled()}`"
        data = data["case"]
    if data.get("schema") == "dryz.trace/1":
        from .trace import Trace
        return f"trace `{Trace.from_json(data).spelled()}`"
    try:
        return _spell(data)
    except Exception:  # noqa: BLE001
        return Path(path).name


# -- the summary ------------------------------------------------------------------------------------------


def markdown(res: GateResult, limit: int = 60) -> str:
    """The summary to paste into a pull request (at most `limit` lines)."""
    from .subject.identity import subject_line
    nf = len(res.findings)
    und = [c for c in res.changes if not c.declared]
    head = {"pass": "PASS", "fail": "FAIL", "error": "ERROR (the harness could not conclude)",
            "interrupted": "INTERRUPTED (partial)"}[res.verdict]
    why = [f"{nf} finding(s)"] + ([f"{len(und)} undeclared change(s)"] if res.changes or res.declared else []) + \
          ([f"{len(res.declared_unseen)} declared change(s) not seen"] if res.declared_unseen else [])
    s = res.subject or {}
    lines = [f"### dryz gate: {head} — {', '.join(why)}", "",
             f"- subject: {subject_line(s)}, sha256 `{s.get('libllama_sha256', '?')[:16]}`"]
    if res.base:
        lines.append(f"- base: {subject_line(res.base)}, sha256 `{res.base.get('libllama_sha256', '?')[:16]}`")
    lines.append(f"- budget `--time {res.budget:g}` on {res.lanes} lane(s): {res.seconds:.0f} s wall "
                 f"(witnesses {res.witness_seconds:.0f} s)")
    lines += ["", "| mode | verdict | time | result |", "|---|---|---|---|"]
    for m in res.modes:
        t = f"{m.seconds:.0f} s" + (f" (of {m.given:.0f})" if m.given else "")
        lines.append(f"| {m.name} | {m.verdict} | {t} | {m.text.replace('|', '/')} |")
    tail: list[str] = []
    if res.findings:
        tail += ["", "**Findings** (each mode's first, minimized; `dryz explain` excerpt)"]
        shown: dict = {}
        for m in res.modes:
            for f in m.findings[:1]:
                where = f.minimized or f.witness or ""
                if where and where in shown:
                    tail.append(f"- **{f.mode}** `{f.klass}`: the same witness as **{shown[where]}**")
                    continue
                shown[where] = f.mode
                tail.append(f"- **{f.mode}** `{f.klass}`: {f.spelled or f.detail} (shortest: {f.shortest or '?'}; "
                            f"`{Path(where).name}`)")
                if f.explain:
                    tail += ["  ```"] + [f"  {ln}" for ln in f.explain] + ["  ```"]
    if res.changes or res.declared_unseen:
        tail += ["", "**Behaviour changes against the base** (declare with `--expect-change CLASS`)", "",
                 "| class | declared | witness | base | new |", "|---|---|---|---|---|"]
        for c in res.changes:
            tail.append(f"| `{c.klass}` | {'yes' if c.declared else '**no**'} | {c.spelled} ({c.shortest}) | "
                        f"{c.base.replace('|', '/')} | {c.new.replace('|', '/')} |")
        for dcl in res.declared_unseen:
            tail.append(f"| `{dcl}` | declared, **not seen** | | | |")
        ex = [c for c in res.changes if c.explain]
        if ex:
            tail += ["", "```"]
            for c in ex:
                tail += [f"{c.klass}:"] + c.explain
            tail += ["```"]
    room = limit - len(lines)
    if len(tail) > room:
        tail = tail[:room - 1] + [f"(… {len(tail) - room + 1} more lines: see the HTML report and the JSON)"]
    return "\n".join(lines + tail) + "\n"


def html_section(d: dict, name: str) -> tuple[str, str]:
    """The gate's section of `dryz report` (HTML, Markdown) from its JSON."""
    import html as _h

    from .report import _table
    res = from_json(d)
    md = markdown(res, limit=10_000)
    parts = [f"<h2>Gate <code>{_h.escape(name)}</code>: <span class=\"{'ok' if res.verdict == 'pass' else 'bad'}\">"
             f"{_h.escape(res.verdict.upper())}</span></h2>"]
    from .subject.identity import subject_line
    rows = [["subject", subject_line(res.subject)], ["sha256", res.subject.get("libllama_sha256", "?")]]
    if res.base:
        rows += [["base", subject_line(res.base)], ["base sha256", res.base.get("libllama_sha256", "?")]]
    rows.append(["budget", f"--time {res.budget:g} on {res.lanes} lanes: {res.seconds:.0f} s wall"])
    parts.append(_table(["", ""], rows)[0])
    parts.append(_table(["mode", "verdict", "seconds", "given", "result"],
                        [[m.name, m.verdict, m.seconds, m.given or "", m.text] for m in res.modes])[0])
    if res.findings:
        parts.append("<h3>Findings</h3>" + _table(
            ["mode", "class", "witness", "shortest", "explain"],
            [[f.mode, f.klass, (f.spelled or f.detail).replace("`", ""), f.shortest, "<pre>" + _h.escape("\n".join(f.explain)) + "</pre>"]
             for f in res.findings])[0])
    if res.changes or res.declared_unseen:
        parts.append("<h3>Behaviour changes against the base</h3>" + _table(
            ["class", "declared", "witness", "base", "new", "explain"],
            [[c.klass, "yes" if c.declared else "NO", f"{c.spelled.replace('`', '')} ({c.shortest})", c.base, c.new,
              "<pre>" + _h.escape("\n".join(c.explain)) + "</pre>"] for c in res.changes]
            + [[dcl, "declared, not seen", "", "", "", ""] for dcl in res.declared_unseen])[0])
    return "".join(parts), f"## Gate `{name}`\n\n" + md


def from_json(d: dict) -> GateResult:
    modes = [ModeResult(**{k: v for k, v in m.items() if k != "findings"},
                        findings=[Finding(**f) for f in m["findings"]]) for m in d["modes"]]
    keep = {k: v for k, v in d.items() if k in GateResult.__dataclass_fields__ and k not in ("modes", "changes")}
    return GateResult(**{**keep, "modes": modes, "changes": [Change(**c) for c in d["changes"]]})


def report_inputs(res: GateResult) -> list[str]:
    """What `dryz report` reads besides the gate's JSON: the certificates, the campaigns, the witnesses."""
    work = Path(res.work)
    out = [str(work / f"{n}.json") for n in ("certificate", "parameters", "window-caps", "traces")
           if (work / f"{n}.json").exists()]
    out += [str(work / n) for n in ("fuzz", "fuzz-traces", "fuzz-vocab-dict", "fuzz-vocab-random")
            if (work / n / "summary.json").exists()]
    out += [str(work / n) for n in ("witnesses", "changes") if (work / n).is_dir() and any((work / n).rglob("*.json"))]
    return out


# -- the command ----------------------------------------------------------------------------------------


def resolve_base(base: str, log) -> str:
    """--base VERSION (a llama-cpp-python release, built by `dryz subject build` into the cache), a subject spec
    KIND:ARG, or a libllama PATH: the base's subject spec."""
    from .matrix import as_spec
    from .subject.binding import SubjectError, resolve
    from .subject.registry import KINDS
    if re.fullmatch(r"\d+\.\d+\.\d+", base):
        from .subject.build import BuildError, build
        t = time.monotonic()
        try:
            out = build(base, None, log=log)
        except BuildError as e:
            raise GateError(f"--base {base}: {str(e).splitlines()[0]}") from None
        log(f"base {base}: {out} (prepared in {time.monotonic() - t:.1f} s, outside the budget)")
        return as_spec(out)
    if base.split(":", 1)[0] in KINDS and ":" in base:
        return base
    try:
        return as_spec(resolve(base))
    except SubjectError as e:
        raise GateError(f"--base: {e}") from None


def identity(subject_args, work: Path) -> dict:
    """The subject's identity, read by `dryz SUBJECT_ARGS subject show` in a child (this process loads no
    library); GateError when it cannot be loaded."""
    p = _dryz(subject_args, ["subject", "show"], 300, work)
    if p is None or p.returncode != 0:
        why = "no answer within 300 s" if p is None else (p.stderr.strip().splitlines() or ["cannot be loaded"])[-1]
        raise GateError(f"subject {' '.join(subject_args)}: {why.removeprefix('dryz: error: ')}")
    return json.loads(p.stdout)


def gate(subject_args, seconds: float, base: str | None = None, expect=(), work: Path | str = "gate-work",
         modes=None, lanes: int = LANES, log=None) -> GateResult:
    """`dryz gate`: plan and run every mode on the subject the opaque global options `subject_args` select
    (["--subject", SPEC]), with the differential against `base` (a release, a subject spec or a libllama path)
    when given;
    the result judged against the declared changes `expect`."""
    log = log or (lambda m: None)
    work = Path(work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if expect and base is None:
        raise GateError("--expect-change and --expect-file declare changes against a base: give --base")
    base_lib = resolve_base(base, log) if base is not None else None
    ident = identity(subject_args, work)
    base_ident = identity(["--subject", base_lib], work) if base_lib is not None else None
    modes_ = plan(list(subject_args), seconds, base_lib, modes, lanes)
    return run(modes_, work, seconds, log, expect=expect, base_identity=base_ident, subject_identity=ident)


def command(gate_lib, seconds, base, expect, expect_file, workdir, modes, lanes, md_path, html_path, json_path,
            log, echo) -> int:
    """`dryz gate`, everything but option parsing: the subject (gate's --lib, else the one the command line
    selected), run it, write gate.json (and --json, --markdown, --html), print the Markdown summary; the gate's
    exit code."""
    from .files import fail
    from .inputs import selected_spec
    from .output import write_json
    from .subject.binding import SubjectError, resolve
    declared = declared_changes(expect, expect_file)
    try:
        subject = f"libllama:{resolve(gate_lib)}" if gate_lib else selected_spec()
    except SubjectError as e:
        fail(f"subject: {e}")
    res = gate(["--subject", subject], seconds, base, declared, Path(workdir), list(modes) or None, lanes, log=log)
    md = markdown(res)
    data = res.to_json()
    write_json(Path(res.work) / "gate.json", data)
    if json_path:
        write_json(json_path, data)
    if md_path:
        Path(md_path).write_text(md)
    if html_path:
        from .report import build_report
        page, _ = build_report([str(Path(res.work) / "gate.json")] + report_inputs(res))
        Path(html_path).write_text(page)
    echo(md, nl=False)
    return res.exit
