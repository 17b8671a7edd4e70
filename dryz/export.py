"""`dryz export ENTRY --as test-sampling|pytest|c`: a corpus entry (a case or a trace, from corpus/, from `dryz
minimize`, or a gate, mutate or matrix witness) as a test in its target's own style. It reads the entry and the
oracles; it runs no subject.

What the test asserts is what the oracles say the library must leave (dryz.check.expected_output), never what a
library did:
- agree, and every class that is not a finding (documented-*: a limitation the source states; the shipped model is
  what it does): the shipped model's logits, bit for bit, and sorted flag. The test passes on a correct build.
- mismatch (and -multi-token), crash, memory: the same, the shipped model. It fails on the build the entry was
  found on (a crash there ends the test's process, as a failing test_dry's GGML_ASSERT does).
- promise-*: what the source promises where it and the shipped model part. promise-restart-order and the
  text-level promise-breaker-*: the promised model's output (Step 1's restart order, or the breaker as the text
  prints it, the rest as shipped), bit for bit; promise-finite-penalty: every candidate the shipped model
  overflows to -inf (from a finite logit) must stay finite, the others as shipped. It fails on every build
  that keeps the shipped behaviour, the one the entry was found on included.
A trace's test runs its events on one sampler and asserts the same after every apply (each apply's equivalent
case, dryz.oracle.trace_model).

No form: a served-* witness (llama-server's request layer, an HTTP exchange), a declared-* entry (another engine's
declared deviation), an entry the oracles disagree on (no expected value), one made under DRYZ_FAULT.

The forms. test-sampling: one `test_dry(...)` call for llama.cpp's tests/test-sampling.cpp. Its tester makes the
array ids 0..n-1 in id order with logit logf(p_i), applies DRY made by llama_sampler_init_dry_testing (no
vocabulary: the breakers are handed over as the restart sequences init_dry builds from the strings, as the model
says it does), then the dist sampler, and compares probabilities within 1e-5. So it cannot express (and export
refuses, naming --as pytest or --as c): a trace, a real vocabulary, an explicit candidate array (a subset, another
order, unequal logits), a sorted flag, the 8-argument init_dry (n_ctx_train), a configuration that turns DRY
off (llama_sampler_init_dry_testing takes init_dry's empty sampler for a DRY one and crashes), a promise without an
exact value (finite-penalty), a finding whose difference the probabilities do not show (below 1e-5 after softmax, one
candidate, or the candidate array or sorted flag only), and a finding with a multi-token restart sequence (its
construction from the strings, which test_dry bypasses). pytest: a self-contained file on llama-cpp-python's
bindings (llama_cpp only); c: a C program against llama.h. Both express every entry a form can: a real
vocabulary (a GGUF path), the symbol vocabulary (embedded), reset, clone, free, sorted flags, either ABI, a crash
(pytest runs it in a child process; the C program dies with the library).
"""

from __future__ import annotations

import base64
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .case import Case
from .check import Expected, expected_output
from .config import restart_sequences_of
from .corpus import load_entry
from .errors import DryzError
from .oracle.trace_model import equivalent_cases
from .subject.symbol_vocab import symbol_vocab_path
from .subject.vendored_vocabs import resolve_vocab
from .verdict import CRASH, HarnessError, MEMORY, is_finding
from .vocab_cases import reference_vocab_of

FORMS = ("test-sampling", "pytest", "c")
TOLERANCE = 1e-5  # test-sampling's sampler_tester::check: |p - expected| < 1e-5
MARGIN = 2e-5     # a finding's probabilities must differ by this much for test_dry to show it


class ExportError(ValueError, DryzError):
    """An entry that a form (or every form) cannot express, with a one-line reason naming the next form."""


@dataclass
class Apply:
    """One apply the test checks: its equivalent case (the candidate array given) and what must come back."""
    case: Case
    expected: Expected


@dataclass
class Plan:
    """An entry made ready for a form: what it is, the configuration, the events, each apply's expectation."""
    source: str
    data: dict
    klass: str            # the entry's expect
    abi: int              # the init_dry ABI of the subject it was recorded on
    params: object        # DryParams (the case's or the trace's)
    alphabet: int
    vocab: str | None
    vocab_sha256: str | None
    events: list          # trace events; a case is [("accept", history), ("apply", its array)]
    applies: list         # one Apply per apply event, in order
    trace: bool
    crash: bool           # class crash or memory: on its build the library dies on it
    promises: bool        # a promise-* finding: the promised semantics asserted


