"""The conformance result as people read it (pure: from one `dryz conformance` result, nothing run): a compact grid
of properties x subjects (each cell a short label and a colour: conforms with its count, declared, the cause's
short name, not expressible, not judged), the same grid as an SVG picture, per subject its causes (llama.cpp with
A + B + C, residual N) and per differing cell its causes with their source lines and minimized witnesses; and each
engine page's "what differs" table, made from the fitted causes and their witnesses."""

from __future__ import annotations

import html
import json
from pathlib import Path

from ..case import Case
from ..oracle.deviations import MODELLED, pattern
from ..render import probe_line, witness_values

STATUS_CLASS = {"conforms": "ok", "declared": "declared", "differs": "differs", "not expressible": "none",
                "not judged": "none"}
COLOURS = {"ok": "#d7f0d2", "declared": "#d9e6f7", "differs": "#f7d4d0", "none": "#e8e8e8"}


def short_name(r: dict) -> str:
    """A row's column heading: the engine's name, or what llama.cpp subject it is."""
    ident = r.get("identity") or {}
    if ident.get("engine"):
        return str(ident["engine"])
    kind = ident.get("kind") or r.get("spec", "").split(":")[0]
    return {"libllama": "libllama", "server": "llama-server", "llama-cpp-python": "binding"}.get(kind, kind or "?")


SHORT = 16  # characters of a cause's name a cell shows


def cell_label(c: dict | None) -> tuple[str, str]:
    """(short text, colour class) of a cell: ✓ and the probes judged, declared, its first cause's name (and how
    many more), not expressible, not judged."""
    if c is None:
        return "", "none"
    st = c["status"]
    if st == "conforms":
        return f"✓\u00a0{c['judged']:,}", "ok"
    causes = c.get("causes", [])
    if st == "declared":
        return "declared", "declared"
    if st == "differs":
        names = [x["name"] for x in causes if x["kind"] != "declared"] or ["differs"]
        first = names[0] if len(names[0]) <= SHORT else names[0][:SHORT - 1] + "…"
        return first + (f" +{len(names) - 1}" if len(names) > 1 else ""), "differs"
    return st, "none"


def cell_title(c: dict | None) -> str:
    """A cell's whole story in one line (its tooltip): the status, the counts, every cause."""
    if c is None:
        return ""
    causes = "; ".join(f"{x['kind']} {x['name']}" for x in c.get("causes", []))
    why = "; ".join(c.get("not_judged", {}))
    return f"{c['status']}: {c['judged']:,} judged" + (f"; {causes}" if causes else "") + (f"; {why}" if why else "")


def columns(result: dict) -> list[tuple[str, str]]:
    cols = [(p["name"], p["title"]) for p in result["properties"]]
    if any("other" in r.get("cells", {}) for r in result["rows"]):
        cols.append(("other", "other differences"))
    return cols


def anchor(r: dict, key: str) -> str:
    return f"{short_name(r).replace('.', '')}-{key}".lower()


def grid_html(result: dict, link: bool = True) -> str:
    """The grid as an HTML table (properties down, subjects across), for the page and `dryz report`."""
    rows = [r for r in result["rows"]]
    head = "".join(f"<th>{html.escape(short_name(r))}</th>" for r in rows)
    out = ['<table class="dz-grid">', f"<thead><tr><th>property</th>{head}</tr></thead>", "<tbody>"]
    for key, title in columns(result):
        tds = []
        for r in rows:
            if "error" in r and not r.get("cells"):
                tds.append('<td class="dz-none">not run</td>')
                continue
            c = r["cells"].get(key)
            text, cls = cell_label(c)
            body = html.escape(text)
            if link and c and c.get("causes"):  # its drill-down below
                body = f'<a href="#{anchor(r, key)}">{body}</a>'
            tds.append(f'<td class="dz-{cls}" title="{html.escape(cell_title(c))}">{body}</td>')
        out.append(f"<tr><th>{html.escape(title)}</th>{''.join(tds)}</tr>")
    out += ["</tbody>", "</table>"]
    return "\n".join(out)


