"""A fix declared on a llama.cpp subject (dryz.oracle.deviations.FIXES): its model, the subject spec that carries it
to every process (`+declare=`), the served layer's fix, replay's "fixed as declared" and the gate's change class.
Pure: no subject is built or run here (tests/test_fixes.py runs the patched builds)."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from conftest import dryz
from dryz.case import Case
from dryz.config import case_config
from dryz.check import check_batch, case_arrays
from dryz.config import Semantics
from dryz.corpus import ReplayRow
from dryz.gate.changes import change_class, fixes_declared, subject_broke, unfixable
from dryz.judge import judge_output
from dryz.oracle import deviations, served
from dryz.subject.answers import Output
from dryz.subject.registry import parse, split_declared, with_declared
from dryz.symbols import symbol_bytes

FLT_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
HUGE = Case(history=(0, 0), alphabet=1, penalty_last_n=2, multiplier=3.4e38, allowed_length=0)  # 3.4e38 * 2 > max


def klass(case: Case, observed, declared=()) -> str:
    cands, H = case_arrays(case)
    b = check_batch(case_config(case, 7, declared), H, cands, np.array([observed], dtype=np.float32),
                    np.array(case.logits, dtype=np.float32), case.sorted)
    return b.row_class(0)


def test_the_saturating_fix_is_a_model_not_a_label():
    """aa with multiplier 3.4e38: the shipped output is -inf (promise-finite-penalty); -FLT_MAX is a mismatch
    unless the subject declares finite-penalty:saturate, and then only -FLT_MAX is that class (a finite but other
    value, or +FLT_MAX, is still a mismatch)."""
    fix = ("finite-penalty:saturate",)
    assert klass(HUGE, [-np.inf]) == "promise-finite-penalty"
    assert klass(HUGE, [-np.inf], fix) == "promise-finite-penalty"
    assert klass(HUGE, [-FLT_MAX]) == "mismatch"
    assert klass(HUGE, [-FLT_MAX], fix) == "declared-finite-penalty:saturate"
    for wrong in (0.0, -3.0e38, FLT_MAX):
        assert klass(HUGE, [wrong], fix) == "mismatch"
    # a negative multiplier pushes the logit up: +FLT_MAX
    up = Case(history=(0, 0), alphabet=1, penalty_last_n=2, multiplier=-3.4e38, allowed_length=0)
    assert klass(up, [np.inf]) == "promise-finite-penalty"
    assert klass(up, [FLT_MAX], fix) == "declared-finite-penalty:saturate"
    # a result that stays finite is the shipped one: nothing for the fix to do
    fine = Case(history=(0,) * 128, alphabet=1, penalty_last_n=128, allowed_length=0)
    assert klass(fine, [-float(2 ** 127)], fix) == "agree"


def test_fixes_are_named_by_the_finding_they_fix():
    assert deviations.fix_for("promise-finite-penalty") == "finite-penalty:saturate"
    assert deviations.fix_for("served-base-replaced") == "base-below-one:off"
    assert deviations.fix_for("mismatch") is None
    assert deviations.fix_for("promise-breaker-phantom") == "breaker-text:printed"
    assert deviations.fixed_by("declared-finite-penalty:saturate") == ("promise-finite-penalty",)
    assert deviations.fixed_by("declared-single-token-breakers") == ()
    assert deviations.fixed_by("promise-finite-penalty") == ()
    assert deviations.fixed_by("declared-finite-penalty:saturate+breaker-text:printed")[0] == "promise-finite-penalty"
    assert fixes_declared(["promise-finite-penalty@window>0", "semantic-change", "served-base-replaced",
                           "promise-breaker-phantom", "promise-breaker-in-token"]) == \
        ["finite-penalty:saturate", "base-below-one:off", "breaker-text:printed"]
    with pytest.raises(deviations.DeviationError, match="only a fix dryz models"):
        deviations.check_fixes(["match-cap:3"])
    with pytest.raises(deviations.DeviationError, match="a server:PATH subject"):
        deviations.check_fixes(["base-below-one:off"])
    assert deviations.check_fixes(["base-below-one:off"] * 2, "llama-server") == ("base-below-one:off",)
    # the gate says which declared finding classes it has no fix model for
    assert unfixable("promise-restart-order") and unfixable("mismatch@window>0")
    assert not any(map(unfixable, ["promise-finite-penalty", "semantic-change@window=-1", "crash", "nonsense"]))


def test_the_spec_carries_the_declaration():
    spec = with_declared("libllama:/x/lib", ["finite-penalty:saturate"])
    assert spec == "libllama:/x/lib+declare=finite-penalty:saturate"
    assert parse(spec) == ("libllama", "/x/lib")
    assert split_declared(spec) == ("libllama:/x/lib", ("finite-penalty:saturate",))
    assert with_declared(spec, ["finite-penalty:saturate"]) == spec
    assert with_declared("server:/s", []) == "server:/s"


def test_the_served_layer_fix():
    """dry_base 0.5 through llama-server: as shipped the layer runs 1.75 (served-base-replaced); with the fix it
    passes 0.5, and the library switches DRY off. An answer with DRY off is a mismatch against the shipped layer,
    and declared-base-below-one:off from a server declaring the fix; a 1.75 answer stays served-base-replaced."""
    case = Case(history=(0, 0), alphabet=1, penalty_last_n=2, base=0.5, allowed_length=0)
    assert served.served_params({"prompt": [0], "dry_base": 0.5}, fixes=("base-below-one:off",)).base == 0.5
    assert served.served_outcome(case, symbol_bytes(), fixes=("base-below-one:off",)).classes == ()
    off = Output((0,), np.array([0.0], dtype=np.float32), None, 1)
    run = Output((0,), np.array([-1.75], dtype=np.float32), None, 1)  # 1 x 1.75^(1 - 0)
    shipped = Semantics("server", 7, (), "llama-server")
    fixed = Semantics("server", 7, ("base-below-one:off",), "llama-server")
    assert judge_output(case, shipped, off).klass == "mismatch"
    assert judge_output(case, fixed, off).klass == "declared-base-below-one:off"
    assert judge_output(case, shipped, run).klass == "served-base-replaced"
    assert judge_output(case, fixed, run).klass == "served-base-replaced"
    assert judge_output(Case(history=(0, 0), alphabet=1, penalty_last_n=2), fixed,
                        Output((0,), np.array([-1.0], dtype=np.float32), None, 1)).klass == "agree"


def test_replay_and_the_gate_read_a_declared_fix():
    row = ReplayRow(path=None, expect="promise-finite-penalty", got="declared-finite-penalty:saturate")
    assert row.ok and row.fixed and row.status == "fixed as declared"
    other = ReplayRow(path=None, expect="agree", got="declared-finite-penalty:saturate")
    assert not other.ok and other.status == "changed"
    # a request layer's fix runs the library's semantics: an entry recorded on a library as agree shows it
    assert ReplayRow(path=None, expect="agree", got="declared-base-below-one:off").fixed
    assert ReplayRow(path=None, expect="served-base-replaced", got="declared-base-below-one:off").fixed
    assert not ReplayRow(path=None, expect="mismatch", got="declared-base-below-one:off").ok
    # llama-server's documented request layer: an entry recorded on a library, now a served-* class
    row = ReplayRow(path=None, expect="agree", got="served-window-refused")
    assert row.ok and row.status == "as served"
    assert ReplayRow(path=None, expect="agree", got="mismatch").status == "changed"
    # a served-* witness must keep its own class
    assert ReplayRow(path=None, expect="served-base-replaced", got="served-window-refused").status == "changed"
    x = {"class": "semantic-change", "reference": {"klass": "promise-finite-penalty"},
         "other": {"klass": "declared-finite-penalty:saturate"}}
    assert not subject_broke(x)
    assert subject_broke(dict(x, other={"klass": "mismatch"}))
    assert change_class("semantic-change", HUGE, "promise-finite-penalty", "declared-finite-penalty:saturate") \
        == "promise-finite-penalty@window>0"
    assert change_class("semantic-change", HUGE, "agree", "declared-finite-penalty:saturate") == \
        "semantic-change@window>0"


@pytest.mark.parametrize("args, says", [
    (["--declare", "bogus"], "--declare 'bogus': a llama.cpp subject declares only a fix dryz models"),
    (["--subject", "engine:mistralrs", "--declare", "finite-penalty:saturate"],
     "--declare: engine subjects declare their deviations in their adapter"),
    (["--declare", "base-below-one:off"], "a fix of llama-server's request layer (a server:PATH subject)"),
])
def test_a_bad_declaration_is_one_line_and_exit_2(args, says):
    p = dryz(*args, "exhaustive")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and says in p.stderr, p.stderr


def test_a_tail_tokenized_as_a_continuation():
    """The printed-text fix's tail tokenization, on a made-up SentencePiece-like tokenizer that starts every text
    with a word-start space: "\n" alone is [_, \n] (the space prefix), after a newline it is [\n] (kept);
    a tail whose pieces after the newline do not spell it is tokenized as before; no space prefix: as before."""
    from dryz.oracle.restarts_vocab import continuation_tokenizer
    piece = {0: b" ", 1: b"\n", 2: b" b", 3: b"b", 4: b"\nb"}.__getitem__

    def tokenize(text: bytes):
        return {b"\n": (0, 1), b"\n\n": (0, 1, 1), b"b": (2,), b"\nb": (0, 1, 3), b"x": (2,), b"\nx": (4,)}[text]
    tok = continuation_tokenizer(tokenize, piece, True)
    assert tok(b"\n") == (1,) and tok(b"b") == (3,)
    assert tok(b"x") == (2,)  # after a newline the pieces do not print "x": as before
    assert continuation_tokenizer(tokenize, piece, False)(b"\n") == (0, 1)
