"""What the commands print: each mode's result as text for a person (certificates, campaigns, comparisons,
restart sweeps, properties). Only the command line and the modes' command modules call these; the results
themselves are JSON (dryz.output.write_json). What needs a heavier module is printed beside it (a replay:
dryz.corpus.replay_text; a case or trace explained, a crash: dryz.explain; a minimized trace: dryz.shrink_command),
so that a command loads only what it prints (tests/test_startup.py)."""

from __future__ import annotations

import json

from .subject.identity import subject_details, subject_line
from .case import Case
from .symbols import SYMBOLS


def _confirmation(controls: dict) -> str:
    c = controls.get("abi_confirmation")
    if c is None:
        return ""
    return abi_confirmation_text(c) + "; "


def abi_confirmation_text(c: dict) -> str:
    """The control in a certificate's controls line."""
    if c["passed"]:
        return "ABI confirmation case passed (aa, allowed_length 1: logit -1)"
    if not c["oracles_passed"]:
        return "ABI confirmation case: the ORACLES miss logit -1: harness in doubt"
    return f"ABI confirmation case MISSED BY THE LIBRARY (aa, allowed_length 1: logit {c['observed_logit']}, not -1)"


def _judged_forms(rows: list) -> str:
    skipped = sum(1 for row in rows if "not_judged" in row)
    return f"{len(rows)} closed forms" + (f", {skipped} NOT JUDGED: the subject cannot express them" if skipped else "")


def certificate_text(r: dict) -> str:
    s = r["subject"]
    lines = [
        f"dryz exhaustive: {r['verdict'].upper()}",
        f"subject   {subject_line(s)}",
        *(f"          {x}" for x in subject_details(s)),
        f"space     every history of length {r['space']['min_length']}..{r['space']['max_length']} over "
        f"{r['space']['alphabet']} symbols, every symbol a candidate",
    ]
    for c in r["configs"]:
        brk = f" breakers={c['breakers']}" if c["breakers"] else ""
        lines.append(f"  {c['name']:<9} last_n={c['penalty_last_n']:<3}{brk}  cases {c['cases']:>11,}  "
                     f"mismatches {c['mismatches']:,}  oracle disagreements {c['oracle_disagreements']:,}  "
                     f"penalized {c['penalized_cases']:,}  max L {c['max_L']}"
                     + (f"  NOT JUDGED {c['not_judged_cases']:,}" if c.get("not_judged_cases") else "")
                     + (f"  RAISED ON {c['raised_cases']:,}" if c.get("raised_cases") else ""))
    t = r["totals"]
    lines.append(f"  {'total':<9} {'':<10} cases {t['cases']:>11,}  mismatches {t['mismatches']:,}  "
                 f"oracle disagreements {t['oracle_disagreements']}"
                 + (f"  NOT JUDGED {t['not_judged_cases']:,}" if t.get("not_judged_cases") else "")
                 + (f"  RAISED ON {t['raised_cases']:,}" if t.get("raised_cases") else ""))
    for c in r["configs"]:
        for why, n in c.get("not_judged_why", {}).items():
            lines.append(f"  not judged ({c['name']}): {n:,} histories the subject cannot express: {why}")
    for c in r["configs"]:
        for why, n in c.get("raised_why", {}).items():
            lines.append(f"crash     ({c['name']}) {n:,} histories the subject raised on (class crash; the rest "
                         f"judged): {why}")
    c = r["controls"]
    per = c["periodic"]
    lines.append(f"controls  periodic {'passed' if per['passed'] else 'MISSED BY THE LIBRARY'} "
                 f"({_judged_forms(per['cases'])}"
                 f"{'' if per.get('oracles_passed', True) else '; the ORACLES miss one: harness in doubt'}); "
                 f"{_confirmation(c)}off-by-one reference flagged "
                 f"{c['off_by_one']['flagged']:,} cases; multiplier 0: " + (
                     f"the subject CRASHED ({c['multiplier_zero']['crash']['detail']})" if "crash" in
                     c["multiplier_zero"] else f"{c['multiplier_zero']['nonzero_deltas']} non-zero deltas in "
                                               f"{c['multiplier_zero']['cases']:,} cases"))
    for c in r["configs"]:
        for x in c.get("crashes", []):
            what = f"class memory: {x['summary']}" if x.get("sanitizer") else x["detail"]
            lines.append(f"crash     ({c['name']}) the subject failed ({x['signal']}) walking the slice "
                         f"{x['slice']}: {what}")
    lines.append(f"wall      {r['wall_seconds']:.2f} s")
    return "\n".join(lines)


