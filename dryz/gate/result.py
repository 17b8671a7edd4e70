"""What a gate run found: per mode its result (verdict, exit, seconds, text, findings with their witnesses), the
behaviour changes against a base, and the whole (GateResult: its JSON is what `dryz report` and `dryz mutate`
read back, from_json)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..errors import DryzError


class GateError(RuntimeError, DryzError):
    """Bad input to the gate (one line)."""


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
    verdict: str          # pass | finding | error | timeout | crash | cancelled | interrupted | not run |
                          # not expressible (the subject's capabilities: counted, not run)
    exit: int | None
    seconds: float
    given: float | None   # the --time it was given (timed modes)
    text: str
    command: list
    findings: list = field(default_factory=list)
    started: float = 0.0  # seconds after the gate started
    ended: float = 0.0
    counts: dict = field(default_factory=dict)  # class -> number, where the mode counts them (a campaign's findings)


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
    causes: dict = field(default_factory=dict)  # an engine gate's fits (dryz.gate.causes): base, subject, removed

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


def from_json(d: dict) -> GateResult:
    modes = [ModeResult(**{k: v for k, v in m.items() if k != "findings"},
                        findings=[Finding(**f) for f in m.get("findings", [])]) for m in d["modes"]]
    keep = {k: v for k, v in d.items() if k in GateResult.__dataclass_fields__ and k not in ("modes", "changes")}
    return GateResult(**{**keep, "modes": modes, "changes": [Change(**c) for c in d.get("changes", [])]})
