"""The fix proposals in fixes/ (issue 33, item 5), each built by `dryz subject build --patch fixes/X.diff` (a
one-file rebuild after the version's first build; cached after) and its finding's witnesses judged on the plain
and the fixed build: what the finding was on the plain build, and the exact output on the fixed one.

dryz judges every libllama against the as-shipped model, so on a fixed build a witness whose shipped output broke a
promise is a `mismatch` against that model, unless the subject declares the fix (`dryz --declare FIX`, which the
gate does for `--expect-change CLASS`; dryz.oracle.deviations.FIXES): then it is `declared-FIX` exactly where the
output equals the fix's model. What each test asserts besides the class is that the fixed output is the one the
promise asks for (fixes/README.md says what each patch does and does not cover).

Skipped when the subjects cannot be built, unless DRYZ_REQUIRE_BUILDS=1 (CI sets it), where they fail.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from conftest import REQUIRE_BUILDS, ROOT, build, dryz

FIXES = ROOT / "fixes"
FINDINGS = ROOT / "corpus" / "findings"
FLT_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]


def verdict(lib, entry: str, *declare: str) -> dict:
    """`dryz --lib LIB [--declare FIX] check ENTRY`'s verdict (exit 0 agree or a declared fix, 1 a finding)."""
    p = dryz(*[a for d in declare for a in ("--declare", d)], "check", str(FINDINGS / entry), lib=lib)
    assert p.returncode in (0, 1), p.stderr[-2000:]
    v = json.loads(p.stdout)["verdict"]
    assert p.returncode == (0 if v["class"] == "agree" or v["class"].startswith("declared-") else 1)
    return v


def fixed(name: str) -> Path:
    """The fix's build: conftest.build takes a patch path outside tests/patches as is."""
    return build("0.3.36", str(FIXES / name))


def promised(entry: str) -> list:
    """What the source's promises say the witness's output must be (dryz.check.expected_output, promises=True)."""
    from dryz.check import expected_output
    from dryz.corpus import load_entry
    from dryz.vocab_cases import reference_vocab_of
    c = load_entry(FINDINGS / entry).case
    return expected_output(c, 7, reference_vocab_of(c) if c.vocab else None, promises=True).logits.tolist()


def test_the_fixes_apply_to_the_sdist_they_name():
    """Every .diff in fixes/ is one patch against the 0.3.36 sdist's vendor/llama.cpp with a rationale above it."""
    diffs = sorted(FIXES.glob("*.diff"))
    assert [d.name for d in diffs] == ["finite-penalty-clamp.diff", "served-base-below-one.diff",
                                       "served-cost-vocab-cache.diff", "served-cost-words-once.diff",
                                       "spm-breaker-matching.diff"]
    for d in diffs:
        head = d.read_text().split("\n--- a/", 1)[0]
        assert head.startswith("dryz fix proposal") and "0.3.36" in head, d.name


@pytest.mark.parametrize("entry, L", [("promise-finite-penalty-5573ce8e83.json", 1),
                                      ("promise-finite-penalty-54cb4383cc.json", 128)])
def test_finite_penalty_clamp(entry, L):
    """aa with multiplier 3.4e38 (base 2), and a x129 with multiplier 1 (2^128 > FLT_MAX): the plain build's
    logit is -inf (promise-finite-penalty); the fixed build's is -FLT_MAX exactly, finite, which the shipped model
    (-inf) calls a mismatch and no promise is broken."""
    plain = verdict(build("0.3.36"), entry)
    assert plain["class"] == "promise-finite-penalty" and plain["observed_logits"] == ["-inf"]
    assert plain["broken_promises"] == ["finite-penalty"] and plain["oracle_L"] == [L]
    new = verdict(fixed("finite-penalty-clamp.diff"), entry)
    assert new["class"] == "mismatch" and new["expected_logits"] == ["-inf"]
    assert new["observed_logits"] == [-FLT_MAX] and new["broken_promises"] == []
    # declaring the fix: its model (Step 4 saturating) gives exactly this output
    new = verdict(fixed("finite-penalty-clamp.diff"), entry, "finite-penalty:saturate")
    assert new["class"] == "declared-finite-penalty:saturate" and new["observed_logits"] == [-FLT_MAX]
    # the plain build declaring it still breaks the promise (its output is the shipped model's, not the fix's)
    assert verdict(build("0.3.36"), entry, "finite-penalty:saturate")["class"] == "promise-finite-penalty"


