"""Fuzz target throughput of two builds of dryz, interleaved in one process: for a noisy machine.

This VM's wall clock drifts by 15-30% between identical runs, more than most single changes gain. Here both
builds run in the same process on the same inputs, alternating in chunks of 100 inputs over 8 rounds, and
each chunk keeps its best time, so a slow spell hits both builds alike.

Usage: python bench/fuzz_ab.py X Y [--instrumented] [--band LO HI] [--traces [--inputs N]]
  X, Y: a git revision of this repository (e.g. HEAD~3) or a directory holding a dryz/ package.
  --instrumented: each build instrumented as its fuzz harness instruments dryz (its instrument()).
  --band: histories LO..HI-1 tokens (default 0 257).
  --traces: the trace target (dryz fuzz --traces: test_one_trace) on random inputs of 0..700 bytes (about 50
  applies each), chunks of 20 inputs; --inputs: how many (default 600); --corpus DIR: the files of DIR instead
  (e.g. what a campaign kept: its work directory's corpus/).
Each build's call sequencer (dryz/subject/_drive.c, or dryz/_drive.c before 2026-12-02) is compiled for it with
setuptools (as pip builds it).
Writes the record bench/records/fuzz_ab.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere).
"""

import argparse
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from record import command_line, write_record

REPO = Path(__file__).resolve().parent.parent
OLD_HARNESS = "fuzz/dry_fuzz.py"  # where builds before dryz/fuzz/harness.py kept the harness


def _first(*names):
    """The first of these modules that exists (a module moved between builds)."""
    for n in names:
        try:
            return importlib.import_module(n)
        except ModuleNotFoundError as e:
            if e.name != n:
                raise
    raise ModuleNotFoundError(names[-1])


