"""dryz explain: the source's worked example laid out, and a disagreement marked where it is."""

import os
import subprocess
import sys

from dryz.case import Case
from dryz.explain import matched_at


def test_matched_positions_check_a_given_length():
    w = [0, 1, 2, 2, 1, 2, 24, 0, 1, 2]  # a b c c b c y a b c
    assert matched_at(w, 2, 3) == [3]      # c: [a b c] then c at position 3
    assert matched_at(w, 1, 1) == [4]       # b: [c] then b
    assert matched_at(w, 24, 2) == [6]     # y: [b c] then y


def _explain(tmp_path, case, **env):
    f = tmp_path / "c.json"
    f.write_text(case.dumps())
    e = {k: v for k, v in os.environ.items() if k != "DRYZ_FAULT"}
    e.update(env)
    return subprocess.run([sys.executable, "-m", "dryz", "explain", "--no-color", str(f)], capture_output=True,
                          text=True, timeout=120, env=e)


def test_source_example_explained(tmp_path):
    p = _explain(tmp_path, Case(history=(0, 1, 2, 2, 1, 2, 24, 0, 1, 2), alphabet=26, penalty_last_n=64))
    assert p.returncode == 0, p.stderr
    rows = {ln.split()[0]: ln for ln in p.stdout.splitlines() if ln[:1] in "bcy" and len(ln.split()) > 4}
    assert rows["c"].split()[1:4] == ["3", "3", "3"] and "[a b c] <c> b c y a b c   (at -7)" in rows["c"]
    assert rows["b"].split()[1:4] == ["1", "1", "1"] and rows["y"].split()[1:4] == ["2", "2", "2"]
    assert "(23 more candidates" in p.stdout and "class agree" in p.stdout


def test_disagreement_is_marked(tmp_path):
    p = _explain(tmp_path, Case(history=(0, 0, 0), alphabet=1, penalty_last_n=3, allowed_length=0),
                 DRYZ_FAULT="off-by-one")
    assert p.returncode == 1 and "class mismatch" in p.stdout
    [row] = [ln for ln in p.stdout.splitlines() if ln.startswith("a ")]
    assert row.split()[1:6] == ["3", "3", "-", "-8", "-4"] and row.rstrip().endswith("<- DIFFERS")
