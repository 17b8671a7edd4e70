"""Behaviour changes against a base: a difference the differential found (dryz compare) that is not the subject's
own finding is a change, classed by what it is and where its minimized witness sits on the window's edges
(`crash@window<-1`, `semantic-change@window=-1`, ...), and judged against what the pull request declares
(--expect-change, --expect-file): a declaration covers the classes it names or extends at `@` or `,`."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..case import Case
from ..corpus import known_classes
from ..differential import CLASSES as COMPARISON_CLASSES, where
from ..oracle.deviations import DeviationError, fix_for, fixed_by, parse
from ..verdict import is_finding, kind_of
from .result import Change, GateError, GateResult


def subject_broke(x: dict) -> bool:
    """A difference where the subject crashed, hung, or broke a promise no corpus entry documents: a finding,
    not a behaviour change (a class that is no finding, such as a fix the subject declares, is none)."""
    new = x["other"]
    return "klass" not in new or (is_finding(new["klass"]) and new["klass"] not in known_classes())


def fixes_declared(declarations) -> list[str]:
    """The fixes dryz models for the finding classes a gate declares as changes (--expect-change
    promise-finite-penalty: the subject is judged declaring finite-penalty:saturate)."""
    return list(dict.fromkeys(f for f in (fix_for(d.split("@", 1)[0]) for d in declarations) if f))


def side(s: dict) -> str:
    return s.get("klass") or f"{s.get('kind')}: {s.get('detail', '')}"[:120]


def spell(c: dict) -> str:
    """A case in one line: the history and the parameters that are not the defaults."""
    case = Case.from_json(c)
    h = f"`{case.symbols}`" if case.vocab is None else f"{len(case.history)} tokens of {case.vocab}"
    parts = [h, f"window {case.penalty_last_n}"]
    if case.n_ctx_train != 4096:
        parts.append(f"n_ctx_train {case.n_ctx_train}")
    parts.append(f"allowed_length {case.allowed_length}")
    if case.breakers:
        parts.append(f"breakers {list(case.breakers)}")
    if (case.multiplier, case.base) != (1.0, 2.0):
        parts.append(f"multiplier {case.multiplier:g} base {case.base:g}")
    return ", ".join(parts)


def cause_of(declaration: str) -> tuple[str, str | None] | None:
    """(the base's cause, its new number's model or None) a declaration names (MODEL, or OLD=NEW: the same
    numbered model), or None for a change class."""
    old, sep, new = declaration.partition("=")
    try:
        kind, n = parse(old)
        if sep:
            kind2, n2 = parse(new)
            if kind2 != kind or n is None or n2 is None or n2 == n:
                return None
    except DeviationError:
        return None
    return old, (new if sep else None)


def is_model(declaration: str) -> bool:
    """A declaration that names a cause the patch removes (or narrows), not a change class."""
    return cause_of(declaration) is not None


def unfixable(declaration: str) -> bool:
    """A declared change that names a finding class of a verdict (not a comparison's class: crash,
    semantic-change, promise-broken-in-one) for which dryz models no fix."""
    klass = declaration.split("@", 1)[0]
    return klass not in COMPARISON_CLASSES and kind_of(klass) is not None \
        and is_finding(klass) and fix_for(klass) is None


def change_class(klass: str, case, base: str = "", new: str = "") -> str:
    """The declarable class of a behaviour change: the comparison's class (crash, semantic-change,
    promise-broken-in-one), or the base's finding where the new subject's class is a fix of it it declares
    (promise-finite-penalty where the new is declared-finite-penalty:saturate), at where its minimized witness
    sits on the window's edges (dryz.differential.where): CLASS@window=-1, CLASS@window<-1,
    CLASS@window>0,n_ctx_train<=0, ..."""
    if base and base in fixed_by(new):
        klass = base
    window, cap = where(case)
    w = {"-1": "window=-1", "<-1": "window<-1", "0": "window=0", ">0": "window>0"}[window]
    return f"{klass}@{w}" + (f",{cap}" if cap != "-" else "")


def declared(klass: str, declarations) -> bool:
    """A declaration covers a change class when equal, or a prefix of it ending at @ or , (`crash` covers
    every crash change, `crash@window<-1` both crashes with window below -1)."""
    return any(klass == d or klass.startswith(d) and klass[len(d)] in "@," for d in declarations)


DECLARED = re.compile(r"[a-z-]+(@window(=-1|<-1|=0|>0)(,n_ctx_train(<=0|<window))?)?")
DECLARED_FORM = "CLASS[@window=-1|<-1|=0|>0[,n_ctx_train<=0|<window]], e.g. semantic-change@window=-1 or crash"


def declarable() -> tuple[str, ...]:
    """The classes a change may be declared as (--expect-change CLASS[@...]): the comparison's own, and every
    finding class of a verdict (the base's finding a fix removes)."""
    from ..oracle.served import CLASSES as SERVED  # on use: the command line asks it while parsing
    from ..verdict import CLASSES  # on use: the command line asks it while parsing
    return tuple(dict.fromkeys((*COMPARISON_CLASSES, *(c for c in (*CLASSES, *SERVED) if is_finding(c)))))


def declared_changes(expect, expect_file) -> list[str]:
    """The classes --expect-change and --expect-file declare; GateError names the first malformed one."""
    declared = list(expect)
    if expect_file:
        if not os.path.isfile(expect_file):
            raise GateError(f"--expect-file {expect_file}: no such file")
        declared += [d for _, d in read_expect_file(expect_file)]
    bad = [d for d in declared if not DECLARED.fullmatch(d) and not is_model(d)]
    if bad:
        raise GateError(f"--expect-change {bad[0]!r}: a class is {DECLARED_FORM}, or a cause an engine's patch "
                        "removes (a deviation model)")
    return declared


def read_expect_file(path) -> list[tuple[int, str]]:
    """Declarations, one class per line, with their line numbers; # starts a comment. A file that is not UTF-8
    text: GateError."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise GateError(f"{path}: not UTF-8 text (byte {e.start}): one class a line was expected") from None
    except OSError as e:
        raise GateError(f"cannot read {path}: {e.strerror}") from None
    out = []
    for i, ln in enumerate(text.splitlines(), 1):
        ln = ln.split("#", 1)[0].strip()
        if ln:
            out.append((i, ln))
    return out


def changes(res: GateResult, work: Path) -> None:
    """The differential's differences that are not the subject's own findings, as the run's changes, each judged
    against the declarations; the declarations no change shows."""
    d = json.loads((work / "differential.json").read_text())
    res.base = res.base or d["base"]["identity"]
    for x in d["differences"]:
        if subject_broke(x):
            continue
        k = change_class(x["class"], Case.from_json(x["case"]), x["reference"].get("klass", ""),
                         x["other"].get("klass", ""))
        res.changes.append(Change(k, declared(k, res.declared), x.get("written"), spell(x["case"]),
                                  x["shortest"], side(x["reference"]), side(x["other"])))
    res.declared_unseen = [dcl for dcl in res.declared if not any(declared(c.klass, [dcl]) for c in res.changes)]