def test_finite_penalty_clamp_replays_as_declared():
    """The project corpus on the fixed build declaring the fix: the two promise-finite-penalty entries are
    "fixed as declared", every other entry as expected (exit 0); without the declaration they changed (exit 1)."""
    lib = fixed("finite-penalty-clamp.diff")
    p = dryz("--declare", "finite-penalty:saturate", "replay", lib=lib)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "2 fixed as declared, 0 changed, 0 invalid" in p.stdout
    assert sum(ln.startswith("fixed   promise-finite-penalty-") for ln in p.stdout.splitlines()) == 2
    p = dryz("replay", lib=lib)
    assert p.returncode == 1 and "0 fixed" not in p.stdout and "2 changed" in p.stdout


def test_finite_penalty_clamp_leaves_finite_results_alone(tmp_path):
    """a x128 (penalty 2^127, finite in the shipped code): the same logit on the fixed build, class agree."""
    case = {"schema": "dryz.case/1", "history": [0] * 128, "alphabet": 1, "penalty_last_n": 128, "breakers": [],
            "multiplier": 1.0, "base": 2.0, "allowed_length": 0}
    (tmp_path / "c.json").write_text(json.dumps(case))
    p = dryz("check", str(tmp_path / "c.json"), lib=fixed("finite-penalty-clamp.diff"))
    v = json.loads(p.stdout)["verdict"]
    assert p.returncode == 0 and v["class"] == "agree" and v["observed_logits"] == [-float(2 ** 127)]


# (witness, plain class, plain logit, fixed class, fixed logit, the promised logit)
SPM = [
    ("promise-breaker-across-tokens-d3452246ae.json", "promise-breaker-across-tokens", -4.0,
     "mismatch-multi-token", -2.0, -2.0),   # llama-spm, "\n\n" emitted as two newline tokens
    ("promise-breaker-phantom-321f60adf0.json", "promise-breaker-phantom", -1.0,
     "mismatch-multi-token", -2.0, -2.0),   # llama-spm, breaker "ab" restarting on "a b"
    ("promise-breaker-in-token-a382cd9c2e.json", "promise-breaker-in-token", -2.0,
     "mismatch", 0.0, -1.0),                # llama-spm, breaker " " inside "\u2581the": see below
    ("promise-breaker-across-tokens-8bc9f31166.json", "promise-breaker-across-tokens", -2.0,
     "promise-breaker-across-tokens", -2.0, -1.0),  # gpt-2, "🙂" split mid-character: not covered
]


@pytest.mark.parametrize("entry, plain_class, plain_logit, new_class, new_logit, want", SPM,
                         ids=[s[0].split(".")[0] for s in SPM])
def test_spm_breaker_matching(entry, plain_class, plain_logit, new_class, new_logit, want):
    """The SentencePiece witnesses: on the fixed build the across-tokens and phantom witnesses give exactly the
    promised output. The in-token witness's rep_limit is now the promised one, but its candidate (\u2581, which
    prints the breaker " ") is now itself a single-token breaker and exempt (0.0), where dryz's promised output
    keeps the shipped exemptions (-1.0). The byte-level gpt-2 witness is not covered and is unchanged."""
    assert promised(entry) == [want]
    plain = verdict(build("0.3.36"), entry)
    assert plain["class"] == plain_class and plain["observed_logits"] == [plain_logit]
    new = verdict(fixed("spm-breaker-matching.diff"), entry)
    assert new["class"] == new_class and new["observed_logits"] == [new_logit]
    # declaring the fix (breaker-text:printed): the SPM witnesses' outputs are exactly its model's (the in-token
    # one's candidate exempt as a breaker, as the fix prints it); the gpt-2 one is the plain build's
    new = verdict(fixed("spm-breaker-matching.diff"), entry, "breaker-text:printed")
    want_class = plain_class if plain_class == new_class else "declared-breaker-text:printed"
    assert new["class"] == want_class and new["observed_logits"] == [new_logit]


