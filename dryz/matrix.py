"""`dryz matrix`: every llama.cpp release that shipped DRY, side by side, and a minimized witness for every
behaviour that differs between two of them.

Per subject (a llama-cpp-python release built by `dryz subject build`, or the xllamacpp wheel fetched with pip),
every cell is a dryz command run in its own process on that subject (`dryz --subject SPEC ...`, with a timeout), so a
subject that crashes, aborts or hangs costs that cell, never the matrix: the default certificate, the corpus
replay, `--parameters`, `--window-caps`, the restart sweep and a fuzz campaign. Then the subjects are compared
case by case against the reference (the pinned release) through `dryz.differential` (edge cases of every parameter,
the project corpus, random fuzz-decoder cases, and the inputs each subject's campaign kept); each distinct
difference is minimized with the DRY shrink passes under the predicate "the two subjects still differ the same
way", proven shortest where the search budget allows, and written to the corpus naming the subjects it
separates.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from . import gate
from .children import run as run_child
from .compare import comparison_cases, differential, minimized_differences
from .errors import DryzError
from .subject.build import PINNED_VERSION
from .subject.cache import cache_dir
from .subject.identity import subject_line
from .subject.registry import as_spec
from .output import table_out
from .subject.build import build, describe, refuse_or_announce
from .subject.registry import parse

# One llama-cpp-python release per DRY source seen so far (0.3.25-0.3.34 share one; 0.3.35 and 0.3.36 have
# byte-identical DRY sections but 0.3.35 is kept as the first release after PR #26524), plus xllamacpp.
DEFAULT_VERSIONS = ("0.3.16", "0.3.34", "0.3.35", PINNED_VERSION, "xllamacpp")
CELL_TIMEOUT = 1800


class MatrixError(RuntimeError, DryzError):
    pass


@dataclass(frozen=True)
class Spec:
    kind: str      # "llama-cpp-python" (a release, built), "xllamacpp" (the wheel) or "subject" (any --subject)
    version: str   # a release, "latest" for xllamacpp, or the subject spec (KIND:ARG)

    @property
    def name(self) -> str:
        if self.kind == "subject":
            return self.version
        return f"xllamacpp {self.version}" if self.kind == "xllamacpp" else f"llama-cpp-python {self.version}"


def parse_versions(text: str) -> list[Spec]:
    out = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        if item == "xllamacpp":
            out.append(Spec("xllamacpp", "latest"))
        elif item.startswith("xllamacpp=="):
            v = item.split("==", 1)[1]
            if not re.fullmatch(r"[0-9][0-9A-Za-z.]*", v):
                raise MatrixError(f"--versions: bad xllamacpp version {v!r}")
            out.append(Spec("xllamacpp", v))
        elif re.fullmatch(r"\d+\.\d+\.\d+", item):
            out.append(Spec("llama-cpp-python", item))
        else:
            raise MatrixError(f"--versions: {item!r} is neither a llama-cpp-python version (0.3.36) nor "
                              "xllamacpp[==VERSION]")
    if not out:
        raise MatrixError("--versions: no subject given")
    if len(set(out)) != len(out):
        raise MatrixError("--versions: a subject is named twice")
    return out


def fetch_xllamacpp(version: str, log) -> Path:
    """The xllamacpp wheel (pip download, no install) unpacked into the subject cache; its extension module."""
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    req = "xllamacpp" if version == "latest" else f"xllamacpp=={version}"
    have = sorted(wheels.glob("xllamacpp-*.whl"))
    if version != "latest":
        have = [w for w in have if w.name.startswith(f"xllamacpp-{version}-")]
    if not have or version == "latest":
        log(f"fetching the {req} wheel with pip")
        p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                            "--disable-pip-version-check", "-q", req, "-d", str(wheels)], capture_output=True,
                           text=True)
        if p.returncode != 0:
            if not have:
                raise MatrixError(f"pip download {req} failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")
            log(f"pip download {req} failed; using the cached {have[-1].name}")
        have = sorted(wheels.glob("xllamacpp-*.whl")) if version == "latest" else \
            [w for w in wheels.glob(f"xllamacpp-{version}-*.whl")]
    wheel = max(have, key=lambda w: w.stat().st_mtime)
    v = wheel.name.split("-")[1]
    out = cache_dir() / "subjects" / f"xllamacpp-{v}"
    so = out / "xllamacpp" / "xllamacpp.abi3.so"
    if not so.exists():
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        with zipfile.ZipFile(wheel) as z:
            z.extractall(tmp)
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    return so


def prepare(spec: Spec, log) -> str:
    """The subject spec a matrix row runs: a release's libllama built, the xllamacpp extension fetched, or the
    spec given."""
    if spec.kind == "subject":
        return spec.version
    if spec.kind == "xllamacpp":
        return f"libllama:{fetch_xllamacpp(spec.version, log)}"
    return f"libllama:{build(spec.version, None, log=log)}"


# The cells of a row: the gate's modes (dryz.gate.modes), run as the gate runs them (dryz.gate.run_mode), each
# campaign whole (not ended at its first crashing job, as the gate ends it).
CELLS = (("certificate", "certificate"), ("replay", "replay"), ("parameters", "parameters"),
         ("window_caps", "window-caps"), ("restarts", "restarts"), ("fuzz", "fuzz"))


def cell(spec: str, mode: str, work: Path, seconds: int, caps: dict | None = None, extra: tuple = ()) -> dict:
    """A row's cell: the gate's mode on the subject, its verdict, exit, time, text and counts; `failed` when it
    could not conclude or the subject crashed or hung its process; not expressible where its capabilities say."""
    m = gate.mode(mode, spec, seconds, caps=caps, extra=extra)
    r = gate.run_mode(m, work, m.seconds, timeout=CELL_TIMEOUT + (seconds if m.timed else 0))
    return {"verdict": r.verdict, "exit": r.exit, "seconds": r.seconds, "text": r.text, "counts": r.counts,
            "findings": [{"klass": f.klass, "detail": f.detail, "witness": f.witness} for f in r.findings],
            "failed": r.verdict in ("error", "timeout", "crash")}


def row(spec: Spec, lib: str, seconds: int, work: Path, log) -> dict:
    """A subject's row: its identity (read by a dryz child: this process loads no library) and its cells."""
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    p = run_child(as_spec(lib), ["subject", "show"], 300, work)
    bad = p.failure(300)
    if bad or p.exit != 0:
        return {"subject": spec.name, "spec": lib, "error": bad or p.stderr.strip(), "cells": {}}
    ident = json.loads(p.stdout)
    caps = ident.pop("capabilities", None)
    if spec.kind == "subject":  # named by what it says it is
        name = subject_line(ident)
    else:
        name = ident.get("distribution", spec.name) if spec.kind == "xllamacpp" else spec.name
    spec = Spec(spec.kind, name.split()[-1]) if spec.kind == "xllamacpp" else spec
    cells = {}
    for key, mode in CELLS:
        log(f"  {spec.name}: {key}")
        cells[key] = cell(as_spec(lib), mode, work, seconds, caps)
        log(f"  {spec.name}: {key}: {cells[key]['text']} ({cells[key]['seconds']} s)")
    built = ident.get("built_by_dryz") or {}
    return {"subject": name if spec.kind == "subject" else spec.name, "spec": lib, "identity": ident,
            "work": str(work),
            "commit": built.get("vendored_commit", ident.get("llama_cpp_commit")) or "?",
            "abi": ident["init_dry_abi"], "dry_fingerprint": built.get("dry_fingerprint"),
            "cells": cells, "crashes": sum(1 for c in cells.values() if c["verdict"] in ("crash", "timeout"))
            + sum(c["counts"].get("crash", 0) for c in cells.values()),
            "seconds": round(time.monotonic() - t0, 1)}


