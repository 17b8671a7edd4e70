"""Kill-first ordering of the gate's modes for `dryz mutate`, from a kill matrix (which mode killed which mutant,
and each mode's median seconds to kill).

A kill matrix (schema dryz.kill-matrix/1) is made from a run's results (`kill_matrix`, every mode run on every
mutant: without --first-kill) and shipped per release beside the triage (kill-matrix-VERSION.json). The order is
greedy set cover weighted by time, lane by lane: the next mode of a lane is the one that kills the most mutants
not yet killed by the lane's earlier modes per median second to kill; modes that kill nothing new follow by
their median, and modes the matrix does not know keep their place at the end. With --first-kill, a mutant's
first kill then comes early: the run's cost is mostly the builds.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from .report import KILLING, TRIAGE_DIR, TriageError

SCHEMA = "dryz.kill-matrix/1"


def default_matrix(version: str) -> Path:
    return TRIAGE_DIR / f"kill-matrix-{version}.json"


def kill_matrix(results: list[dict], version: str, source: str) -> dict:
    """The kill matrix of a run's results (dryz.mutant/1): per mutant run, the modes that killed it; per mode,
    its median seconds to kill."""
    killed_by, seconds = {}, {}
    for r in results:
        if r.get("status") not in ("killed", "survived"):
            continue
        killed_by[r["id"]] = [m["mode"] for m in r["modes"] if m["status"] in KILLING]
        for m in r["modes"]:
            if m["status"] in KILLING:
                seconds.setdefault(m["mode"], []).append(m["seconds"])
    return {"schema": SCHEMA, "version": version, "source": source,
            "median_seconds_to_kill": {k: round(statistics.median(v), 1) for k, v in sorted(seconds.items())},
            "killed_by": killed_by}


def load_matrix(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise TriageError(f"{path}: not a readable kill matrix ({e})") from None
    if isinstance(data, dict) and isinstance(data.get("summary"), dict) and "kill_matrix" in data["summary"]:
        data = data["summary"]["kill_matrix"]  # an earlier run's --json (without --first-kill)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("killed_by"), dict):
        raise TriageError(f"{path}: not a {SCHEMA} file")
    return data


def kill_first(lanes: list[list[str]], matrix: dict) -> list[str]:
    """Every mode of `lanes` (the gate's plan, lane by lane), each lane in kill-first order (module docstring);
    returned as one list (gate.plan's `order`)."""
    med = {k: v for k, v in matrix.get("median_seconds_to_kill", {}).items() if v is not None}
    kills: dict[str, set] = {}
    for mutant, modes in matrix["killed_by"].items():
        for m in modes:
            kills.setdefault(m, set()).add(mutant)
    out = []
    for lane in lanes:
        known = [m for m in lane if m in med]
        left, todo = set().union(*(kills.get(m, set()) for m in known)) if known else set(), list(known)
        while todo:
            best = max(todo, key=lambda m: (len(kills.get(m, set()) & left) / max(med[m], 0.1), -med[m],
                                            -lane.index(m)))
            if not kills.get(best, set()) & left:  # nothing new: the rest by their median
                out += sorted(todo, key=lambda m: (med[m], lane.index(m)))
                break
            out.append(best)
            left -= kills[best]
            todo.remove(best)
        out += [m for m in lane if m not in med]
    return out
