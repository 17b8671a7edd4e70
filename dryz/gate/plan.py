"""The gate's plan: the modes (dryz.gate.modes) for a budget of `--time` seconds on the subject, in two lanes (two
processes at a time: the project's machines have two cores).

    lane 0: parameters, certificate, window-caps, restarts, replay | construction | fuzz-traces | fuzz-vocab-random
    lane 1: traces | promise | fuzz | differential (with a base) | fuzz-vocab-dict

The fixed modes (the certificates, the restart sweep, the replay) run to completion; the timed ones take a share
of the budget as their own --time: construction 20% and promise 10% of it, the differential 15%, and the fuzz
campaigns split what is left of their lane equally (after the fixed modes' measured cost and each campaign's
measured start-up and re-check overhead). When a timed mode starts, its share is rescaled to the time its lane
actually has left (dryz.gate.run), so a slow machine shortens the campaigns rather than the deadline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from .modes import BY_NAME, MODES, NAMES, ModeRecord
from .result import GateError

LANES = 2
MIN_SECONDS = 5.0


@dataclass
class Mode:
    """One planned mode: a registered mode (its record) on the subject `spec`, in a lane, with its planned
    seconds (the estimate of a fixed mode, the share of a timed one)."""
    record: ModeRecord
    lane: int
    seconds: float
    spec: str             # the subject spec the mode runs on
    base: str | None = None
    early_stop: bool = True  # a campaign ends at its first crashing job (the gate; the matrix runs it whole)
    not_expressible: str = ""  # why the subject cannot express the mode (its capabilities): not run, counted

    def __post_init__(self):  # the record's name, kind and measured overhead, read as the mode's own
        self.name, self.timed, self.overhead = self.record.name, self.record.timed, self.record.overhead

    def timeout(self, given: float) -> float:
        """When the mode's process is stopped (verdict timeout): far past what a working subject needs."""
        return max(180.0, 6 * given) if not self.timed else given + self.overhead + max(180.0, given)

    def args(self, work: Path, given: float) -> list[str]:
        """The dryz command (after the subject options) with the run's work folder, the seconds it is given and
        the base filled in."""
        sub = {"work": str(work), "time": f"{max(1, int(round(given)))}", "name": self.name,
               "base": str(self.base)}
        args = list(self.record.args) + (list(self.record.stop_early) if self.early_stop else [])
        return [re.sub(r"\{(work|time|name|base)\}", lambda m: sub[m.group(1)], a) for a in args]


def plan(spec: str, budget: float, base=None, modes=None, lanes: int = LANES, caps: dict | None = None,
         order: list[str] | None = None) -> list[Mode]:
    """The modes for a gate of `budget` seconds on the subject `spec`; with `base` (a subject spec) the
    differential too. modes: only these names (in the registry's order); lanes: 1 or 2. caps: the subject's
    capabilities (subject show): a mode it cannot express is planned as not expressible (not run, its time given to
    the others). order: mode names; each lane runs its modes in this order (unlisted ones after, in the
    registry's order; dryz mutate's kill-first order), its budget unchanged."""
    if lanes not in (1, 2):
        raise GateError(f"lanes must be 1 or 2, got {lanes}")
    wanted = set(NAMES if modes is None else modes)
    unknown = wanted - set(NAMES)
    if unknown:
        raise GateError(f"unknown mode(s) {', '.join(sorted(unknown))}; known: {', '.join(NAMES)}")
    if base is None:
        wanted -= {m.name for m in MODES if m.needs_base}
    layout = [[m for m in MODES if m.lane == i and m.name in wanted] for i in range(LANES)]
    if lanes == 1:
        layout = [layout[0] + layout[1]]
    if order:
        rank = {name: i for i, name in enumerate(order)}
        layout = [sorted(lane, key=lambda m: rank.get(m.name, len(rank))) for lane in layout]
    why = {m.name: (m.needs(caps) if m.needs and caps is not None else None) or "" for lane in layout for m in lane}
    out = []
    for i, lane in enumerate(layout):
        runs = [m for m in lane if not why[m.name]]
        fixed = sum(m.fixed for m in runs)
        timed = [m for m in runs if m.timed]
        campaigns = [m for m in timed if m.campaign]
        rest = budget - fixed - sum(m.share * budget for m in timed) - sum(m.overhead for m in timed)
        for m in lane:
            secs = 0.0 if why[m.name] else m.fixed if m.fixed else m.share * budget if m.share else \
                rest / len(campaigns)
            out.append(Mode(m, i, round(max(MIN_SECONDS, secs), 1) if m.timed and not why[m.name] else secs, spec,
                            base, not_expressible=why[m.name]))
    return out


def mode(name: str, spec: str, seconds: float = 0.0, early_stop: bool = False, caps: dict | None = None,
         extra: tuple = ()) -> Mode:
    """One registered mode on its own (the matrix's cells): its planned seconds are its estimate, or `seconds`
    for a timed mode; not expressible where the subject's capabilities (caps) say so; extra: options added to
    its command (a smaller space)."""
    m = BY_NAME[name]
    if extra:
        m = replace(m, args=tuple(m.args) + tuple(extra))
    why = (m.needs(caps) if m.needs and caps is not None else None) or ""
    return Mode(m, 0, m.fixed if m.fixed else seconds, spec, early_stop=early_stop, not_expressible=why)
