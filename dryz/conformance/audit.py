"""`dryz audit`: one subject against llama.cpp's semantics, in one command: its causes fitted from every property's
probes (`dryz properties`), the certificate space it can express, the restart sweep, a fuzz campaign judging with the
causes, the campaigns' witnesses attributed, each cause's witness minimized keeping its cause; one verdict, a grid
of the properties, each difference with its cause, what llama.cpp and the subject gave, and the command that
replays it. `--time` bounds the whole run. A row of `dryz conformance` is this audit (subject_row); every step is a
dryz child on the subject (dryz.children), so a subject that crashes or hangs costs that step, never the audit.

Exit: 2 when the subject could not be had or a step could not conclude; 1 when a cell differs or a campaign found
something; 0 when every cell conforms (or differs only as the subject declares); 130 interrupted (the result so
far written, said so).
"""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path

from ..case import Case
from ..causes import predicted_json
from ..children import run as run_child
from ..gate.witnesses import minimized, properties
from ..matrix import cell as campaign_cell
from ..output import write_json, write_text
from ..subject.identity import subject_line
from . import page

CAMPAIGNS = (("certificate", "certificate"), ("restarts", "restarts"), ("fuzz", "fuzz"))
MAX_LENGTH = 8  # the certificate campaign's longest history (the default space is 11; an engine answers ~100/s)
MINIMIZE_SECONDS = 300  # a witness's minimization, at most
MINIMIZE_SHARE = 0.3    # of what a bounded audit has left after the certificate and the sweep: the minimization's
MINIMIZE_MIN = 5        # seconds: a witness given less is not minimized (said so)
FUZZ_MIN = 10           # seconds: a bounded audit's campaign, at least
RECHECK_BOUNDED = 12    # a bounded audit's campaign re-checks at most this many findings (the smallest) ...
RECHECK_SECONDS = 40    # ... which it expects to take about this long (each in a clean process)


def subject_row(spec: str, seconds: int, work: Path, log, max_length: int = MAX_LENGTH, names=(),
                budget: float | None = None) -> dict:
    """A subject's row (an audit): its identity, its causes fitted from the properties' probes, its campaigns (the
    fuzz campaign judging with the causes: what they explain is counted, not found), the campaigns' witnesses
    attributed (the properties again, with them), each cause's witness minimized keeping its cause. seconds: the
    fuzz campaign's --time; budget: the whole row's seconds, when bounded (then the campaign has what the steps
    before it left, less a share for the minimization, and the minimization what is left)."""
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    p = run_child(spec, ["subject", "show"], 600, work)
    bad = p.failure(600)
    if bad or p.exit != 0:
        return {"spec": spec, "subject": spec, "error": bad or p.last_error() or "the subject could not be opened",
                "cells": {}, "campaigns": {}}
    ident = json.loads(p.stdout)
    caps = ident.pop("capabilities", None)
    name = label(ident)
    campaigns: dict = {}
    try:
        return _row(spec, name, ident, caps, campaigns, seconds, work, log, max_length, names, t0, budget)
    except KeyboardInterrupt:  # the row as far as it got, said so (the step's child is stopped: dryz.children)
        return {"spec": spec, "subject": name, "identity": ident, "capabilities": caps, "cells": {},
                "campaigns": campaigns, "interrupted": True,
                "error": "interrupted (Ctrl-C) " + (f"after {', '.join(campaigns)}" if campaigns else
                                                    "before its first campaign ended"),
                "seconds": round(time.monotonic() - t0, 1)}


