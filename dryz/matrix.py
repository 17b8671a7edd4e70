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

from .subject.build import PINNED_VERSION
from .subject.cache import cache_dir
from .errors import DryzError

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
    from .subject.build import build
    return f"libllama:{build(spec.version, None, log=log)}"


def as_spec(subject) -> str:
    """A subject spec from a spec or a libllama path."""
    s = str(subject)
    from .subject.registry import KINDS
    return s if s.split(":", 1)[0] in KINDS and ":" in s else f"libllama:{s}"


def _dryz(spec: str, args, timeout: float, cwd: Path) -> subprocess.CompletedProcess | str:
    env = {k: v for k, v in os.environ.items() if k not in ("DRYZ_LIB", "DRYZ_SUBJECT", "LLAMA_CPP_LIB_PATH",
                                                           "DRYZ_FAULT")}
    try:
        return subprocess.run([sys.executable, "-m", "dryz", "--subject", as_spec(spec), *args],
                              capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    except subprocess.TimeoutExpired:
        return f"hang (no result within {timeout:.0f} s)"


def _outcome(p) -> str:
    """A cell's failure to run at all, or None."""
    if isinstance(p, str):
        return p
    if p.returncode < 0:
        import signal
        return f"crash ({signal.Signals(-p.returncode).name})"
    if p.returncode not in (0, 1):
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        return f"error (exit {p.returncode}: {last[:120]})"
    return ""


def _certificate_cell(lib, work: Path, name: str, extra: list[str]) -> dict:
    path = work / f"{name}.json"
    path.unlink(missing_ok=True)
    t = time.monotonic()
    p = _dryz(lib, ["exhaustive", *extra, "--json", str(path), "--no-progress"], CELL_TIMEOUT, work)
    cell = {"seconds": round(time.monotonic() - t, 1)}
    bad = _outcome(p)
    if bad:
        return dict(cell, text=bad, failed=True)
    r = json.loads(path.read_text())
    per = r["controls"]["periodic"]
    cell.update(verdict=r["verdict"], cases=r["totals"]["cases"], mismatches=r["totals"]["mismatches"],
                periodic_library_failures=per.get("library_failures", 0), exit=p.returncode)
    text = r["verdict"].upper()
    if r["totals"]["mismatches"]:
        text += f" ({r['totals']['mismatches']:,} mismatches)"
    if per.get("library_failures"):
        text += f" (periodic: {per['library_failures']} missed)"
    cell["text"] = text
    return cell


def _replay_cell(lib, work: Path) -> dict:
    t = time.monotonic()
    p = _dryz(lib, ["replay"], CELL_TIMEOUT, work)
    cell = {"seconds": round(time.monotonic() - t, 1)}
    bad = _outcome(p)
    invalid = not isinstance(p, str) and p.returncode == 2 and "replayed" in p.stdout
    if bad and not invalid:
        return dict(cell, text=bad, failed=True)
    changed = [Path(ln.split()[1].rstrip(":")).name + " -> " + ln.rsplit("now ", 1)[1].split(" (")[0]
               for ln in p.stdout.splitlines() if ln.startswith("CHANGED")]
    m = re.search(r"replayed (\d+) entries: (\d+) as expected, (\d+) changed, (\d+) invalid", p.stdout)
    n, ok = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    cell.update(entries=n, as_expected=ok, changed=changed, exit=p.returncode,
                text=f"{ok}/{n} as expected" + (f", {len(changed)} changed" if changed else "")
                + (" (invalid entries)" if invalid else ""))
    if invalid:
        cell["failed"] = True
    return cell


def _restarts_cell(lib, work: Path) -> dict:
    path = work / "restarts.json"
    path.unlink(missing_ok=True)
    t = time.monotonic()
    p = _dryz(lib, ["restarts", "--json", str(path)], CELL_TIMEOUT, work)
    cell = {"seconds": round(time.monotonic() - t, 1)}
    bad = _outcome(p)
    if bad:
        return dict(cell, text=bad, failed=True)
    counts: dict[str, int] = {}
    for c in json.loads(path.read_text())["configs"]:
        for k, v in c["counts"].items():
            counts[k] = counts.get(k, 0) + v
    cell.update(counts=counts, exit=p.returncode,
                text=", ".join(f"{k} {v:,}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])))
    return cell


def _fuzz_cell(lib, work: Path, seconds: int) -> dict:
    path = work / "fuzz.json"
    t = time.monotonic()
    path.unlink(missing_ok=True)  # a summary left by an earlier matrix run is not this run's
    p = _dryz(lib, ["fuzz", "--time", str(seconds), "--jobs", "1", "--workdir", str(work / "fuzz"),
                    "--json", str(path)], seconds + CELL_TIMEOUT, work)
    cell = {"seconds": round(time.monotonic() - t, 1)}
    bad = _outcome(p)
    if isinstance(p, str) or not path.exists() or (bad and p.returncode != 2):
        return dict(cell, text=bad or "no summary", failed=True)
    s = json.loads(path.read_text())
    classes: dict[str, int] = {}
    for f in s["findings"]:
        classes[f["klass"]] = classes.get(f["klass"], 0) + 1
    cell.update(execs=s["execs"], findings=len(s["findings"]), classes=classes, exit=p.returncode,
                text=f"{s['execs']:,} execs, " + (", ".join(f"{k} {v}" for k, v in classes.items())
                                                  if classes else "no findings")
                + (" (crash files that do not reproduce: harness in doubt)" if p.returncode == 2 else ""))
    if p.returncode == 2:
        cell["failed"] = True
    return cell


def row(spec: Spec, lib: Path, seconds: int, work: Path, log) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    p = _dryz(lib, ["subject", "show"], 300, work)
    bad = _outcome(p)
    if bad or p.returncode != 0:
        return {"subject": spec.name, "spec": lib, "error": bad or p.stderr.strip(), "cells": {}}
    ident = json.loads(p.stdout)
    if spec.kind == "subject":  # named by what it says it is
        from .subject.identity import subject_line
        name = subject_line(ident)
    else:
        name = ident.get("distribution", spec.name) if spec.kind == "xllamacpp" else spec.name
    spec = Spec(spec.kind, name.split()[-1]) if spec.kind == "xllamacpp" else spec
    cells = {}
    for name, fn in (("certificate", lambda: _certificate_cell(lib, work, "certificate", [])),
                     ("replay", lambda: _replay_cell(lib, work)),
                     ("parameters", lambda: _certificate_cell(lib, work, "parameters", ["--parameters"])),
                     ("window_caps", lambda: _certificate_cell(lib, work, "window_caps", ["--window-caps"])),
                     ("restarts", lambda: _restarts_cell(lib, work)),
                     ("fuzz", lambda: _fuzz_cell(lib, work, seconds))):
        log(f"  {spec.name}: {name}")
        cells[name] = fn()
        log(f"  {spec.name}: {name}: {cells[name]['text']} ({cells[name]['seconds']} s)")
    built = ident.get("built_by_dryz") or {}
    return {"subject": name if spec.kind == "subject" else spec.name, "spec": lib, "identity": ident,
            "work": str(work),
            "commit": built.get("vendored_commit", ident.get("llama_cpp_commit")) or "?",
            "abi": ident["init_dry_abi"], "dry_fingerprint": built.get("dry_fingerprint"),
            "cells": cells, "crashes": sum(1 for c in cells.values() if c.get("failed")
                                           and c["text"].startswith(("crash", "hang")))
            + sum(c.get("classes", {}).get("crash", 0) for c in cells.values()),
            "seconds": round(time.monotonic() - t0, 1)}


# -- differences between subjects ----------------------------------------------------------------------


def _feature_key(case, klass: str, a, b) -> tuple:
    """What kind of behaviour a difference is, for one witness per kind: its class, the sides' outcomes, and
    where the case sits on each parameter's edges."""
    side = lambda r: r.klass if r.kind == "ok" else r.detail.split(":")[0]  # noqa: E731
    return (klass, side(a), side(b)) + where(case)


def where(case) -> tuple[str, str]:
    """Where a case sits on the window's edges: (-1 | <-1 | 0 | >0, n_ctx_train<window | n_ctx_train<=0 | -)."""
    last_n = case.penalty_last_n
    window = "-1" if last_n == -1 else "<-1" if last_n < -1 else "0" if last_n == 0 else ">0"
    cap = "n_ctx_train<window" if 0 < case.n_ctx_train < min(max(last_n, 0) or 1 << 30, len(case.history)) \
        else "n_ctx_train<=0" if case.n_ctx_train <= 0 else "-"
    return window, cap


def differential(ref: tuple[str, Path], others: list[tuple[str, Path]], cases, log, budget_s: float = 600,
                 always: int = 0):
    """Differences between the reference subject and each other one: {other: {feature key: (case, class,
    results)}} with the first case of each kind, and counts. The first `always` cases are compared whatever
    the budget."""
    from .differential import Judge, compare
    servers = {ref[0]: Judge(as_spec(ref[1]))}
    servers.update({name: Judge(as_spec(lib)) for name, lib in others})
    found: dict[str, dict] = {name: {} for name, _ in others}
    counts: dict[str, dict] = {name: {} for name, _ in others}
    n = 0
    try:
        for case, other, klass, res in compare(servers, cases, ref[0], log=log, budget_s=budget_s, always=always):
            counts[other][klass] = counts[other].get(klass, 0) + 1
            if klass == "error":  # dryz could not judge it on one side: counted, nothing claimed
                continue
            key = _feature_key(case, klass, res[ref[0]], res[other])
            found[other].setdefault(key, (case, klass, res))
            n += 1
    finally:
        evaluated = {name: s.evaluations for name, s in servers.items()}
        for s in servers.values():
            s.close()
    return found, counts, evaluated


def minimize_difference(a, b, case):
    """Shrink a case two subjects' servers treat differently, keeping the difference (same class, same outcome
    on each side); returns (case, shortest, predicate calls, results on both)."""
    from .differential import classify
    from .shrink import reduce_case

    def sig(c):
        ra, rb = a.run(c), b.run(c)
        side = lambda r: r.klass if r.kind == "ok" else r.kind + ":" + r.detail.split(":")[0]  # noqa: E731
        return (classify(ra, rb), side(ra), side(rb))
    target = sig(case)
    reduced, shortest, calls = reduce_case(case, target, sig, log=None)
    return reduced, shortest, calls, (a.run(reduced), b.run(reduced))


def witness_entry(case, klass: str, shortest: str, calls: int, ref_row: dict, other_row: dict, results,
                  ref_verdict) -> dict:
    """A corpus entry for a difference: replayed on the pinned subject like any entry (expect = its class
    there), plus `separates`: the two subjects, the class, and what each did."""
    from .corpus import entry_json, subject_json

    def side(row, r):
        d = {"subject": row["subject"], "identity": subject_json(row["identity"]),
             "dry_fingerprint": row.get("dry_fingerprint"), "outcome": r.kind}
        if r.kind == "ok":
            d.update(klass=r.klass, logit_bits=list(r.bits), sorted=r.sorted)
        else:
            d["detail"] = r.detail
        return d
    data = entry_json(case, ref_verdict, expect=ref_verdict.klass, shortest=shortest,
                      provenance={"found_by": "dryz matrix", "predicate_calls": calls},
                      subject=ref_row["identity"], note=f"{klass} between {ref_row['subject']} and "
                                                        f"{other_row['subject']}")
    data["separates"] = {"class": klass, "reference": side(ref_row, results[0]),
                         "others": [side(other_row, results[1])]}
    return data


def comparison_cases(kept_dirs, random_cases: int) -> tuple[list, int]:
    """What two subjects are compared on: the parameter-edge cases and the project corpus's cases (not its
    traces), then up to 500 inputs kept by each campaign (its corpus directory) and `random_cases`
    fuzz-decoder cases; and how many come first (edges and corpus: compared in full whatever the budget)."""
    from .differential import edge_cases, random_cases as random_set
    from .corpus import PROJECT_DIR, entries, load_entry
    from .decode.cases import decode
    cases = edge_cases()
    cases += [e.case for e in map(load_entry, entries(PROJECT_DIR)) if e.case is not None]  # not traces
    always = len(cases)
    for kept in kept_dirs:  # what each campaign kept
        for p in sorted(Path(kept).glob("*"))[:500] if Path(kept).is_dir() else []:
            try:
                cases.append(decode(p.read_bytes()))
            except Exception:  # noqa: BLE001 (an input the decoder refuses is no case)
                pass
    return cases + random_set(random_cases), always


def minimized_differences(ref_row: dict, other_row: dict, kinds: dict, corpus_dir: Path | None, log) -> list[dict]:
    """Each kind of difference (differential()'s {feature key: (case, class, results)} for one subject) shrunk
    to a witness (two kinds that shrink to one case are one behaviour), optionally written to corpus_dir.
    A row is {"subject", "spec", "identity", "dry_fingerprint"?}, as the matrix's rows are."""
    from .differential import Judge
    a, b = Judge(ref_row["spec"]), Judge(other_row["spec"])
    try:
        minimized = [(key, klass) + minimize_difference(a, b, case) for key, (case, klass, res) in kinds.items()]
    finally:
        a.close()
        b.close()
    out, seen = [], set()
    for key, klass, reduced, shortest, calls, final in minimized:
        if reduced.dumps() in seen:  # two kinds that shrink to one witness are one behaviour
            continue
        seen.add(reduced.dumps())
        d = {"between": [ref_row["subject"], other_row["subject"]], "class": klass, "kind": list(key),
             "shortest": shortest, "predicate_calls": calls, "case": reduced.to_json(), "history": reduced.symbols,
             "reference": final[0].__dict__ if final[0].kind != "ok" else {"klass": final[0].klass},
             "other": final[1].__dict__ if final[1].kind != "ok" else {"klass": final[1].klass}}
        if corpus_dir is not None:
            d["written"] = str(_write_witness(reduced, klass, shortest, calls, ref_row, other_row, final,
                                              corpus_dir))
        log(f"  -> {reduced.symbols!r} window {reduced.penalty_last_n}, shortest {shortest}"
            f"{', written ' + d['written'] if 'written' in d else ''}")
        out.append(d)
    return out


def subject_row(spec: str, work: Path) -> dict:
    """A subject's identity, read in a child process (this process loads no library): a row for
    minimized_differences; MatrixError when the subject cannot be had."""
    p = _dryz(spec, ["subject", "show"], 300, work)
    bad = _outcome(p)
    if bad or p.returncode != 0:
        raise MatrixError(f"{spec}: {bad or (p.stderr.strip().splitlines() or ['cannot be had'])[-1]}")
    from .subject.identity import subject_line
    ident = json.loads(p.stdout)
    built = ident.get("built_by_dryz") or {}
    return {"subject": subject_line(ident), "spec": as_spec(spec), "identity": ident,
            "dry_fingerprint": built.get("dry_fingerprint")}


def compare_pair(base: str, new: str, kept_dirs, random_cases: int, budget_s: float, work: Path,
                 corpus_dir: Path | None, log) -> dict:
    """`dryz compare`: the matrix's comparison for two subjects, NEW against BASE (the reference): the same
    cases, the same classes, each kind of difference minimized to a witness."""
    t0 = time.monotonic()
    ref_row, new_row = subject_row(base, work), subject_row(new, work)
    if ref_row["subject"] == new_row["subject"]:  # two builds that name themselves alike: keep them apart
        ref_row["subject"] += " [base]"
        new_row["subject"] += " [new]"
    cases, always = comparison_cases(kept_dirs, random_cases)
    log(f"differential: {len(cases):,} cases, {new_row['subject']} against {ref_row['subject']}")
    found, counts, evaluated = differential((ref_row["subject"], base), [(new_row["subject"], new)], cases, log,
                                            budget_s, always)
    t = time.monotonic()
    diffs = minimized_differences(ref_row, new_row, found[new_row["subject"]], corpus_dir, log)
    return {"tool": "dryz compare", "base": ref_row, "new": new_row, "cases": len(cases), "always": always,
            "compared": evaluated.get(new_row["subject"], 0), "counts": counts[new_row["subject"]],
            "differences": diffs, "compare_seconds": round(t - t0, 1),
            "minimize_seconds": round(time.monotonic() - t, 1), "wall_seconds": round(time.monotonic() - t0, 1)}


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


def _write_witness(case, klass, shortest, calls, ref_row, other_row, results, corpus_dir: Path) -> Path:
    """Judge the witness on the reference subject (in its isolation worker: the matrix process loads no
    library itself) and store it."""
    from .judge import check_in
    from .corpus import write_entry
    from .subject.isolation import Worker
    with Worker(ref_row["spec"], timeout=300) as w:
        try:
            verdict = check_in(w, case)
        except Exception:  # noqa: BLE001 (the reference could not judge it)
            return Path("(not written: the reference could not be judged)")
    if verdict.status == "crash":  # the reference itself crashed: a crash entry
        from .corpus import crash_entry
        data = crash_entry(case, shortest, {"found_by": "dryz matrix", "predicate_calls": calls},
                           ref_row["identity"])
        data["separates"] = {"class": klass, "reference": {"subject": ref_row["subject"], "outcome": "crash"},
                             "others": [{"subject": other_row["subject"], "outcome": results[1].kind}]}
        return write_entry(corpus_dir, data)
    data = witness_entry(case, klass, shortest, calls, ref_row, other_row, results, verdict)
    from .corpus import file_name
    existing = Path(corpus_dir) / file_name(data)
    if existing.exists():  # the same witness separates the reference from several subjects: one entry names all
        try:
            old = json.loads(existing.read_text())["separates"]
            if old["class"] == klass and old["reference"]["subject"] == ref_row["subject"]:
                names = {o["subject"] for o in data["separates"]["others"]}
                data["separates"]["others"] = [o for o in old["others"] if o["subject"] not in names] + \
                    data["separates"]["others"]
                data["note"] = f"{klass} between {ref_row['subject']} and " + \
                    ", ".join(o["subject"] for o in data["separates"]["others"])
        except (OSError, ValueError, KeyError):
            pass
    return write_entry(corpus_dir, data)


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
    if any("error" in r or any(c.get("failed") and not c["text"].startswith(("crash", "hang"))
                               for c in r["cells"].values()) for r in rows) or any(
            r.get("differences_from_reference", {}).get("error") for r in rows):
        return 2
    found = result["differences"] or any(
        c.get("exit") == 1 or c.get("failed") for r in rows for c in r["cells"].values())
    return 1 if found else 0


def command(versions, seconds, random_cases, workdir, corpus_dir, json_path, md_path, extra, log, echo) -> int:
    """`dryz matrix`, everything but option parsing: the subjects from --versions and --with, the matrix, the
    table (printed, and written where asked); the exit code."""
    from .output import write_json
    from .subject.registry import parse
    specs = parse_versions(versions if versions is not None else ",".join(DEFAULT_VERSIONS)) if (
        versions != "" or not extra) else []
    for x in extra:
        parse(x)
        specs.append(Spec("subject", x))
    result = run_matrix(specs, seconds, Path(workdir).resolve(), Path(corpus_dir), log, random_cases)
    table = markdown(result)
    echo(table)
    if json_path:
        write_json(json_path, result)
    if md_path:
        Path(md_path).write_text(table)
    return exit_code(result)


def compare_command(base, new: str, kept, random_cases, seconds, corpus_dir, json_path, log, echo) -> int:
    """`dryz compare`: the selected subject NEW against BASE (dryz.gate.resolve_base), every difference minimized;
    exit 1 when they differ, 2 when a case could not be judged on one side."""
    from .gate import resolve_base
    from .files import fail
    from .output import write_json
    from .render import compare_text
    base_lib = resolve_base(base, log)
    r = compare_pair(base_lib, new, [Path(k) for k in kept], random_cases, seconds, Path.cwd(),
                     Path(corpus_dir) if corpus_dir else None, log)
    echo(f"new       {r['new']['subject']}\n          {r['new']['spec']}\nbase      {r['base']['subject']}\n"
         f"          {r['base']['spec']}")
    echo(compare_text(r))
    if json_path:
        write_json(json_path, r)
    if r["counts"].get("error"):
        fail(f"{r['counts']['error']} case(s) could not be judged on one side: the harness is in doubt")
    return 1 if r["differences"] else 0