def server(patch: str | None) -> Path:
    from dryz.subject.build import BuildError
    from dryz.subject.build import build as build_subject
    try:
        return build_subject("0.3.36", FIXES / patch if patch else None, server=True, log=lambda m: None) \
            / "llama-server"
    except (BuildError, OSError) as e:
        if REQUIRE_BUILDS:
            raise
        pytest.skip(f"cannot build llama-server: {str(e).splitlines()[0]}")


def test_served_base_below_one():
    """dry_base 0.5 on `aa`: the plain llama-server replaces it with 1.75 and penalizes `a` by 1
    (served-base-replaced); the fixed one passes it through and the library switches DRY off, as the libllama
    itself does for the same case (every logit 0)."""
    entry = "served-base-replaced-1c6c0bcdce.json"
    p = dryz("--subject", f"server:{server(None)}", "check", str(FINDINGS / entry))
    v = json.loads(p.stdout)["verdict"]
    assert v["class"] == "served-base-replaced" and v["observed_logits"][0] == -1.0
    p = dryz("--subject", f"server:{server('served-base-below-one.diff')}", "check", str(FINDINGS / entry))
    v = json.loads(p.stdout)["verdict"]
    assert v["class"] == "mismatch" and "served" not in v
    assert not np.any(np.array(v["observed_logits"], dtype=np.float64))
    # declaring the fix of the request layer: the server ran the case as the library does
    p = dryz("--subject", f"server:{server('served-base-below-one.diff')}", "--declare", "base-below-one:off",
             "check", str(FINDINGS / entry))
    w = json.loads(p.stdout)["verdict"]
    assert p.returncode == 0 and w["class"] == "declared-base-below-one:off"
    assert w["observed_logits"] == v["observed_logits"]
    p = dryz("--subject", f"server:{server(None)}", "--declare", "base-below-one:off", "check", str(FINDINGS / entry))
    assert json.loads(p.stdout)["verdict"]["class"] == "served-base-replaced" and p.returncode == 1
    # the witnesses on the fixed server declaring the fix: the two base-0.5 entries fixed as declared, the
    # served-* classes the server still has as served, nothing changed; on the plain server, six as served
    p = dryz("--subject", f"server:{server('served-base-below-one.diff')}", "--declare", "base-below-one:off",
             "replay", str(FINDINGS))
    assert p.returncode == 0 and "5 as served, 2 fixed as declared, 0 changed" in p.stdout, p.stdout[-3000:]
    p = dryz("--subject", f"server:{server(None)}", "replay", str(FINDINGS))
    assert p.returncode == 0 and "6 as served, 0 changed" in p.stdout, p.stdout[-3000:]
    lib = verdict(build("0.3.36"), entry)  # the same case on the library: DRY off, agree
    assert lib["class"] == "agree" and lib["observed_logits"] == v["observed_logits"]


COST = ["served-cost-words-once.diff", "served-cost-vocab-cache.diff"]


@pytest.mark.parametrize("patch", COST)
@pytest.mark.parametrize("entry", [s[0] for s in SPM])
def test_served_cost_fix_changes_no_output(entry, patch):
    """The vocabulary detokenized once per init_dry call, not once per breaker (words-once), or once per
    vocabulary (vocab-cache): the breaker witnesses (real vocabularies, where init_dry processes breakers) give the
    plain build's verdict and logits, bit for bit."""
    plain = verdict(build("0.3.36"), entry)
    new = verdict(fixed(patch), entry)
    assert (new["class"], new["observed_logits"]) == (plain["class"], plain["observed_logits"])
    assert new["class"] == entry.rsplit("-", 1)[0]


@pytest.mark.parametrize("patch", COST)
def test_served_cost_fix_keeps_the_construction(patch):
    """init_dry's restart sequences on llama-spm and gpt-2, one after the other in one process, against dryz's
    independent construction model: no disagreement on the fixed build (the shipped construction, unchanged;
    for vocab-cache, no vocabulary's texts serve another's)."""
    p = dryz("restarts", "--vocab", "llama-spm", "--vocab", "gpt-2", "--check", "construction", "--time", "20",
             lib=fixed(patch))
    assert p.returncode == 0 and "0 disagreements" in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]