def plan(path: str) -> Plan:
    """The entry at path read and its expected outputs computed by the oracles; ExportError (one line) when no
    form can express it."""
    e = load_entry(Path(path))
    data, klass = e.data, e.expect
    where = f"{path}"
    if "http" in data or klass.startswith("served-"):
        raise ExportError(f"{where}: a served-* witness is llama-server's request layer (an HTTP exchange), not the "
                          "library's DRY: no test of the library expresses it (dryz replay replays it)")
    if klass.startswith("declared-"):
        raise ExportError(f"{where}: a declared-* entry is another engine's declared deviation, not libllama's DRY")
    if e.requests is not None:
        raise ExportError(f"{where}: a request sequence (requests sent in turn to one instance of an engine): no test "
                          "of the library expresses it (each request alone is a case; dryz replay replays it)")
    fault = (data.get("provenance") or {}).get("fault")
    if fault:
        raise ExportError(f"{where}: made under DRYZ_FAULT={fault}: its expected values are a planted wrong "
                          "reference, nothing to export")
    abi = int((data.get("subject") or {}).get("init_dry_abi") or 7)
    promises = klass.startswith("promise-") and is_finding(klass)
    if e.trace is not None:
        t = e.trace
        cases = equivalent_cases(t, abi)
        events, params, alphabet, vocab, sha = list(t.events), t.params(), t.alphabet, None, None
    else:
        c = e.case
        cases = [c]
        events = [("accept", tuple(c.history))] if c.history else []
        events.append(("apply", c.candidates, c.sorted) if c.candidates is not None or c.sorted else ("apply", None))
        params, alphabet, vocab, sha = c.params(), c.alphabet, c.vocab, c.vocab_sha256
    vocabulary = reference_vocab_of(cases[0]) if vocab is not None else None
    try:
        applies = [Apply(c, expected_output(c, abi, vocabulary, promises)) for c in cases]
    except HarnessError as err:
        raise ExportError(f"{where}: {err}") from None
    if vocab is not None and sha is None:
        sha = vocabulary.ref.sha256
    return Plan(str(path), data, klass, abi, params, alphabet, vocab, sha, events, applies, e.trace is not None,
                klass in (CRASH, MEMORY), promises)


def export(path: str, form: str) -> str:
    """The entry at path as a test of the form (FORMS): its text."""
    if form not in FORMS:
        raise ExportError(f"unknown form {form!r} (known: {', '.join(FORMS)})")
    p = plan(path)
    return {"test-sampling": test_sampling, "pytest": pytest_file, "c": c_program}[form](p)


# -- what every form says about the entry ---------------------------------------------------------------------


def _asserts(p: Plan) -> str:
    """One sentence: what the test asserts and where it passes or fails."""
    if p.promises:
        what = ("every candidate the shipped model overflows to -inf must stay finite (the promise of Step 4's "
                "clamp), every other as the shipped model" if p.klass == "promise-finite-penalty" else
                "the output the source's promise gives (the promised model), which the shipped model's differs from")
        return f"{what}; it fails on the build the entry was found on (the shipped behaviour)"
    if p.crash:
        return ("the shipped model's output (dryz's oracles); on the build the entry was found on the library dies on "
                "it" + (" (a sanitizer report: run with that build's sanitizer runtime preloaded)"
                        if p.klass == MEMORY else ""))
    if is_finding(p.klass):
        return "the shipped model's output (dryz's oracles), bit for bit; it fails on the build the entry was found on"
    return "the shipped model's output (dryz's oracles), bit for bit; it passes on a correct build"


def _subject(p: Plan) -> str:
    s = p.data.get("subject") or {}
    made = s.get("built_by_dryz") or {}
    patch = f" + patch {made['patch']}" if made.get("patch") else ""
    sha = s.get("libllama_sha256")
    return (f"llama-cpp-python {s.get('llama_cpp_python', '?')}{patch}" + (f", libllama sha256 {sha[:16]}..." if sha
                                                                            else ""))


