"""The gate of an engine's patch: a subject and a base that are both other engines' DRY (`engine:NAME+patch=FILE`
against `engine:NAME`, or any two adapters), whose outputs differ from llama.cpp's by design. Their behaviour is
judged by their causes (dryz.causes: the 1-minimal set of deviation models whose composition with llama.cpp's
DRY explains every answer bit for bit), and a patch declares the causes it removes: `--expect-change MODEL`
(`--expect-change raises-window:20`), or a numbered cause it narrows: `--expect-change OLD=NEW`, the same model with
another number (`repeat-min:2=repeat-min:1`: one-token repeats are penalized now, tokens that follow no repeat
still are not).

1. Before the modes (outside the budget, as a base's build is): `dryz properties` on the base and on the subject,
   side by side (dryz children): each one's causes fitted on the properties' probes.
2. The expected causes: the base's without the declared ones (a narrowed one with its new number). Every
   campaign (fuzz*) runs with them (`fuzz --fitted`): a difference they explain is counted per cause, anything
   else is recorded.
3. After the modes, both engines are fitted again (`dryz properties --witness`, side by side) on the probes and
   every input the modes recorded: each campaign's findings and the differential's witnesses. A campaign's input
   can show a cause of the base the probes alone do not (exllamav2's no-clamp past its short windows), and the
   base then has it too: both fits see the same inputs. The changes: a cause of the base the subject no longer
   has is a change of that class (the model's name; OLD=NEW where the subject has the same model with another
   number), declared or not; a cause the subject has and the base has not is a change no declaration covers; an
   answer of the subject no composition explains is a finding (mode `causes`, or the campaign's own where it
   recorded the input). The differential's witnesses (dryz compare: each kind of difference minimized) are asked
   again of both engines (an isolation worker each) and judged by the causes: each is a change of the causes the
   base's answer needs and the subject's fit lacks, declared when those are declared and the subject's answer is
   what the expected causes give; a witness the removed causes do not explain is a change no declaration covers.

The gate passes when the subject's fit is the base's minus exactly the declared causes with residual 0, every
campaign finds nothing the expected causes do not explain, and every behaviour change is a declared cause's. The
same gate without the declaration fails: the removed causes are undeclared changes, and the campaigns find the
patched answers the base's causes no longer explain. A mode that judges against llama.cpp alone (the
certificates, the restart sweep, the replay) finds the engine's designed differences: it runs only when asked
for (--mode), and its findings count.
"""

from __future__ import annotations

import signal
import time
from dataclasses import replace
from pathlib import Path

from ..case import Case
from ..causes import explains
from ..oracle.deviations import pattern
from .changes import cause_of, is_model, spell
from .result import Change, Finding, GateError, GateResult, ModeResult
from .witnesses import PROPERTIES_TIMEOUT, properties_child, properties_result

DEFAULT_MODES = ("fuzz", "differential")  # the modes an engine gate runs unless --mode says otherwise
KINDS = ("engine", "cmd")                 # subjects whose causes are fitted: other engines' adapters


def applies(spec: str, base: str | None) -> bool:
    """Whether a gate of `spec` against `base` is judged by the causes: both are other engines' adapters."""
    return base is not None and all(s.split(":", 1)[0] in KINDS for s in (spec, base))


