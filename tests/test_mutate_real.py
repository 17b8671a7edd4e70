"""dryz mutate on real mutants of the pinned sdist, each built with `dryz subject build --patch` (about 15 s after
the version's first build): a Dask run that resumes, and the regression test of the audit's strength: each mutant
below must still be killed by the gate's mode that killed it (a mode that stops killing its mutant fails the
suite). These build in the version's plain work tree (the one tests/test_real_subjects.py builds), not in
`dryz mutate`'s own. Without a compiler or PyPI they skip, unless DRYZ_REQUIRE_BUILDS=1 (CI)."""

from __future__ import annotations

import json
import os

import pytest

from dryz.mutate.runner import Killer, done_ids, prepare, run, run_one

REQUIRE = os.environ.get("DRYZ_REQUIRE_BUILDS") == "1"
VERSION = "0.3.36"

# mutant id -> a deterministic gate mode that killed it in a `dryz mutate --sample 80` run on 0.3.36 (the old
# killer's names: exhaustive = certificate), chosen where few modes see it: get_overlapping_token_sequences
# returning at once (every mode), an arithmetic mutant only the restart-sequence modes and the fuzzers see, one only
# the replayed corpus and the vocabulary campaigns see. And two the certificate once called void (exit 2, the
# harness in doubt) and now kills: init reading multiplier 1 as DRY off (the ABI probes' first strength could
# not tell the ABI), and Step 2's naive match starting at -1 (every slice crashes, so no case is counted). And one
# every mode called void in the full run of 0.3.36 (exit 2, "cannot tell llama_sampler_init_dry's ABI"): init
# enabling DRY only for multiplier 0, so never where it must be on (the probes' multiplier-0 strength reads it).
KILLS: dict[str, str] = {"return-overlap-28d86c68": "certificate", "aor-apply-5fb5e880": "restarts",
                         "aor-overlap-8f889d6b": "replay", "const-init-56d0e002": "certificate",
                         "const-apply-d156bfdb": "certificate", "ror-init-f77d222d": "certificate"}


@pytest.fixture(scope="module")
def every():
    from dryz.mutate.operators import generate, sdist_source
    from dryz.subject.build import BuildError
    try:
        return {m.id: m for m in generate(sdist_source(VERSION))}
    except (BuildError, OSError) as e:
        if REQUIRE:
            raise
        pytest.skip(f"no sdist: {e}")


@pytest.fixture(scope="module")
def pristine():
    from dryz.subject.build import BuildError, build
    try:
        return build(VERSION, None, log=lambda m: None)
    except (BuildError, OSError) as e:
        if REQUIRE:
            raise
        pytest.skip(f"cannot build libllama {VERSION}: {str(e).splitlines()[0]}")


def test_a_dask_run_resumes(tmp_path, every, pristine):
    """Two mutants as Dask tasks (each worker builds its own): one stillborn (`--it` on an unordered_multimap
    iterator does not compile), one killed by the default certificate and not by llama.cpp's test-sampling
    (get_overlapping_token_sequences returns at once: no breaker is ever processed; test-sampling's DRY cases
    give token breakers directly). A second run finds both done and runs nothing."""
    distributed = pytest.importorskip("distributed")
    import dask
    mutants = [every["return-overlap-28d86c68"], every["aor-apply-40dd81b8"]]
    killer = Killer(("certificate",), 60.0)
    work = tmp_path / "w"
    plan = prepare(VERSION, killer, work, mutants, "test", {}, True, log=lambda m: None, tree=None)
    assert [r["status"] for r in plan["control"]["results"]] == ["survived", "survived"]
    with dask.config.set({"distributed.worker.profile.enabled": False}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                     silence_logs=40) as c, distributed.Client(c) as client:
        results = run(plan, mutants, killer, work, scheduler=client, log=lambda m: None)
    by = {r["id"]: r for r in results}
    assert by["aor-apply-40dd81b8"]["status"] == "stillborn" and "build_error" in by["aor-apply-40dd81b8"]
    killed = by["return-overlap-28d86c68"]
    assert killed["status"] == "killed" and killed["killed_by"] == ["certificate"]
    assert killed["upstream"]["status"] == "survived"
    assert "llama_sampler_init_dry" in killed["object_code"]["differs_in"]  # get_overlapping_... is inlined there
    assert done_ids(work) == set(by)
    stamp = {p.name: p.stat().st_mtime_ns for p in (work / "results").iterdir()}
    again = run(plan, mutants, killer, work, log=lambda m: (_ for _ in ()).throw(AssertionError(m))
                if m.startswith("[") else None)
    assert again == results and {p.name: p.stat().st_mtime_ns for p in (work / "results").iterdir()} == stamp


@pytest.mark.parametrize("mutant_id", sorted(KILLS))
def test_the_audit_still_kills(mutant_id, every, pristine, tmp_path):
    from dryz.mutate.objcode import fingerprint
    mode = KILLS[mutant_id]
    res = run_one(every[mutant_id].to_json(), VERSION, Killer((mode,), 60.0), fingerprint(pristine / "libllama.so"),
                  None, tree=None)
    assert res["status"] == "killed", json.dumps(res, indent=1)
    assert res["killed_by"] == [mode]