# -- differences between subjects ----------------------------------------------------------------------


def run_matrix(specs: list[Spec], seconds: int, work: Path, corpus_dir: Path | None, log,
               random_cases: int = 2000) -> dict:
    t0 = time.monotonic()
    libs = []
    for spec in specs:
        t = time.monotonic()
        log(f"{spec.name}: preparing")
        try:
            libs.append((spec, prepare(spec, lambda m: log(f"  {m}")), round(time.monotonic() - t, 1)))
        except Exception as e:  # noqa: BLE001 (a subject that cannot be had costs its row)
            log(f"{spec.name}: cannot be prepared: {e}")
            libs.append((spec, None, round(time.monotonic() - t, 1)))
    rows = []
    for spec, lib, prep in libs:
        if lib is None:
            rows.append({"subject": spec.name, "error": "could not be built or fetched", "cells": {},
                         "prepare_seconds": prep})
            continue
        log(f"{spec.name}: {lib}")
        r = row(spec, lib, seconds, work / re.sub(r"[^\w.-]+", "_", spec.name), log)
        r["prepare_seconds"] = prep
        rows.append(r)
    usable = [(s, lib, r) for (s, lib, _), r in zip(libs, rows) if lib is not None and "error" not in r]
    pinned = next((x for x in usable if x[2]["subject"] == f"llama-cpp-python {PINNED_VERSION}"), None) or \
        (usable[0] if usable else None)
    differences = []
    if pinned is not None and len(usable) > 1:
        cases, always = comparison_cases([Path(r["work"]) / "fuzz" / "corpus" for _, _, r in usable], random_cases)
        ref = (pinned[2]["subject"], pinned[1])
        others = [(r["subject"], lib) for s, lib, r in usable if lib != pinned[1]]
        log(f"differential: {len(cases):,} cases on {len(others) + 1} subjects against {ref[0]}")
        t = time.monotonic()
        found, counts, evaluated = differential(ref, others, cases, log, always=always)
        log(f"differential: {time.monotonic() - t:.0f} s, {sum(len(v) for v in found.values())} kinds of "
            "difference")
        by_name = {r["subject"]: r for _, _, r in usable}
        for other, kinds in found.items():
            differences += minimized_differences(by_name[ref[0]], by_name[other], kinds, corpus_dir, log)
        for r in rows:
            if r["subject"] in counts:
                r["differences_from_reference"] = counts[r["subject"]]
                r["cases_compared"] = evaluated.get(r["subject"], 0)
                r["cases_to_compare"] = len(cases)
    return {"tool": "dryz matrix", "reference": pinned[2]["subject"] if pinned else None, "rows": rows,
            "differences": differences, "fuzz_seconds": seconds,
            "wall_seconds": round(time.monotonic() - t0, 1),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def markdown(result: dict) -> str:
    cols = ["subject", "llama.cpp", "ABI", "DRY fingerprint", "certificate", "replay", "--parameters",
            "--window-caps", "restart sweep", f"fuzz {result['fuzz_seconds']} s", "differs from reference",
            "crashes", "time"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['subject']} | " + " | ".join([r["error"]] + [""] * (len(cols) - 2)) + " |")
            continue
        c = r["cells"]
        diff = r.get("differences_from_reference")
        diff_text = "reference" if r["subject"] == result["reference"] else (
            ", ".join(f"{k} {v:,}" for k, v in diff.items()) if diff else "none")
        if r.get("cases_compared", 0) < r.get("cases_to_compare", 0):
            diff_text += f" (partial: {r['cases_compared']:,} of {r['cases_to_compare']:,} cases compared)"
        lines.append("| " + " | ".join([
            r["subject"], str(r["commit"])[:9], str(r["abi"]), r.get("dry_fingerprint") or "(source unknown)",
            c["certificate"]["text"], c["replay"]["text"], c["parameters"]["text"], c["window_caps"]["text"],
            c["restarts"]["text"], c["fuzz"]["text"], diff_text, str(r["crashes"]),
            f"{r['seconds']:.0f} s"]) + " |")
    if result["differences"]:
        lines += ["", "| between | class | witness | window | n_ctx_train | shortest | reference | other |",
                  "|---|---|---|---|---|---|---|---|"]
        for d in result["differences"]:
            side = lambda s: s.get("klass") or f"{s.get('kind')}: {s.get('detail', '')}"  # noqa: E731
            lines.append(f"| {' / '.join(d['between'])} | {d['class']} | `{d['history']}` "
                         f"(allowed_length {d['case']['allowed_length']}, breakers {d['case']['breakers']}) | "
                         f"{d['case']['penalty_last_n']} | {d['case'].get('n_ctx_train', 4096)} | {d['shortest']} "
                         f"| {side(d['reference'])} | {side(d['other'])} |")
    return "\n".join(lines) + "\n"


def exit_code(result: dict) -> int:
    """dryz matrix's exit: 2 when a subject could not be had or a cell could not run (a crash or hang cell is a
    finding, not an error), 1 when a subject has a finding or differs from the reference, else 0."""
    rows = result["rows"]
    if any("error" in r or any(c["verdict"] == "error" for c in r["cells"].values()) for r in rows) or any(
            r.get("differences_from_reference", {}).get("error") for r in rows):
        return 2
    found = result["differences"] or any(
        c.get("exit") == 1 or c.get("failed") for r in rows for c in r["cells"].values())
    return 1 if found else 0


def command(versions, seconds, random_cases, workdir, corpus_dir, json_path, md_path, extra, log, echo) -> int:
    """`dryz matrix`, everything but option parsing: the subjects from --versions and --with, the matrix, the
    table (printed, and written where asked); the exit code."""
    specs = parse_versions(versions if versions is not None else ",".join(DEFAULT_VERSIONS)) if (
        versions != "" or not extra) else []
    for x in extra:
        parse(x)
        specs.append(Spec("subject", x))
    refuse_or_announce([describe(s.version) for s in specs if s.kind not in ("subject", "xllamacpp")], log)
    result = run_matrix(specs, seconds, Path(workdir).resolve(), Path(corpus_dir), log, random_cases)
    table_out(result, markdown(result), json_path, md_path, echo)
    return exit_code(result)