def traces_text(tr: dict) -> str:
    k = tr["alphabet"]
    accepts = ", ".join(f"accept {SYMBOLS[i]}" for i in range(k))
    lines = [f"traces    every trace of 1..{tr['n_max']} events over {{{accepts}, apply, reset, clone}}"
             f"{' (+ free last)' if tr['free'] else ''}, every symbol a candidate at each apply"]
    for c in tr["configs"]:
        brk = f" breakers={c['breakers']}" if c["breakers"] else ""
        extra = f" allowed={c['allowed_length']}" if c["allowed_length"] != 1 else ""
        lines.append(f"  {c['config']:<9} last_n={c['penalty_last_n']:<3}{brk}{extra}  traces {c['traces']:>9,} "
                     f"(closed form {c['expected_traces']:,})  applies {c['applies']:>9,}  "
                     f"disagreements {c['disagreements']:,}  control differences {c['control_differences']}"
                     + (f"  CRASHED ON {c['crashed_traces']:,}" if c.get("crashed_traces") else ""))
    lines.append(f"  {'total':<9} {'':<10} traces {tr['traces']:>9,}  applies {tr['applies']:,}  "
                 f"disagreements {tr['disagreements']:,}  wall {tr['wall_seconds']:.2f} s")
    for c in tr["configs"]:
        if c["examples"]:
            ex = c["examples"][0]
            lines.append(f"  witness ({c['config']}): {ex['status']} at apply {ex['first_bad_apply']}: "
                         f"{ex['spelled']}")
        for x in c.get("crashes", [])[:1]:  # the first trace the subject died on (the certificate keeps 5)
            lines.append(f"  crash   ({c['config']}): class {x['class']} on trace {x['spelled']!r}: {x['detail']}")
    return "\n".join(lines)


def certificate_report(result: dict, json_path) -> str:
    """What `dryz exhaustive` and `dryz merge` print: the certificate, the canonical counts, the shard, the trace
    space, where the results are, and every finding's case."""
    text = certificate_text(result)
    if result["space"]["alphabet"] == "all":
        text = text.replace(" over all symbols, every symbol a candidate",
                            " over every alphabet size (one history per equality pattern)")
    lines = [text]
    if result["space"].get("enumeration") == "canonical":
        lines += [f"canonical {c['name']:<9} histories {c['canonical_histories']:>11,}  cases "
                  f"{c['canonical_cases']:>11,}  fresh-symbol violations {c['fresh_violations']}"
                  for c in result["configs"]]
    if result.get("shard"):
        s = result["shard"]
        lines.append(f"shard     {s['index']}/{s['count']}: {len(s['tasks'])} of {s['total_tasks']} slices "
                     "(counts are judged by dryz merge)")
    if result.get("merged_from"):
        lines.append(f"merged    {len(result['merged_from'])} shards of {result['shards']}")
    if result.get("traces"):
        lines.append(traces_text(result["traces"]))
    if json_path:
        lines.append(f"results   {json_path}")
    lines += [f"{ex['kind']} ({c['name']}): {Case.from_json(ex['case']).dumps()}"
              for c in result["configs"] for ex in c["examples"]]
    lines += [f"{ex['kind']} (periodic control, the library misses its closed form): "
              f"{Case.from_json(ex['case']).dumps()}" for ex in result["controls"]["periodic"].get("findings", [])]
    lines += [f"{ex['kind']} (ABI confirmation control, the library misses logit -1): "
              f"{Case.from_json(ex['case']).dumps()}"
              for ex in (result["controls"].get("abi_confirmation") or {}).get("findings", [])]
    return "\n".join(lines)


def vocab_certificate_text(result: dict, results: list, pieces) -> str:
    """What `dryz exhaustive --vocab` prints before its verdict: the space and per configuration the counts."""
    ids = [t["id"] for t in result["tokens"]]
    shown = ", ".join(f"{t}={pieces[t].decode('utf-8', errors='replace')!r}" for t in ids)
    lines = [f"dryz exhaustive --vocab {result['vocab']['name']}: every history of length 1..{result['max_length']} "
             f"over {len(ids)} tokens ({shown}), breakers {result['breakers']}"]
    for r in results:
        classes = "  ".join(f"{k} {c:,}" for k, c in sorted(r.history_classes.items())) or "every history agrees"
        lines.append(f"{r.config.name:<24} histories {r.histories:>10,}  cases {r.cases:>11,}  mismatches "
                     f"{r.mismatches}  oracle disagreements {r.oracle_disagreements}  off-by-one flagged "
                     f"{r.off_by_one_flagged:,}  {classes}")
        lines += [f"  {k}: {e.dumps()}" for k, e in r.examples]
    return "\n".join(lines)