def _row(spec, name, ident, caps, campaigns, seconds, work, log, max_length, names, t0, budget):
    left = (lambda: budget - (time.monotonic() - t0)) if budget is not None else (lambda: float("inf"))
    log(f"  {name}: properties (the causes fitted)")
    t_props = time.monotonic()
    props, why = properties(spec, work, names, [], log, "probes")
    t_props = time.monotonic() - t_props  # (a bounded audit keeps as long again for the properties with witnesses)
    if props is None:
        return {"spec": spec, "subject": name, "identity": ident, "error": f"dryz properties: {why}", "cells": {},
                "campaigns": campaigns}
    fitted = props["fit"]["models"]
    log(f"  {name}: llama.cpp with {' + '.join(fitted) or 'nothing'}, residual {props['fit']['residual']:,}")
    for key, mode in CAMPAIGNS:
        log(f"  {name}: {key}")
        extra = ("-n", str(max_length)) if mode == "certificate" else \
            tuple(x for m in fitted for x in ("--fitted", m)) if mode == "fuzz" else ()
        t = seconds
        if mode == "fuzz" and budget is not None:  # what is left, less the minimization's share and the re-checks
            t = max(FUZZ_MIN, int(left() * (1 - MINIMIZE_SHARE) - t_props - RECHECK_SECONDS))
            extra += ("--recheck", str(RECHECK_BOUNDED))
        campaigns[key] = campaign_cell(spec, mode, work, t, caps, extra)
        log(f"  {name}: {key}: {campaigns[key]['text']} ({campaigns[key]['seconds']} s)")
    found = [f["witness"] for c in campaigns.values() for f in c["findings"] if f.get("witness")]
    found += [w for w in _campaign_findings(work) if w not in found]
    if found:  # the campaigns' witnesses judged and attributed (the causes fitted again with them, from these)
        log(f"  {name}: properties again, with the campaigns' {len(found)} witness(es)")
        again, why = properties(spec, work, names, found, log, "witnesses", fitted)
        if again is None:
            return {"spec": spec, "subject": name, "identity": ident, "error": f"dryz properties: {why}",
                    "cells": props["cells"], "campaigns": campaigns}
        props = again
    fitted = props["fit"]["models"]
    todo = [(key, cause) for key, c in props["cells"].items() for cause in c.get("causes", [])]
    for i, (key, cause) in enumerate(todo):
        per = MINIMIZE_SECONDS if budget is None else left() / (len(todo) - i)
        if per < MINIMIZE_MIN:
            (cause.get("witness") or {})["shortest"] = "not minimized (no time left)"
            continue
        minimize_witness(spec, work, key, cause, fitted, name, log, ident.get("init_dry_abi", 7),
                         min(per, MINIMIZE_SECONDS))
    return {"spec": spec, "subject": name, "identity": ident, "capabilities": caps, "cells": props["cells"],
            "fit": props["fit"], "campaigns": campaigns, "witnesses": props.get("witnesses", []),
            "seconds": round(time.monotonic() - t0, 1)}


WITNESSES_MAX = 24  # a campaign's findings (re-checked, reproducing) judged against the causes, smallest first


def _campaign_findings(work: Path) -> list[str]:
    """The fuzz campaign's findings that reproduce, as files (the smallest of each class first, WITNESSES_MAX in
    all): its differences the causes did not explain, to be attributed or left as the residual."""
    summary = work / "fuzz.json"
    if not summary.is_file():
        return []
    rows = [f for f in json.loads(summary.read_text()).get("findings", []) if f.get("reproduces")
            and Path(f["file"]).is_file()]
    by: dict = {}
    for f in sorted(rows, key=lambda f: (Path(f["file"]).stat().st_size, f["file"])):
        by.setdefault(f["klass"], []).append(f["file"])
    out = []
    while len(out) < WITNESSES_MAX and any(by.values()):  # round the classes
        for k in list(by):
            if by[k] and len(out) < WITNESSES_MAX:
                out.append(by[k].pop(0))
    return out


