"""The main job starts fast: `dryz exhaustive` on the default libllama loads what its subject and its mode need and
nothing else. No other subject kind (llama-server's HTTP client, the engines' adapters), no corpus, no minimizer,
no explain layout, no served model. The bound is on the SET of modules the whole run imported (its pool workers are
forks of it), not on its time: time belongs in bench/ (bench/records/startup.json)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT, clean_env

# Every module of dryz's own that `dryz exhaustive` may import: the command line, the subject (libllama: its
# binding, build facts, walker and vocabulary loader), the oracles and the one comparison, the judge, the space
# and the printing of a certificate. A module that joins this list is a decision: say why in its commit.
ALLOWED = {
    "dryz", "dryz.__main__", "dryz.cli", "dryz.options", "dryz.inputs", "dryz.files", "dryz.errors", "dryz.output",
    "dryz.environment",
    "dryz.params", "dryz.symbols", "dryz.case", "dryz.trace", "dryz.trace_space", "dryz.verdict", "dryz.config",
    "dryz.vocab_cases", "dryz.space", "dryz.check", "dryz.judge", "dryz.render",
    "dryz.oracle", "dryz.oracle.deviations", "dryz.oracle.idbytes", "dryz.oracle.lengths", "dryz.oracle.lengths_b",
    "dryz.oracle.promise_text", "dryz.oracle.promised", "dryz.oracle.restarts", "dryz.oracle.restarts_vocab",
    "dryz.oracle.seqindex", "dryz.oracle.shipped", "dryz.oracle.windows",
    "dryz.subject", "dryz.subject._drive", "dryz.subject.answers", "dryz.subject.binding", "dryz.subject.build",
    "dryz.subject.cache", "dryz.subject.identity", "dryz.subject.isolation", "dryz.subject.libllama",
    "dryz.subject.protocol", "dryz.subject.registry", "dryz.subject.sanitizer", "dryz.subject.symbol_vocab",
    "dryz.subject.trace_driver", "dryz.subject.vendored_vocabs", "dryz.subject.walker",
    "dryz.enumerate", "dryz.enumerate.certificate", "dryz.enumerate.command", "dryz.enumerate.controls",
    "dryz.enumerate.dask_exec", "dryz.enumerate.exhaustive", "dryz.enumerate.run", "dryz.enumerate.selection",
}

# What the main job must never load (each once did, through an import at a module's top): another subject kind
# and its client, the corpus and what only a written report, a replay or a minimized case needs.
NEVER = {"dryz.subject.server", "dryz.subject.command", "dryz.subject.engines", "dryz.subject.llama_cpp_python",
         "dryz.oracle.served", "dryz.judge_served", "dryz.corpus", "dryz.shrink", "dryz.explain", "dryz.report",
         "minimize", "dryz.enumerate.vocab_command", "dryz.enumerate.restarts_command", "dryz.enumerate.traces",
         "dryz.enumerate.vocab_restarts", "http.client", "ssl", "email.parser", "urllib.request"}

PROBE = ("import atexit, json, sys\n"
         "atexit.register(lambda: json.dump(sorted(sys.modules), open(sys.argv[1], 'w')))\n"
         "from dryz.cli import main\n"
         "main(sys.argv[2:])\n")


def imported_by(tmp_path, *args) -> tuple[set, subprocess.CompletedProcess]:
    """The modules a whole dryz run (`dryz ARGS`, in tmp_path) had imported when it exited, and the run."""
    out = tmp_path / "modules.json"
    p = subprocess.run([sys.executable, "-c", PROBE, str(out), *args], capture_output=True, text=True, cwd=tmp_path,
                       env=clean_env(PYTHONPATH=str(ROOT)), timeout=300)
    return set(json.loads(out.read_text())), p


def test_the_main_job_imports_only_what_its_subject_and_mode_need(tmp_path):
    mods, p = imported_by(tmp_path, "exhaustive", "-n", "4")
    assert p.returncode == 0, p.stderr
    assert "dryz exhaustive: CERTIFIED" in p.stdout
    ours = {m for m in mods if m.split(".")[0] in ("dryz", "minimize")}
    assert {"dryz.subject.libllama", "dryz.enumerate.exhaustive", "dryz.check"} <= ours  # the probe saw the run
    assert sorted(ours - ALLOWED) == []
    assert sorted(mods & NEVER) == []


def test_the_bound_sees_what_another_mode_loads(tmp_path):
    """The probe is not blind: a command that writes a corpus entry's replay loads the corpus and the served model
    (a corpus holds served witnesses), which the main job's bound refuses."""
    mods, p = imported_by(tmp_path, "replay", str(ROOT / "corpus" / "seeds"))
    assert p.returncode in (0, 1), p.stderr
    assert {"dryz.corpus", "dryz.oracle.served"} <= mods
    assert {m for m in mods if m.startswith("dryz.")} - ALLOWED
