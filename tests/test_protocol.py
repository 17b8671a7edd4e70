"""The subject protocol: a new kind is one class plus one registry line, and every mode runs through it; the one
isolation mechanism answers a crash and goes on; the selection on the command line."""

from __future__ import annotations

import os
import sys
import time

import pytest

from conftest import dryz
from dryz.case import Case
from dryz.judge import check, check_in
from dryz.config import space_config
from dryz.subject import Capabilities, Crash, Subject, registry
from dryz.subject.isolation import Pool, Worker


class ByCase(Subject):
    """A trivial kind for the test: the pip libllama seen only through run_batch (no native walk, no traces), so
    every mode takes the protocol's generic paths."""

    kind = "test-bycase"
    caps = Capabilities(calls=frozenset({"accept", "apply"}), batch=64, in_process=True)

    def __init__(self, arg: str = ""):
        from dryz.subject.libllama import LibLlama
        self.inner = LibLlama(arg or None)
        self.spec = f"test-bycase:{arg}"
        self.abi = self.inner.abi
        self.batches = 0

    @property
    def identity(self) -> dict:
        return {"kind": self.kind, "spec": self.spec, "label": "the pip libllama, case by case",
                "inner": self.inner.identity["libllama_sha256"]}

    def run_batch(self, cases):
        self.batches += 1
        return self.inner.run_batch(cases)


@pytest.fixture
def bycase(monkeypatch):
    monkeypatch.setitem(registry.KINDS, "test-bycase", f"{__name__}:ByCase")
    return registry.open_subject("test-bycase:")


def test_a_new_kind_runs_the_certificate_through_the_protocol(bycase, lib, tmp_path):
    from dryz.enumerate.exhaustive import run_exhaustive
    specs = [space_config(n, 3, 7) for n in ("base", "window4", "breaker")]
    mine = run_exhaustive(bycase, 3, 7, specs, str(tmp_path / "a.json"), False, 2, True)
    ref = run_exhaustive(lib, 3, 7, specs, str(tmp_path / "b.json"), False, 2, True)
    assert mine["verdict"] == ref["verdict"] == "certified"
    strip = lambda c: {k: v for k, v in c.items() if k != "seconds"}  # noqa: E731
    assert [strip(c) for c in mine["configs"]] == [strip(c) for c in ref["configs"]]
    assert mine["controls"] == ref["controls"] and mine["subject"]["kind"] == "test-bycase"
    # every case went through run_batch (the generic walk), in batches
    assert bycase.walk.__func__ is Subject.walk


def test_the_generic_walk_equals_the_c_walker(bycase, lib):
    from dryz.space import PlainSpace
    def sink_into(d):
        def sink(n, m, H, logits, cands):
            for h, row in zip(H.tolist(), logits):
                d[tuple(h)] = row.tobytes()
        return sink
    mine, ref = {}, {}
    args = (1.0, 2.0, 1, 64, ("c",))
    assert bycase.walk(PlainSpace(3, 6), 6, args, sink_into(mine)) == lib.walk(PlainSpace(3, 6), 6, args,
                                                                                sink_into(ref)) == 1092
    assert mine == ref and bycase.batches > 0


def test_registry_refuses_unknown_kinds_and_selections(monkeypatch):
    with pytest.raises(registry.SubjectError, match="unknown kind 'nope'"):
        registry.parse("nope:x")
    with pytest.raises(registry.SubjectError, match="not both"):
        registry.selected_spec("libllama:", "/x")
    monkeypatch.delenv("DRYZ_SUBJECT", raising=False)
    monkeypatch.delenv("DRYZ_LIB", raising=False)
    assert registry.selected_spec() == "libllama:"