def fuzz_summary_text(summary: dict, traces: bool, seconds: int, hard_limit: float) -> str:
    """What `dryz fuzz` prints after its campaign: the figures, and every finding with its re-check."""
    lines = [f"summary: {'traces: ' if traces else ''}{summary['execs']:,} execs in {summary['seconds']} s "
             f"({summary['exec_per_s_fuzz']:,} exec/s over libFuzzer's {summary['fuzz_seconds']} s, after "
             f"{summary['setup_seconds']} s of set-up), cov {summary['cov']}, ft {summary['ft']}, "
             f"corpus {summary['corpus']}, findings {len(summary['findings'])}"]
    if summary["counters"]:
        lines.append(f"coverage counters: {summary['counters']}")
    if summary.get("stopped_at_hard_limit"):
        lines.append(f"note: libFuzzer outlasted --time {seconds} (its seed pass restarts after every crash); dryz "
                     f"stopped it at {hard_limit:.0f} s")
    for f in summary["findings"]:
        if f["klass"].startswith("not re-checked"):
            lines.append(f"finding: {f['file']} ({f['klass']})")
            continue
        again = {True: "reproduces", False: "does NOT reproduce", None: "not re-checked"}[f["reproduces"]]
        lines.append(f"finding: {f['file']} (re-checked in a clean process on the subject: {f['klass']}, {again})")
    v = summary.get("vocab")
    if v and any(f["reproduces"] for f in summary["findings"]):  # its crash files are the vocabulary decoder's bytes
        spec = (summary.get("subject") or {}).get("spec")
        fault = f"DRYZ_FAULT={summary['fault']} " if summary.get("fault") else ""
        lines.append(f"to read a crash file as this campaign did: {fault}dryz{' --subject ' + spec if spec else ''} "
                     f"check|minimize --vocab {v.get('spec') or v['path']} --decode-breakers {v['breakers']} FILE (a "
                     "finding the re-check judged also has its decoded case beside it, FILE.case.json)")
    for f in summary.get("slow", []):
        again = ", slow again" if f["recheck_seconds"] >= summary["slow_unit_seconds"] else ""
        lines.append(f"slow input (not a finding): {f['file']} (libFuzzer saw one run take "
                     f"{summary['slow_unit_seconds']} s or more; re-checked in a clean process: {f['klass']} in "
                     f"{f['recheck_seconds']} s{again})")
    return "\n".join(lines)


def compare_text(r: dict) -> str:
    """What `dryz compare` prints after the subjects: the counts, then each difference's minimized witness."""
    lines = [f"compared  {r['compared']:,} of {r['cases']:,} cases in {r['compare_seconds']} s: "
             + (", ".join(f"{k} {v:,}" for k, v in r["counts"].items()) or "no differences")]
    for d in r["differences"]:
        c = d["case"]
        lines.append(f"{d['class']}: {d['history']!r} window {c['penalty_last_n']} n_ctx_train "
                     f"{c.get('n_ctx_train', 4096)} allowed_length {c['allowed_length']} breakers {c['breakers']} "
                     f"(shortest {d['shortest']}); base {d['reference'].get('klass') or d['reference'].get('detail')}, "
                     f"new {d['other'].get('klass') or d['other'].get('detail')}")
    return "\n".join(lines)


def restarts_text(results) -> str:
    """What `dryz restarts` prints: per configuration, its breakers, histories and verdict counts."""
    return "\n".join(f"{r.name:<22} breakers={list(r.breakers)!s:<18} histories {r.histories:,}  "
                     + "  ".join(f"{k} {v:,}" for k, v in r.to_json()["counts"].items())
                     + (f"\n    the subject failed on {r.examples['crash']!r}: {r.crash} (the rest not walked)"
                        if r.crash else "") for r in results)


def properties_text(result: dict) -> str:
    """What `dryz properties` prints: per property its status, counts, and the witness of one that differs."""
    lines = [f"dryz properties: {subject_line(result['subject'])}"]
    for c in result["cells"].values():
        counts = f"{c['judged']:,} judged" + (f", {sum(c['not_judged'].values()):,} not judged"
                                              if c.get("not_judged") else "")
        bad = ", ".join(f"{k} {n:,}" for k, n in c.get("classes", {}).items() if k != "agree")
        lines.append(f"  {c['title']:<38} {c['status'].upper() if c['status'] == 'differs' else c['status']:<16} "
                     f"{counts}" + (f" ({bad})" if bad else ""))
        for d in c.get("declared", []):
            lines.append(f"      declared {d['name']}: {d['cited']}")
        w = c.get("witness")
        if w:
            shown = probe_line(w["probe"]) if "probe" in w else w.get("file", "")
            lines.append(f"      {w['class']}" + (f" (= llama.cpp with {w['explained_by']})" if w.get("explained_by")
                                                   else "") + f": {shown}")
        if c["status"] == "not expressible":
            for why in c.get("not_judged", {}):
                lines.append(f"      {why}")
    lines.append(f"wall {result['seconds']} s")
    return "\n".join(lines)


def probe_line(probe: dict) -> str:
    """A probe (Case or trace JSON) in one short line: the history spelled (long ones cut), the parameters."""
    if "events" in probe:
        return "trace " + json.dumps(probe["events"])
    c = Case.from_json(probe)
    h = c.symbols if len(c.symbols) <= 40 else f"{c.symbols[:36]}... ({len(c.history)} tokens)"
    extra = "".join(f", {k} {v}" for k, v in (("candidates", c.candidates), ("sorted", c.sorted)) if v)
    return (f"{h!r} window {c.penalty_last_n}, allowed_length {c.allowed_length}, multiplier {c.multiplier:g}, "
            f"base {c.base:g}, breakers {list(c.breakers)}{extra}")