def minimize_witness(spec, work: Path, key: str, cause: dict, fitted, name, log, abi: int = 7,
              seconds: float = 300) -> None:
    """A cause's witness minimized on its subject, keeping the cause (dryz minimize --cause): a witness of this
    cause that no other fitted cause explains. A class the judge names (promise-*, served-*) keeps its class."""
    w = cause.get("witness") or {}
    src = w.get("file")
    tag = re.sub(r"[^\w.-]+", "_", f"{key}-{cause['name']}")
    if src is None and {"history", "requests", "events"} & set(w.get("probe") or {}):  # a probe: a case, sequence or trace
        src = str(work / "probes" / f"{tag}.json")
        Path(src).parent.mkdir(exist_ok=True)
        Path(src).write_text(json.dumps(w["probe"]) + "\n")
    if src is None:
        return
    args = ["minimize", src, "--corpus", str(work / "witnesses")]
    fit_args = [x for m in fitted for x in ("--fitted", m)]
    if cause["kind"] in ("observed", "declared"):
        args += ["--cause", cause["name"]] + fit_args
    elif cause["kind"] == "residual" and fitted:
        args += ["--cause", "unexplained"] + fit_args
    log(f"  {name}: minimizing the witness of {cause['name']} ({key})")
    w["minimized"], w["shortest"] = minimized(spec, args, seconds, work, work / f"minimize-{tag}.json")
    w["source"] = src
    if w["minimized"]:
        entry = json.loads(Path(w["minimized"]).read_text())
        if "requests" in entry:  # a request sequence: per request what llama.cpp, the other causes and it gave
            w["minimized_case"] = entry["requests"]
            w["minimized_values"] = _sequence_values(entry, cause, fitted, abi)
            return
        w["minimized_case"] = entry.get("case")
        if entry.get("answer") and entry.get("case"):  # what llama.cpp, the other causes and the subject give
            case = Case.from_json(entry["case"])
            rest = tuple(m for m in fitted if m != cause["name"])
            vals = {"probe": entry["case"], "llama.cpp": predicted_json(case, (), abi), "subject": entry["answer"]}
            other = predicted_json(case, rest, abi) if cause["kind"] in ("observed", "declared") else None
            if other is not None and other != vals["llama.cpp"]:
                vals["without"] = other
            w["minimized_values"] = vals


def _sequence_values(entry: dict, cause: dict, fitted, abi: int) -> dict:
    """A minimized request sequence's values: per request what llama.cpp gives, what it gives with the other
    fitted causes (where that differs) and what the subject answered; the request that shows the cause first."""
    from ..requests import Requests  # on use: a sequence witness only
    seq = Requests.from_json(entry["requests"])
    rest = tuple(m for m in fitted if m != cause["name"]) if cause["kind"] in ("observed", "declared") else ()
    per = []
    for item, got in zip(seq.items(), entry["per_request"]):
        v = {"class": got.get("class"), "llama.cpp": predicted_json(item, (), abi), "subject": got["subject"]}
        other = predicted_json(item, rest, abi) if rest else None
        if other is not None and other != v["llama.cpp"]:
            v["without"] = other
        per.append(v)
    shown = next((i for i, r in enumerate(per) if r["class"] not in (None, "agree", "not judged")), len(per) - 1)
    return {"probe": entry["requests"], "request": shown + 1, **per[shown], "per_request": per}



def label(ident: dict) -> str:
    """A row's name: an engine and its version, else the subject's line."""
    if ident.get("engine"):
        return f"{ident['engine']} {str(ident.get('engine_version') or '').split(' (')[0]}".strip()
    return subject_line(ident)




# -- `dryz audit` ------------------------------------------------------------------------------------------------

def verdict(row: dict) -> str:
    """The audit's verdict: ERROR (the subject or a step failed), INTERRUPTED, DIFFERS (a cell differs or a campaign
    found what the causes do not explain), NOT JUDGED (nothing could be asked), or CONFORMS."""
    if row.get("interrupted"):
        return "INTERRUPTED"
    if "error" in row:
        return "ERROR"
    cells = row["cells"].values()
    if any(c["status"] == "differs" for c in cells) or any(c.get("exit") == 1 for c in row["campaigns"].values()):
        return "DIFFERS"
    if not any(c["judged"] for c in cells):
        return "NOT JUDGED"
    return "CONFORMS"