def _header_lines(p: Plan) -> list[str]:
    d = p.data
    lines = [f"dryz export of {Path(p.source).name}: class {d.get('class', p.klass)}, expect {p.klass}, shortest "
             f"{d.get('shortest')}; recorded on {_subject(p)} (init_dry ABI {p.abi})"]
    if d.get("separates"):
        sep = d["separates"]
        lines.append(f"a witness of {sep.get('class')}: {d.get('note') or 'it separates subjects'}")
    lines.append("asserts: " + _asserts(p))
    return _wrap(lines)


def _wrap(lines: list[str]) -> list[str]:
    return [w for ln in lines for w in textwrap.wrap(ln, 110, subsequent_indent="  ", break_on_hyphens=False)]


def _bits(x: float) -> int:
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


def _changed(a: Apply) -> list[tuple[int, float | None]]:
    """Per candidate whose expected logit is not its initial one (bits), (id, expected); None: only finite."""
    out = []
    for i, (t, lg) in enumerate(zip(a.case.ids, a.case.logits)):
        if a.expected.finite[i]:
            out.append((t, None))
        elif _bits(float(a.expected.logits[i])) != _bits(lg):
            out.append((t, float(a.expected.logits[i])))
    return out


def _f32(x: float) -> str:
    """A float32 value as a C float literal (9 significant digits read back to the same float32)."""
    if math.isinf(x):
        return "-INFINITY" if x < 0 else "INFINITY"
    s = f"{x:.9g}"
    return (s if any(ch in s for ch in ".en") else s + ".0") + "f"


def _c_string(b: bytes) -> str:
    return '"' + "".join(chr(c) if 32 <= c < 127 and chr(c) not in '"\\?' else f"\\{c:03o}" for c in b) + '"'


# -- test-sampling ---------------------------------------------------------------------------------------------


def _refuse(p: Plan, why: str) -> ExportError:
    return ExportError(f"{p.source}: test_dry cannot express {why}: export it --as pytest (or --as c)")


def _softmax(logits: np.ndarray) -> np.ndarray:
    """The dist sampler's probabilities as test_dry reads them (one candidate: 1)."""
    if len(logits) == 1:
        return np.ones(1)
    x = logits.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - x.max())
        return e / e.sum()


def _recorded(p: Plan) -> np.ndarray | None:
    """The output the entry records (its observed logits, as JSON numbers), or None."""
    rows = p.data.get("candidates")
    if not rows:
        return None
    return np.array([float(r["observed_logit"]) for r in rows], dtype=np.float32)


def test_sampling(p: Plan) -> str:
    if p.trace:
        raise _refuse(p, "a trace (calls on one sampler: its tester makes one sampler, accepts, applies once)")
    if p.abi != 7:
        raise _refuse(p, "the 8-argument init_dry (n_ctx_train): llama_sampler_init_dry_testing takes the 7-argument "
                         "parameters")
    a = p.applies[0]
    c = a.case
    why = refusal_of_test_dry(c)
    if why:
        raise _refuse(p, why)
    if a.expected.finite.any():
        raise _refuse(p, "the promise finite-penalty (a logit that must stay finite: probabilities after softmax "
                         "are 0 either way)")
    expected = np.asarray(a.expected.logits, dtype=np.float32)
    if not np.isfinite(expected).any():
        raise _refuse(p, "an output whose every logit is -inf (no distribution to compare)")
    if is_finding(p.klass) and not p.crash:
        if a.expected.multi_token:
            raise _refuse(p, "a finding with a multi-token restart sequence (it hands apply the sequences as the model "
                             "says init_dry builds them from the strings, so their construction is not run)")
        differing = [d.get("direction") for d in (p.data.get("verdict") or {}).get("differing", [])]
        if "array" in differing or "sorted" in differing:
            raise _refuse(p, "a change of the candidate array or of its sorted flag (it compares probabilities only)")
        seen = _recorded(p)
        if seen is None or len(seen) != len(expected):
            raise _refuse(p, "this finding (the entry records no output to show the difference against)")
        shown = np.abs(_softmax(seen) - _softmax(expected)).max() if len(expected) > 1 else 0.0
        if not shown >= MARGIN:
            raise _refuse(p, f"this finding: after softmax its probabilities differ by {shown:.2g}, not the "
                             f"{MARGIN:g} its 1e-5 tolerance needs to show" + (" (one candidate: probability 1)"
                                                                                 if len(expected) == 1 else ""))
    return call_of_test_dry(c, _header_lines(p), expected)