def materialize(spec: str, into: Path, name: str) -> None:
    """Copy build `spec` (a directory with dryz/, or a git revision) to into/name, imports renamed."""
    src = Path(spec)
    tmp = None
    if not (src / "dryz").is_dir():
        tmp = Path(tempfile.mkdtemp())
        archive = subprocess.run(["git", "-C", str(REPO), "archive", spec, "dryz", "fuzz"], capture_output=True)
        if archive.returncode:
            sys.exit(f"fuzz_ab: {spec!r} is neither a directory with dryz/ nor a git revision")
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
        src = tmp
    dst = into / name
    shutil.copytree(src / "dryz", dst, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    if (src / OLD_HARNESS).exists() and not (dst / "fuzz" / "harness.py").exists():
        shutil.copy(src / OLD_HARNESS, into / f"{name}_harness.py")
    for rel in ("subject/_drive.c", "_drive.c"):  # (without one the build uses its ctypes path)
        if (dst / rel).exists():
            build_drive(dst / rel, into, name + "." + rel[:-2].replace("/", "."))
            break
    for p in dst.rglob("*.py"):
        text = re.sub(r"\b(from|import) dryz\b", rf"\1 {name}", p.read_text())
        # module paths named in strings (the subject registry's kinds): each build opens its own subject
        text = re.sub(r"([\"'])dryz\.subject\.", rf"\1{name}.subject.", text)
        p.write_text(text)
    if (into / f"{name}_harness.py").exists():
        h = into / f"{name}_harness.py"
        h.write_text(re.sub(r"\b(from|import) dryz\b", rf"\1 {name}", h.read_text()))
    if tmp:
        shutil.rmtree(tmp)


def build_drive(source: Path, into: Path, module: str) -> None:
    """Compile a build's call sequencer to into/<module path>*.so (module: e.g. dryz.subject._drive), with the
    flags pip's build uses."""
    from setuptools import Distribution, Extension
    if "." not in module:
        module += "._drive"  # (a package name alone: its top-level _drive)
    dist = Distribution({"ext_modules": [Extension(module, [str(source)])]})
    cmd = dist.get_command_obj("build_ext")
    cmd.build_lib, cmd.build_temp = str(into), str(into / f"build-{module}")
    cmd.ensure_finalized()
    cmd.run()


def load(name: str, instrumented: bool, traces: bool = False):
    module = _first(name + ".fuzz.target", name + ".fuzzing")  # the fuzz target before/after 2026-12-03
    if instrumented:  # the harness's own instrument(), on this build's copies of the modules it names
        os.environ["DRYZ_INSTRUMENT"] = "0"  # importing an old harness must not instrument anything itself
        try:
            harness = importlib.import_module(name + ".fuzz.harness")
        except ImportError:
            harness = importlib.import_module(name + "_harness")
        names = harness.INSTRUMENTED_TRACES if traces else harness.INSTRUMENTED
        harness.instrument([importlib.import_module(m.replace("dryz", name, 1)) for m in names])
    return module


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("x")
    ap.add_argument("y")
    ap.add_argument("--instrumented", action="store_true")
    ap.add_argument("--band", nargs=2, type=int, default=(0, 257))
    ap.add_argument("--traces", action="store_true")
    ap.add_argument("--inputs", type=int, default=600)
    ap.add_argument("--corpus")
    a = ap.parse_args()
    os.environ.setdefault("DRYZ_CORPUS", str(REPO / "corpus"))  # known classes, as the campaign reads them
    work = Path(tempfile.mkdtemp())
    materialize(a.x, work, "dryz_x")
    materialize(a.y, work, "dryz_y")
    sys.path.insert(0, str(work))
    import numpy  # noqa: F401,F811  (before instrumentation, as in the harness)
    builds = {"x": load("dryz_x", a.instrumented, a.traces), "y": load("dryz_y", a.instrumented, a.traces)}
    rng = np.random.default_rng(0)
    if a.traces:
        if a.corpus:
            datas = [p.read_bytes() for p in sorted(Path(a.corpus).iterdir()) if p.is_file()]
            what = f"trace inputs from {a.corpus}"
        else:
            datas = [rng.integers(0, 256, int(rng.integers(0, 701))).astype(np.uint8).tobytes()
                     for _ in range(a.inputs)]
            what = "trace inputs of 0..700 bytes"
        run = {k: b.test_one_trace for k, b in builds.items()}
        size = 20
    else:
        decode = _first("dryz_x.fuzz.decode", "dryz_x.decode").decode
        lo, hi = a.band
        datas = [rng.integers(0, 256, int(rng.integers(0, 3000))).astype(np.uint8).tobytes() for _ in range(12000)]
        datas = [d for d in datas if lo <= len(decode(d).history) < hi][:3000]
        run = {k: b.test_one_input for k, b in builds.items()}
        size, what = 100, f"histories {lo}..{hi - 1}"
    for k in builds:
        for d in datas:
            run[k](d)
    chunks = [datas[i:i + size] for i in range(0, len(datas), size)]
    best = {k: [float("inf")] * len(chunks) for k in builds}
    for r in range(8):
        order = list(builds) if r % 2 else list(builds)[::-1]
        for ci, chunk in enumerate(chunks):
            for k in (order if ci % 2 else order[::-1]):
                f = run[k]
                t = time.perf_counter()
                for d in chunk:
                    f(d)
                best[k][ci] = min(best[k][ci], time.perf_counter() - t)
    shutil.rmtree(work)
    rows = []
    for k, spec in (("x", a.x), ("y", a.y)):
        total = sum(best[k])
        print(f"{spec:>24}: {len(datas) / total:6.0f} exec/s  {total / len(datas) * 1e6:6.1f} us/input  "
              f"({len(datas)} {what}{', instrumented' if a.instrumented else ''})")
        rows.append({"build": spec, "exec_per_second": round(len(datas) / total, 1),
                     "us_per_input": round(total / len(datas) * 1e6, 2)})
    figures = {f"{xy}: {r['build']} exec/s": r["exec_per_second"] for xy, r in zip("XY", rows)}
    figures["ratio X/Y exec/s"] = round(rows[0]["exec_per_second"] / rows[1]["exec_per_second"], 3)
    out = write_record("fuzz_ab", command_line(), figures, inputs=len(datas), what=what,
                       instrumented=a.instrumented, x=a.x, y=a.y, rows=rows)
    print(f"record: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
