"""Sanitized subjects (`dryz subject build --sanitize address,undefined`) and the `memory` class.

The planted bug tests/patches/repeat-count-past-end.diff writes one slot past the end of dry_repeat_count (inside
its capacity) whenever Step 1 finds a restart sequence and the history is shorter than the window: no logit
changes, so no output comparison can see it on the plain build; on the sanitized build libstdc++'s vector
annotations make it a container-overflow, and dryz finds it as class memory, minimized with the report's frames.

The builds are made on first use (the sanitized one takes minutes: clang, -O1, every source); without clang,
compiler-rt, cmake or PyPI these tests skip, unless DRYZ_REQUIRE_BUILDS=1 (CI), where they fail.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import conftest
import pytest

from dryz.subject.build import BUILD_INFO, parse_sanitize, runtime_env
from dryz.subject.sanitizer import died, report

PLANTED = "repeat-count-past-end.diff"

ASAN = """=================================================================
==4242==ERROR: AddressSanitizer: container-overflow on address 0x611 at pc 0x7f bp 0x7ff sp 0x7ff
WRITE of size 4 at 0x611 thread T0
    #0 0x7f4047988d4e in llama_sampler_dry_apply(llama_sampler*, llama_token_data_array*) /s/llama-sampler.cpp:3457:61
    #1 0x7f4047988d4f in llama_sampler_apply /s/src/llama-sampler.cpp:388:5
    #2 0x7f4047988d50  (/nonexistent/libffi.so.8+0x6f79) (BuildId: 4b5ef0d8)

0x611 is located 4 bytes to the right of 16-byte region [0x600,0x610)
allocated by thread T0 here:
    #0 0x7f40538e1dbd in operator new(unsigned long) asan_new_delete.cpp:95:3
SUMMARY: AddressSanitizer: container-overflow /s/src/llama-sampler.cpp:3457:61 in llama_sampler_dry_apply
==4242==ABORTING
"""

UBSAN = """/s/llama-sampler.cpp:3580:48: runtime error: signed integer overflow: 5 - -2147483648 cannot be represented
    #0 0x7f11 in llama_sampler_dry_apply(llama_sampler*, llama_token_data_array*) /s/src/llama-sampler.cpp:3580:48
