"""The mutation score, the kill matrix and the survivors, from a run's results and a triage file.

score = killed / (generated - stillborn - shown equivalent), for dryz (any mode), for each mode alone, and for
the baseline (llama.cpp's test-sampling). Shown equivalent: identical DRY object code (runner.run_one), or a
triage entry `{"verdict": "equivalent", "reason": ...}` (a person's argument, recorded). A survivor with no
such entry is a gap of the audit; the triage may say why (`"verdict": "gap"`).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from ..errors import DryzError

TRIAGE_SCHEMA = "dryz.mutate-triage/1"
KILLING = ("killed", "crash", "memory", "timeout")  # what kills a mutant (a mode's status, or test-sampling's)
TRIAGE_DIR = Path(__file__).parent


class TriageError(ValueError, DryzError):
    pass


def default_triage(version: str) -> Path:
    return TRIAGE_DIR / f"triage-{version}.json"


def load_triage(path: Path | None) -> dict:
    """{mutant id: {"verdict": "equivalent"|"gap", "reason": str}} (empty without a file)."""
    if path is None or not Path(path).exists():
        return {}
    try:
        data = json.loads(Path(path).read_text())
    except ValueError as e:
        raise TriageError(f"{path}: not JSON ({e})") from None
    if not isinstance(data, dict) or data.get("schema") != TRIAGE_SCHEMA or not isinstance(data.get("mutants"),
                                                                                              dict):
        raise TriageError(f"{path}: not a {TRIAGE_SCHEMA} file")
    for k, v in data["mutants"].items():
        if not isinstance(v, dict) or v.get("verdict") not in ("equivalent", "gap") or not v.get("reason"):
            raise TriageError(f"{path}: {k}: each entry needs verdict equivalent|gap and a reason")
    return data["mutants"]


def summarize(results: list[dict], generated: int, mode_names: list[str], triage: dict) -> dict:
    """Counts, scores and the per-mode kill matrix of a (possibly partial) run."""
    by_status: dict[str, int] = {}
    for r in results:
        by_status[r["status"]] = by_status.get(r["status"], 0) + 1
    stillborn = by_status.get("stillborn", 0)
    proven = by_status.get("equivalent", 0)
    argued = [r["id"] for r in results if r["status"] == "survived"
              and triage.get(r["id"], {}).get("verdict") == "equivalent"]
    run = [r for r in results if r["status"] in ("killed", "survived")]
    denominator = len(run) - len(argued)  # a result of status error (the harness in doubt) counts nowhere
    killed = by_status.get("killed", 0)

    def score(k: int) -> float | None:
        return round(k / denominator, 4) if denominator > 0 else None

    modes = []
    for name in mode_names:
        kills = [m for r in run for m in r["modes"] if m["mode"] == name and m["status"] in
                 KILLING]
        only = [r["id"] for r in run if r["killed_by"] == [name]]
        modes.append({"mode": name, "killed": len(kills), "score": score(len(kills)), "only_killer": len(only),
                      "median_seconds_to_kill": round(statistics.median([m["seconds"] for m in kills]), 1)
                      if kills else None,
                      "statuses": _count(m["status"] for r in run for m in r["modes"] if m["mode"] == name)})
    up = [r["upstream"] for r in run if r.get("upstream")]
    up_kills = [u for u in up if u["status"] in KILLING]
    seconds = [r["seconds"] for r in results if r["status"] in ("killed", "survived")]
    builds = [r["build_seconds"] for r in results if "build_seconds" in r and not r.get("cached_build")]
    return {
        "generated": generated, "done": len(results), "statuses": by_status, "stillborn": stillborn,
        "equivalent_proven": proven, "equivalent_argued": len(argued), "denominator": denominator,
        "errors": sorted(r["id"] for r in results if r["status"] == "error"),
        "killed": killed, "score": score(killed),
        "upstream": {"killed": len(up_kills), "score": score(len(up_kills)) if up else None,
                     "run": len(up)},
        "killed_by_upstream_only": sorted(r["id"] for r in run if not r["killed_by"] and r.get("upstream")
                                          and r["upstream"]["status"] in KILLING),
        "modes": modes,
        "by_operator": _by(results, "operator"), "by_function": _by(results, "function"),
        "seconds_per_mutant": {"median": round(statistics.median(seconds), 1) if seconds else None,
                               "mean": round(statistics.mean(seconds), 1) if seconds else None,
                               "total": round(sum(r.get("seconds", 0) for r in results), 1)},
        "build_seconds": {"median": round(statistics.median(builds), 1) if builds else None,
                          "max": max(builds) if builds else None},
        "survivors": [{"id": r["id"], "description": r["description"],
                       "triage": triage.get(r["id"]), "upstream": (r.get("upstream") or {}).get("status")}
                      for r in results if r["status"] == "survived"],
    }


def _count(items) -> dict:
    out: dict = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


def _by(results: list[dict], key: str) -> dict:
    out: dict = {}
    for r in results:
        d = out.setdefault(r[key], {"generated": 0, "killed": 0, "survived": 0, "stillborn": 0, "equivalent": 0})
        d["generated"] += 1
        d[r["status"]] = d.get(r["status"], 0) + 1
    return out


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def markdown(summary: dict, results: list[dict], mutants_by_id: dict, mode_names: list[str]) -> str:
    """The report: the score, the kill matrix by mode (totals and per mutant), the survivors with their diffs."""
    s = summary
    lines = [f"**Mutation score: {_pct(s['score'])}** ({s['killed']} killed of {s['denominator']} = "
             f"{s['done']} run - {s['stillborn']} stillborn - {s['equivalent_proven']} equivalent by object code"
             f" - {s['equivalent_argued']} equivalent by argument; {s['generated']} in the plan). "
             f"llama.cpp's test-sampling: {_pct(s['upstream']['score'])} ({s['upstream']['killed']} killed).", ""]
    lines += ["| mode | killed | score | sole killer | median s to kill |", "|---|---|---|---|---|",
              f"| upstream test-sampling | {s['upstream']['killed']} | {_pct(s['upstream']['score'])} | "
              f"{len(s['killed_by_upstream_only'])} (no dryz mode) | - |"]
    for m in s["modes"]:
        lines.append(f"| {m['mode']} | {m['killed']} | {_pct(m['score'])} | {m['only_killer']} | "
                     f"{m['median_seconds_to_kill'] if m['median_seconds_to_kill'] is not None else '-'} |")
    lines.append(f"| **any dryz mode** | **{s['killed']}** | **{_pct(s['score'])}** | | |")
    lines += ["", "Per mutant (K killed, . survived, C crash, M memory, T timeout, E harness error, - not run: "
              "cancelled at the first kill; U: upstream test-sampling):", "",
              "| mutant | status | U | " + " | ".join(mode_names) + " | s |",
              "|---|---|---|" + "---|" * len(mode_names) + "---|"]
    mark = {"killed": "K", "survived": ".", "crash": "C", "memory": "M", "timeout": "T", "error": "E",
            "not run": "-"}
    for r in results:
        if r["status"] not in ("killed", "survived"):
            lines.append(f"| `{r['id']}` | {r['status']} | | " + " | ".join("" for _ in mode_names) +
                         f" | {r.get('seconds', '')} |")
            continue
        cells = {m["mode"]: mark.get(m["status"], "?") for m in r["modes"]}
        up = mark.get((r.get("upstream") or {}).get("status"), "")
        lines.append(f"| `{r['id']}` | {r['status']} | {up} | " +
                     " | ".join(cells.get(n, "") for n in mode_names) + f" | {r['seconds']} |")
    if s["survivors"]:
        lines += ["", "Survivors:", ""] + survivor_lines(s["survivors"], mutants_by_id)
    return "\n".join(lines) + "\n"


def survivor_lines(survivors: list[dict], mutants_by_id: dict, indent: str = "") -> list[str]:
    """Each survivor as a Markdown item: its description, its triage (or **not triaged**) and its diff (indented
    by `indent` inside the item, where a page's list needs it)."""
    lines = []
    for sv in survivors:
        t = sv["triage"]
        lines.append(f"- `{sv['id']}` {sv['description']}: " +
                     (f"**{t['verdict']}**: {t['reason']}" if t else "**not triaged**"))
        m = mutants_by_id.get(sv["id"])
        if m is not None:
            lines += ["", f"{indent}```diff"] + [f"{indent}{ln}" for ln in m.diff.rstrip("\n").splitlines()] + \
                [f"{indent}```", ""]
    return lines
