"""The ClusterFuzzLite / OSS-Fuzz layout (.clusterfuzzlite/): build.sh's packaging run locally into a temporary
$OUT (no docker: a compile_python_fuzzer that does what OSS-Fuzz's does without pyinstaller, dryz already
installed), then each fuzzer run as OSS-Fuzz runs it (-runs=N on its unpacked seed corpus, with its dictionary)
on the pinned build: it runs, and finds nothing."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FUZZERS = ("dry_case_fuzzer", "dry_trace_fuzzer")

# OSS-Fuzz's compile_python_fuzzer packages the target with pyinstaller into $OUT/<name>.pkg and writes an
# executable $OUT/<name> that runs it; here the executable runs the target with this interpreter.
SHIM = """#!/bin/bash -eu
fuzzer_path=$1
name=$(basename -s .py "$fuzzer_path")
printf '#!/bin/sh\\nexec %s %s "$@"\\n' "$DRYZ_TEST_PYTHON" "$(realpath "$fuzzer_path")" > "$OUT/$name"
chmod +x "$OUT/$name"
"""


def test_project_yaml_and_dockerfile():
    assert (ROOT / ".clusterfuzzlite" / "project.yaml").read_text().strip() == "language: python"
    docker = (ROOT / ".clusterfuzzlite" / "Dockerfile").read_text()
    assert "FROM gcr.io/oss-fuzz-base/base-builder-python" in docker
    assert "COPY .clusterfuzzlite/build.sh $SRC/" in docker


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ossfuzz")
    src, out, bin_ = tmp / "src", tmp / "out", tmp / "bin"
    for d in (src, out, bin_):
        d.mkdir()
    (src / "dryz").symlink_to(ROOT)
    shim = bin_ / "compile_python_fuzzer"
    shim.write_text(SHIM)
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = dict(os.environ, SRC=str(src), OUT=str(out), DRYZ_SKIP_INSTALL="1", DRYZ_TEST_PYTHON=sys.executable,
               PATH=os.pathsep.join([str(bin_), os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    p = subprocess.run(["bash", str(ROOT / ".clusterfuzzlite" / "build.sh")], env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return out


def _expected_seeds():
    """Seeds per fuzzer, counted from the corpus: case entries on the symbol vocabulary and the ABI confirmation
    case seed the case fuzzer; those and the trace entries seed the trace fuzzer."""
    from dryz.corpus import DEFAULT_DIR, entries, load_entry
    from dryz.enumerate.controls import abi_confirmation_case
    es = [load_entry(p) for p in entries(DEFAULT_DIR)]
    cases = {e.case.dumps() for e in es if e.case is not None and e.case.vocab is None}
    cases.add(abi_confirmation_case().dumps())
    traces = sum(1 for e in es if e.trace is not None)
    return len(cases), len(cases) + traces


def test_build_sh_packages_both_fuzzers(out):
    n_case, n_trace = _expected_seeds()
    for name, n in zip(FUZZERS, (n_case, n_trace)):
        exe = out / name
        assert exe.exists() and os.access(exe, os.X_OK)
        with zipfile.ZipFile(out / f"{name}_seed_corpus.zip") as z:
            names = z.namelist()
            assert len(names) == n and all("/" not in x for x in names)  # flat, as OSS-Fuzz unpacks it
            assert all(z.read(x).startswith(b"{") for x in names)  # the JSON the decoders read back
        words = (out / f"{name}.dict").read_text().splitlines()
        assert words and all(w.startswith('"') and w.endswith('"') for w in words)
        key = '"\\"history\\""' if name == "dry_case_fuzzer" else '"\\"events\\""'
        assert key in words


@pytest.mark.parametrize("name", FUZZERS)
def test_each_fuzzer_runs_as_oss_fuzz_runs_it(out, name, tmp_path):
    corpus = tmp_path / "corpus"
    with zipfile.ZipFile(out / f"{name}_seed_corpus.zip") as z:
        z.extractall(corpus)
    env = {k: v for k, v in os.environ.items() if k not in ("DRYZ_LIB", "DRYZ_SUBJECT", "LLAMA_CPP_LIB_PATH", "DRYZ_FAULT")}
    runs = 500 if name == "dry_case_fuzzer" else 100  # both past the seed corpus (libFuzzer counts it in)
    p = subprocess.run([str(out / name), f"-dict={out / f'{name}.dict'}", f"-runs={runs}", "-rss_limit_mb=2560",
                        "-timeout=25", str(corpus)], env=env, cwd=tmp_path, capture_output=True, text=True,
                       timeout=600)
    log = p.stdout + p.stderr
    assert p.returncode == 0, log[-3000:]
    import re
    done = re.search(r"Done (\d+) runs", log)  # libFuzzer stops at -runs, or just past it within a batch
    assert done and runs <= int(done.group(1)) < runs + 50, log[-3000:]
    assert "Dictionary:" in log and "INITED" in log
    assert not list(tmp_path.glob("crash-*")) and "==ERROR" not in log