def refusal_of_test_dry(c: Case) -> str | None:
    """Why test_dry cannot express the case itself (its vocabulary, configuration or candidate array), or None."""
    if c.vocab is not None:
        return f"a real vocabulary ({c.vocab}: its tester has none, and its array is ids 0..n-1)"
    if not (c.multiplier != 0.0 and c.base >= 1.0 and c.penalty_last_n > 0):
        return ("a configuration that turns DRY off (multiplier 0, base below 1, or penalty_last_n <= 0): "
                "llama_sampler_init_dry_testing then takes init_dry's empty sampler for a DRY one and crashes")
    if c.candidates is not None and (list(c.ids) != list(range(len(c.ids))) or len(set(c.logits)) != 1):
        return "an explicit candidate array (its tester's array is ids 0..n-1 in id order, equal probabilities)"
    if c.sorted:
        return "a sorted candidate array (its tester's array is unsorted)"
    return None


def tester_probabilities(c: Case, logits: np.ndarray) -> np.ndarray:
    """The probabilities test_dry's tester reads when DRY leaves `logits` for the case (its candidate array,
    logits 0): the tester starts every id at logf(1/n), so the same penalties are taken from there, then the
    dist sampler's softmax."""
    n = len(c.ids)
    start = np.float32(np.log(np.float32(1.0 / n)))  # logf(p): the tester's initial logit
    initial = np.asarray(c.logits, dtype=np.float64)
    penalty = initial - np.asarray(logits, dtype=np.float32).astype(np.float64)  # what apply subtracted
    with np.errstate(invalid="ignore", over="ignore"):  # an infinite output keeps its sign; NaN stays NaN
        after = (start - penalty.astype(np.float32)).astype(np.float32)
    return _softmax(after)


def call_of_test_dry(c: Case, notes, expected: np.ndarray | None = None) -> str:
    """One test_dry(...) call for a case test_dry expresses (the caller checked), asserting `expected` (the
    output logits; default: the oracles' expected output), with `notes` (lines, or one line) as its comment."""
    if expected is None:
        expected = expected_output(c).logits
    want = tester_probabilities(c, expected)
    n = len(c.ids)
    seqs = restart_sequences_of(tuple(c.breakers))
    brk = "{" + ", ".join("{" + ", ".join(str(t) for t in (h, *tail)) + "}" for h, tail in seqs) + "}"
    fl = lambda v: ", ".join(_f32(float(x)) for x in v)  # noqa: E731
    hist = ", ".join(map(str, c.history))
    notes = ([notes] if isinstance(notes, str) else list(notes)) + _wrap([
        f"history {c.symbols!r} (token i is symbol i: a, b, c, ...), window {c.penalty_last_n}, breakers "
        f"{list(c.breakers)} as restart sequences (init_dry's construction, as dryz models it)"])
    lines = [f"    // {ln}" for ln in notes]
    lines.append(f"    test_dry({{{fl([np.float32(1.0 / n)] * n)}}}, {{{hist}}}, {{{fl(want)}}}, {_f32(c.multiplier)}, "
                 f"{_f32(c.base)}, {c.allowed_length}, {c.penalty_last_n}, {brk});")
    return "\n".join(lines) + "\n"


# -- the events, shared by pytest and C -----------------------------------------------------------------------


def _apply_array(p: Plan, k: int) -> tuple[list[int] | None, list[float] | None, bool]:
    """Apply k's candidate array: (ids, logits) or (None, None) for every token of the vocabulary at logit 0,
    and its sorted flag."""
    c = p.applies[k].case
    if c.candidates is None:
        return None, None, bool(c.sorted)
    return list(c.ids), [float(x) for x in c.logits], bool(c.sorted)


def _vocab_bytes(p: Plan) -> bytes | None:
    """The symbol vocabulary's GGUF (embedded in the test) when breakers need one; None when no vocabulary is
    read (no breakers: init_dry does not touch it) or the case names a real one."""
    if p.vocab is not None or not p.params.breakers:
        return None
    return symbol_vocab_path().read_bytes()


def _vocab_path(p: Plan) -> str | None:
    return None if p.vocab is None else str(resolve_vocab(p.vocab).path)


# -- pytest ---------------------------------------------------------------------------------------------------


