"""The exhaustive certificate: the space a run covers, its verdict from the results alone, and merging shards.

judge() reads only the results JSON, so a merged certificate is judged by exactly the rule a single run is.
"""

from __future__ import annotations

from ..symbols import SYMBOLS
from ..errors import DryzError
from ..space import bell, case_count, expected_canonical, space_for
from ..subject.identity import same_subject
from ..trace_space import count_traces


class MergeError(ValueError, DryzError):
    """Shards that do not fit together (one-line reason)."""


def space_json(alphabet, max_length, specs, canonical: bool) -> dict:
    d = {"alphabet": alphabet if alphabet is not None else "all",
         "symbols": SYMBOLS[:alphabet] if alphabet is not None else "every alphabet size (equality patterns)",
         "min_length": 1, "max_length": max_length,
         "candidates": ("every symbol, logit 0" if not canonical else
                        "every symbol of the history, the breaker, one fresh symbol; logit 0"),
         "enumeration": "canonical" if canonical else "plain",
         "configs": [s.to_json() for s in specs],
         "expected_cases": case_count(alphabet, max_length) * len(specs) if alphabet is not None else None}
    if canonical:
        per = []
        for s in specs:
            sp = space_for(s, alphabet, max_length)
            e = expected_canonical(sp, max_length)
            if alphabet is None:  # independent of the walk and of the dynamic programme: Bell numbers
                shift = 1 if sp.breaker is not None else 0
                by_len = {str(n): bell(n + shift) for n in range(1, max_length + 1)}
            else:
                by_len = {str(n): c for n, c in e["histories_by_length"].items()}
            per.append(dict(sp.to_json(), name=s.name, expected_histories_by_length=by_len,
                            expected_canonical_cases=e["cases"]))
        d["canonical"] = per
    return d


def judge(r: dict) -> tuple[str, dict]:
    """(verdict, checks) from a results dict.

    `checks` are the harness's own: the oracles reproduce the periodic closed forms, the off-by-one reference
    is flagged (non-vacuity), multiplier 0 leaves every logit untouched, and the counts equal the space's
    formula (not judged on an unmerged shard). Any of them false: void (exit 2), the harness is in doubt.
    Otherwise a mismatch, an oracle self-disagreement, a periodic closed form or the ABI confirmation case the
    library misses is a finding: mismatch (exit 1), and so is a slice, a control or a trace the subject did not
    survive: crash (exit 1; a crashed slice's cases are not counted, so the coverage checks wait for a run without
    one; a crashed trace is counted, and names itself).
    Then partial (a clean shard) or certified."""
    space, configs, controls = r["space"], r["configs"], r["controls"]
    shard = r.get("shard")
    periodic = controls["periodic"]
    flagged = sum(c["off_by_one_flagged"] for c in configs)
    penalized = sum(c["penalized_cases"] for c in configs)
    # Non-vacuity: the comparison flags a wrong answer. A deliberately off-by-one reference must be flagged (a
    # space or shard without a penalized case cannot show it, the periodic cases always can); mismatches show it
    # as well (a library that is itself off by one leaves the reference unflagged: that is a finding, not void).
    mism = sum(c["mismatches"] for c in configs)
    off_by_one = flagged > 0 or mism > 0 or (penalized == 0 and periodic.get("off_by_one_flagged", 0) > 0)
    mz = controls["multiplier_zero"]
    checks = {"periodic_oracles": periodic.get("oracles_passed", periodic["passed"])}
    lost = sum(len(c.get("crashes", [])) for c in configs)  # slices the subject did not survive: not counted
    crashes = lost + ("crash" in mz) + sum(1 for f in periodic.get("findings", []) if f.get("kind") == "crash") \
        + sum(1 for c in configs if c.get("raised_cases"))  # histories it raised on: counted, the rest judged
    if off_by_one or not crashes:  # a crashed slice's cases are not counted: on a subject that crashes on every
        checks["off_by_one"] = off_by_one  # slice none is left to flag; its crash is the finding, not void
    if "crash" not in mz:  # a control the subject crashed on is the subject's finding, not the harness's doubt
        checks["multiplier_zero"] = mz["passed"]
    confirmation = controls.get("abi_confirmation")  # absent from results made before 2026-12-03
    if confirmation is not None:
        checks["abi_confirmation_oracles"] = confirmation["oracles_passed"]
    crashes += confirmation is not None and confirmation["class"] in ("crash", "memory")
    if shard is None and not lost:
        if space["expected_cases"] is not None:
            checks["covered_cases"] = sum(c["cases"] + c.get("not_judged_cases", 0) + c.get("raised_cases", 0)
                                          for c in configs) == space["expected_cases"]
        for c, e in zip(configs, space.get("canonical") or []):
            checks[f"canonical_{c['name']}"] = (
                c["canonical_histories_by_length"] == e["expected_histories_by_length"]
                and c["canonical_cases"] + c.get("canonical_not_judged_cases", 0)
                + c.get("canonical_raised_cases", 0) == e["expected_canonical_cases"])
    if configs and not any(c["cases"] for c in configs) and any(c.get("not_judged_cases") for c in configs):
        checks["something_judged"] = False  # the subject can express none of the space: nothing is certified
    dis = sum(c["oracle_disagreements"] for c in configs)
    # A broken promise is a finding too (a "documented-" class is the source's own stated limitation: shown,
    # not a finding); mismatches and oracle disagreements are counted per case above.
    promises = sum(n for c in configs for k, n in c.get("history_classes", {}).items() if k.startswith("promise-"))
    trace_dis = 0
    tr = r.get("traces")
    if tr is not None:  # dryz exhaustive --trace-events N: the trace space (dryz/enumerate/traces.py)
        checks["trace_counts"], trace_dis = judge_traces(tr)
        # a trace the subject died on: judged in an isolation worker, class crash or memory, the rest judged too
        crashes += sum(c.get("crashed_traces", 0) for c in tr["configs"])
    if not all(checks.values()):
        return "void", checks
    if crashes:
        return "crash", checks
    if mism or dis or promises or trace_dis or not periodic["passed"] or (
            confirmation is not None and not confirmation["passed"]):
        return "mismatch", checks
    return ("partial" if shard is not None else "certified"), checks