class Causes:
    """One engine gate's causes: the base's and the subject's fits, the expected causes, and the judgement."""

    def __init__(self, spec: str, base: str, declared, work: Path, log):
        self.spec, self.base, self.work, self.log = spec, base, Path(work), log
        pairs = [cause_of(d) for d in declared if is_model(d)]
        self.removed = [old for old, _ in pairs]
        self.narrowed = {old: new for old, new in pairs if new}
        self.fits: dict = {}
        self.seconds = 0.0

    def fit(self, witnesses=(), tag: str = "probes") -> None:
        """`dryz properties` (with these witness files) on the base and the subject, side by side: GateError when
        either cannot conclude."""
        t0 = time.monotonic()
        self.log(f"causes: dryz properties on the base and the subject ({self.base}, {self.spec})"
                 + (f", with {len(witnesses):,} input(s) the modes recorded" if witnesses else ""))
        started = {}
        for side, spec in (("base", self.base), ("subject", self.spec)):  # side by side, their output in files
            d = self.work / f"causes-{side}"
            d.mkdir(parents=True, exist_ok=True)
            started[side] = properties_child(spec, d, (), witnesses, f"{side}-{tag}")
        try:
            got = {side: properties_result(c.wait(PROPERTIES_TIMEOUT), out) for side, (c, out) in started.items()}
        except KeyboardInterrupt:  # (the child waited on is stopped by its wait; the other here)
            for c, _ in started.values():
                c.signal(signal.SIGINT)
            time.sleep(1)
            for c, _ in started.values():
                c.signal(signal.SIGKILL)
            raise
        for side in ("base", "subject"):
            result, why = got[side]
            if result is None:
                raise GateError(f"causes: dryz properties on the {side} could not conclude: {why}")
            self.fits[side] = result
        self.seconds += round(time.monotonic() - t0, 1)
        for side in ("base", "subject"):
            f = self.fits[side]["fit"]
            self.log(f"causes: {side} = llama.cpp with {' + '.join(f['models']) or 'nothing'}, residual "
                     f"{f['residual']:,} of {f['answers']:,} answers")

    @property
    def base_models(self) -> tuple:
        return tuple(self.fits["base"]["fit"]["models"])

    @property
    def subject_models(self) -> tuple:
        return tuple(self.fits["subject"]["fit"]["models"])

    @property
    def expected(self) -> tuple:
        """The causes the subject should have: the base's without the declared ones (a narrowed one with its new
        number)."""
        return tuple(self.narrowed.get(m, m) for m in self.base_models if m not in self.removed or m in self.narrowed)

    def declaration(self, old: str) -> str:
        """How a cause's change is declared: MODEL, or OLD=NEW where it is narrowed."""
        return f"{old}={self.narrowed[old]}" if old in self.narrowed else old

    def campaigns(self, planned: list) -> list:
        """The plan with every campaign judging by the expected causes (fuzz --fitted MODEL ...)."""
        fitted = tuple(x for m in self.expected for x in ("--fitted", m))
        for m in planned:
            if m.name.startswith("fuzz") and fitted:
                m.record = replace(m.record, args=tuple(m.record.args) + fitted)
        return planned

    # -- after the modes ---------------------------------------------------------------------------------------

    def judge(self, res: GateResult, work: Path) -> None:
        """The causes compared and the differential's witnesses judged by them (the module docstring, step 3):
        the changes, the declarations not seen, mode `causes`."""
        recorded = self._recorded(res, work)
        if recorded:
            self.fit([str(p) for p in recorded], "witnesses")
        base, new = self.base_models, self.subject_models
        gone = [m for m in base if m not in new]
        added = [m for m in new if m not in base]
        res.changes = []  # the differential's classes are judged again below, by the causes
        self._campaigns(res)
        for m in gone:
            w = self._witness("base", m)
            now = next((x for x in added if pattern(x) == pattern(m)), None)  # the same model, another number
            klass = f"{m}={now}" if now else m
            if now:
                added.remove(now)
            res.changes.append(Change(klass, klass == self.declaration(m) and m in self.removed, None, w[0], w[1],
                                      f"needs {m}", f"needs {now}" if now else "explained without it"))
        for m in added:
            w = self._witness("subject", m)
            res.changes.append(Change(m, False, None, w[0], w[1], "explained without it", f"needs {m}"))
        self._differential(res, work, gone)
        seen = {c.klass for c in res.changes if c.declared}
        res.declared_unseen = [d for d in res.declared if d not in seen]
        resid = self.fits["subject"]["fit"]["residual"]
        findings = [Finding("causes", w[2], f"no composition of the causes explains it: {w[0]}", None, spelled=w[0],
                            shortest=w[1]) for w in self._residual()]
        b, s = self.fits["base"]["fit"], self.fits["subject"]["fit"]
        text = (f"base: llama.cpp with {' + '.join(base) or 'nothing'} (residual {b['residual']:,} of "
                f"{b['answers']:,}); subject: llama.cpp with {' + '.join(new) or 'nothing'} (residual {resid:,} "
                f"of {s['answers']:,})" + (f"; removed {', '.join(gone)}" if gone else "") +
                (f"; added {', '.join(added)}" if added else ""))
        res.modes.insert(0, ModeResult("causes", "finding" if resid else "pass", 1 if resid else 0, self.seconds,
                                       None, text, ["properties"], findings))
        res.causes = {"base": b, "subject": s, "declared": list(self.removed), "expected": list(self.expected),
                      "removed": gone, "added": added}

    def _cells(self, side: str):
        for key, c in self.fits[side]["cells"].items():
            for cause in c.get("causes", []):
                yield key, cause

    def _witness(self, side: str, model: str) -> tuple[str, str, str]:
        """(the witness in one line, how short, its class) of a cause in a side's properties: its first probe."""
        for _, cause in self._cells(side):
            if cause["name"] == model and "probe" in (cause.get("witness") or {}):
                return spell(cause["witness"]["probe"]), "the first probe that needs it", cause["witness"]["class"]
        return "(no single probe: the cause explains answers another property's cause needs too)", "", ""

    def _residual(self) -> list:
        out = []
        for _, cause in self._cells("subject"):
            w = cause.get("witness") or {}
            if cause["kind"] == "residual" and "probe" in w:
                out.append((spell(w["probe"]), "the first probe", w.get("class", "")))
        return out

    def _differential(self, res: GateResult, work: Path, gone: list) -> None:
        """The differential's witnesses judged by the causes: each a change (module docstring); the mode's
        findings (the engines differ from llama.cpp by design) are replaced by these changes."""
        import json  # on use
        diff = res.mode("differential")
        path = work / "differential.json"
        if diff is None or diff.verdict not in ("pass", "finding") or not path.exists():
            return
        d = json.loads(path.read_text())
        cases = [Case.from_json(x["case"]) for x in d["differences"]]
        answers = self._answers(cases) if cases else {"base": [], "subject": []}
        candidates = list(dict.fromkeys([*gone, *self.removed]))
        base_fit, expected = self.base_models, self.expected
        for x, case, a_base, a_new in zip(d["differences"], cases, answers["base"], answers["subject"]):
            needs = _needs(case, a_base, base_fit, [m for m in candidates if m in base_fit])
            ok = explains(case, a_new, expected)
            klass = "+".join(self.declaration(m) for m in needs) if needs else "unexplained"
            res.changes.append(Change(klass, bool(needs) and ok and all(m in self.removed for m in needs),
                                      x.get("written"), spell(x["case"]), x["shortest"],
                                      f"{_said(a_base)}" + ("" if explains(case, a_base, base_fit) else
                                                             " (not what the base's causes give)"),
                                      f"{_said(a_new)}" + ("" if ok else " (not what the expected causes give)")))
        diff.findings = []
        diff.verdict = "pass"
        diff.text += "; every difference judged by the causes (the changes below)"

    def _recorded(self, res: GateResult, work: Path) -> list:
        """Every input the modes recorded: each campaign's findings (its artifacts, re-checked or not, and a
        control case it failed) and the differential's witnesses."""
        import json  # on use
        out = [f for m in res.modes if m.name.startswith("fuzz") and m.verdict == "finding"
               for f in self._campaign_inputs(m.name)]
        diff = work / "differential.json"
        if res.mode("differential") is not None and diff.exists():
            out += [Path(x["written"]) for x in json.loads(diff.read_text())["differences"]
                    if x.get("written") and Path(x["written"]).is_file()]
        return out

    def _campaign_inputs(self, name: str) -> list:
        """A campaign's findings (its artifacts) and each control case it failed (a campaign's controls judge
        against llama.cpp alone: written as a Case file in WORK/inputs, judged by the causes like a finding)."""
        import json  # on use
        d = self.work / name
        out = sorted((d / "artifacts").glob("crash-*"))
        summary = d / "summary.json"
        controls = json.loads(summary.read_text()).get("controls") or {} if summary.exists() else {}
        for key, c in controls.items():
            if isinstance(c, dict) and c.get("passed") is False and isinstance(c.get("case"), dict):
                f = self.work / "inputs" / f"{name}-control-{key}.json"
                f.parent.mkdir(exist_ok=True)
                f.write_text(json.dumps(c["case"]) + "\n")
                out.append(f)
        return out

    def _campaigns(self, res: GateResult) -> None:
        """A campaign's findings judged by the subject's fit with them: the mode passes when the causes explain
        every one; else its first finding is an input no composition explains."""
        attributed = {str(Path(a["witness"]).name): a for a in self.fits["subject"].get("witnesses", [])}
        for m in res.modes:
            if not m.name.startswith("fuzz") or m.verdict != "finding":
                continue
            files = self._campaign_inputs(m.name)
            bad = [f for f in files if _unexplained(attributed.get(f.name))]
            m.text += (f"; the {len(files):,} input(s) it recorded (findings, a failed control's case) fitted with "
                       f"the probes: {len(files) - len(bad):,} explained by the causes")
            if not bad:
                m.findings, m.verdict, m.exit = [], "pass", 0
                continue
            a = attributed.get(bad[0].name) or {}
            m.findings = [Finding(m.name, a.get("class", "unexplained"), f"{bad[0].name}: no composition of the "
                                  "causes explains the subject's answer", str(bad[0]), shortest="not minimized")]

    def _answers(self, cases: list) -> dict:
        """Each case's answer from each engine, asked in an isolation worker of its own."""
        from ..judge import answer_op  # on use: an engine gate only
        from ..subject.isolation import Worker  # on use: an engine gate only
        out = {}
        for side, spec in (("base", self.base), ("subject", self.spec)):
            with Worker(spec, timeout=120) as w:
                out[side] = [w.call(answer_op, c) for c in cases]
        return out