def grid_svg(result: dict) -> str:
    """The grid as a picture: one coloured box per cell, its short label inside."""
    rows = result["rows"]
    cols = columns(result)
    left, top, w, h = 230, 34, 150, 22
    width, height = left + w * len(rows) + 10, top + h * len(cols) + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="11">', f'<rect width="{width}" height="{height}" fill="white"/>']
    for i, r in enumerate(rows):
        out.append(f'<text x="{left + i * w + w / 2}" y="{top - 10}" text-anchor="middle" font-weight="bold">'
                   f"{html.escape(short_name(r))}</text>")
    for j, (key, title) in enumerate(cols):
        y = top + j * h
        out.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{html.escape(title)}</text>')
        for i, r in enumerate(rows):
            text, cls = cell_label(r.get("cells", {}).get(key)) if r.get("cells") else ("not run", "none")
            x = left + i * w
            out.append(f'<rect x="{x + 1}" y="{y + 1}" width="{w - 2}" height="{h - 2}" fill="{COLOURS[cls]}"/>')
            shown = text if len(text) <= 22 else text[:21] + "…"
            out.append(f'<text x="{x + w / 2}" y="{y + 15}" text-anchor="middle">{html.escape(shown)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def fitted_line(r: dict) -> str:
    """A row's causes in one line: `NAME = llama.cpp with A + B + C, residual N of M answers`."""
    f = r.get("fit")
    if not f:
        return f"{r['subject']}: {r.get('error', 'no fit')}"
    with_ = " + ".join(f"`{m}`" for m in f["models"]) or "nothing"
    return (f"**{short_name(r)}** = llama.cpp with {with_}; residual {f['residual']:,} of {f['answers']:,} "
            "answers")


def replay_command(r: dict, w: dict) -> str:
    path = w.get("minimized") or w.get("source") or w.get("file")
    return f"dryz --subject {r['spec']} check {path}" if path else ""


def _case_line(w: dict) -> str:
    c = w.get("minimized_case") or w.get("probe")
    if c and ("history" in c or "requests" in c or "events" in c):
        return probe_line(c)
    return Path(w.get("file") or "").name


def cause_rows(r: dict, key: str, c: dict, plain: bool = False) -> list[str]:
    """A cell's drill-down: each cause with its meaning, citation or source line, and its witness (Markdown; plain:
    the same as terminal text)."""
    b, code, item = ("", "", "") if plain else ("**", "`", "- ")
    lines = []
    for cause in c.get("causes", []):
        w = cause.get("witness") or {}
        what = {"observed": "observed (a finding)", "declared": "declared", "class": "the judge's class",
                "residual": "unexplained (residual)"}[cause["kind"]]
        count = f"{cause['probes']:,} probe(s)" + (f", {cause['campaign']:,} campaign witness(es)"
                                                   if cause.get("campaign") else "")
        lines.append(f"{item}{b}{cause['name']}{b} — {what}, {count}" +
                     (f": {cause['meaning']}" if cause.get("meaning") else ""))
        sub = "    " + item
        if cause.get("source"):
            lines.append(f"{sub}source: {code}{cause['source']}{code}")
        if cause.get("cited"):
            lines.append(f"{sub}documented: {cause['cited']}")
        if w:
            shortest = f" ({w['shortest']})" if w.get("shortest") else ""
            lines.append(f"{sub}witness{shortest}: {code}{_case_line(w)}{code}")
            for v in witness_values(_minimized_values(w), cause["name"] if cause["kind"] == "class" else "")[:6]:
                lines.append(f"{sub}{v}")
            cmd = replay_command(r, w)
            if cmd and plain:
                lines.append(f"{sub}replay: {cmd}")
            elif cmd:  # a block of its own: a long path scrolls in its box, not past the page's column
                lines += [f"{sub}replay:", "", "        ```sh", f"        {cmd}", "        ```", ""]
    return lines


def _minimized_values(w: dict) -> dict:
    """The witness's values: the minimized witness's where recorded (minimize keeps them), else the probe's."""
    return w.get("minimized_values") or w


def markdown(result: dict) -> str:
    """The whole result as Markdown: the grid (HTML), the picture's link, the campaigns, the causes per subject and
    the drill-down per cell."""
    lines = [grid_html(result), ""]
    lines += ["Each row's causes: llama.cpp's DRY composed with these deviation models explains every answer of "
              "the row's probes and campaign witnesses bit for bit (the residual: what none explains).", ""]
    for r in result["rows"]:
        lines.append(f"- {fitted_line(r)}" if r.get("fit") else f"- **{short_name(r)}**: {r.get('error', '')}")
    lines += ["", "| subject | certificate | restarts | fuzz |", "|---|---|---|---|"]
    for r in result["rows"]:
        cs = r.get("campaigns") or {}
        lines.append(f"| {short_name(r)} | " + " | ".join(cs.get(k, {}).get("text", "") for k in
                                                        ("certificate", "restarts", "fuzz")) + " |")
    lines.append("")
    for r in result["rows"]:
        cells = [(k, c) for k, c in r.get("cells", {}).items() if c.get("causes")]
        if not cells:
            continue
        lines += [f"## {short_name(r)}", "", f"`{r['subject']}`", ""]
        for key, c in cells:
            lines += [f'### {c["title"]} <a id="{anchor(r, key)}"></a>', ""]
            lines += cause_rows(r, key, c) + [""]
    return "\n".join(lines) + "\n"


def engine_table(r: dict) -> str:
    """An engine page's "what differs": one row per cause (declared ones too), its minimized witness, what llama.cpp
    and the engine give, and why (the model's meaning and the engine's source line)."""
    lines = ["| cause | witness | llama.cpp and the engine | why |", "|---|---|---|---|"]
    for key, c in r.get("cells", {}).items():
        for cause in c.get("causes", []):
            w = cause.get("witness") or {}
            vals = "; ".join(witness_values(_minimized_values(w))[:3]).replace("|", "\\|")
            why = (cause.get("meaning") or cause["name"]) + \
                (f" (`{cause['source']}`)" if cause.get("source") else "") + \
                (f" — declared: {cause['cited']}" if cause.get("cited") else "")
            lines.append(f"| `{cause['name']}` ({cause['kind']}) | `{_case_line(w)}` | {vals} | "
                         f"{why.replace('|', chr(92) + '|')} |")
    return "\n".join(lines) + "\n"
