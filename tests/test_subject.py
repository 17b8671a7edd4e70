"""The shipped library through the driver, and check() on it."""

import math

import numpy as np

from dryz.case import Case
from dryz.verdict import AGREE, MISMATCH
from dryz.judge import check
from dryz.check import invert_deltas
from dryz.symbols import SYMBOLS, from_symbols


def test_identity_names_the_loaded_library(lib):
    ident = lib.identity
    assert ident["llama_cpp_python"] == "0.3.36"
    assert ident["libllama_path"].endswith("libllama.so") or ".so" in ident["libllama_path"]
    assert len(ident["libllama_sha256"]) == 64 and int(ident["libllama_sha256"], 16) >= 0
    assert ident["llama_cpp_commit"] and ident["llama_cpp_commit"].startswith("0c1e570")


def test_source_example_through_the_library(lib):
    case = Case(history=tuple(from_symbols("abccbcyabc")), alphabet=26, penalty_last_n=64)
    v = check(case, lib)
    assert v.status == AGREE
    got = {SYMBOLS[i]: L for i, L in enumerate(v.library_L) if L}
    assert got == {"c": 3, "b": 1, "y": 2}
    # The penalties themselves: 1 * 2^(L-1), subtracted from logit 0.
    assert v.observed_logits[2] == -4.0 and v.observed_logits[1] == -1.0 and v.observed_logits[24] == -2.0
    assert v.observed_sorted is False


def test_run_matches_clone_and_extend(lib):
    """A sampler cloned from a prefix and extended gives the same output as a fresh one."""
    hist = from_symbols("abcabcaab")
    case = Case(history=tuple(hist), alphabet=3, penalty_last_n=64)
    fresh = lib.run(case)
    s = lib.sampler_for(case)
    for t in hist[:4]:
        lib.accept(s, t)
    c = lib.clone(s)
    lib.free(s)
    for t in hist[4:]:
        lib.accept(c, t)
    out = lib.apply_once(c, [0, 1, 2], [0.0] * 3, False)
    lib.free(c)
    assert np.array_equal(out.logits, fresh.logits)


def test_inversion_is_exact():
    d = np.array([[0.0, 1.0, 2.0, 1024.0, 3.0, 0.75, -1.0, math.inf]], dtype=np.float32)
    L, bad = invert_deltas(d)
    assert L[0, :4].tolist() == [0, 1, 2, 11]
    assert bad[0].tolist() == [False] * 4 + [True] * 4


def test_multiplier_zero_leaves_logits(lib):
    case = Case(history=tuple(from_symbols("abab")), alphabet=3, penalty_last_n=64, multiplier=0.0)
    v = check(case, lib)
    assert v.status == AGREE and v.observed_logits == [0.0, 0.0, 0.0] and v.observed_sorted is False


def test_uninvertible_delta_is_the_librarys_mismatch(lib, monkeypatch):
    """A delta that is not a power of two is the library's doing: a mismatch (exit 1), never rounded to an L
    and never a void 'harness error'."""
    from dryz.subject.libllama import LibLlama
    real = LibLlama.run

    def perturbed(self, case):
        out = real(self, case)
        out.logits = out.logits * np.float32(1.5)
        return out
    monkeypatch.setattr(LibLlama, "run", perturbed)
    case = Case(history=tuple(from_symbols("abab")), alphabet=3, penalty_last_n=64)
    v = check(case, lib)
    assert v.status == MISMATCH and v.library_L == [None, 0, 0]  # a: L = 2, delta 2 * 1.5 = 3
    assert [(d["id"], d["direction"]) for d in v.differing] == [(0, "more")]


def test_library_tokenizer_splits_symbol_strings_into_characters(lib):
    """The model tokenizes breaker tails one token per character; the library's own tokenizer agrees."""
    L = lib.L
    for text in ["b", "ab", "abc", "zzyx", "a0!#Z", "ba" * 10]:
        raw = text.encode()
        buf = (L.llama_token * 64)()
        n = L.llama_tokenize(lib.vocab, raw, len(raw), buf, 64, False, False)
        assert list(buf[:n]) == from_symbols(text), text


def test_multi_token_breaker_through_the_library(lib):
    """Breaker 'ca' is head c with tail a. In 'a c a c' it completes one token from the end, so
    rep_limit = 2 - 1 = 1 and a's repeat of 2 ('a c' again) is clamped to 1."""
    with_brk = check(Case(history=tuple(from_symbols("acac")), alphabet=3, penalty_last_n=64, breakers=("ca",)), lib)
    without = check(Case(history=tuple(from_symbols("acac")), alphabet=3, penalty_last_n=64), lib)
    assert with_brk.ok and with_brk.multi_token and without.ok
    assert with_brk.library_L == [1, 0, 0] and without.library_L == [2, 0, 0]


def test_call_sequencer_is_built_and_equals_the_ctypes_path(lib, monkeypatch):
    """dryz._drive (the C sequence of libllama's init_dry/accept/apply/free) is installed, assumes the
    bindings' struct layout, and its output is bit-identical to making the same calls one by one through
    ctypes, on fuzz-decoded cases (random windows, breakers, parameters and candidate arrays)."""
    import dryz.subject.libllama as subject_mod
    from dryz.decode.cases import decode
    assert subject_mod._DRIVE is not None, "dryz.subject._drive is not built (pip install -e . compiles it)"
    assert subject_mod._DRIVE.layout() == subject_mod.layout() == (12, 0, 4, 8, 32, 0, 8, 16, 24)
    rng = np.random.default_rng(12)
    cases = [decode(rng.integers(0, 256, int(rng.integers(0, 1500))).astype(np.uint8).tobytes())
             for _ in range(300)]
    cases.append(Case(history=tuple(from_symbols("abcabcab")), alphabet=3, penalty_last_n=8,
                      breakers=tuple("c" * (1 + i % 3) for i in range(100)) + ("ab",)))  # many breakers
    native = [lib.run(c) for c in cases]
    monkeypatch.setattr(subject_mod, "_DRIVE", None)
    for c, a in zip(cases, native):
        b = lib.run(c)
        assert a.ids == b.ids and a.size == b.size and a.sorted == b.sorted, c
        assert np.array_equal(a.logits.view(np.uint32), b.logits.view(np.uint32)), c