def exit_code(row: dict) -> int:
    v = verdict(row)
    if v == "INTERRUPTED":
        return 130
    if v in ("ERROR", "NOT JUDGED") or any(c.get("failed") for c in row.get("campaigns", {}).values()):
        return 2 if v != "DIFFERS" else 1
    return 1 if v == "DIFFERS" else 0


def text(row: dict) -> str:
    """What `dryz audit` prints: the verdict and the causes in a line, the subject, the grid of properties, every
    cause with its witness (what llama.cpp and the subject give) and the command that replays it, the campaigns."""
    v = verdict(row)
    lines = [f"dryz audit: {v}" + (f" — {page.fitted_line(row).replace('**', '').replace('`', '')}"
                                   if row.get("fit") else f" — {row.get('error', '')}")]
    ident = row.get("identity")
    if ident:
        lines.append(f"subject   {subject_line(ident)}")
    for key, c in row.get("cells", {}).items():
        label, _ = page.cell_label(c)
        lines.append(f"  {c['title'][:38]:<40}{label}")
    causes = [(key, c, x) for key, c in row.get("cells", {}).items() for x in c.get("causes", [])]
    if causes:
        lines.append("causes    each with its witness, what llama.cpp and the subject give, and how to replay it")
        for key, c, x in causes:
            lines += ["  " + ln for ln in page.cause_rows(row, key, {"causes": [x]}, plain=True)]
    for key, camp in row.get("campaigns", {}).items():
        lines.append(f"{key:<9} {camp['text']} ({camp['seconds']} s)")
    if "seconds" in row:
        lines.append(f"wall      {row['seconds']} s")
    return "\n".join(lines)


def command(spec: str, seconds: float, names, workdir, json_path, md_path, log, echo) -> int:
    """`dryz audit` past its options: the selected subject's row, bounded by `seconds`, printed and written."""
    from ..render import dryz_on, ending, here  # on use: the command's own printing
    from ..subject.registry import parse  # on use
    parse(spec)
    work = Path(workdir).resolve()
    t0 = time.monotonic()
    row = subject_row(spec, max(FUZZ_MIN, int(seconds * 0.4)), work, log, MAX_LENGTH, names, budget=seconds)
    row.setdefault("seconds", round(time.monotonic() - t0, 1))
    result = {"tool": "dryz audit", "spec": spec, "budget_seconds": seconds, **row}
    echo(text(result))
    written = []
    if json_path:
        write_json(json_path, result)
        written.append(f"{here(json_path)} (the audit)")
    if md_path:
        write_text(md_path, page.markdown({"rows": [row], "properties": [{"name": k, "title": c["title"]} for k, c in
                                                                        row.get("cells", {}).items()]}))
        written.append(f"{here(md_path)} (the grid and every cause, as Markdown)")
    written.append(f"{here(work)}/ (every step's output; the witnesses in witnesses/)")
    on = dryz_on(spec)
    first = next((x.get("witness", {}).get("minimized") for c in row.get("cells", {}).values()
                  for x in c.get("causes", []) if x.get("witness", {}).get("minimized")), None)
    steps = [(f"{on} explain {shlex.quote(here(first))}", "the first cause's witness laid out")] if first else []
    if spec not in ("", "libllama:"):
        steps.append((f"dryz conformance --row libllama: --row {shlex.quote(spec)}",
                      "the subject beside llama.cpp's libllama, on the documentation's grid"))
    else:
        steps.append(("dryz --subject engine:mistralrs audit", "the same questions to another engine's DRY (any "
                                                              "subject: --subject KIND:ARG)"))
    statuses: dict = {}
    for c in row.get("cells", {}).values():
        statuses[c["status"]] = statuses.get(c["status"], 0) + 1
    echo(ending(dict(sorted(statuses.items())), written, steps, unit=f"{len(row.get('cells', {}))} properties"))
    return exit_code(result)