def _needs(case, answer, fitted: tuple, candidates: list) -> list:
    """The candidate causes the answer needs: each one whose removal leaves it unexplained; where none alone does
    (two causes explain it each, a raise of both), each one that explains it without the other candidates."""
    if not explains(case, answer, fitted):
        return []
    one = [m for m in candidates if not explains(case, answer, tuple(b for b in fitted if b != m))]
    if one or explains(case, answer, tuple(b for b in fitted if b not in candidates)):
        return one
    return [m for m in candidates if explains(case, answer, tuple(b for b in fitted if b == m or
                                                                   b not in candidates))]


def _unexplained(attributed: dict | None) -> bool:
    """A witness the properties' fit does not explain: not attributed, or attributed to a class (the residual's
    name is its class: mismatch, crash), not to deviation models alone."""
    if attributed is None or attributed.get("klass") == "not judged":
        return True
    causes = attributed.get("causes")
    if causes is None:  # agrees with llama.cpp: nothing to explain
        return False
    return not causes or not all(is_model(c) for c in causes)


def _said(answer) -> str:
    """An answer in a few words: the logits, or what the engine raised or refused."""
    from ..causes import answer_json  # on use
    a = answer_json(answer)
    if "logits" in a:
        return "logits " + ", ".join(f"{x:g}" if isinstance(x, float) else str(x) for x in a["logits"][:6]) + \
            (" ..." if len(a["logits"]) > 6 else "")
    return next((f"{k} {str(v)[:80]}" for k, v in a.items()), "no answer")


def check_declarations(declared, spec: str, base: str | None) -> None:
    """GateError for a cause declared where the gate cannot judge causes (not two engines' adapters)."""
    models = [d for d in declared if is_model(d)]
    if models and not applies(spec, base):
        raise GateError(f"--expect-change {models[0]}: a cause is declared removed on a gate of two engines' "
                        "adapters (--subject engine:NAME+patch=FILE --base engine:NAME)")