def judge_traces(tr: dict) -> tuple[bool, int]:
    """(the trace counts equal the closed form, recomputed here from n_max, alphabet and free; disagreements)."""
    expected = count_traces(tr["n_max"], tr["alphabet"], tr["free"])
    ok = bool(tr["configs"]) and all(c["traces"] == expected for c in tr["configs"])
    return ok, sum(c["disagreements"] for c in tr["configs"])


def traces_json(r: dict) -> dict:
    """The certificate's `traces` section from enumerate_traces' result (the subject is the certificate's)."""
    out = {k: v for k, v in r.items() if k not in ("subject", "schema", "count_ok")}
    out["free"] = r["configs"][0]["free"] if r["configs"] else True
    out["events"] = "accept one token (each symbol), apply (every symbol, logit 0), reset, clone; free last"
    out["expected_traces_per_config"] = r["configs"][0]["expected_traces"] if r["configs"] else 0
    return out


def totals(configs: list[dict]) -> dict:
    t = {k: sum(c[k] for c in configs) for k in ("cases", "mismatches", "oracle_disagreements")}
    nj = sum(c.get("not_judged_cases", 0) for c in configs)
    if nj:
        t["not_judged_cases"] = nj
    raised = sum(c.get("raised_cases", 0) for c in configs)
    if raised:
        t["raised_cases"] = raised
    return t


def canonical_totals(configs: list[dict]) -> dict | None:
    if not configs or configs[0].get("mode") != "canonical":
        return None
    return {k: sum(c[k] for c in configs) for k in ("canonical_histories", "canonical_cases",
                                                    "canonical_mismatches", "fresh_violations")}


_PARAMS = ("name", "penalty_last_n", "breakers", "multiplier", "base", "allowed_length", "mode", "comparison")


