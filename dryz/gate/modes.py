"""The gate's modes, registered in one place: each a record of the dryz command it runs on the subject, its lane,
how much of the budget it takes, how its result is read (from the JSON the command writes), and what it covers.
The gate (dryz.gate.plan, .run), the matrix's cells (dryz.matrix) and the mutants' kills (dryz.mutate) run these
records; a mode added here is run, read and reported by all of them.

A record's `args` may hold {work} (the run's work folder: the mode writes {work}/NAME.json, a campaign its work
directory {work}/NAME), {time} (the seconds a timed mode is given, decided when it starts) and {base} (the base's
subject spec: the differential). `fixed` is a mode that runs to completion (its measured wall sizes the others'
shares); a timed mode takes `share` of the budget, or (a campaign) an equal part of what its lane has left, plus
its measured `overhead` beyond its own --time.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..corpus import known_classes
from ..enumerate.restarts import case_of
from ..render import explained_text
from ..verdict import is_finding
from .changes import side, spell, subject_broke
from .result import Finding, ModeResult

VOCAB_FUZZ = "llama-bpe"  # the real vocabulary of the vocabulary campaigns (README's campaigns use it)
RANDOM_CASES = 500  # fuzz-decoder cases in the differential (besides edges, the corpus and the kept inputs)


@dataclass(frozen=True)
class ModeRecord:
    name: str
    args: tuple
    lane: int
    read: Callable        # (ModeResult, its JSON, work folder) -> None: fills verdict, text, findings, counts
    what: str
    fixed: float = 0.0    # > 0: runs to completion, this many seconds measured (README "The gate")
    share: float = 0.0    # > 0: this fraction of the budget as its --time
    overhead: float = 0.0  # a timed mode's measured seconds beyond its --time (start-up, seeding, re-checks)
    stop_early: tuple = ()  # what the gate adds so that a campaign ends at its first crashing job
    needs_base: bool = False
    needs: Callable | None = None  # capabilities (subject show's JSON) -> why the subject cannot express the mode

    @property
    def timed(self) -> bool:
        return not self.fixed

    @property
    def campaign(self) -> bool:
        return self.timed and not self.share


def _write(work: Path, name: str, data: dict) -> str:
    d = work / "inputs"
    d.mkdir(exist_ok=True)
    p = d / name
    p.write_text(json.dumps(data) + "\n")
    return str(p)


# -- how each mode's result is read (its --json) -----------------------------------------------------------------


def read_certificate(r: ModeResult, c: dict, work: Path) -> None:
    n = r.name
    t = c["totals"]
    text = f"{c['verdict'].upper()}: {t['cases']:,} cases, {t['mismatches']:,} mismatches"
    if n == "parameters":
        text += f", {len(c['configs'])} configurations"
    per = c["controls"]["periodic"]
    tr = c.get("traces")
    if per.get("library_failures"):
        text += f"; periodic control: the library misses {per['library_failures']} closed form(s)"
    if tr:
        text = f"{c['verdict'].upper()}: {tr['traces']:,} traces, {tr['applies']:,} applies, " \
               f"{tr['disagreements']:,} disagreements; histories {t['cases']:,} cases, {t['mismatches']:,} " \
               f"mismatches" + text.split(" mismatches", 1)[1]
        crashed = sum(cf.get("crashed_traces", 0) for cf in tr["configs"])
        if crashed:
            text += f"; the subject died on {crashed:,} trace(s)"
        for cf in tr["configs"]:
            for ex in cf["examples"][:1]:
                r.findings.append(Finding(n, ex.get("status", "trace-disagreement"),
                                          f"{cf['config']}: first bad apply {ex['first_bad_apply']}",
                                          _write(work, f"{n}-{cf['config']}.trace.json", ex["trace"]),
                                          spelled=ex["spelled"]))
            for x in cf.get("crashes", [])[:1]:  # a trace the subject died on (class crash or memory), named
                r.findings.append(Finding(n, x["class"], f"{cf['config']}: {x['detail']}",
                                          _write(work, f"{n}-{cf['config']}.crash.trace.json", x["trace"]),
                                          spelled=x["spelled"]))
    for cf in c["configs"]:
        for ex in cf["examples"][:1]:
            r.findings.append(Finding(n, ex["kind"], f"configuration {cf['name']}",
                                      _write(work, f"{n}-{cf['name'].replace('/', '_')}.json", ex["case"])))
    for i, ex in enumerate(per.get("findings", [])[:1]):
        r.findings.append(Finding(n, ex["kind"], "periodic control: the library misses its closed form",
                                  _write(work, f"{n}-periodic-{i}.json", ex["case"])))
    r.counts = {"mismatch": t["mismatches"]} if t["mismatches"] else {}
    r.text = text


def read_restarts(r: ModeResult, d: dict, work: Path) -> None:
    counts: dict = {}
    for c in d["configs"]:
        for k, v in c["counts"].items():
            counts[k] = counts.get(k, 0) + v
        for k, h in c["examples"].items():
            if is_finding(k) and not any(f.klass == k for f in r.findings):
                case = case_of(h, c["breakers"], d["alphabet"], d["max_length"])
                r.findings.append(Finding("restarts", k, f"breaker set {c['breakers']} ({c['name']})",
                                          _write(work, f"restarts-{c['name']}.json", case.to_json())))
    r.counts = counts
    r.text = ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def read_replay(r: ModeResult, d: dict, work: Path) -> None:
    t = d["totals"]
    r.text = f"{t['as_expected']}/{t['replayed']} as expected" \
        + (f", {t['served']} as served" if t.get("served") else "") \
        + (f", {t['fixed']} fixed as declared" if t.get("fixed") else "") \
        + (f", {t['changed']} changed" if t["changed"] else "") \
        + (f", {t['not_judged']} not judged (the subject cannot express them)" if t.get("not_judged") else "")
    for e in d["entries"]:
        if e["status"] == "changed":
            r.findings.append(Finding("replay", e["got"], f"{Path(e['path']).name}: expected {e['expect']}",
                                      e["path"]))
    r.counts = {"changed": t["changed"]} if t["changed"] else {}


def read_vocab(r: ModeResult, d: dict, work: Path) -> None:
    n = r.name
    ran = [v for v in d["vocabularies"] if "skipped" not in v]
    cover = f"{len(ran)} of {len(d['vocabularies'])} vocabularies"
    if n == "construction":
        probes = sum(v.get("construction", {}).get("probes", 0) for v in ran)
        sets = sum(v.get("construction", {}).get("sets_complete", 0) for v in ran)
        dis = sum(v.get("construction", {}).get("disagreements", 0) for v in ran)
        r.text = f"{probes:,} probes, {sets} breaker sets complete, {cover}: {dis} disagreements"
        skipped = sum(sum(v.get("construction", {}).get("not_judged", {}).values()) for v in ran)
    else:
        classes: dict = {}
        for v in ran:
            for k, c in {**v["promise"]["windows"]}.items():
                classes[k] = classes.get(k, 0) + c
        known = sorted(k for k in classes if k != "agree" and k in known_classes() and k != "construction-mismatch")
        r.text = f"{cover}, {sum(classes.values()):,} windows: {len(d['findings'])} finding(s)" + \
                 (f" (documented classes seen: {', '.join(known)})" if known else "")
        skipped = sum(sum(v["promise"].get("not_judged", {}).values()) for v in ran)
    if skipped:
        r.text += f"; {skipped:,} not judged (the subject cannot express them)"
    for i, f in enumerate(d["findings"][:3]):
        r.findings.append(Finding(n, f["klass"], f"{f['vocab']}: {f['detail'][:160]}",
                                  _write(work, f"{n}-{i}.json", f["case"])))


def read_fuzz(r: ModeResult, s: dict, work: Path) -> None:
    classes: dict = {}
    for f in s["findings"]:
        classes[f["klass"]] = classes.get(f["klass"], 0) + 1
    r.counts = classes
    rate = s.get("exec_per_s_fuzz")
    ex = s.get("explained")
    r.text = (f"VOID ({s['void']}): " if s.get("void") else "") + \
        f"{s['execs']:,} execs in {s['seconds']:.0f} s" + (f" ({rate:,} exec/s)" if rate else "") + \
        f", cov {s['cov']}: " + \
        (explained_text(ex) + "; " if ex and ex["inputs"] else "") + \
        (", ".join(f"{k} {v}" for k, v in classes.items()) if classes else "no findings") + \
        (f" ({len(s['slow'])} slow input(s), not findings)" if s.get("slow") else "")
    if s.get("void"):
        r.verdict = "error"
    real = sorted((f for f in s["findings"] if f["reproduces"]), key=lambda f: os.path.getsize(f["file"])
                  if os.path.exists(f["file"]) else 1 << 30)
    v = s.get("vocab")
    for f in real[:1]:
        beside = f["file"] + ".case.json"  # the re-check's decoded case (none for a crash)
        w = beside if os.path.exists(beside) else f["file"]
        # A vocabulary campaign's bare crash file is read as that campaign decoded it (`--vocab --decode-breakers`)
        reader = ["--vocab", v.get("spec") or v["path"], "--decode-breakers", v["breakers"]] if v and w == f["file"] else []
        r.findings.append(Finding(r.name, f["klass"], f"crash file {Path(f['file']).name} (reproduces in a clean "
                                                      "process)", w, reader=reader))


def read_differential(r: ModeResult, d: dict, work: Path) -> None:
    counts = ", ".join(f"{k} {v:,}" for k, v in d["counts"].items()) or "no differences"
    r.text = f"{d['compared']:,} of {d['cases']:,} cases compared: {counts}; {len(d['differences'])} witness(es)"
    r.counts = dict(d["counts"])
    # A difference is a finding when the subject itself crashes or breaks a promise nobody documented there
    # (the rest are behaviour changes, judged against the declarations: dryz.gate.changes).
    r.verdict = "pass"
    for x in d["differences"]:
        if subject_broke(x):
            r.findings.append(Finding("differential", x["class"], f"the subject: {side(x['other'])}; the base: "
                                      f"{side(x['reference'])}", x.get("written"), spelled=spell(x["case"]),
                                      shortest=x["shortest"]))
    if r.findings:
        r.verdict = "finding"


# -- what a mode needs of the subject ----------------------------------------------------------------------------


def _traces(caps: dict) -> str | None:
    missing = {"reset", "clone", "free"} - set(caps.get("calls", ()))
    return f"a trace needs the {', '.join(sorted(missing))} call(s), which the subject does not expose" if missing \
        else None


def _vocabularies(caps: dict) -> str | None:
    v = caps.get("vocabularies", "any")
    return None if v == "any" or VOCAB_FUZZ in v else f"the subject runs the vocabularies {v}, not the vendored ones"


def _many_cases(caps: dict) -> str | None:
    return "every case starts a fresh instance of the engine (instance_per_case): the mode's tens of thousands of " \
           "cases would take hours" if caps.get("instance_per_case") else None


def _traces_of_cases(caps: dict) -> str | None:
    return _traces(caps) or _many_cases(caps)


# -- the registry ------------------------------------------------------------------------------------------------

_J = "--json={work}/{name}.json"
_EXHAUSTIVE = ("exhaustive", "-j", "1", "--no-progress")
_FUZZ = ("fuzz", "--time", "{time}", "--jobs", "1", "--workdir={work}/{name}", _J)
# A buggy subject makes many crash files at once (the seeds): three re-checked are enough to fail, and the first
# crashing job ends the campaign.
_STOP = ("--recheck", "3", "--", "-ignore_crashes=0")

# In lane order: the fixed modes first (their results come in minutes), then the timed ones; the differential
# follows the symbol campaign in its lane, so it compares on that campaign's kept inputs.
MODES = (
    ModeRecord("parameters", _EXHAUSTIVE + ("--parameters", _J), 0, read_certificate,
             "the same space over allowed_length 0..3 x 4 (multiplier, base) pairs, bit-exact", fixed=18.0,
             needs=_many_cases),
    ModeRecord("certificate", _EXHAUSTIVE + (_J,), 0, read_certificate,
             "every history of length 1..11 over 3 symbols, 3 configurations (dryz exhaustive)", fixed=2.0,
             needs=_many_cases),
    ModeRecord("window-caps", _EXHAUSTIVE + ("--window-caps", _J), 0, read_certificate,
             "a configuration per window cap 1..11 (ring-buffer wrap-around)", fixed=5.0, needs=_many_cases),
    ModeRecord("restarts", ("restarts", _J), 0, read_restarts,
             "multi-token restart sequences, every history up to 7 tokens, 13 breaker sets", fixed=2.0,
             needs=_many_cases),
    ModeRecord("replay", ("replay", _J), 0, read_replay, "the project corpus: every entry's verdict as recorded",
             fixed=6.0),
    ModeRecord("construction", ("restarts", "--vocab", "all", "--check", "construction", "--time", "{time}", _J), 0,
             read_vocab, "init_dry's restart sequences against an independent model, vendored vocabularies",
             share=0.20, overhead=3.0, needs=_vocabularies),
    ModeRecord("fuzz-traces", _FUZZ[:1] + ("--traces",) + _FUZZ[1:], 0, read_fuzz,
             "libFuzzer campaign over traces (reset, clone, continue)", overhead=15.0, stop_early=_STOP,
             needs=_traces),
    ModeRecord("fuzz-vocab-random", _FUZZ + ("--vocab", VOCAB_FUZZ, "--breaker-sets", "random"), 0, read_fuzz,
             f"libFuzzer campaign over {VOCAB_FUZZ}, random breakers", overhead=20.0, stop_early=_STOP,
             needs=_vocabularies),
    ModeRecord("traces", _EXHAUSTIVE + ("--trace-events", "7", _J), 1, read_certificate,
             "every trace of up to 7 events (accept, apply, reset, clone, free), 4 configurations", fixed=26.0,
             needs=_traces_of_cases),
    ModeRecord("promise", ("restarts", "--vocab", "all", "--check", "promise", "--time", "{time}", _J), 1, read_vocab,
             "rep_limit against the breaker as printed, texts over the vendored vocabularies", share=0.10,
             overhead=3.0, needs=_vocabularies),
    ModeRecord("fuzz", _FUZZ, 1, read_fuzz,
             "libFuzzer campaign, symbol vocabulary (long histories, random windows and parameters)", overhead=7.0,
             stop_early=_STOP),
    ModeRecord("differential", ("compare", "--base", "{base}", "--kept", "{work}/fuzz/corpus", "--random",
                              str(RANDOM_CASES), "--time", "{time}", "--corpus", "{work}/changes", _J), 1,
             read_differential, "the subject against the base, case by case (dryz compare: edges, corpus, kept "
                                "inputs)", share=0.15, overhead=35.0, needs_base=True),
    ModeRecord("fuzz-vocab-dict", _FUZZ + ("--vocab", VOCAB_FUZZ, "--breaker-sets", "dict"), 1, read_fuzz,
             f"libFuzzer campaign over {VOCAB_FUZZ}, real-world breaker sets", overhead=20.0, stop_early=_STOP,
             needs=_vocabularies),
)
BY_NAME = {m.name: m for m in MODES}
NAMES = tuple(BY_NAME)
