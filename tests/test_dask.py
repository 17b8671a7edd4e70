"""The dask.distributed executor against a real LocalCluster on this machine: the same slices, merged in
slice order, give results identical to a single-process run (Python API and `dryz exhaustive --scheduler`)."""

import json
import subprocess
import sys

import pytest

distributed = pytest.importorskip(
    "distributed", reason="dask.distributed is not installed (pip install -e '.[test,dask]' to run this test)")

from dryz.config import parameter_names, space_config

SAME = ("verdict", "checks", "totals", "canonical_totals", "space", "subject")


def comparable(r):
    out = {k: r.get(k) for k in SAME}
    out["configs"] = [dict(c, seconds=0) for c in r["configs"]]
    return out


@pytest.fixture(scope="module")
def cluster():
    import dask
    # The worker's sampling profiler takes the GIL every 10 ms, and every libllama call releases it: off, as
    # the recipe in dryz.enumerate.dask_exec recommends (results do not depend on it, only speed).
    with dask.config.set({"distributed.worker.profile.enabled": False}), distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as c:
        with distributed.Client(c) as client:
            yield c, client


def test_dask_matches_single_process(tmp_path, cluster, lib):
    from dryz.enumerate.exhaustive import run_exhaustive
    _, client = cluster
    names = ["base", "window4", "breaker"] + parameter_names(["breaker"])[:3]
    for canonical in (True, False):
        specs = [space_config(x, 3, 7) for x in names]
        one = run_exhaustive(lib, 3, 7, specs, str(tmp_path / "one.json"), False, 1, canonical)
        dsk = run_exhaustive(lib, 3, 7, specs, str(tmp_path / "dask.json"), False, 2, canonical, scheduler=client)
        assert one["verdict"] == "certified" and comparable(dsk) == comparable(one)
        assert dsk["environment"]["executor"] == "dask.distributed"
    # The slices ran in the workers' own processes, each with its own subject.
    pids = client.run(lambda: __import__("os").getpid())
    assert len(set(pids.values())) == 2 and all(p != __import__("os").getpid() for p in pids.values())
    loaded = client.run(lambda: len(__import__("dryz.subject.registry").subject.registry._OPENED))
    assert set(loaded.values()) == {1}
    # A worker whose subject is not the submitting process's is refused before any slice runs.
    from dryz.enumerate.dask_exec import SchedulerError, require_subject
    with pytest.raises(SchedulerError, match="different subject"):
        require_subject(client, lib.spec, dict(lib.identity, libllama_sha256="0" * 64))


def test_cli_scheduler_and_shard(tmp_path, cluster):
    c, _ = cluster
    base = [sys.executable, "-m", "dryz", "exhaustive", "--all-alphabets", "-n", "6", "--no-progress"]
    one = tmp_path / "one.json"
    p = subprocess.run(base + ["-j", "1", "--json", str(one)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    dsk = tmp_path / "dask.json"
    p = subprocess.run(base + ["--scheduler", c.scheduler_address, "--json", str(dsk)], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    a, b = json.loads(one.read_text()), json.loads(dsk.read_text())
    assert comparable(b) == comparable(a) and b["environment"]["workers"] == 2  # the cluster's threads
    # A shard on the cluster is the same shard as a local one.
    s_loc, s_dsk = tmp_path / "s_loc.json", tmp_path / "s_dsk.json"
    for extra, out in (([], s_loc), (["--scheduler", c.scheduler_address], s_dsk)):
        p = subprocess.run(base + ["--shard", "2/3", "-j", "1", "--json", str(out)] + extra, capture_output=True,
                           text=True)
        assert p.returncode == 0, p.stderr
    a, b = json.loads(s_loc.read_text()), json.loads(s_dsk.read_text())
    assert comparable(b) == comparable(a) and b["shard"] == a["shard"]


def test_a_worker_that_cannot_open_the_subject_is_one_line(tmp_path):
    """Through the command line: a cluster whose workers cannot open the subject (here: their cache folder
    cannot be made) refuses the run before any slice, in one line naming the worker and why (exit 2)."""
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40, env={"DRYZ_CACHE": "/proc/dryz-cannot-write-here"}) as c:
        p = subprocess.run([sys.executable, "-m", "dryz", "exhaustive", "-n", "3", "--no-progress",
                            "--scheduler", c.scheduler_address, "--json", str(tmp_path / "x.json")],
                           capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dryz: error: Dask worker ") and "cannot open the subject" \
        in lines[0] and "internal error" not in p.stderr, p.stderr
    assert not (tmp_path / "x.json").exists() or json.loads((tmp_path / "x.json").read_text())["verdict"] != \
        "certified"


def test_unreachable_scheduler_is_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "dryz", "exhaustive", "-n", "3", "--no-progress",
                        "--scheduler", "tcp://127.0.0.1:1", "--json", str(tmp_path / "x.json")],
                       capture_output=True, text=True, timeout=120,
                       env=dict(__import__("os").environ, DRYZ_DASK_TIMEOUT="2s"))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "cannot reach the Dask scheduler" in p.stderr
