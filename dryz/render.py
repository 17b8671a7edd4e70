"""What the commands print: each mode's result as text for a person (certificates, campaigns, comparisons,
restart sweeps, properties). Only the command line and the modes' command modules call these; the results
themselves are JSON (dryz.output.write_json). What needs a heavier module is printed beside it (a replay:
dryz.corpus.replay_text; a case or trace explained, a crash: dryz.explain; a minimized trace: dryz.shrink_command),
so that a command loads only what it prints (tests/test_startup.py)."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import numpy as np

from .subject.identity import subject_details, subject_line
from .case import Case
from .symbols import SYMBOLS


def ending(classes: dict | None, written: list[str], steps: list[tuple[str, str]], unit: str = "") -> str:
    """How every command ends: the counts by class (None: the command has none), what it wrote where (or that it
    wrote nothing), and the next commands to run, each with what it is for, so that nobody has to guess what the
    output means or what to do with it."""
    lines = []
    if classes is not None:
        lines.append("classes   " + (f"{unit}: " if unit else "")
                     + ("  ".join(f"{k} {n:,}" for k, n in classes.items() if n) or "none"))
    lines += [f"{'written' if i == 0 else '':<9} {w}" for i, w in enumerate(written or ["nothing"])]
    width = max((len(c) for c, _ in steps), default=0)
    for i, (c, why) in enumerate(steps):
        head = "next" if i == 0 else ""
        lines += [f"{head:<9} {c:<{width}}  # {why}"] if width <= 80 else [f"{head:<9} {c}", f"{'':<11}# {why}"]
    return "\n".join(lines)


def here(path) -> str:
    """A path as a person reads it: relative to the working directory when it lies below it."""
    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else str(path)


def dryz_on(spec: str, fault: str | None = None) -> str:
    """The start of a command line that runs dryz on the subject the user selected again (spec: as selected;
    nothing for the default one), under the same planted fault."""
    pre = f"DRYZ_FAULT={fault} " if fault else ""
    if spec in ("", "libllama:"):
        return pre + "dryz"
    if spec.startswith("libllama:") and "+declare=" not in spec:
        return pre + f"dryz --lib {shlex.quote(spec.removeprefix('libllama:'))}"
    return pre + f"dryz --subject {shlex.quote(spec)}"


def again(argv, fallback: str = "dryz") -> str:
    """The command line that ran this command (main()'s arguments), to be run again with more options."""
    return f"dryz {shlex.join(argv)}" if argv else fallback


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
    if c.get("explained_by"):
        return (f"ABI confirmation case: logit {c['observed_logit']}, not -1 (aa, allowed_length 1), explained by "
                "the fitted causes")
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


def certificate_ending(result: dict, json_path, spec: str = "", argv=None) -> str:
    """The end of a certificate's report: its histories by class, where it was written, what to run next."""
    configs = result["configs"]
    odd: dict = {}
    for c in configs:
        for k, n in c.get("history_classes", {}).items():
            odd[k] = odd.get(k, 0) + n
    judged = sum(c["histories"] for c in configs)
    classes = {"agree": judged - sum(n for k, n in odd.items() if k != "crash"), **dict(sorted(odd.items()))}
    nj = sum(c.get("not_judged_histories", 0) for c in configs)
    if nj:
        classes["not judged"] = nj
    on = dryz_on(spec)
    steps = []
    if result["verdict"] in ("mismatch", "crash"):
        steps = [(f"{on} minimize CASE.json --corpus findings", "CASE.json: a case above, saved to a file; shrunk to "
                  "a shortest reproducer"), (f"{on} explain CASE.json", "the case laid out: L by each oracle and by the "
                                                                         "subject, where the repeat is")]
    elif result["verdict"] != "void" and not result.get("shard"):
        steps = [(f"{on} fuzz --time 600", "beyond the space: long histories, random windows, parameters and arrays")]
    if json_path and not result.get("shard"):
        steps.append((f"dryz report {shlex.quote(here(json_path))} --html certificate.html", "the certificate on one page"))
    elif result.get("shard"):
        steps.append(("dryz merge SHARD.json... --json certificate.json", "every shard's result, one certificate"))
    else:
        steps.append((f"{again(argv, f'{on} exhaustive')} --json results/main.json", "the same run, its certificate "
                                                                                 "kept as JSON (dryz report makes its page)"))
    return ending(classes, [f"{here(json_path)} (the certificate)"] if json_path else [], steps,
                  unit=f"{judged:,} histories in {len(configs)} configurations")


def certificate_report(result: dict, json_path, spec: str = "", argv=None) -> str:
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
    lines += [f"{ex['kind']} ({c['name']}): {Case.from_json(ex['case']).dumps()}"
              for c in result["configs"] for ex in c["examples"]]
    lines += [f"{ex['kind']} (periodic control, the library misses its closed form): "
              f"{Case.from_json(ex['case']).dumps()}" for ex in result["controls"]["periodic"].get("findings", [])]
    lines += [f"{ex['kind']} (ABI confirmation control, the library misses logit -1): "
              f"{Case.from_json(ex['case']).dumps()}"
              for ex in (result["controls"].get("abi_confirmation") or {}).get("findings", [])]
    lines.append(certificate_ending(result, json_path, spec, argv))
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


FINDINGS_SHOWN = 10  # finding lines a campaign prints (the rest are counted; every one is in its summary.json)


def explained_text(ex: dict) -> str:
    """A campaign's inputs its fitted causes explained (its summary's `explained`), on one line: how many, how many
    of them were crash files their re-check explained, and per cause (the inputs that need it) on the sample
    counted."""
    sample = f"by cause, on a sample of {ex['by_cause_of']:,}: " if ex.get("by_cause_of") else ""
    again = f", {ex['rechecked']:,} of them crash files explained when re-checked" if ex.get("rechecked") else ""
    return (f"{ex['inputs']:,} explained by the causes{again} (" + sample +
            ", ".join(f"{m} {n:,}" for m, n in ex["by_cause"].items()) + ")")


def fuzz_summary_text(summary: dict, traces: bool, seconds: int, hard_limit: float, work=None, spec: str = "",
                      json_path=None) -> str:
    """What `dryz fuzz` prints after its campaign: the figures, the findings (those that reproduce first, at most
    FINDINGS_SHOWN, smallest first), their counts by class, what was written where and the next commands."""
    lines = [f"summary: {'traces: ' if traces else ''}{summary['execs']:,} execs in {summary['seconds']} s "
             f"({summary['exec_per_s_fuzz']:,} exec/s over libFuzzer's {summary['fuzz_seconds']} s, after "
             f"{summary['setup_seconds']} s of set-up), cov {summary['cov']}, ft {summary['ft']}, "
             f"corpus {summary['corpus']}, findings {len(summary['findings'])}"]
    if summary.get("explained") and summary["explained"]["inputs"]:
        lines.append(f"explained: {explained_text(summary['explained'])}; not findings")
    if summary["counters"]:
        lines.append(f"coverage counters: {summary['counters']}")
    if summary.get("stopped_at_hard_limit"):
        lines.append(f"note: libFuzzer outlasted --time {seconds} (its seed pass restarts after every crash); dryz "
                     f"stopped it at {hard_limit:.0f} s")
    findings = sorted(summary["findings"], key=lambda f: f["reproduces"] is not True)  # (a stable sort)
    for f in findings[:FINDINGS_SHOWN]:
        if f["klass"].startswith("not re-checked"):
            lines.append(f"finding: {f['file']} ({f['klass']})")
            continue
        again = {True: "reproduces", False: "does NOT reproduce", None: "not re-checked"}[f["reproduces"]]
        lines.append(f"finding: {f['file']} (re-checked in a clean process on the subject: {f['klass']}, {again})")
    if len(findings) > FINDINGS_SHOWN:
        lines.append(f"  ... and {len(findings) - FINDINGS_SHOWN:,} more crash files (every one with its class in "
                     f"{here(work / 'summary.json') if work else 'the summary'})")
    v = summary.get("vocab")
    decode = ""
    fault = summary.get("fault")
    if v and any(f["reproduces"] for f in summary["findings"]):  # its crash files are the vocabulary decoder's bytes
        decode = f" --vocab {v.get('spec') or v['path']} --decode-breakers {v['breakers']}"
        lines.append(f"to read a crash file as this campaign did: {dryz_on(spec, fault)} check|minimize{decode} FILE "
                     "(a finding the re-check judged also has its decoded case beside it, FILE.case.json)")
    for f in summary.get("slow", []):
        again = ", slow again" if f["recheck_seconds"] >= summary["slow_unit_seconds"] else ""
        lines.append(f"slow input (not a finding): {f['file']} (libFuzzer saw one run take "
                     f"{summary['slow_unit_seconds']} s or more; re-checked in a clean process: {f['klass']} in "
                     f"{f['recheck_seconds']} s{again})")
    classes: dict = {}
    for f in summary["findings"]:
        k = f["klass"] if f["reproduces"] is not False else f"{f['klass']} (does not reproduce)"
        classes[k] = classes.get(k, 0) + 1
    written = []
    if work is not None:
        written = [f"{here(work / 'summary.json')} (the summary)", f"{here(work / 'libfuzzer.log')} (libFuzzer's log)",
                   f"{here(work / 'corpus')}/ ({summary['corpus']:,} inputs kept)"]
        if summary["findings"]:
            written.append(f"{here(Path(summary['findings'][0]['file']).parent)}/ ({len(summary['findings']):,} "
                           "crash files)")
    if json_path:
        written.append(f"{json_path} (the summary)")
    steps = []
    first = next((f for f in summary["findings"] if f["reproduces"]), None)
    if first is not None:
        crash = shlex.quote(here(first["file"]))
        steps.append((f"{dryz_on(spec, fault)} minimize {crash}{decode} --corpus findings",
                      f"the smallest finding ({first['klass']}) shrunk to a shortest reproducer"))
    if work is not None:
        steps.append((f"dryz report {shlex.quote(here(work))} --html fuzz.html", "the campaign on one page"))
    if first is None and not summary.get("interrupted"):
        steps.append((f"{dryz_on(spec)} fuzz --time {max(600, 10 * seconds)}", "a longer campaign"))
    lines.append(ending(classes, written, steps))
    return "\n".join(lines)


def replay_ending(rows, json_path, spec: str) -> str:
    """The end of `dryz replay` (rows: dryz.corpus.ReplayRow): the classes the entries have now, where the result
    was written, and what to run on the first entry whose verdict changed."""
    classes: dict = {}
    for r in rows:
        k = "invalid" if r.error else "not judged" if r.not_judged else r.got or "?"
        classes[k] = classes.get(k, 0) + 1
    on = dryz_on(spec)
    changed = next((r for r in rows if not r.ok and not r.error and not r.not_judged), None)
    if changed is not None:
        entry = shlex.quote(here(changed.path))
        steps = [(f"{on} explain {entry}", f"the first changed entry ({changed.expect}, now {changed.got}) laid out"),
                 (f"{on} minimize {entry} --corpus changed", "shrunk to a shortest reproducer of its new verdict")]
    else:
        steps = [(f"{on} fuzz --time 600", "new inputs beyond the corpus")]
    return ending(dict(sorted(classes.items())), [f"{here(json_path)} (every entry's status)"] if json_path else [],
                  steps, unit=f"{len(rows)} entries, as judged now")


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


def compare_ending(r: dict, json_path, new: str, base: str, base_spec: str) -> str:
    """The end of `dryz compare`: the differences by class, the witnesses written, and what to run on the first."""
    written = [f"{here(d['written'])} (a witness: {d['class']})" for d in r["differences"] if "written" in d]
    if json_path:
        written.append(f"{here(json_path)} (the comparison)")
    steps = []
    first = next((d for d in r["differences"] if "written" in d and not d["written"].startswith("(")), None)
    if first is not None:
        w = shlex.quote(here(first["written"]))
        steps = [(f"{dryz_on(new)} explain {w}", "the first witness laid out on the new subject"),
                 (f"{dryz_on(base_spec)} explain {w}", "and on the base")]
    elif r["differences"]:
        steps = [(f"{dryz_on(new)} compare --base {shlex.quote(base)} --corpus witnesses",
                  "the same comparison, each difference's witness written")]
    return ending(r["counts"], written, steps, unit=f"{r['compared']:,} cases compared")


def restarts_text(results) -> str:
    """What `dryz restarts` prints: per configuration, its breakers, histories and verdict counts."""
    return "\n".join(f"{r.name:<22} breakers={list(r.breakers)!s:<18} histories {r.histories:,}  "
                     + "  ".join(f"{k} {v:,}" for k, v in r.to_json()["counts"].items())
                     + (f"\n    the subject failed on {r.examples['crash']!r}: {r.crash} (the rest not walked)"
                        if r.crash else "") for r in results)


def properties_text(result: dict) -> str:
    """What `dryz properties` prints: the causes fitted, then per property its status, counts and each cause with
    its witness: what llama.cpp and the subject gave."""
    lines = [f"dryz properties: {subject_line(result['subject'])}"]
    f = result.get("fit")
    if f:
        observed = ", ".join(f["observed"]) or "none"
        lines.append(f"causes    {len(f['models'])} fitted: llama.cpp with {' + '.join(f['models']) or 'nothing'}; "
                     f"residual {f['residual']:,} of {f['answers']:,} answers (observed: {observed})")
        if f.get("declared_not_fitted"):
            lines.append(f"          declared, not what the answers show: {', '.join(f['declared_not_fitted'])}")
    for c in result["cells"].values():
        counts = f"{c['judged']:,} judged" + (f", {sum(c['not_judged'].values()):,} not judged"
                                              if c.get("not_judged") else "")
        bad = ", ".join(f"{k} {n:,}" for k, n in c.get("classes", {}).items() if k != "agree")
        lines.append(f"  {c['title']:<38} {c['status'].upper() if c['status'] == 'differs' else c['status']:<16} "
                     f"{counts}" + (f" ({bad})" if bad else ""))
        for cause in c.get("causes", []):
            lines.append(f"      {cause['kind']} {cause['name']} ({cause['probes']:,} probes)" +
                         (f": {cause['meaning']}" if cause.get("meaning") else ""))
            for key in ("cited", "source"):
                if cause.get(key):
                    lines.append(f"        {key}: {cause[key]}")
            w = cause.get("witness") or {}
            if "probe" in w:
                lines.append(f"        first probe: {probe_line(w['probe'])}")
                lines += [f"        {x}" for x in witness_values(w)]
            elif w.get("file"):
                lines.append(f"        witness: {w['file']}")
        if c["status"] in ("not judged", "not expressible"):
            for why in c.get("not_judged", {}):
                lines.append(f"      {why}")
    lines.append(f"wall {result['seconds']} s")
    return "\n".join(lines)


def _num(x) -> str:
    """A logit as a person reads it: float32's seven digits (-0.8, not -0.800000011920929)."""
    return f"{x:.7g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else str(x)


def properties_ending(result: dict, json_path, spec: str, argv) -> str:
    """The end of `dryz properties`: the cells by status, what was written, and what to run on a difference."""
    classes: dict = {}
    for c in result["cells"].values():
        classes[c["status"]] = classes.get(c["status"], 0) + 1
    written = [f"{here(w)} (a cause's first probe)" for w in result.get("written", [])]
    if json_path:
        written.append(f"{here(json_path)} (every cell)")
    on = dryz_on(spec)
    steps = []
    if result.get("written"):
        w = shlex.quote(here(result["written"][0]))
        steps = [(f"{on} explain {w}", "the first cause's probe laid out"),
                 (f"{on} minimize {w} --corpus witnesses", "shrunk to a shortest reproducer")]
    elif "differs" in classes:
        steps = [(f"{again(argv, f'{on} properties')} --corpus witnesses", "the same run, each differing property's "
                                                                          "first probe written as a corpus entry")]
    if spec in ("", "libllama:"):
        steps.append(("dryz exhaustive", "the certificate: every history of a bounded space, on the same subject"))
    else:
        steps.append(("dryz conformance --row libllama: --row " + shlex.quote(spec),
                      "the subject beside llama.cpp's libllama, each difference minimized"))
    return ending(dict(sorted(classes.items())), written, steps, unit=f"{len(result['cells'])} properties")


def values_lines(probe: dict, verdict: dict | None, most: int = 3) -> list[str]:
    """What llama.cpp's semantics give and what the subject gave on a probe's differing candidates (at most
    `most`, the rest counted): logit and L by the first oracle and by the subject; a crash's detail; a refusal."""
    if not verdict:
        return []
    if verdict.get("class") in ("crash", "memory"):
        return [f"the subject failed: {verdict.get('summary') or verdict.get('detail', '')}"]
    vocab = "vocab" in probe and probe.get("vocab") is not None
    cands = list(verdict.get("candidates") or [])
    out = []
    diff = verdict.get("differing") or []
    for d in diff[:most]:
        if d["id"] < 0:  # the array, the sorted flag, or a request the server refused or ran
            out.append(f"llama.cpp: {d['expected']}; the subject: {d['observed']}")
            continue
        name = f"token {d['id']}" if vocab or d["id"] >= len(SYMBOLS) else repr(SYMBOLS[d["id"]])
        j = cands.index(d["id"]) if d["id"] in cands else None
        L = (lambda key: f", L {verdict[key][j]}" if j is not None and j < len(verdict.get(key) or []) else "")
        out.append(f"candidate {name}: llama.cpp gives logit {_num(d['expected'])}{L('oracle_L')}, the subject "
                   f"{_num(d['observed'])}{L('library_L')}")
    if len(diff) > most:
        out.append(f"(and {len(diff) - most} more differing candidates)")
    if not diff and verdict.get("broken_promises"):  # the shipped model's output, which breaks what the source says
        out.append(f"the subject gives what llama.cpp's code gives, which breaks the promise its source makes: "
                   f"{', '.join(verdict['broken_promises'])}")
    return out


def witness_values(w: dict, promise: str = "") -> list[str]:
    """What llama.cpp, llama.cpp with the other causes and the subject gave for a witness probe: per candidate that
    differs between them, its logits (float32, every digit), or the raise or refusal; for a request sequence, per
    request. promise: the class of a promise the source breaks, where llama.cpp and the subject agree (then the
    subject's own logits are shown)."""
    probe = w.get("probe") or {}
    if "requests" in probe:
        reqs = probe["requests"]
        return [f"request {i} {Case.from_json(c).symbols!r}: " + "; ".join(witness_values({**v, "probe": c}))
                for i, (c, v) in enumerate(zip(reqs, w.get("per_request") or []), 1)]
    cols = [(k, w[k]) for k in ("llama.cpp", "without", "subject") if w.get(k) is not None]
    if not cols:  # a class the judge names without values (a crash): its detail
        v = w.get("verdict") or {}
        return [f"llama.cpp answers; the subject: {v['detail']}"] if v.get("class") == "crash" else []
    names = {"llama.cpp": "llama.cpp", "without": "with the other causes", "subject": "subject"}
    if all("logits" in a for _, a in cols):
        ids = Case.from_json(probe).ids
        rows = []
        for i, t in enumerate(ids):
            vals = [a["logits"][i] for _, a in cols]
            if len({repr(v) for v in vals}) > 1:
                rows.append(f"{SYMBOLS[t] if t < len(SYMBOLS) else t}: " +
                            ", ".join(f"{names[k]} {_f32(v)}" for (k, _), v in zip(cols, vals)))
        if not rows and promise:  # the shipped code's own output, which breaks what its source promises
            return ["llama.cpp and the subject alike: " + ", ".join(
                f"{SYMBOLS[t] if t < len(SYMBOLS) else t} {_f32(v)}" for t, v in zip(ids, cols[-1][1]["logits"]))
                + f" ({promise}: the source promises otherwise)"]
        return rows or ["every logit the same"]
    return ["; ".join(f"{names[k]} " + (_f32_list(a["logits"]) if "logits" in a else _not_logits(a))
                      for k, a in cols)]


def _not_logits(a: dict) -> str:
    """A raise, crash or refusal as one phrase ("raised OverflowError: ...", not "raised the engine raised: ...")."""
    x = next(x for x in ("raised", "crash", "refused") if x in a)
    return f"{x} " + re.sub(r"^the (engine|subject|library) (raised|crashed|refused):? ", "", str(a[x]))


def _f32(v) -> str:
    return v if isinstance(v, str) else str(np.float32(v))  # the shortest digits that read back as the float32


def _f32_list(vals) -> str:
    return "logits [" + ", ".join(_f32(v) for v in vals) + "]"


def probe_line(probe: dict) -> str:
    """A probe (Case, trace or request sequence JSON) in one short line: the history spelled (long ones cut), the
    parameters (a sequence's: its last request's)."""
    if "events" in probe:
        return "trace " + (probe.get("spelled") or json.dumps(probe["events"])) + \
            f", window {probe.get('penalty_last_n')}, allowed_length {probe.get('allowed_length')}"
    if "requests" in probe:
        reqs = [Case.from_json(c) for c in probe["requests"]]
        return "requests " + ", then ".join(repr(_spelled(c)) for c in reqs) + _params_text(reqs[-1])
    c = Case.from_json(probe)
    return repr(_spelled(c)) + _params_text(c)


def _spelled(c: Case) -> str:
    return c.symbols if len(c.symbols) <= 40 else f"{c.symbols[:36]}... ({len(c.history)} tokens)"


def _params_text(c: Case) -> str:
    extra = "".join(f", {k} {v}" for k, v in (("candidates", c.candidates), ("sorted", c.sorted)) if v)
    return (f" window {c.penalty_last_n}, allowed_length {c.allowed_length}, multiplier {c.multiplier:g}, "
            f"base {c.base:g}, breakers {list(c.breakers)}{extra}")