def _merge_config(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        if k in _PARAMS:
            if a.get(k) != v:
                raise MergeError(f"configuration {k} differs ({a.get(k)!r} vs {v!r})")
        elif k == "max_L":
            out[k] = max(a[k], v)
        elif k == "examples":
            out[k] = (a[k] + v)[:5]
        elif k == "seconds":
            out[k] = round(a[k] + v, 3)
        elif isinstance(v, dict):
            d = dict(a[k])
            for n, c in v.items():
                d[n] = d.get(n, 0) + c
            out[k] = dict(sorted(d.items(), key=lambda kv: (0, int(kv[0]), "") if kv[0].isdigit()
                                 else (1, 0, kv[0])))
        else:
            out[k] = a[k] + v
    return out


def merge(results: list[dict], names: list[str]) -> dict:
    """One certificate from shard results; MergeError when they do not fit together."""
    if not results:
        raise MergeError("no shard results given")
    for r, n in zip(results, names):
        if r.get("tool") != "dryz exhaustive":
            raise MergeError(f"{n}: not a dryz exhaustive result")
        if not r.get("shard"):
            raise MergeError(f"{n}: not a shard (run with --shard I/N)")
    first, fname = results[0], names[0]
    sha = first["subject"].get("libllama_sha256")
    abi = first["subject"].get("init_dry_abi")
    count, total, slicing = (first["shard"][k] for k in ("count", "total_tasks", "slicing"))
    seen: dict[int, str] = {}
    for r, n in zip(results, names):
        if r["subject"].get("libllama_sha256") != sha or not same_subject(r["subject"], first["subject"]):
            raise MergeError(f"{n}: different subject (libllama_sha256 {r['subject'].get('libllama_sha256')} "
                             f"vs {sha} in {fname})")
        if r["subject"].get("init_dry_abi") != abi:
            raise MergeError(f"{n}: different init_dry ABI ({r['subject'].get('init_dry_abi')} vs {abi} in {fname})")
        if r["space"] != first["space"]:
            raise MergeError(f"{n}: different space from {fname}")
        s = r["shard"]
        if (s["count"], s["total_tasks"], s["slicing"]) != (count, total, slicing):
            raise MergeError(f"{n}: different partition (shard {s['index']}/{s['count']} of {s['total_tasks']} "
                             f"slices vs {count} shards of {total} in {fname})")
        for j in s["tasks"]:
            if j in seen:
                raise MergeError(f"{n}: overlapping slices: slice {j} is also in {seen[j]}")
            seen[j] = n
    missing = sorted(set(range(total)) - set(seen))
    if missing:
        have = sorted({r["shard"]["index"] for r in results})
        raise MergeError(f"missing slices: {len(missing)} of {total} (shards present: "
                         f"{', '.join(map(str, have))} of {count})")
    configs = [dict(c) for c in first["configs"]]
    for r in results[1:]:
        configs = [_merge_config(a, b) for a, b in zip(configs, r["configs"])]
    periodic = dict(first["controls"]["periodic"], passed=all(r["controls"]["periodic"]["passed"] for r in results),
                    oracles_passed=all(r["controls"]["periodic"].get("oracles_passed", True) for r in results))
    confirmation = [r["controls"].get("abi_confirmation") for r in results]
    mz = dict(first["controls"]["multiplier_zero"])
    mz["passed"] = all(r["controls"]["multiplier_zero"]["passed"] for r in results)
    mz["nonzero_deltas"] = sum(r["controls"]["multiplier_zero"]["nonzero_deltas"] for r in results)
    flagged = sum(c["off_by_one_flagged"] for c in configs)
    out = {"tool": "dryz exhaustive", "verdict": None, "subject": first["subject"], "space": first["space"],
           "configs": configs, "totals": totals(configs)}
    ct = canonical_totals(configs)
    if ct:
        out["canonical_totals"] = ct
    out["controls"] = {"periodic": periodic, "off_by_one": {"flagged": flagged, "passed": flagged > 0},
                       "multiplier_zero": mz}
    if all(c is not None for c in confirmation):  # every shard judged it on the same subject
        out["controls"]["abi_confirmation"] = dict(
            confirmation[0], passed=all(c["passed"] for c in confirmation),
            oracles_passed=all(c["oracles_passed"] for c in confirmation))
    out["merged_from"] = [{"file": n, "shard": r["shard"]["index"], "wall_seconds": r.get("wall_seconds")}
                          for r, n in zip(results, names)]
    out["shards"] = count
    out["wall_seconds"] = round(sum(r.get("wall_seconds") or 0 for r in results), 3)  # summed over shards
    out["verdict"], out["checks"] = judge(out)
    return out
