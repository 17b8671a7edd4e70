"""`dryz report`: one self-contained HTML page (and its Markdown) from what dryz wrote — a certificate JSON, a
fuzz campaign's work directory, a matrix JSON, a corpus directory — for a person to read or paste into an issue.

Plots are inline SVG drawn here (bars and lines; no plotting library, no script, nothing fetched), so the page
opens anywhere, offline.
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

from . import __version__, gate
from .corpus import CorpusError, entries, load_entry
from .errors import DryzError
from .files import fail, wide_text
from .conformance import page as conformance_page
from .matrix import markdown as matrix_markdown
from .oracle.shipped import Config, penalties
from .subject.identity import subject_line

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:72rem;color:#222;padding:0 1rem}
h1{font-size:1.6rem}h2{font-size:1.25rem;border-bottom:1px solid #ccc;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.85rem}td,th{border:1px solid #ccc;padding:.25rem .5rem;
text-align:left;vertical-align:top}th{background:#f3f3f3}code,pre{font-family:ui-monospace,monospace;font-size:.82rem}
pre{background:#f7f7f7;padding:.6rem;overflow-x:auto}.ok{color:#176c1f;font-weight:600}.bad{color:#b00020;font-weight:600}
.plots{display:flex;flex-wrap:wrap;gap:1rem}.plot{border:1px solid #ddd;padding:.4rem}
.mixed{border-left:4px solid #b26a00;background:#fff6e5;padding:.4rem .6rem}
"""


class ReportError(ValueError, DryzError):
    pass


def esc(x) -> str:
    return html.escape(str(x))


def _verdict_class(v: str) -> str:
    return "ok" if v in ("certified", "partial", "agree", "as expected") else "bad"


# -- SVG ------------------------------------------------------------------------------------------------