SUMMARY: UndefinedBehaviorSanitizer: undefined-behavior /s/src/llama-sampler.cpp:3580:48
"""


def test_an_asan_report():
    r = report("some output\n" + ASAN)
    assert r["sanitizer"] == "AddressSanitizer" and r["kind"] == "container-overflow"
    assert r["frames"] == ["llama_sampler_dry_apply(llama_sampler*, llama_token_data_array*) llama-sampler.cpp:3457:61",
                           "llama_sampler_apply llama-sampler.cpp:388:5", "(libffi.so.8+0x6f79)"]  # not the allocation
    assert r["function"] == "llama_sampler_dry_apply"
    assert r["summary"] == ("AddressSanitizer: container-overflow (WRITE of size 4) in llama_sampler_dry_apply("
                            "llama_sampler*, llama_token_data_array*) llama-sampler.cpp:3457:61")
    assert died(ASAN)["class"] == "memory" and died("terminate called after throwing\n") == {"class": "crash"}


def test_a_ubsan_report():
    r = report(UBSAN)
    assert r["sanitizer"] == "UndefinedBehaviorSanitizer" and r["kind"] == "signed integer overflow"
    assert r["function"] == "llama_sampler_dry_apply" and len(r["frames"]) == 1
    assert report("no report here\n") is None


def test_sanitize_option_and_runtime_env(tmp_path):
    assert parse_sanitize("undefined,address") == ("address", "undefined") == parse_sanitize("address, undefined")
    assert parse_sanitize(None) == ()
    with pytest.raises(ValueError, match="--sanitize takes address,undefined"):
        parse_sanitize("thread")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / BUILD_INFO).write_text(json.dumps({"llama_cpp_python": "0.3.36"}))
    assert runtime_env(plain / "libllama.so") == {} and runtime_env(None) == {}
    san = tmp_path / "san"
    san.mkdir()
    (san / BUILD_INFO).write_text(json.dumps({"sanitize": ["address", "undefined"], "sanitizer_runtime": "/rt.so"}))
    env = runtime_env(san)
    assert env["LD_PRELOAD"] == "/rt.so" and "detect_leaks=0" in env["ASAN_OPTIONS"] and \
        "abort_on_error=1" in env["ASAN_OPTIONS"] and "halt_on_error=1" in env["UBSAN_OPTIONS"]
    p = subprocess.run([sys.executable, "-m", "dryz", "subject", "build", "--sanitize", "thread"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--sanitize takes" in p.stderr


def test_a_memory_entry_is_stored_and_read(tmp_path):
    from dryz.case import Case
    from dryz.corpus import crash_entry, load_entry, write_entry
    case = Case(history=(0,), alphabet=1, penalty_last_n=64, breakers=("a",), allowed_length=0)
    data = crash_entry(case, "proven", {"found_by": "test"}, {"libllama_sha256": "0" * 64}, died(ASAN))
    assert data["class"] == data["expect"] == "memory"
    assert data["sanitizer"]["frames"][0].startswith("llama_sampler_dry_apply")
    path = write_entry(tmp_path, data)
    assert load_entry(path).expect == "memory"


# -- real builds -----------------------------------------------------------------------------------------


def _build(patch=None, sanitize=()):
    return conftest.build("0.3.36", patch, sanitize)


@pytest.fixture(scope="session")
def san_pristine():
    return _build(sanitize=("address", "undefined"))


@pytest.fixture(scope="session")
def san_planted(san_pristine):
    return _build(PLANTED, sanitize=("address", "undefined"))


@pytest.fixture(scope="session")
def plain_planted():
    return _build(PLANTED)


def dryz(lib, *args, timeout=900, **kw):
    return conftest.dryz(*args, lib=lib, timeout=timeout, **kw)


def test_the_pristine_sanitized_build_is_clean(san_pristine, tmp_path):
    """The default certificate, the corpus replay (the subject server) and a short fuzz campaign, each in a
    process that re-executes itself with the runtime preloaded; the campaign counts coverage (the runtime
    combined with libFuzzer)."""
    info = json.loads((san_pristine / BUILD_INFO).read_text())
    assert info["sanitize"] == ["address", "undefined"] and info["sanitizer_runtime"].endswith(".so")
    assert san_pristine.name.endswith("-san-address-undefined-s2")
    p = dryz(san_pristine, "exhaustive", "--json", str(tmp_path / "r.json"))
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert "CERTIFIED" in p.stdout and "[sanitized: address,undefined]" in p.stdout
    assert dryz(san_pristine, "replay").returncode == 0
    f = dryz(san_pristine, "fuzz", "--time", "20", "--jobs", "1", "--workdir", str(tmp_path / "w"), "--json",
             str(tmp_path / "f.json"))
    assert f.returncode == 0, f.stdout[-2000:] + f.stderr[-2000:]
    summary = json.loads((tmp_path / "f.json").read_text())
    assert summary["findings"] == [] and summary["cov"] > 0 and summary["execs"] > 0
    assert "Using preloaded libfuzzer" in (tmp_path / "w" / "libfuzzer.log").read_text()


def test_the_planted_write_is_memory_on_the_sanitized_build(san_planted, tmp_path):
    """fuzz finds it (every finding re-checked as class memory), minimize shrinks one to a proven-shortest
    reproducer stored as class memory with the report's first frames, and check, replay and exhaustive see it."""
    f = dryz(san_planted, "fuzz", "--time", "60", "--jobs", "1", "--workdir", str(tmp_path / "w"), "--json",
             str(tmp_path / "f.json"), "--", "-ignore_crashes=0")
    assert f.returncode == 1, f.stdout[-2000:] + f.stderr[-2000:]
    findings = json.loads((tmp_path / "f.json").read_text())["findings"]
    assert findings and all(x["klass"] == "memory" and x["reproduces"] for x in findings)
    # one slot past the end: inside the vector's capacity (container-overflow) or, where the capacity is the size,
    # past the allocation (heap-buffer-overflow); which crash file a campaign writes first varies
    assert findings[0]["kind"] in ("container-overflow", "heap-buffer-overflow")
    assert findings[0]["frames"][0].startswith("llama_sampler_dry_apply(")
    # the smallest container-overflow crash file where the campaign wrote one (its shortest reproducer is one
    # token, below); else the smallest of any kind
    pool = [x for x in findings if x["kind"] == "container-overflow"] or findings
    crash = min((Path(x["file"]) for x in pool), key=lambda q: q.stat().st_size)
    m = dryz(san_planted, "minimize", str(crash), "--corpus", str(tmp_path / "c"))
    assert m.returncode == 0, m.stdout + m.stderr[-2000:]
    [path] = list((tmp_path / "c").glob("memory-*.json"))
    entry = json.loads(path.read_text())
    assert entry["class"] == entry["expect"] == "memory" and entry["shortest"] == "proven"
    assert entry["sanitizer"]["kind"] in ("container-overflow", "heap-buffer-overflow")
    assert entry["sanitizer"]["frames"][0].startswith("llama_sampler_dry_apply(")
    assert "llama-sampler.cpp:" in entry["sanitizer"]["frames"][0]
    assert entry["subject"]["built_by_dryz"]["sanitize"] == ["address", "undefined"]
    # the reproducer: a breaker completed, the window above the history, as the trigger needs; for
    # container-overflow one token (a heap-buffer-overflow's shortest reproducer, when a campaign wrote only
    # that kind, was 'aaa' with breaker 'a': the minimizer keeps the kind)
    case = entry["case"]
    assert case["breakers"] and case["penalty_last_n"] > len(case["history"]) >= 1
    if entry["sanitizer"]["kind"] == "container-overflow":
        assert len(case["history"]) == 1
    c = dryz(san_planted, "check", str(path))
    assert c.returncode == 1 and json.loads(c.stdout)["verdict"]["class"] == "memory"
    assert dryz(san_planted, "replay", str(tmp_path / "c")).returncode == 0  # replays as recorded
    e = dryz(san_planted, "exhaustive", "--json", str(tmp_path / "r.json"))
    assert e.returncode == 1 and "CRASH" in e.stdout, e.stdout + e.stderr[-2000:]
    assert "class memory: AddressSanitizer: container-overflow" in e.stdout  # the isolation worker's Crash
    (tmp_path / "entry.json").write_text(json.dumps(entry))