PYTEST_BODY = '''
def _bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


_LOG = None


def _quiet():
    global _LOG
    if _LOG is None:
        _LOG = llama_cpp.llama_log_callback(lambda level, text, user: None)
    llama_cpp.llama_log_set(_LOG, ctypes.c_void_p(0))


def _vocab(tmp):
    """(vocab pointer or None, model to free): the vocabulary init_dry reads the breakers with."""
    if VOCAB_GGUF is None and VOCAB_PATH is None:
        return None, None
    path = os.environ.get("DRY_VOCAB_GGUF", VOCAB_PATH)
    if VOCAB_GGUF is not None:
        path = os.path.join(tmp, "symbols.gguf")
        with open(path, "wb") as f:
            f.write(base64.b64decode(VOCAB_GGUF))
    else:
        assert os.path.exists(path), f"the vocabulary {path} is missing (set DRY_VOCAB_GGUF)"
        with open(path, "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == VOCAB_SHA256, f"{path} is not the entry's vocabulary"
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(path.encode(), params)
    assert model, f"llama_model_load_from_file({path}) failed"
    return llama_cpp.llama_model_get_vocab(model), model


def _apply(smpl, k):
    ids, logits, sorted_in = APPLIES[k]["array"]
    if ids is None:
        ids, logits = list(range(N_VOCAB)), [0.0] * N_VOCAB
    n = len(ids)
    data = (llama_cpp.llama_token_data * n)()
    for i, (t, lg) in enumerate(zip(ids, logits)):
        data[i].id, data[i].logit, data[i].p = t, lg, 0.0
    arr = llama_cpp.llama_token_data_array(data=data, size=n, selected=-1, sorted=sorted_in)
    llama_cpp.llama_sampler_apply(smpl, ctypes.byref(arr))
    view = (llama_cpp.llama_token_data * arr.size).from_address(ctypes.addressof(arr.data.contents))
    return [d.id for d in view], [_bits(d.logit) for d in view], bool(arr.sorted)


def _same_abi():
    n_args = len(llama_cpp.llama_sampler_init_dry.argtypes)
    assert n_args == ABI, (f"the entry is on the {ABI}-argument llama_sampler_init_dry; this llama-cpp-python "
                           f"binds {n_args} arguments")


def observe():
    """Run the events on one sampler: per apply (ids, logit bits, sorted flag) as the library left them."""
    _same_abi()
    llama_cpp.llama_backend_init()
    _quiet()
    with tempfile.TemporaryDirectory() as tmp:
        vocab, model = _vocab(tmp)
        names = (ctypes.c_char_p * max(1, len(BREAKERS)))(*[b.encode() for b in BREAKERS])
        head = (vocab,) if ABI == 7 else (vocab, N_CTX_TRAIN)
        smpl = llama_cpp.llama_sampler_init_dry(*head, MULTIPLIER, BASE, ALLOWED_LENGTH, PENALTY_LAST_N, names,
                                                len(BREAKERS))
        kept, outs = [], []
        for ev in EVENTS:
            if ev[0] == "accept":
                for t in ev[1]:
                    llama_cpp.llama_sampler_accept(smpl, t)
            elif ev[0] == "apply":
                outs.append(_apply(smpl, ev[1]))
            elif ev[0] == "reset":
                llama_cpp.llama_sampler_reset(smpl)
            elif ev[0] == "clone":
                kept.append(smpl)
                smpl = llama_cpp.llama_sampler_clone(smpl)
            elif ev[0] == "free":
                llama_cpp.llama_sampler_free(smpl)
                smpl = None
        if smpl is not None:
            llama_cpp.llama_sampler_free(smpl)
        for s in reversed(kept):
            llama_cpp.llama_sampler_free(s)
        if model is not None:
            llama_cpp.llama_model_free(model)
    return outs


def test_dry_as_the_oracles_say():
    _same_abi()
    if CRASHES:  # the library died on this on the build it was found on: run it in a child process
        child = subprocess.run([sys.executable, __file__], capture_output=True, text=True, timeout=600)
        assert child.returncode == 0, f"the library's process died (exit {child.returncode}): {child.stderr[-800:]}"
        outs = json.loads(child.stdout.strip().splitlines()[-1])
    else:
        outs = observe()
    assert len(outs) == len(APPLIES)
    for k, (a, (ids, bits, sorted_out)) in enumerate(zip(APPLIES, outs)):
        given = a["array"][0] if a["array"][0] is not None else list(range(N_VOCAB))
        initial = a["array"][1] if a["array"][1] is not None else [0.0] * N_VOCAB
        assert ids == given, f"apply {k}: DRY changed the candidate array"
        for t, got, start in zip(ids, bits, initial):
            want = a["changed"].get(t, start)
            logit = struct.unpack("<f", struct.pack("<I", got))[0]
            if want is FINITE:
                assert math.isfinite(logit), f"apply {k}, token {t}: logit {logit}, promised finite"
            else:
                assert got == _bits(want), f"apply {k}, token {t}: logit {logit!r}, the oracles say {want!r}"
        assert sorted_out == a["sorted"], f"apply {k}: sorted flag {sorted_out}, the oracles say {a['sorted']}"


if __name__ == "__main__":  # the child process of a crash entry's test
    print(json.dumps(observe()))
'''


