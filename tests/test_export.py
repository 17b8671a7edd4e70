"""`dryz export ENTRY --as test-sampling|pytest|c`: a corpus entry as a test in its target's own style, its expected
values from the oracles. Each form is compiled or run here as its target runs it:

- test-sampling: the exported test_dry call added to llama.cpp's own tests/test-sampling.cpp of the 0.3.36 sdist
  (dryz.mutate.upstream compiles it against the pristine libllama), run on the pristine build (an agree entry and a
  planted bug's minimized witness pass) and on the planted build the witness came from (it fails there);
- pytest: the file run with pytest on llama-cpp-python (LLAMA_CPP_LIB_PATH selects the build): agree entries pass,
  findings fail on the build they were found on, a crash is a failing test (the library dies in a child process);
- c: the program compiled with cc against the 0.3.36 llama.h and run on the pristine libllama (a trace with a reset,
  a real vocabulary's promise finding, a crash trace) and on the builds the findings came from.

The builds are made on first use (cached); without a compiler they skip, unless DRYZ_REQUIRE_BUILDS=1 (CI).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import conftest
import pytest

from dryz.export import FORMS, ExportError, export

CORPUS = conftest.ROOT / "corpus"
AGREE_SEED = CORPUS / "seeds" / "agree-1493b47d79.json"  # llama.cpp's own second test_dry case (base 1.1)
TRACE = CORPUS / "traces" / "agree-trace-b8f14250dc.json"  # +a R +b A: a reset
FINITE = CORPUS / "findings" / "promise-finite-penalty-5573ce8e83.json"
IN_TOKEN = CORPUS / "findings" / "promise-breaker-in-token-a382cd9c2e.json"  # llama-spm
SERVED = CORPUS / "findings" / "served-empty-prompt-1cb48f7350.json"
OFF = CORPUS / "findings" / "agree-e17141ebc9.json"  # penalty_last_n 0: DRY off


def export_cli(*args):
    return conftest.dryz("export", *map(str, args), timeout=300)


# -- what the forms refuse, and what they assert -------------------------------------------------------------


@pytest.mark.parametrize("entry,why", [
    (TRACE, "a trace (calls on one sampler"),
    (IN_TOKEN, "a real vocabulary (llama-spm"),
    (FINITE, "the promise finite-penalty"),
    (OFF, "a configuration that turns DRY off"),
    (CORPUS / "findings" / "documented-contained-restart-d4c21dd4be.json", "an explicit candidate array"),
])
def test_test_sampling_refuses_what_test_dry_cannot_express_naming_the_next_form(entry, why):
    with pytest.raises(ExportError) as e:
        export(str(entry), "test-sampling")
    msg = str(e.value)
    assert f"test_dry cannot express {why}" in msg and msg.endswith(": export it --as pytest (or --as c)")
    assert "\n" not in msg
    for form in ("pytest", "c"):  # the next forms express it
        assert export(str(entry), form)


def test_refusals_are_one_line_and_exit_2():
    p = export_cli(TRACE, "--as", "test-sampling")
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1
    assert p.stderr.startswith("dryz: error: ") and "--as pytest" in p.stderr
    for form in FORMS:  # no form expresses llama-server's request layer
        p = export_cli(SERVED, "--as", form)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "served-* witness" in p.stderr
    p = export_cli(AGREE_SEED, "--as", "rust")
    assert p.returncode == 2 and "'rust' is not one of" in p.stderr
    p = export_cli(conftest.ROOT / "README.md", "--as", "c")
    assert p.returncode == 2 and p.stderr.count("\n") == 1


def test_the_expected_values_are_the_oracles(tmp_path):
    """The agree seed's call is llama.cpp's own second test_dry case, its probabilities computed from the shipped
    model (llama.cpp's hand-written 0.296923f, 0.109232f); the finite-penalty finding asks for a finite logit where
    the library (and the shipped model) give -inf; --output writes what stdout shows."""
    call = export(str(AGREE_SEED), "test-sampling").splitlines()[-1]
    assert call == ("    test_dry({0.25f, 0.25f, 0.25f, 0.25f}, {0, 1, 2, 0, 1}, {0.296922742f, 0.296922742f, "
                    "0.109231773f, 0.296922742f}, 1.0f, 1.10000002f, 2, 5, {});")
    text = export(str(FINITE), "pytest")
    assert '"changed": {0: FINITE}' in text and "MULTIPLIER = 3.3999999521443642e+38" in text
    assert "fails on the build the entry was found on" in " ".join(text.split())
    out = tmp_path / "t.c"
    p = export_cli(TRACE, "--as", "c", "--output", out)
    assert p.returncode == 0 and p.stdout == "" and out.read_text() == export(str(TRACE), "c")


# -- the forms run as their targets run them -----------------------------------------------------------------


@pytest.fixture(scope="module")
def pristine():
    return conftest.build("0.3.36")


@pytest.fixture(scope="module")
def plus_one():
    return conftest.build("0.3.36", "restart-limit-plus-one.diff")


@pytest.fixture(scope="module")
def witness(plus_one, tmp_path_factory):
    """The planted bug's witness as `dryz minimize` writes it: `cac` (breaker c, allowed_length 1) shrunk on the
    restart-limit-plus-one build."""
    d = tmp_path_factory.mktemp("witness")
    (d / "cac.json").write_text(json.dumps({"schema": "dryz.case/1", "history": [2, 0, 2], "alphabet": 3,
                                            "penalty_last_n": 64, "breakers": ["c"], "multiplier": 1.0,
                                            "base": 2.0, "allowed_length": 1}))
    p = conftest.dryz("minimize", str(d / "cac.json"), "--corpus", str(d / "c"), "--json", str(d / "m.json"),
                      lib=plus_one)
    assert p.returncode == 0, p.stdout + p.stderr
    written = Path(json.loads((d / "m.json").read_text())["written"])
    assert json.loads(written.read_text())["expect"] == "mismatch"
    return written


def _test_sampling(calls: str, pristine: Path) -> Path:
    from dryz.mutate.upstream import build_test_sampling
    from dryz.subject.build import BuildError
    try:
        return build_test_sampling("0.3.36", pristine, calls=calls)
    except BuildError as e:
        if conftest.REQUIRE_BUILDS:
            raise
        pytest.skip(f"test-sampling cannot be built: {e}")


def test_the_test_sampling_form_in_llama_cpps_own_test(pristine, plus_one, witness):
    from dryz.mutate.upstream import run_test_sampling
    agree = export(str(AGREE_SEED), "test-sampling")
    exe = _test_sampling(agree, pristine)
    assert run_test_sampling(exe, pristine).status == "survived"
    call = export(str(witness), "test-sampling")
    said = " ".join(call.replace("//", " ").split())  # the comment lines, unwrapped
    assert "it fails on the build the entry was found on" in said and "restart-limit-plus-one.diff" in said
    exe = _test_sampling(call, pristine)
    assert run_test_sampling(exe, pristine).status == "survived"  # the oracles' values: a correct build passes
    r = run_test_sampling(exe, plus_one)
    assert r.status == "crash" and r.exit == -6  # test_dry's GGML_ASSERT on the probabilities
    assert "GGML_ASSERT(fabs(cur_p.data[i].p - probs_expected[i]) < 1e-5) failed" in r.detail


def _pytest(path: Path, lib: Path | None = None) -> subprocess.CompletedProcess:
    env = conftest.clean_env(LLAMA_CPP_LIB_PATH=lib)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=path.parent)


def test_the_pytest_form_on_llama_cpp_python(plus_one, witness, tmp_path):
    """Run with pytest: agree entries pass on the pip build, the witness passes there and fails on the build it
    came from, the finite-penalty finding fails on the pip build (it keeps the shipped behaviour), the reset trace
    fails where reset keeps the tokens, and a crash trace's test fails (its child process dies) without taking
    pytest with it."""
    def write(entry: Path, name: str) -> Path:
        out = tmp_path / f"test_{name}.py"
        out.write_text(export(str(entry), "pytest"))
        assert "import dryz" not in out.read_text() and "from dryz" not in out.read_text()
        return out

    assert _pytest(write(AGREE_SEED, "seed")).returncode == 0
    w = write(witness, "witness")
    assert _pytest(w).returncode == 0
    p = _pytest(w, plus_one)
    assert p.returncode == 1 and "apply 0, token 1: logit -2.0, the oracles say -1.0" in p.stdout
    p = _pytest(write(FINITE, "finite"))
    assert p.returncode == 1 and "apply 0, token 0: logit -inf, promised finite" in p.stdout
    t = write(TRACE, "trace")
    assert _pytest(t).returncode == 0
    p = _pytest(t, conftest.build("0.3.36", "reset-keeps-tokens.diff"))
    assert p.returncode == 1 and "apply 0, token 1: logit -1.0, the oracles say 0.0" in p.stdout
    crash = _crash_trace(tmp_path)
    c = write(crash, "crash")
    assert "CRASHES = True" in c.read_text()
    assert _pytest(c).returncode == 0
    p = _pytest(c, conftest.build("0.3.36", "reset-aborts.diff"))
    assert p.returncode == 1 and "the library's process died (exit -6)" in p.stdout and "1 failed" in p.stdout


def _crash_trace(tmp_path: Path) -> Path:
    """A trace the reset-aborts build dies on, minimized there (class crash, '+a A R')."""
    aborts = conftest.build("0.3.36", "reset-aborts.diff")
    src = tmp_path / "long.json"
    src.write_text(json.dumps({"schema": "dryz.trace/1", "alphabet": 2, "penalty_last_n": 8, "breakers": [],
                               "multiplier": 1.0, "base": 2.0, "allowed_length": 1,
                               "events": [["accept", [0, 1, 0]], ["apply", None], ["reset"], ["accept", [1]],
                                          ["apply", None]]}))
    p = conftest.dryz("minimize", str(src), "--corpus", str(tmp_path / "crash-entries"), "--json",
                      str(tmp_path / "m.json"), lib=aborts)
    assert p.returncode == 0, p.stdout + p.stderr
    written = Path(json.loads((tmp_path / "m.json").read_text())["written"])
    assert json.loads(written.read_text())["spelled"] == "+a A R"  # the reset after the apply
    return written


def _cc(source: str, tmp_path: Path, name: str, pristine: Path) -> Path:
    """The C form compiled with cc against the 0.3.36 llama.h (the sdist's, as test-sampling's build unpacks it)
    and the pristine libllama."""
    from dryz.subject.cache import cache_dir
    cc = shutil.which("cc")
    if cc is None:
        if conftest.REQUIRE_BUILDS:
            raise AssertionError("cc is required")
        pytest.skip("no C compiler")
    _test_sampling("", pristine)  # unpacks the sdist's include/ and ggml/include/
    vendor = cache_dir() / "upstream" / "0.3.36" / "src" / "llama_cpp_python-0.3.36" / "vendor" / "llama.cpp"
    (tmp_path / f"{name}.c").write_text(source)
    exe = tmp_path / name
    p = subprocess.run([cc, "-std=c11", "-O1", "-Wall", "-Werror", "-I", str(vendor / "include"), "-I",
                        str(vendor / "ggml" / "include"), str(tmp_path / f"{name}.c"), "-L", str(pristine),
                        "-lllama", "-lggml-base", "-lm", "-o", str(exe)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    return exe


def _run(exe: Path, lib: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=300,
                          env=conftest.clean_env(LD_LIBRARY_PATH=lib))


def test_the_c_form_against_llama_h(pristine, tmp_path):
    """A trace with a reset passes on the pristine build and fails where reset keeps the tokens; a real vocabulary's
    promise finding (a GGUF path) fails on the pristine build (it keeps the shipped behaviour), each difference
    printed; a crash trace passes on the pristine build and aborts as the library does on its own."""
    trace = _cc(export(str(TRACE), "c"), tmp_path, "trace", pristine)
    p = _run(trace, pristine)
    assert p.returncode == 0 and p.stdout.strip() == "ok: as the oracles say"
    p = _run(trace, conftest.build("0.3.36", "reset-keeps-tokens.diff"))
    assert p.returncode == 1 and "apply 0, token 1: logit -1, the oracles say 0" in p.stdout
    conftest.vocab("llama-spm")  # the vendored vocabulary, extracted once
    vocab = _cc(export(str(IN_TOKEN), "c"), tmp_path, "vocab", pristine)
    p = _run(vocab, pristine)
    assert p.returncode == 1 and "apply 0, token 29871: logit -2, the oracles say -1" in p.stdout
    crash = _cc(export(str(_crash_trace(tmp_path)), "c"), tmp_path, "crash", pristine)
    assert _run(crash, pristine).returncode == 0
    assert _run(crash, conftest.build("0.3.36", "reset-aborts.diff")).returncode == -6  # SIGABRT, as the library


def test_the_c_form_of_an_8_argument_abi_crash(tmp_path):
    """A crash of llama-cpp-python 0.3.34 (the 8-argument init_dry: a window of -2 makes a ring buffer of capacity
    zero, and the first accept throws), minimized there: the C program calls the 8-argument init_dry with the
    entry's n_ctx_train, compiles against 0.3.34's llama.h and dies on that build as the library does;
    test-sampling cannot express that ABI."""
    import tarfile

    from dryz.subject.build import sdist
    old = conftest.build("0.3.34")
    (tmp_path / "c.json").write_text(json.dumps({"schema": "dryz.case/1", "history": [0, 0, 1, 0], "alphabet": 2,
                                                 "penalty_last_n": -2, "breakers": [], "multiplier": 1.0,
                                                 "base": 2.0, "allowed_length": 1}))
    p = conftest.dryz("minimize", str(tmp_path / "c.json"), "--corpus", str(tmp_path / "c"), "--json",
                      str(tmp_path / "m.json"), lib=old)
    assert p.returncode == 0, p.stdout + p.stderr
    entry = json.loads((tmp_path / "m.json").read_text())["written"]
    assert json.loads(Path(entry).read_text())["expect"] == "crash"
    with pytest.raises(ExportError, match="the 8-argument init_dry"):
        export(entry, "test-sampling")
    source = export(entry, "c")
    assert "llama_sampler_init_dry(vocab, 4096, 1.0f, 2.0f, 0, -2, NULL, 0);" in source
    top = "llama_cpp_python-0.3.34/vendor/llama.cpp/"
    with tarfile.open(sdist("0.3.34", lambda m: None, tmp_path / "sdist.log"), "r:gz") as tf:
        tf.extractall(tmp_path / "src", members=[m for m in tf.getmembers() if m.name.startswith(
            (top + "include/", top + "ggml/include/"))], filter="data")
    cc = shutil.which("cc")
    if cc is None:
        if conftest.REQUIRE_BUILDS:
            raise AssertionError("cc is required")
        pytest.skip("no C compiler")
    vendor = tmp_path / "src" / top
    (tmp_path / "x.c").write_text(source)
    c = subprocess.run([cc, "-std=c11", "-O1", "-Wall", "-Werror", "-I", str(vendor / "include"), "-I",
                        str(vendor / "ggml" / "include"), str(tmp_path / "x.c"), "-L", str(old), "-lllama",
                        "-lggml-base", "-lm", "-o", str(tmp_path / "x")], capture_output=True, text=True)
    assert c.returncode == 0, c.stderr[-3000:]
    r = _run(tmp_path / "x", old)
    assert r.returncode == -6 and "ring buffer: capacity is zero" in r.stderr
