"""Two or more subjects compared case by case (`dryz compare`, and the matrix's comparison with the pinned
release): the same cases on every subject (the parameter-edge cases, the project corpus, the inputs each campaign
kept, random fuzz-decoder cases), each a verdict in the subject's own isolation worker (dryz.differential), every
kind of difference minimized with the DRY shrink passes under "the two subjects still differ the same way" and,
where asked, written to a corpus naming the subjects it separates (`separates`)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from .children import run as run_child
from .corpus import PROJECT_DIR, crash_entry, entries, entry_json, file_name, load_entry, subject_json, write_entry
from .decode.cases import decode
from .differential import Judge, classify, compare, edge_cases, random_cases as random_set, where
from .errors import DryzError
from .files import fail
from .judge import check_in
from .output import write_json
from .render import compare_ending, compare_text
from .shrink import reduce_case
from .subject.identity import subject_line
from .subject.isolation import Worker
from .subject.registry import as_spec, resolve_base


class CompareError(RuntimeError, DryzError):
    pass


def _feature_key(case, klass: str, a, b) -> tuple:
    """What kind of behaviour a difference is, for one witness per kind: its class, the sides' outcomes, and
    where the case sits on each parameter's edges."""
    side = lambda r: r.klass if r.kind == "ok" else r.detail.split(":")[0]  # noqa: E731
    return (klass, side(a), side(b)) + where(case)


def differential(ref: tuple[str, Path], others: list[tuple[str, Path]], cases, log, budget_s: float = 600,
                 always: int = 0):
    """Differences between the reference subject and each other one: {other: {feature key: (case, class,
    results)}} with the first case of each kind, and counts. The first `always` cases are compared whatever
    the budget."""
    servers = {ref[0]: Judge(as_spec(ref[1]))}
    servers.update({name: Judge(as_spec(lib)) for name, lib in others})
    found: dict[str, dict] = {name: {} for name, _ in others}
    counts: dict[str, dict] = {name: {} for name, _ in others}
    n = 0
    try:
        for case, other, klass, res in compare(servers, cases, ref[0], log=log, budget_s=budget_s, always=always):
            counts[other][klass] = counts[other].get(klass, 0) + 1
            if klass in ("error", "not-judged"):  # not judged on one side: counted, nothing claimed
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
    minimized_differences; CompareError when the subject cannot be had."""
    p = run_child(as_spec(spec), ["subject", "show"], 300, work)
    bad = p.failure(300)
    if bad or p.exit != 0:
        raise CompareError(f"{spec}: {bad or p.last_error()}")
    ident = json.loads(p.stdout)
    ident.pop("capabilities", None)
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


def _write_witness(case, klass, shortest, calls, ref_row, other_row, results, corpus_dir: Path) -> Path:
    """Judge the witness on the reference subject (in its isolation worker: the matrix process loads no
    library itself) and store it."""
    with Worker(ref_row["spec"], timeout=300) as w:
        try:
            verdict = check_in(w, case)
        except Exception:  # noqa: BLE001 (the reference could not judge it)
            return Path("(not written: the reference could not be judged)")
    if verdict.status == "crash":  # the reference itself crashed: a crash entry
        data = crash_entry(case, shortest, {"found_by": "dryz matrix", "predicate_calls": calls},
                           ref_row["identity"])
        data["separates"] = {"class": klass, "reference": {"subject": ref_row["subject"], "outcome": "crash"},
                             "others": [{"subject": other_row["subject"], "outcome": results[1].kind}]}
        return write_entry(corpus_dir, data)
    data = witness_entry(case, klass, shortest, calls, ref_row, other_row, results, verdict)
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


def compare_command(base, new: str, kept, random_cases, seconds, corpus_dir, json_path, log, echo) -> int:
    """`dryz compare`: the selected subject NEW against BASE (dryz.subject.registry.resolve_base), every difference minimized;
    exit 1 when they differ, 2 when a case could not be judged on one side."""
    base_lib = resolve_base(base, log)
    r = compare_pair(base_lib, new, [Path(k) for k in kept], random_cases, seconds, Path.cwd(),
                     Path(corpus_dir) if corpus_dir else None, log)
    echo(f"new       {r['new']['subject']}\n          {r['new']['spec']}\nbase      {r['base']['subject']}\n"
         f"          {r['base']['spec']}")
    if json_path:
        write_json(json_path, r)
    echo(compare_text(r))
    echo(compare_ending(r, json_path, new, base, base_lib))
    if r["counts"].get("error"):
        fail(f"{r['counts']['error']} case(s) could not be judged on one side: the harness is in doubt")
    return 1 if r["differences"] else 0