def _py_float(x: float) -> str:
    return "-math.inf" if x == -math.inf else repr(float(x))


def pytest_file(p: Plan) -> str:
    pr = p.params
    gguf = _vocab_bytes(p)
    applies = []
    for k, a in enumerate(p.applies):
        ids, logits, srt = _apply_array(p, k)
        arr = "(None, None, %r)" % srt if ids is None else \
            f"({ids!r}, [{', '.join(_py_float(x) for x in logits)}], {srt!r})"
        changed = ", ".join(f"{t}: {'FINITE' if v is None else _py_float(v)}" for t, v in _changed(a))
        applies.append(f"    {{\"array\": {arr}, \"changed\": {{{changed}}}, \"sorted\": {a.expected.sorted!r}}},")
    events = []
    k = 0
    for e in p.events:
        if e[0] == "apply":
            events.append(f"    (\"apply\", {k}),")
            k += 1
        elif e[0] == "accept":
            events.append(f"    (\"accept\", {list(e[1])!r}),")
        else:
            events.append(f"    (\"{e[0]}\",),")
    doc = "\n".join(_header_lines(p))
    head = f'''"""{doc}

A self-contained test on llama-cpp-python's bindings (llama_cpp): the events below on one DRY sampler, and after each
apply every candidate's logit (float32 bits) and the sorted flag as dryz's oracles say. The expected values come
from the oracles (the shipped model of llama.cpp's DRY, or its promises), never from running a library.

Run:  pytest {{this file}}     (LLAMA_CPP_LIB_PATH=DIR selects the libllama llama-cpp-python loads)
"""

import base64
import ctypes
import hashlib
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import llama_cpp

ABI = {p.abi}  # llama_sampler_init_dry's arguments (8: n_ctx_train after the vocabulary, llama-cpp-python <= 0.3.34)
MULTIPLIER = {_py_float(pr.multiplier)}
BASE = {_py_float(pr.base)}
ALLOWED_LENGTH = {pr.allowed_length}
PENALTY_LAST_N = {pr.penalty_last_n}
N_CTX_TRAIN = {pr.n_ctx_train}
BREAKERS = {list(pr.breakers)!r}
N_VOCAB = {p.alphabet}  # an apply without an array: every token 0..N_VOCAB-1 at logit 0
VOCAB_PATH = {_vocab_path(p)!r}  # a real vocabulary (a GGUF; DRY_VOCAB_GGUF overrides the path)
VOCAB_SHA256 = {p.vocab_sha256!r}
# the symbol vocabulary (token i is the character "abc..."[i]), for the breakers' strings
VOCAB_GGUF = {repr(base64.b64encode(gguf).decode()) if gguf else None}
CRASHES = {p.crash!r}  # class crash or memory: the library died on it on its build (run it in a child process)
FINITE = object()  # the promise finite-penalty: the logit must stay finite

EVENTS = [
{chr(10).join(events)}
]
# per apply: the array given (ids, logits, sorted flag; None: every token at logit 0), the candidates whose logit
# must change (to this float32, or FINITE), every other left as given, and the sorted flag it must leave
APPLIES = [
{chr(10).join(applies)}
]
'''
    return head + PYTEST_BODY


# -- C --------------------------------------------------------------------------------------------------------