def test_no_output_comparison_sees_it_on_the_plain_build(plain_planted, tmp_path):
    """The same patch without sanitizers: every output is intact, so every mode passes (the write lands inside
    the vector's allocation and nothing reads it)."""
    for args in (["exhaustive"], ["exhaustive", "--parameters"], ["exhaustive", "--window-caps"],
                 ["exhaustive", "--trace-events", "7"], ["restarts"], ["replay"]):
        json_args = ["--json", str(tmp_path / "r.json")] if args[0] == "exhaustive" else []
        p = dryz(plain_planted, *args, *json_args)
        assert p.returncode == 0, (args, p.stdout[-2000:], p.stderr[-2000:])
    f = dryz(plain_planted, "fuzz", "--time", "30", "--jobs", "1", "--workdir", str(tmp_path / "w"))
    assert f.returncode == 0, f.stdout[-2000:] + f.stderr[-2000:]
    f = dryz(plain_planted, "fuzz", "--traces", "--time", "20", "--jobs", "1", "--workdir", str(tmp_path / "t"))
    assert f.returncode == 0, f.stdout[-2000:] + f.stderr[-2000:]
    case = tmp_path / "a.json"
    case.write_text(json.dumps({"schema": "dryz.case/1", "history": [0], "alphabet": 1, "penalty_last_n": 64,
                                "breakers": ["a"], "multiplier": 1.0, "base": 2.0, "allowed_length": 0}))
    c = dryz(plain_planted, "check", str(case))
    assert c.returncode == 0 and json.loads(c.stdout)["verdict"]["class"] == "agree"
