"""Each engine's figures beside libllama's: the certificate space it can express (cases judged per second) and a
fuzz campaign (execs per second, findings by class), one subject after another on one core each, written as a
benchmark record to bench/records/engines.json (bench/record.py: command, commit, machine, load, date, the
figures; the per-subject rows beside them).

Each engine's campaign runs as `dryz conformance` runs it: with the fitted causes of its row in the checked-in
conformance result (`--fitted MODEL ...`; --fitted-from RESULT: another result), so an input they explain is
counted, not re-checked as a finding.

Usage: python bench/engines.py [--time SECONDS] [--max-length N] [--record NAME] [--fitted-from RESULT]
                               [SUBJECT[@N] ...]
  default subjects: libllama: engine:mistralrs@8 engine:exllamav2 engine:aphrodite engine:aphrodite-python
  ik-llama:; --time 300 (a 5-minute
  campaign), --max-length 11 (the default space of `dryz exhaustive`); SUBJECT@N: that subject's certificate to
  length N only (mistral.rs answers ~1,200 cases a second through its HTTP-like request path: the default space,
  1.6 million cases, would take over 20 minutes); --record NAME: write bench/records/NAME.json instead (a subject
  measured on its own, e.g. `--time 60 --record engines-ik-llama ik-llama:`)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from record import command_line, machine, write_record

ROOT = Path(__file__).resolve().parent.parent
SUBJECTS = ("libllama:", "engine:mistralrs@8", "engine:exllamav2", "engine:aphrodite", "engine:aphrodite-python",
            "ik-llama:")


def fitted(result: Path) -> dict:
    """Each row's fitted causes in a conformance result: {spec: (model, ...)}."""
    r = json.loads(result.read_text())
    return {row["spec"]: tuple((row.get("fit") or {}).get("models") or ()) for row in r.get("rows", [])}


def dryz(spec: str, *args: str) -> tuple[float, int]:
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "dryz", "--subject", spec, "-q", *args], capture_output=True,
                       text=True, cwd=ROOT)
    return time.monotonic() - t, p.returncode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time", type=int, default=300)
    ap.add_argument("--max-length", type=int, default=11)
    ap.add_argument("--record", default="engines")
    ap.add_argument("--fitted-from", type=Path, default=ROOT / "docs" / "results" / "conformance.json")
    ap.add_argument("subjects", nargs="*", default=list(SUBJECTS))
    a = ap.parse_args()
    causes = fitted(a.fitted_from)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for given in a.subjects:
            spec, _, n = given.partition("@")
            n = int(n) if n else a.max_length
            load = os.getloadavg()[0]
            cert = Path(tmp) / "cert.json"
            wall, rc = dryz(spec, "exhaustive", "-j", "1", "--no-progress", "-n", str(n),
                            "--json", str(cert))
            c = json.loads(cert.read_text())
            t = c["totals"]
            fz = Path(tmp) / "fuzz.json"
            fit = causes.get(spec, ()) if not spec.startswith("libllama") else ()
            fwall, frc = dryz(spec, "fuzz", "--time", str(a.time), "--jobs", "1", "--workdir",
                              str(Path(tmp) / spec.replace(":", "_")), "--json", str(fz),
                              *[x for m in fit for x in ("--fitted", m)])
            s = json.loads(fz.read_text())
            classes: dict = {}
            for f in s["findings"]:
                classes[f["klass"]] = classes.get(f["klass"], 0) + 1
            rows.append({"subject": spec, "load_before": round(load, 2),
                         "certificate": {"max_length": n, "verdict": c["verdict"], "cases": t["cases"],
                                         "not_judged_cases": t.get("not_judged_cases", 0),
                                         "mismatches": t["mismatches"], "wall_seconds": round(wall, 1),
                                         "cases_per_second": round(t["cases"] / wall, 1), "exit": rc},
                         # execs per second of libFuzzer's own time, as the campaign reports them (the command's
                         # seconds add its set-up and the re-checks of its findings, which are no fuzzing)
                         "campaign": {"execs": s["execs"], "seconds": round(s["seconds"], 1),
                                      "fuzz_seconds": s["fuzz_seconds"],
                                      "execs_per_second": round(s["execs"] / max(s["fuzz_seconds"], 1e-9), 1),
                                      "findings": classes, "fitted": list(fit),
                                      "explained": (s.get("explained") or {}).get("inputs", 0), "exit": frc}})
            print(json.dumps(rows[-1]), flush=True)
    figures = {}
    for r in rows:
        figures[f"{r['subject']} certificate cases/s"] = r["certificate"]["cases_per_second"]
        figures[f"{r['subject']} campaign execs/s"] = r["campaign"]["execs_per_second"]
    out = write_record(a.record, command_line(), figures,
                       bench="engines", machine=machine(), load_after=round(os.getloadavg()[0], 2),
                       certificate_command="dryz --subject SUBJECT exhaustive -j 1 -n MAX_LENGTH",
                       campaign_command=f"dryz --subject SUBJECT fuzz --time {a.time} --jobs 1 [--fitted MODEL ...]",
                       fitted_from=os.path.relpath(a.fitted_from, ROOT), rows=rows)
    print(f"written: {out}")


if __name__ == "__main__":
    main()