C_HELPERS = r'''
static int bad = 0;

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static void quiet(enum ggml_log_level level, const char * text, void * user) {
    (void) level; (void) text; (void) user;
}

struct expect { llama_token id; float logit; int finite_only; };

/* One apply: the array given (ids NULL: every token 0..n-1 at logit 0), then every candidate checked. */
static void apply_and_check(struct llama_sampler * s, int k, const llama_token * ids, const float * logits, size_t n,
                            bool sorted_in, const struct expect * changed, size_t n_changed, bool sorted_out) {
    llama_token_data * data = calloc(n, sizeof *data);
    for (size_t i = 0; i < n; i++) {
        data[i].id = ids ? ids[i] : (llama_token) i;
        data[i].logit = logits ? logits[i] : 0.0f;
    }
    llama_token_data_array arr = { data, n, -1, sorted_in };
    llama_sampler_apply(s, &arr);
    if (arr.size != n) {
        printf("apply %d: DRY changed the array's size (%zu, given %zu)\n", k, arr.size, n);
        bad = 1;
    }
    for (size_t i = 0; i < arr.size && i < n; i++) {
        llama_token t = ids ? ids[i] : (llama_token) i;
        float want = logits ? logits[i] : 0.0f;
        int finite_only = 0;
        for (size_t j = 0; j < n_changed; j++) {
            if (changed[j].id == t) {
                want = changed[j].logit;
                finite_only = changed[j].finite_only;
            }
        }
        if (arr.data[i].id != t) {
            printf("apply %d: DRY changed the array (token %d at %zu, given %d)\n", k, arr.data[i].id, i, t);
            bad = 1;
        } else if (finite_only ? !isfinite(arr.data[i].logit) : bits(arr.data[i].logit) != bits(want)) {
            printf("apply %d, token %d: logit %.9g, the oracles say %s%.9g\n", k, t, arr.data[i].logit,
                   finite_only ? "finite, not " : "", finite_only ? arr.data[i].logit : want);
            bad = 1;
        }
    }
    if (arr.sorted != sorted_out) {
        printf("apply %d: sorted flag %d, the oracles say %d\n", k, (int) arr.sorted, (int) sorted_out);
        bad = 1;
    }
    free(data);
}
'''


def _c_array(kind: str, name: str, values: list[str]) -> str:
    body = ", ".join(values) if values else "0"
    return f"static const {kind} {name}[] = {{{body}}};"


