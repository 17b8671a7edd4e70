"""The command line: exit codes, one-line errors, the results JSON."""

import json

import pytest


from conftest import dryz


@pytest.mark.parametrize("args,fragment", [
    (["exhaustive", "--alphabet", "0"], "--alphabet must be in 1..64"),
    (["exhaustive", "--alphabet", "65"], "--alphabet must be in 1..64"),
    (["exhaustive", "--max-length", "-3"], "--max-length must be at least 1"),
    (["exhaustive", "--config", "nope"], "--config: unknown configuration 'nope'"),
    (["exhaustive", "--alphabet", "x"], "'x' is not a valid integer"),
    (["exhaustive", "-j", "0"], "--jobs must be at least 1, got 0"),
    (["exhaustive", "--jobs", "1000"], "--jobs must be in 1.."),
    (["exhaustive", "-c", "window2147483647"], "penalty_last_n 2147483647 is above"),
    (["exhaustive", "--scheduler", "garbage"], "expected HOST:PORT"),
    (["exhaustive", "--no-canonical", "-k", "64", "-n", "12"], "too large"),
    (["exhaustive", "-k", "64", "-n", "14"], "too large"),
    (["exhaustive", "--frobnicate"], "No such option"),
    (["nosuchcommand"], "No such command"),
])
def test_bad_input_is_one_line_exit_2(args, fragment):
    p = dryz(*args)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dryz: error:") and fragment in lines[0], p.stderr
    assert "Traceback" not in p.stderr


def test_small_run_writes_certificate(tmp_path):
    out = tmp_path / "r.json"
    p = dryz("exhaustive", "-k", "3", "-n", "6", "--json", str(out), "-j", "1")
    assert p.returncode == 0, p.stderr
    assert "CERTIFIED" in p.stdout
    r = json.loads(out.read_text())
    assert r["verdict"] == "certified"
    assert len(r["subject"]["libllama_sha256"]) == 64 and r["subject"]["llama_cpp_python"] == "0.3.36"
    assert r["space"]["alphabet"] == 3 and r["space"]["max_length"] == 6
    assert [c["name"] for c in r["space"]["configs"]] == ["base", "window4", "breaker"]
    for c in r["configs"]:
        assert c["cases"] == 3 * (3 + 9 + 27 + 81 + 243 + 729)
        assert c["mismatches"] == 0 and c["oracle_disagreements"] == 0
    assert r["totals"] == {"cases": 3 * 3276, "mismatches": 0, "oracle_disagreements": 0}
    assert r["controls"]["periodic"]["passed"] is True
    assert r["controls"]["off_by_one"]["flagged"] > 0
    assert r["controls"]["multiplier_zero"]["nonzero_deltas"] == 0
    assert r["wall_seconds"] > 0 and r["python"].startswith("3.")


def test_single_config_option(tmp_path):
    out = tmp_path / "r.json"
    p = dryz("exhaustive", "-k", "4", "-n", "4", "-c", "window4", "--json", str(out))
    assert p.returncode == 0, p.stderr
    r = json.loads(out.read_text())
    assert [c["name"] for c in r["configs"]] == ["window4"] and r["totals"]["cases"] == 4 * 340


def test_unwritable_results_path_is_refused_before_the_run(tmp_path):
    p = dryz("exhaustive", "-n", "3", "--json", "/proc/nope/r.json")
    assert p.returncode == 2 and p.stderr.startswith("dryz: error: --json: cannot write /proc/nope/r.json")
    p = dryz("exhaustive", "-n", "3", "--json", str(tmp_path))
    assert p.returncode == 2 and "cannot write" in p.stderr and "Traceback" not in p.stderr


def test_a_closed_stdout_pipe_keeps_the_exit_code(tmp_path):
    """dryz ... | head: the reader going away is not a finding (click would exit 1)."""
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-m", "dryz", "exhaustive", "-n", "5", "--json", str(tmp_path / "r.json"),
                          "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # closed before dryz writes a line
    p.wait(timeout=120)
    assert p.returncode == 0 and b"Traceback" not in p.stderr.read()
