"""dryz installed non-editable into a fresh venv works from outside the checkout: the corpus ships inside the
package, the fuzz harness is importable (the campaign writes its own launcher), nothing reads repository paths.
pip takes llama-cpp-python's wheel from its cache (built by the first install)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    base = tmp_path_factory.mktemp("installed")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # A copy of the checkout, so the build does not write into the source tree.
    src = base / "src"
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"], check=True,
                           capture_output=True).stdout.decode().split("\0")
    for f in filter(None, files):
        if (ROOT / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            (src / f).write_bytes((ROOT / f).read_bytes())
    p = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", str(src)],
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    work = base / "elsewhere"
    work.mkdir()
    return venv / "bin" / "dryz", work


def run(dryz, work, *args, timeout=600):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DRYZ_LIB", "LLAMA_CPP_LIB_PATH", "DRYZ_FAULT", "PYTHONPATH", "DRYZ_CORPUS")}
    return subprocess.run([str(dryz), *args], cwd=work, capture_output=True, text=True, timeout=timeout, env=env)


def test_installed_package_is_not_the_checkout(installed):
    dryz, work = installed
    py = dryz.parent / "python"
    p = subprocess.run([str(py), "-c", "import dryz, dryz.corpus; print(dryz.__file__); "
                        "print(dryz.corpus.PROJECT_DIR)"], cwd=work, capture_output=True, text=True)
    assert p.returncode == 0 and str(ROOT) not in p.stdout and "site-packages" in p.stdout, p.stdout + p.stderr


def test_exhaustive_replay_and_fuzz_from_outside_the_checkout(installed):
    dryz, work = installed
    e = run(dryz, work, "exhaustive", "-n", "7", "--json", "r.json")
    assert e.returncode == 0 and "CERTIFIED" in e.stdout, e.stdout + e.stderr
    r = run(dryz, work, "replay")
    assert r.returncode == 0 and "0 changed, 0 invalid" in r.stdout, r.stdout[-2000:] + r.stderr
    f = run(dryz, work, "fuzz", "--time", "10", "--jobs", "1", "--workdir", "fw")
    assert f.returncode == 0, f.stdout[-2000:] + f.stderr[-2000:]
    import json
    n = sum(1 for p in (ROOT / "corpus").rglob("*.json")  # the project's case entries over the symbol vocabulary
            if "engines" not in p.relative_to(ROOT / "corpus").parts  # (other engines' witnesses are not seeds)
            and "case" in (d := json.loads(p.read_text())) and "vocab" not in d["case"])
    assert n >= 31
    assert f"seeded {n} inputs" in f.stdout and (work / "fw" / "libfuzzer.log").exists()