def c_program(p: Plan) -> str:
    pr = p.params
    gguf = _vocab_bytes(p)
    decls, body = [], []
    brk = [_c_string(b.encode()) for b in pr.breakers]
    if brk:
        decls.append(f"static const char * BREAKERS[] = {{{', '.join(brk)}}};")
    if gguf is not None:
        decls.append("/* the symbol vocabulary (token i is the character \"abc...\"[i]), for the breakers' strings */")
        decls.append(f"static const unsigned char VOCAB_GGUF[{len(gguf)}] = {{")
        decls += ["    " + ", ".join(str(b) for b in gguf[i:i + 24]) + "," for i in range(0, len(gguf), 24)]
        decls.append("};")
    k = 0
    for e in p.events:
        if e[0] == "accept":
            body.append(f"    {{ /* accept {len(e[1])} token(s) */")
            body.append(f"        {_c_array('llama_token', 't', [str(t) for t in e[1]])}")
            body.append(f"        for (size_t i = 0; i < {len(e[1])}; i++) llama_sampler_accept(cur, t[i]);")
            body.append("    }")
        elif e[0] == "apply":
            a = p.applies[k]
            ids, logits, srt = _apply_array(p, k)
            n = p.alphabet if ids is None else len(ids)
            if ids is not None:
                decls.append(_c_array("llama_token", f"IDS{k}", [str(t) for t in ids]))
                decls.append(_c_array("float", f"LOGITS{k}", [_f32(x) for x in logits]))
            ch = _changed(a)
            decls.append(f"static const struct expect CHANGED{k}[] = {{"
                         + ", ".join(f"{{{t}, {'0.0f, 1' if v is None else _f32(v) + ', 0'}}}" for t, v in ch)
                         + ("" if ch else "{0, 0.0f, 0}") + "};")
            body.append(f"    apply_and_check(cur, {k}, {'NULL' if ids is None else f'IDS{k}'}, "
                        f"{'NULL' if ids is None else f'LOGITS{k}'}, {n}, {str(srt).lower()}, CHANGED{k}, {len(ch)}, "
                        f"{str(a.expected.sorted).lower()});")
            k += 1
        elif e[0] == "reset":
            body.append("    llama_sampler_reset(cur);")
        elif e[0] == "clone":
            body.append("    kept[n_kept++] = cur;")
            body.append("    cur = llama_sampler_clone(cur);")
        elif e[0] == "free":
            body.append("    llama_sampler_free(cur);")
            body.append("    cur = NULL;")
    n_clones = sum(e[0] == "clone" for e in p.events)
    vpath = _vocab_path(p)
    if gguf is not None:
        load = '''    char path[] = "/tmp/dry-vocab-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, VOCAB_GGUF, sizeof VOCAB_GGUF) != (ssize_t) sizeof VOCAB_GGUF) {
        perror("writing the vocabulary");
        return 2;
    }
    close(fd);'''
    elif vpath is not None:
        load = (f"    /* the vocabulary's sha256: {p.vocab_sha256} */\n"
                f"    const char * path = argc > 1 ? argv[1] : {_c_string(vpath.encode())};")
    else:
        load = None
    lines = ["/* " + "\n * ".join(_header_lines(p)),
             " *",
             " * A standalone C program against llama.h: the events below on one DRY sampler, and after each apply",
             " * every candidate's logit (float32 bits) and the sorted flag as dryz's oracles say (the shipped model",
             " * of llama.cpp's DRY, or its promises; never a library's output).",
             " *",
             " * Build, against the llama.h of the release the entry was made on (llama.cpp's include/ and",
             " * ggml/include/):",
             " *   cc -std=c11 -O1 -I LLAMA/include -I LLAMA/ggml/include THIS.c -L LIBDIR -lllama -lggml-base -lm \\",
             " *      -o dry_case",
             " * Run:",
             " *   LD_LIBRARY_PATH=LIBDIR ./dry_case" + (" [VOCAB.gguf]" if vpath else ""),
             " * Exit 0: every apply leaves what the oracles say; 1: one does not (each difference printed); 2: the",
             " * vocabulary cannot be loaded. A library that dies on it ends the program as it ends any caller"
             + (" (a sanitized build: run it with that build's sanitizer runtime in LD_PRELOAD)." if p.klass == MEMORY
                else "."),
             " */",
             "#define _POSIX_C_SOURCE 200809L",
             '#include "llama.h"', "", "#include <math.h>", "#include <stdbool.h>", "#include <stdint.h>",
             "#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>", "#include <unistd.h>",
             C_HELPERS]
    lines += decls
    lines += ["", "int main(int argc, char ** argv) {", "    (void) argc; (void) argv;",
              "    llama_log_set(quiet, NULL);", "    llama_backend_init();",
              "    const struct llama_vocab * vocab = NULL;", "    struct llama_model * model = NULL;"]
    if load is not None:
        lines += [load,
                  "    struct llama_model_params mp = llama_model_default_params();",
                  "    mp.vocab_only = true;",
                  "    model = llama_model_load_from_file(path, mp);"]
        if gguf is not None:
            lines.append("    unlink(path);")
        lines += ["    if (model == NULL) {", '        fprintf(stderr, "cannot load the vocabulary %s\\n", path);',
                  "        return 2;", "    }", "    vocab = llama_model_get_vocab(model);"]
    head = "vocab" if p.abi == 7 else f"vocab, {pr.n_ctx_train}"
    lines += [f"    struct llama_sampler * cur = llama_sampler_init_dry({head}, {_f32(pr.multiplier)}, "
              f"{_f32(pr.base)}, {pr.allowed_length}, {pr.penalty_last_n}, {'BREAKERS' if brk else 'NULL'}, "
              f"{len(brk)});",
              f"    struct llama_sampler * kept[{max(n_clones, 1)}];", "    int n_kept = 0;"]
    lines += body
    lines += ["    if (cur != NULL) llama_sampler_free(cur);",
              "    while (n_kept > 0) llama_sampler_free(kept[--n_kept]);",
              "    if (model != NULL) llama_model_free(model);",
              "    llama_backend_free();",
              '    printf("%s\\n", bad ? "FAILED: the library differs from the oracles" : "ok: as the oracles say");',
              "    return bad ? 1 : 0;", "}"]
    return "\n".join(lines) + "\n"
