"""Instructions per fuzz input, counted by valgrind (callgrind): a figure this VM's drifting clock cannot blur.

The harness runs under libFuzzer as a campaign runs it (fuzz/dry_fuzz.py, its instrumentation included), over
libFuzzer's seed pass (-runs=0: each input once) on two sets of random inputs of one band of history lengths,
SMALL and LARGE of them; (instructions(LARGE) - instructions(SMALL)) / (LARGE - SMALL) is the per-input
cost, start-up cancelled. Deterministic to the instruction on one machine: OPENBLAS_NUM_THREADS=1 (numpy's
OpenBLAS threads otherwise spin-wait a varying amount), PYTHONHASHSEED=0, libFuzzer -seed=1 and
-rss_limit_mb=0 (no RSS-polling thread). Instructions are not seconds, but for the same interpreter and
libraries they order builds reliably; bench/fuzz_libfuzzer_band.py gives the wall-clock rate.

valgrind cannot decode AVX-512, which llama-cpp-python's default build (GGML_NATIVE) uses on machines that
have it, so the count runs in a separate Python environment with the library built without it:

    python3 -m venv /tmp/cg && CMAKE_ARGS=-DGGML_NATIVE=OFF /tmp/cg/bin/pip install --no-cache-dir \\
        llama-cpp-python==0.3.36 numpy click gguf 'atheris>=3.0,<3.2'        # ~6 min on 2 cores

Usage: python bench/fuzz_instructions.py --python /tmp/cg/bin/python [--band LO HI] [--uninstrumented]
           [--inputs DIR] [BUILD ...]
  BUILD: a git revision of this repository or a directory holding dryz/ and fuzz/ (default: the working tree);
  each build's dryz/_drive.c is compiled for --python. (--uninstrumented needs a harness that honours
  DRYZ_INSTRUMENT=0, from commit 2c9eafe on.)
  --inputs DIR: count over the files of DIR (e.g. inputs recorded from a campaign) instead of random inputs.
Writes the record bench/records/fuzz_instructions.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from record import command_line, write_record

REPO = Path(__file__).resolve().parent.parent
SMALL, LARGE = 100, 600

# Run by the measured Python (its headers and ABI): fuzz_ab.build_drive, as pip builds the call sequencer
# (dryz/subject/_drive.c; dryz/_drive.c before 2026-12-02).
BUILD_DRIVE = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from pathlib import Path
from fuzz_ab import build_drive
root = Path(sys.argv[1])
new = root / "dryz" / "subject" / "_drive.c"
if new.exists():
    build_drive(new, root, "dryz.subject._drive")
else:
    build_drive(root / "dryz" / "_drive.c", root, "dryz._drive")
"""


def materialize(spec: str, into: Path, python: str) -> Path:
    """The build as into/<name>/{dryz,fuzz}, its _drive compiled for `python`."""
    dst = into / (spec.replace("/", "_").strip("._") or "worktree")
    src = Path(spec)
    if (src / "dryz").is_dir():
        shutil.copytree(src / "dryz", dst / "dryz", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
        shutil.copytree(src / "fuzz", dst / "fuzz", ignore=shutil.ignore_patterns("__pycache__"))
    else:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", spec, "dryz", "fuzz"], capture_output=True)
        if archive.returncode:
            sys.exit(f"fuzz_instructions: {spec!r} is neither a directory with dryz/ nor a git revision")
        dst.mkdir(parents=True)
        subprocess.run(["tar", "-x", "-C", str(dst)], input=archive.stdout, check=True)
    r = subprocess.run([python, "-c", BUILD_DRIVE, str(dst)], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"fuzz_instructions: building {spec}'s dryz/_drive.c failed:\n{r.stderr[-2000:]}")
    return dst


def instructions(python: str, build: Path, inputs: Path, instrumented: bool) -> int:
    out = Path(tempfile.mkdtemp())
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0", PYTHONPATH=str(build),
               DRYZ_CORPUS=str(REPO / "corpus"), DRYZ_INSTRUMENT="1" if instrumented else "0")
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", python,
                        str(build / "fuzz" / "dry_fuzz.py"), "-runs=0", "-rss_limit_mb=0", "-seed=1",
                        "-max_len=4096", str(out), str(inputs)], env=env, capture_output=True, text=True)
    shutil.rmtree(out)
    for line in r.stderr.splitlines():
        if "Collected :" in line:
            return int(line.split(":")[-1].replace(",", ""))
    sys.exit(f"fuzz_instructions: callgrind gave no count for {build}:\n{r.stderr[-2000:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("builds", nargs="*", default=[str(REPO)])
    ap.add_argument("--python", required=True, help="a Python whose llama-cpp-python was built without AVX-512")
    ap.add_argument("--band", nargs=2, type=int, default=(0, 257))
    ap.add_argument("--inputs", help="a directory of inputs to count over instead of random ones")
    ap.add_argument("--uninstrumented", action="store_true")
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("fuzz_instructions: valgrind is not installed")
    work = Path(tempfile.mkdtemp())
    small, large = work / "small", work / "large"
    small.mkdir()
    large.mkdir()
    if a.inputs:
        files = sorted(Path(a.inputs).iterdir())
        if len(files) < 2:
            sys.exit(f"fuzz_instructions: {a.inputs} holds fewer than 2 inputs")
        datas = [f.read_bytes() for f in files]
        what = f"{len(datas)} inputs of {a.inputs}"
    else:
        sys.path.insert(0, str(REPO))
        from dryz.decode.cases import decode
        rng = np.random.default_rng(0)
        lo, hi = a.band
        datas = []
        while len(datas) < LARGE:
            data = rng.integers(0, 256, int(rng.integers(0, 3000))).astype(np.uint8).tobytes()
            if lo <= len(decode(data).history) < hi:
                datas.append(data)
        what = f"random inputs, histories {lo}..{hi - 1}"
    cut = min(SMALL, len(datas) // 6)
    for i, data in enumerate(datas):
        (large / f"{i:06d}").write_bytes(data)
        if i < cut:
            (small / f"{i:06d}").write_bytes(data)
    rows = []
    for spec in a.builds:
        build = materialize(spec, work / "builds", a.python)
        per_input = ((instructions(a.python, build, large, not a.uninstrumented)
                      - instructions(a.python, build, small, not a.uninstrumented)) / (len(datas) - cut))
        print(f"{spec:>24}: {per_input:10,.0f} instructions/input  ({what}"
              f"{', dryz uninstrumented' if a.uninstrumented else ''})", flush=True)
        rows.append({"build": spec, "instructions_per_input": round(per_input)})
    shutil.rmtree(work)
    out = write_record("fuzz_instructions", command_line(),
                       {f"{r['build']} instructions/input": r["instructions_per_input"] for r in rows},
                       inputs=what, counted=len(datas) - cut, instrumented=not a.uninstrumented, rows=rows)
    print(f"record: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