@pytest.mark.parametrize("args,fragment", [
    (["--subject", "nope:x", "subject", "show"], "unknown kind 'nope'"),
    (["--subject", "libllama:/nonexistent/libllama.so", "subject", "show"], "no such file"),
    (["--subject", "libllama:", "--lib", sys.executable, "subject", "show"], "not both"),
])
def test_cli_selection_errors_are_one_line(args, fragment):
    p = dryz(*args, timeout=120)
    assert p.returncode == 2 and fragment in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_cli_subject_and_lib_select_the_same_file(lib):
    import json
    a = json.loads(dryz("--subject", lib.spec, "subject", "show", timeout=120).stdout)
    b = json.loads(dryz("--lib", str(lib.path), "subject", "show", timeout=120).stdout)
    assert a == b and a["spec"] == lib.spec and a["kind"] == "libllama"


# -- the one isolation mechanism ------------------------------------------------------------------------------


def _boom(subject, how):
    if how == "abort":
        os.abort()
    if how == "hang":
        time.sleep(3600)
    if how == "raise":
        raise ValueError("bad input, not a crash")
    return subject.kind


def test_a_worker_answers_a_crash_and_goes_on(lib):
    with Worker(lib.spec, lib, timeout=5) as w:
        assert w.call(_boom, "ok") == "libllama"
        c = w.call(_boom, "abort")
        assert isinstance(c, Crash) and c.signal == "SIGABRT"
        assert w.call(_boom, "ok") == "libllama" and w.restarts == 1
        h = w.call(_boom, "hang")
        assert isinstance(h, Crash) and h.signal == "hang"
        with pytest.raises(ValueError, match="bad input"):  # what fn raises is re-raised: never a crash
            w.call(_boom, "raise")
        assert w.call(_boom, "ok") == "libllama" and w.restarts == 2
        pid = w.pid
    assert pid is not None and not _alive(pid)  # closed: no worker left


def test_a_spawned_worker_opens_the_subject_from_its_spec(lib):
    case = Case(history=(0, 0), alphabet=1, penalty_last_n=4)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(__file__))  # _boom is this module's: importable there
    with Worker(lib.spec, timeout=60, env=env) as w:  # no subject here: a clean process opens it
        v = check_in(w, case)
        assert v.klass == "agree" and v.library_L == [1]
        assert w.call(_boom, "abort").signal == "SIGABRT"  # the inner worker died; the spawned one goes on
        assert check_in(w, case).klass == "agree"
    with Worker(lib.spec, timeout=60) as w:  # a function the worker cannot import: an error, not a crash
        with pytest.raises(RuntimeError, match="cannot read the request"):
            w.call(_boom, "ok")
        assert check_in(w, case).klass == "agree"


def test_pool_keeps_order_and_survives_a_crash(lib):
    with Pool(lib.spec, lib, n=2, timeout=10) as pool:
        out = list(pool.map(_boom, [("ok",), ("abort",), ("ok",), ("ok",)]))
    assert out[0] == out[2] == out[3] == "libllama" and isinstance(out[1], Crash)


def test_a_crash_is_a_verdict(lib, monkeypatch):
    monkeypatch.setenv("DRYZ_FAULT", "abort")
    case = Case(history=(0,) * 6, alphabet=1, penalty_last_n=8)
    with Worker(lib.spec, lib, timeout=30) as w:
        v = check_in(w, case)
    assert v.klass == "crash" and v.status == "crash" and v.to_json()["signal"] == "SIGABRT"
    monkeypatch.delenv("DRYZ_FAULT")
    assert check(case, lib).klass == "agree"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return False


def test_unsupported_cases_are_refused_not_judged(lib):
    from dryz.subject.answers import Unsupported

    class ZerosOnly(ByCase):
        caps = Capabilities(initial_logits=False, candidate_arrays=False)
    s = ZerosOnly.__new__(ZerosOnly)
    s.inner, s.abi, s.spec, s.batches = lib, lib.abi, "test", 0
    with pytest.raises(Unsupported, match="cannot set initial logits"):
        check(Case(history=(0, 0), alphabet=2, penalty_last_n=4, candidates=((0, 1.5), (1, 0.0))), s)
    assert check(Case(history=(0, 0), alphabet=2, penalty_last_n=4), s).klass == "agree"