def bars(title: str, labels: list, values: list, xlabel: str, ylabel: str, log: bool = False, w=460, h=240) -> str:
    """A bar chart as inline SVG (values >= 0; log: a log10 axis for counts spanning decades)."""
    pad_l, pad_b, pad_t = 56, 36, 24
    n = max(len(values), 1)
    f = (lambda v: math.log10(v + 1)) if log else (lambda v: v)
    top = max([f(v) for v in values] + [1e-9])
    bw = (w - pad_l - 10) / n
    out = [f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img">',
           f'<title>{esc(title)}</title><text x="{w / 2}" y="15" text-anchor="middle" font-size="12">{esc(title)}</text>']
    for i, (lab, v) in enumerate(zip(labels, values)):
        bh = (h - pad_b - pad_t) * f(v) / top
        x = pad_l + i * bw
        out.append(f'<rect x="{x + 1:.1f}" y="{h - pad_b - bh:.1f}" width="{max(bw - 2, 1):.1f}" height="{bh:.1f}" '
                   f'fill="#4a78b5"><title>{esc(lab)}: {v:,}</title></rect>')
        if n <= 24 or i % max(1, n // 12) == 0:
            out.append(f'<text x="{x + bw / 2:.1f}" y="{h - pad_b + 12}" font-size="9" text-anchor="middle">'
                       f'{esc(lab)}</text>')
    out.append(f'<line x1="{pad_l}" y1="{h - pad_b}" x2="{w - 5}" y2="{h - pad_b}" stroke="#444"/>')
    out.append(f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{h - pad_b}" stroke="#444"/>')
    top_label = f"{10 ** top - 1:,.0f}" if log else f"{top:,.0f}"
    out.append(f'<text x="{pad_l - 4}" y="{pad_t + 8}" font-size="9" text-anchor="end">{top_label}</text>')
    out.append(f'<text x="{w / 2}" y="{h - 4}" font-size="10" text-anchor="middle">{esc(xlabel)}</text>')
    out.append(f'<text x="12" y="{h / 2}" font-size="10" text-anchor="middle" transform="rotate(-90 12 {h / 2})">'
               f'{esc(ylabel)}{" (log)" if log else ""}</text></svg>')
    return "".join(out)


def lines(title: str, xs: list, series: dict[str, list], xlabel: str, ylabel: str, w=460, h=240) -> str:
    """Line chart(s) as inline SVG over a shared x axis."""
    pad_l, pad_b, pad_t = 56, 36, 24
    colors = ["#4a78b5", "#c2571a", "#2e8b57", "#8a3fb0"]
    xmax = max(xs + [1e-9])
    ymax = max([v for vs in series.values() for v in vs] + [1e-9])
    out = [f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img">',
           f'<title>{esc(title)}</title><text x="{w / 2}" y="15" text-anchor="middle" font-size="12">{esc(title)}</text>']
    for k, (name, vs) in enumerate(series.items()):
        pts = " ".join(f"{pad_l + (w - pad_l - 10) * x / xmax:.1f},{h - pad_b - (h - pad_b - pad_t) * y / ymax:.1f}"
                       for x, y in zip(xs, vs))
        out.append(f'<polyline fill="none" stroke="{colors[k % 4]}" stroke-width="1.5" points="{pts}"/>')
        out.append(f'<text x="{w - 10}" y="{pad_t + 12 * (k + 1)}" font-size="10" text-anchor="end" '
                   f'fill="{colors[k % 4]}">{esc(name)}</text>')
    out.append(f'<line x1="{pad_l}" y1="{h - pad_b}" x2="{w - 5}" y2="{h - pad_b}" stroke="#444"/>')
    out.append(f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{h - pad_b}" stroke="#444"/>')
    out.append(f'<text x="{pad_l - 4}" y="{pad_t + 8}" font-size="9" text-anchor="end">{ymax:,.0f}</text>')
    out.append(f'<text x="{w - 10}" y="{h - pad_b + 12}" font-size="9" text-anchor="end">{xmax:,.0f}</text>')
    out.append(f'<text x="{w / 2}" y="{h - 4}" font-size="10" text-anchor="middle">{esc(xlabel)}</text>')
    out.append(f'<text x="12" y="{h / 2}" font-size="10" text-anchor="middle" transform="rotate(-90 12 {h / 2})">'
               f'{esc(ylabel)}</text></svg>')
    return "".join(out)


def _table(head: list, rows: list[list]) -> tuple[str, str]:
    """(HTML, Markdown) of one table."""
    h = "<table><tr>" + "".join(f"<th>{esc(c)}</th>" for c in head) + "</tr>" + "".join(
        "<tr>" + "".join(f"<td>{c}</td>" if str(c).startswith("<") else f"<td>{esc(c)}</td>" for c in r) + "</tr>"
        for r in rows) + "</table>"
    strip = lambda c: re.sub(r"<[^>]+>", "", str(c)).replace("|", "\\|")  # noqa: E731
    m = "| " + " | ".join(map(strip, head)) + " |\n|" + "---|" * len(head) + "\n" + "".join(
        "| " + " | ".join(map(strip, r)) + " |\n" for r in rows)
    return h, m


def _subject_rows(s: dict) -> list[list]:
    rows = [["subject", subject_line(s)], ["library", s.get("libllama_path", "?")],
            ["sha256", s.get("libllama_sha256", "?")]]
    b = s.get("built_by_dryz")
    if b:
        rows.append(["built by dryz", ", ".join(f"{k} {v}" for k, v in b.items() if v is not None)])
    return rows


# -- sections -------------------------------------------------------------------------------------------


def certificate_section(r: dict, name: str) -> tuple[str, str]:
    import numpy as np
    v = r["verdict"]
    parts_h = [f'<h2>Certificate <code>{esc(name)}</code>: <span class="{_verdict_class(v)}">{esc(v.upper())}</span></h2>']
    parts_m = [f"## Certificate `{name}`: {v.upper()}\n"]
    th, tm = _table(["", ""], _subject_rows(r["subject"]) + [
        ["space", f"every history of length {r['space']['min_length']}..{r['space']['max_length']} over "
                  f"{r['space']['alphabet']} symbols ({r['space']['enumeration']} enumeration)"],
        ["wall", f"{r.get('wall_seconds', '?')} s"]])
    parts_h.append(th)
    parts_m.append(tm)
    c = r.get("controls") or {}
    if c:
        per = c["periodic"]
        rows = [["periodic closed forms", "library " + ("passed" if per["passed"] else "MISSED")
                 + "; oracles " + ("passed" if per.get("oracles_passed", True) else "FAILED")],
                *([["ABI confirmation case (aa, allowed_length 1)", "library " + (
                    "passed" if c["abi_confirmation"]["passed"] else
                    f"MISSED (logit {c['abi_confirmation']['observed_logit']}, not -1)")]]
                  if c.get("abi_confirmation") else []),
                ["off-by-one reference flagged", f"{c['off_by_one']['flagged']:,} cases"],
                ["multiplier 0", f"{c['multiplier_zero']['nonzero_deltas']} non-zero deltas in "
                                 f"{c['multiplier_zero']['cases']:,} cases"]]
        if r.get("checks"):
            rows.append(["harness checks", ", ".join(f"{k} {'ok' if ok else 'FAILED'}" for k, ok in r["checks"].items())])
        th, tm = _table(["control", "result"], rows)
        parts_h += ["<h3>Controls</h3>", th]
        parts_m += ["\n### Controls\n\n", tm]
    rows = [[x["name"], x["penalty_last_n"], ", ".join(x["breakers"]) or "-", f"{x['cases']:,}",
             f"{x['mismatches']:,}", f"{x['oracle_disagreements']:,}", f"{x['penalized_cases']:,}", x["max_L"]]
            for x in r["configs"]]
    th, tm = _table(["configuration", "penalty_last_n", "breakers", "cases", "mismatches", "oracle disagreements",
                     "penalized", "max L"], rows)
    parts_h += ["<h3>Per configuration</h3>", th, '<div class="plots">']
    parts_m += ["\n### Per configuration\n\n", tm]
    for x in r["configs"]:
        hist = {int(k): v for k, v in x.get("L_histogram", {}).items()}
        if not hist:
            continue
        Ls = list(range(0, max(hist) + 1))
        parts_h.append(bars(f"{x['name']}: library L over all cases", Ls, [hist.get(L, 0) for L in Ls], "L",
                            "cases", log=True))
        cfg = Config(x.get("multiplier", 1.0), x.get("base", 2.0), x.get("allowed_length", 1),
                     x["penalty_last_n"], ())
        pen = penalties(np.array([Ls], dtype=np.int64), cfg)[0]
        parts_h.append(lines(f"{x['name']}: penalty by L", Ls, {"penalty (log2)": [
            math.log2(p) + 1 if p > 0 and math.isfinite(p) else 0 for p in pen]}, "L", "log2(penalty) + 1"))
    parts_h.append("</div>")
    ex = [(x["name"], e) for x in r["configs"] for e in x.get("examples", [])]
    ex += [("periodic control", e) for e in (c.get("periodic") or {}).get("findings", [])]
    if ex:
        th, tm = _table(["where", "kind", "case"], [[w, e["kind"], f"<code>{esc(json.dumps(e['case']))}</code>"]
                                                     for w, e in ex])
        parts_h += ["<h3>Disagreements (first few)</h3>", th]
        parts_m += ["\n### Disagreements (first few)\n\n", tm]
    return "".join(parts_h), "".join(parts_m)


def campaign_section(work: Path) -> tuple[str, str]:
    summary = json.loads((work / "summary.json").read_text()) if (work / "summary.json").exists() else None
    log = (work / "libfuzzer.log").read_text(errors="replace") if (work / "libfuzzer.log").exists() else ""
    ts, execs, cov, rate = [], [], [], []
    for m in re.finditer(r"^#(\d+): cov: (\d+) ft: \d+ corp: \d+ exec/s:? (\d+).*? time: (\d+)s", log, re.M):
        execs.append(int(m.group(1)))
        cov.append(int(m.group(2)))
        rate.append(int(m.group(3)))
        ts.append(int(m.group(4)))
    title = f"Fuzz campaign <code>{esc(work)}</code>"
    parts_h, parts_m = [f"<h2>{title}</h2>"], [f"## Fuzz campaign `{work}`\n\n"]
    if summary:
        rows = []
        if summary.get("subject"):
            rows += _subject_rows(summary["subject"])
        rows += [["execs", f"{summary['execs']:,} in {summary['seconds']} s"], ["coverage", f"cov {summary['cov']}, "
                 f"ft {summary['ft']}, corpus {summary['corpus']}"],
                 ["coverage kind", "python + native" if summary.get("native") else "python"],
                 ["fault injected", summary.get("fault") or "none"],
                 ["interrupted", "yes: the summary is partial" if summary.get("interrupted") else "no"],
                 ["slow inputs", f"{len(summary.get('slow', []))} (slow-unit files whose re-check is no new finding)"]]
        th, tm = _table(["", ""], rows)
        parts_h.append(th)
        parts_m.append(tm)
        by: dict[str, list] = {}
        for f in summary["findings"]:
            by.setdefault(f["klass"], []).append(f)
        if by:
            th, tm = _table(["class", "files", "reproduces on the subject", "first file"],
                            [[k, len(v), sum(1 for f in v if f["reproduces"]), v[0]["file"]] for k, v in by.items()])
            parts_h += ["<h3>Findings by class</h3>", th]
            parts_m += ["\n### Findings by class\n\n", tm]
        else:
            parts_h.append("<p class='ok'>No findings.</p>")
            parts_m.append("\nNo findings.\n")
    if ts:
        parts_h.append('<div class="plots">' + lines("exec/s over time", ts, {"exec/s": rate}, "seconds", "exec/s")
                       + lines("coverage over time", ts, {"cov": cov}, "seconds", "edges") + "</div>")
    return "".join(parts_h), "".join(parts_m)


def matrix_section(m: dict, name: str) -> tuple[str, str]:
    md = matrix_markdown(m)
    parts_h = [f"<h2>Version matrix <code>{esc(name)}</code></h2>", f"<p>reference: {esc(m.get('reference'))}; "
               f"fuzz {m['fuzz_seconds']} s per subject; wall {m['wall_seconds']} s</p>"]
    for block in md.strip().split("\n\n"):
        rows = [ln.strip("|").split(" | ") for ln in block.splitlines() if not ln.startswith("|---")]
        th, _ = _table([c.strip() for c in rows[0]], [[c.strip() for c in r] for r in rows[1:]])
        parts_h.append(th)
    return "".join(parts_h), f"## Version matrix `{name}`\n\n" + md


def corpus_section(d: Path) -> tuple[str, str]:
    by: dict[str, list] = {}
    for p in entries(d):
        try:
            e = load_entry(p)
        except CorpusError as err:
            by.setdefault("invalid", []).append((p, str(err), None))
            continue
        sep = e.data.get("separates")
        k = f"{e.expect} ({sep['class']} between subjects)" if sep else e.expect
        shown = e.case.symbols if e.case is not None else "trace " + e.trace.spelled() if e.trace is not None else \
            "requests " + e.requests.spelled()
        by.setdefault(k, []).append((p, shown, e))
    parts_h, parts_m = [f"<h2>Corpus <code>{esc(d)}</code></h2>"], [f"## Corpus `{d}`\n\n"]
    rows = []
    for k in sorted(by):
        for p, hist, e in by[k]:
            c = (e.case or e.trace or e.requests.requests[-1]) if e else None
            params = "" if c is None else (f"window {c.penalty_last_n}, allowed_length {c.allowed_length}, "
                                           f"breakers {list(c.breakers)}, multiplier {c.multiplier:g}, "
                                           f"base {c.base:g}")
            if e and len(hist) > 48:
                hist = f"{hist[:40]}... ({len(hist)} tokens)"
            rows.append([k, p.name, f"<code>{esc(hist)}</code>" if e else esc(hist), params,
                         e.data.get("shortest", "") if e else ""])
    th, tm = _table(["class", "entry", "history", "parameters", "shortest"], rows)
    return "".join(parts_h) + th, "".join(parts_m) + tm


def _read_json(p: Path):
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ReportError(f"cannot read {p}: {e.strerror}") from None
    if wide_text(raw):
        raise ReportError(f"{p}: {wide_text(raw)} text, not UTF-8 (JSON is UTF-8 text)")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ReportError(f"{p}: not UTF-8 (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise ReportError(f"{p}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise ReportError(f"{p}: JSON nested too deeply") from None
    except ValueError as e:
        raise ReportError(f"{p}: not usable JSON ({e})") from None


def gate_section(d: dict, name: str) -> tuple[str, str]:
    """The gate's section of `dryz report` (HTML, Markdown) from its JSON."""
    res = gate.from_json(d)
    md = gate.markdown(res, limit=10_000)
    parts = [f"<h2>Gate <code>{esc(name)}</code>: <span class=\"{'ok' if res.verdict == 'pass' else 'bad'}\">"
             f"{esc(res.verdict.upper())}</span></h2>"]
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
            [[f.mode, f.klass, (f.spelled or f.detail).replace("`", ""), f.shortest, "<pre>" + esc("\n".join(f.explain)) + "</pre>"]
             for f in res.findings])[0])
    if res.changes or res.declared_unseen:
        parts.append("<h3>Behaviour changes against the base</h3>" + _table(
            ["class", "declared", "witness", "base", "new", "explain"],
            [[c.klass, "yes" if c.declared else "NO", f"{c.spelled.replace('`', '')} ({c.shortest})", c.base, c.new,
              "<pre>" + esc("\n".join(c.explain)) + "</pre>"] for c in res.changes]
            + [[dcl, "declared, not seen", "", "", "", ""] for dcl in res.declared_unseen])[0])
    return "".join(parts), f"## Gate `{name}`\n\n" + md


def conformance_section(d: dict, name: str) -> tuple[str, str]:
    """The conformance result as its page shows it (dryz.conformance.page): the grid of properties x subjects, each
    row's causes, and per differing cell its causes and witnesses."""
    md = conformance_page.markdown(d)
    parts = [f"<h2>Conformance <code>{esc(name)}</code></h2>",
             f"<p>fuzz {d['fuzz_seconds']} s per subject; certificates to length {d.get('max_length', '?')}; "
             f"wall {d['wall_seconds']} s</p>", conformance_page.grid_html(d), "<ul>"]
    parts += [f"<li>{esc(conformance_page.fitted_line(r).replace('**', '').replace('`', ''))}</li>"
              for r in d["rows"] if r.get("fit")]
    parts.append("</ul>")
    for r in d["rows"]:
        for key, c in r.get("cells", {}).items():
            if not c.get("causes"):
                continue
            parts.append(f'<h3 id="{conformance_page.anchor(r, key)}">{esc(conformance_page.short_name(r))}: '
                         f'{esc(c["title"])}</h3><pre>'
                         + esc("\n".join(conformance_page.cause_rows(r, key, c))) + "</pre>")
    return "".join(parts), f"## Conformance `{name}`\n\n" + md


def _subject_key(s: dict | None):
    """What tells two judged subjects apart: the file mapped (sha256), else the spec, else the line naming it."""
    if not s:
        return None
    return s.get("libllama_sha256") or s.get("spec") or subject_line(s)


def _mixed_note(s: dict, n: int) -> tuple[str, str]:
    """A section's header line when the report's sections judge different subjects: which one this one judges."""
    sha = s.get("libllama_sha256")
    text = (f"This section judges {subject_line(s)}" + (f" (sha256 {sha[:12]})" if sha else "")
            + f"; this report's sections judge {n} different subjects: each verdict holds for its own section's "
              "subject only.")
    return f'<p class="mixed">{esc(text)}</p>', f"*{text}*\n\n"


def build_report(inputs: list[str]) -> tuple[str, str]:
    """(HTML, Markdown) for the inputs, one section each; ReportError for one that is none of the four. When the
    sections that judge one subject each (a certificate, a campaign, a gate) judge different subjects, the page
    says so at its top and in each such section's header."""
    sections = []  # (HTML, Markdown, the subject the section judges, or None: a matrix or corpus names its own)
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            if (p / "libfuzzer.log").exists() or (p / "summary.json").exists():
                summary = _read_json(p / "summary.json") if (p / "summary.json").exists() else {}
                sections.append((*campaign_section(p), (summary or {}).get("subject")))
            elif any(p.rglob("*.json")):
                sections.append((*corpus_section(p), None))
            else:
                raise ReportError(f"{item}: neither a campaign work directory (libfuzzer.log) nor a corpus (*.json)")
            continue
        d = _read_json(p)
        tool = d.get("tool") if isinstance(d, dict) else None
        if tool == "dryz exhaustive":
            sections.append((*certificate_section(d, p.name), d.get("subject")))
        elif tool == "dryz matrix":
            sections.append((*matrix_section(d, p.name), None))
        elif tool == "dryz gate":
            sections.append((*gate_section(d, p.name), d.get("subject")))
        elif tool == "dryz conformance":
            sections.append((*conformance_section(d, p.name), None))
        else:
            raise ReportError(f"{item}: not a result of dryz exhaustive, matrix, gate or conformance (tool {tool!r})")
    keys = {_subject_key(s): s for _, _, s in sections if _subject_key(s) is not None}
    top_h = top_m = ""
    if len(keys) > 1:
        names = "; ".join(subject_line(s) + (f" (sha256 {s['libllama_sha256'][:12]})" if s.get("libllama_sha256")
                                             else "") for s in keys.values())
        text = f"These sections judge {len(keys)} different subjects: {names}."
        top_h, top_m = f'<p class="mixed"><strong>{esc(text)}</strong></p>', f"**{text}**\n\n"
        shown = []
        for h, m, s in sections:
            if _subject_key(s) is not None:
                nh, nm = _mixed_note(s, len(keys))
                h = h.replace("</h2>", "</h2>" + nh, 1)
                m = m.replace("\n", "\n\n" + nm, 1)
            shown.append((h, m, s))
        sections = shown
    body_h = "".join(h for h, _, _ in sections)
    body_m = "\n".join(m for _, m, _ in sections)
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>dryz report</title>"
            f"<style>{CSS}</style></head><body><h1>dryz report</h1><p>dryz {__version__}: is llama.cpp's DRY "
            f"sampler correct in this build? Every figure below comes from the files named in each section."
            f"</p>{top_h}{body_h}</body></html>\n")
    return page, "# dryz report\n\n" + top_m + body_m


def command(inputs, html_path: str | None, md_path: str | None) -> str:
    """`dryz report` past its options: write the page and the Markdown where asked, from the inputs; what to
    print (the Markdown itself when neither is asked for)."""
    for i in inputs:
        if not Path(i).exists():
            fail(f"{i}: no such file or directory")
    try:
        page, md = build_report(list(inputs))
    except DryzError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        fail(f"an input lacks what its kind must have ({type(e).__name__}: {e}); not written by this dryz?")
    if html_path is None and md_path is None:
        return md
    from .output import write_text  # on use
    if html_path:
        write_text(html_path, page)
    if md_path:
        write_text(md_path, md)
    return "written: " + ", ".join(p for p in (html_path, md_path) if p)
