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
    # the case named from its folder: its heading names the file as given, and a worker's tmp path is longer
    return subprocess.run([sys.executable, "-m", "dryz", "explain", "--no-color", f.name], capture_output=True,
                          text=True, timeout=120, env=e, cwd=tmp_path)


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


# -- long histories: run-length runs, the window around what matters, at most 100 columns -----------------------------

def _widths(text: str) -> list[int]:
    import re
    return [len(re.sub(r"\x1b\[[0-9;]*m", "", ln)) for ln in text.splitlines()]


def test_run_length_cells_and_squeeze():
    from dryz.explain import run_length, squeeze
    labels = list("aaaab") + list("cd") + ["e"] * 3
    assert run_length(labels) == [(0, "a×4"), (4, "b"), (5, "c"), (6, "d"), (7, "e×3")]
    keep = [False, False, False, False, False, True, True, False, False, False]
    assert run_length(labels, keep) == [(-1, "…5…"), (5, "c"), (6, "d"), (-1, "…3…")]
    assert squeeze(["a"] * 128, 20) == "a×128"
    s = squeeze(list("abcdefghij") * 13, 20)
    assert len(s) <= 20 and s.startswith("a b c") and s.endswith("h i j") and "…" in s


def test_a_129_token_history_fits_100_columns(tmp_path):
    p = _explain(tmp_path, Case(history=(0,) * 129, alphabet=2, penalty_last_n=256))
    assert p.returncode == 0, p.stderr
    assert max(_widths(p.stdout)) <= 100, max(_widths(p.stdout))
    assert "history     129 tokens (a×129); window: the last 129" in p.stdout
    lines = p.stdout.splitlines()
    pos = next(i for i, ln in enumerate(lines) if ln.startswith("position"))
    assert lines[pos].split() == ["position", "-129"] and lines[pos + 1].split() == ["token", "a×129"]
    [row] = [ln for ln in lines if ln.startswith("a ")]
    assert row.split()[1:4] == ["128", "128", "128"] and row.endswith("[a×128] <a>   (at -1)")


def test_long_window_shows_the_repeat_and_the_restart(tmp_path):
    """abc x 40 then `c a b a b c c b a` with breaker c: the restart (head at -3, rep_limit 2) and the repeat of
    `b a` (at -7..-6, b at -5) are in the table, the 119 tokens before them elided; 100 columns."""
    h = tuple([0, 1, 2] * 40 + [2, 0, 1, 0, 1, 2, 2, 1, 0])
    p = _explain(tmp_path, Case(history=h, alphabet=3, penalty_last_n=256, breakers=("c",)))
    assert p.returncode == 0 and max(_widths(p.stdout)) <= 100, p.stdout
    lines = p.stdout.splitlines()
    pos = next(i for i, ln in enumerate(lines) if ln.startswith("position"))
    assert lines[pos].split()[1:] == [str(i) for i in range(-10, 0)]
    assert lines[pos + 1].split()[1:] == ["…119…", "c", "c", "a", "b", "a", "b", "c", "c", "b", "a"]
    assert "restart     'c' with its head at -3 sets rep_limit 2 (the 2 token(s) after it)" in p.stdout
    [row] = [ln for ln in lines if ln.startswith("b ")]
    assert row.split()[1:4] == ["2", "2", "2"] and row.endswith("…120… c a [b a] <b> c c …2…   (at -5)")


def test_long_disagreement_is_marked_within_100_columns(tmp_path):
    h = tuple([0, 1, 2, 3] * 32 + [0])
    p = _explain(tmp_path, Case(history=h, alphabet=4, penalty_last_n=256), DRYZ_FAULT="off-by-one")
    assert p.returncode == 1 and "class mismatch" in p.stdout
    assert max(_widths(p.stdout)) <= 100, p.stdout
    [row] = [ln for ln in p.stdout.splitlines() if ln.startswith("b ")]
    # the planted fault overstates L (126 for 125): no earlier occurrence repeats 126 tokens, so no repeat is shown
    assert row.split()[1:6] == ["126", "126", "125", "-4.25353e+37", "-2.12676e+37"] and row.endswith("<- DIFFERS")
    assert "history     129 tokens (a b c d a b c d …113… b c d a b c d a); window: the last 129" in p.stdout


def test_width_is_kept_in_colour_and_narrower_terminals(lib):
    """explain() itself, with colour (escape codes take no columns) and at 80 columns."""
    from dryz.judge import check
    from dryz.explain import explain
    case = Case(history=tuple([5, 9, 3, 7] * 20 + [1, 2, 3, 4] * 8 + [5, 9, 3]), alphabet=12, penalty_last_n=200,
                breakers=("b",), allowed_length=2)
    v = check(case, lib).to_json()
    for width in (100, 80):
        for color in (False, True):
            text = explain(case, v, "libllama (test)", color=color, width=width)
            assert max(_widths(text)) <= width, (width, color)
            assert "restart     'b' with its head at -7 sets rep_limit 6" in text
    plain = explain(case, v, "libllama (test)", width=80)
    assert "[f j d] <h>" in plain and "(at -36)" in plain


def test_each_penalty_says_the_rule_that_made_it(tmp_path):
    """`aba` with allowed_length 0: both oracles give `a` L 0 and expect -1; the row says why (every token after
    the window's first is penalized), the repeat of `b` is drawn, `c` (never in the window) says nothing; the
    rule line gives the formula with the case's numbers."""
    p = _explain(tmp_path, Case(history=(0, 1, 0), alphabet=3, penalty_last_n=64, allowed_length=0))
    assert p.returncode == 0, p.stderr
    rows = {ln.split()[0]: ln for ln in p.stdout.splitlines() if ln[:2] in ("a ", "b ", "c ")}
    assert rows["a"].split()[1:6] == ["0", "0", "-", "-1", "-1"]
    assert rows["a"].endswith("a at -1: allowed_length 0 penalizes every token after the window's first (L 0)")
    assert rows["b"].endswith("[a] <b> a   (at -2)")
    assert rows["c"].split()[1:6] == ["0", "0", "-", "0", "0"] and len(rows["c"].split()) == 6
    text = " ".join(p.stdout.split())
    assert "rule penalty 1*2^(L-0), i.e. multiplier*base^(L-allowed_length), where L >= allowed_length; L: the " \
           "longest suffix of the window the candidate would repeat, capped by rep_limit" in text
    assert "; allowed_length 0: every token after the window's first is penalized, at L 0 or more" in text


def test_a_breaker_says_why_it_is_not_penalized(tmp_path):
    """A single-token breaker in the window is never penalized, and its row and the rule line say so."""
    p = _explain(tmp_path, Case(history=(0, 1, 2, 1), alphabet=3, penalty_last_n=64, allowed_length=0,
                                breakers=("c",)))
    rows = {ln.split()[0]: ln for ln in p.stdout.splitlines() if ln[:2] in ("a ", "b ", "c ")}
    assert rows["c"].split()[1:6] == ["0", "0", "-", "0", "0"]
    assert rows["c"].endswith("a single-token breaker: never penalized")
    assert rows["b"].endswith("b at -1: allowed_length 0 penalizes every token after the window's first (L 0)")
    assert "; never a single-token breaker" in " ".join(p.stdout.split())