def test_every_symbol_tokenizes_to_itself(lib):
    """The v2 vocabulary's pre-tokenizer (gpt-2) still gives one token per character, for every symbol
    and every ordered pair of symbols (letters, digits and punctuation split differently by its regex)."""
    L = lib.L
    buf = (L.llama_token * 8)()
    for a in SYMBOLS:
        for b in SYMBOLS:
            raw = (a + b).encode()
            n = L.llama_tokenize(lib.vocab, raw, len(raw), buf, 8, False, False)
            assert list(buf[:n]) == from_symbols(a + b), a + b


# -- the init_dry ABI: read off the kind of sampler init_dry makes, never off DRY's penalties ---------------------------

def _names(off7_on8, on7_off8, on_both="dry", off_both="?dry"):
    return {"off7_on8": off7_on8, "on7_off8": on7_off8, "on_both": on_both, "off_both": off_both}


def test_abi_from_sampler_names():
    from dryz.subject.binding import abi_from_names
    # 0.3.35/0.3.36 (7) and 0.3.34 (8): the empty sampler "?dry" for DRY off
    assert abi_from_names(_names("?dry", "dry"))[0] == 7
    assert abi_from_names(_names("dry", "?dry"))[0] == 8
    # an inverted enabling condition (empty sampler for DRY on) is calibrated away, not read as the other ABI
    assert abi_from_names(_names("dry", "?dry", on_both="?dry", off_both="dry"))[0] == 7
    assert abi_from_names(_names("?dry", "dry", on_both="?dry", off_both="dry"))[0] == 8
    # names that do not decide: no empty sampler (0.3.16), a condition blind to the window, contradictions
    for n in (_names("dry", "dry", "dry", "dry"), _names("?dry", "?dry", "?dry", "?dry"), _names("dry", "dry"),
              _names("?dry", "?dry"), _names("x", "dry")):
        abi, why = abi_from_names(n)
        assert abi is None and why, n


def test_abi_from_changes():
    from dryz.subject.binding import abi_from_changes
    assert abi_from_changes({"off7_on8": False, "on7_off8": True})[0] == 7
    assert abi_from_changes({"off7_on8": True, "on7_off8": False})[0] == 8
    for pair in ((False, False), (True, True)):
        abi, why = abi_from_changes({"off7_on8": pair[0], "on7_off8": pair[1]})
        assert abi is None and ("neither" in why if not pair[0] else "both" in why)


def test_the_pip_build_is_read_by_its_sampler_names(lib):
    """0.3.36: every probe's sampler named as the 7-argument reading predicts, and the apply fallback (used where
    the names do not decide, e.g. 0.3.16) reads the same ABI off this library too."""
    ev = lib.identity["init_dry_abi_evidence"]
    assert ev == {"decided_by": "llama_sampler_name", "abi": 7,
                  "names": {"off7_on8": "?dry", "on7_off8": "dry", "on_both": "dry", "off_both": "?dry"}}
    from dryz.subject.binding import ABI_PROBES, abi_from_changes
    changed = {p[0]: lib.L._probe_apply(lib.vocab, *p[1:]) for p in ABI_PROBES[:2]}
    assert changed == {"off7_on8": False, "on7_off8": True} and abi_from_changes(changed)[0] == 7
    # probing after load leaves the sampler's own init_dry declared with the detected ABI (7 arguments)
    assert len(lib.L.llama_sampler_init_dry.argtypes) == 7
    assert check(Case(history=(0, 0), alphabet=1, penalty_last_n=64), lib).observed_logits == [-1.0]


def test_a_declared_abi_the_probes_contradict_is_refused(tmp_path):
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("DRYZ_LIB", "LLAMA_CPP_LIB_PATH")}
    for value, said in (("8", "DRYZ_INIT_DRY_ABI=8, but llama_sampler_init_dry has the 7-argument ABI"),
                        ("nine", "DRYZ_INIT_DRY_ABI: 'nine' is not one of '7', '8'")):
        p = subprocess.run([sys.executable, "-m", "dryz", "subject", "show"], capture_output=True, text=True,
                           env=dict(env, DRYZ_INIT_DRY_ABI=value), timeout=120)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and said in p.stderr, p.stderr
    p = subprocess.run([sys.executable, "-m", "dryz", "subject", "show"], capture_output=True, text=True,
                       env=dict(env, DRYZ_INIT_DRY_ABI="7"), timeout=120)
    assert p.returncode == 0 and '"init_dry_abi": 7' in p.stdout


def test_the_binding_subject_clones_and_frees_as_its_own_sampler_does(tmp_path):
    """llama-cpp-python's own binding as the subject (`--subject llama-cpp-python:`): a clone is a LlamaSampler
    that closes like one (it had no exit stack: every trace with a clone ended in 'internal error'), and the
    reset / clone property conforms."""
    from conftest import dryz
    p = dryz("--subject", "llama-cpp-python:", "properties", "--property", "reset-clone", cwd=tmp_path)
    assert p.returncode == 0 and "reset / clone                          conforms" in p.stdout, p.stdout + p.stderr
