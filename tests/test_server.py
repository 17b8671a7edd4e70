"""llama-server end to end (dryz/subject/server.py): a real llama-server built from the pinned sdist by
`dryz subject build --server` (minutes the first time, cached after), with dryz's zero-logit tiny model.

Skipped when the server cannot be built, unless DRYZ_REQUIRE_BUILDS=1 (CI sets it), where they fail.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from dryz.case import Case
from dryz.oracle import served
from dryz.subject.server import (Crash, Refused, ServedOutput, ServerError, ServerProcess,
                                 ServerSubject, Unrecoverable)
from dryz.symbols import from_symbols

from conftest import default_sigint

REQUIRE = os.environ.get("DRYZ_REQUIRE_BUILDS") == "1"
SOURCE_EXAMPLE = tuple(from_symbols("abccbcyabc"))


@pytest.fixture(scope="session")
def server_bin() -> str:
    from dryz.subject.build import BuildError, build
    try:
        return str(build(server=True, log=lambda m: None) / "llama-server")
    except (BuildError, OSError) as e:
        if REQUIRE:
            raise
        pytest.skip(f"cannot build llama-server: {str(e).splitlines()[0]}")


_SUBJECTS: list = []


@pytest.fixture(scope="module")
def subject(server_bin):
    s = ServerSubject(server_bin)
    _SUBJECTS.append(s)
    yield s
    _SUBJECTS.remove(s)
    s.close()


def judge(c, out, subject=None):
    """(class, detail) of the server's answer by the one verdict (dryz.judge.judge_output); "unrecoverable"
    where it refuses to judge an answer that cannot be read back exactly."""
    from dryz.judge import judge_output, semantics
    from dryz.subject.answers import Unsupported
    try:
        v = judge_output(c, semantics(subject or _SUBJECTS[-1]), out)
    except Unsupported as e:
        return "unrecoverable", str(e)
    return v.klass, "" if v.klass == "agree" else v.detail


def case(history, **kw):
    kw.setdefault("alphabet", 25)
    kw.setdefault("penalty_last_n", 64)
    return Case(history=tuple(history), **kw)


def pids_of(binary: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.readlink(d / "exe") == binary:
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def test_build_info(server_bin):
    info = json.loads((Path(server_bin).parent / "dryz-subject.json").read_text())
    assert info["product"] == "llama-server" and info["llama_cpp_python"] == "0.3.36"
    assert info["cmake_options"]["LLAMA_BUILD_SERVER"] == "ON" and info["cmake_options"]["LLAMA_CURL"] == "OFF"
    assert (Path(server_bin).parent / "libllama.so").exists()


def test_source_example_exact(subject):
    """The source's example: penalties b 1, y 2, c 4 (L 1, 2, 3), every other candidate untouched."""
    (out,) = subject.run_batch([case(SOURCE_EXAMPLE)])
    assert isinstance(out, ServedOutput)
    want = np.zeros(25, dtype=np.float32)
    want[from_symbols("b")[0]], want[from_symbols("y")[0]], want[from_symbols("c")[0]] = -1, -2, -4
    assert out.logits.tobytes() == want.tobytes()
    assert [out.widths[i] for i in from_symbols("byc")] == [1, 1, 1]  # the penalised ones: one float each
    assert all(w > 1 for i, w in enumerate(out.widths) if i not in from_symbols("byc"))
    assert judge(case(SOURCE_EXAMPLE), out) == ("agree", "")


def test_base_below_one_is_replaced(subject):
    c = case(SOURCE_EXAMPLE, base=0.5)
    (out,) = subject.run_batch([c])
    got = {s: float(out.logits[from_symbols(s)[0]]) for s in "byc"}
    assert got == {"b": -1.0, "y": -1.75, "c": -3.0625}
    assert judge(c, out)[0] == "served-base-replaced"


@pytest.mark.parametrize("field,value,klass", [("penalty_last_n", -1, "served-window-refused"),
                                                ("allowed_length", -1, "served-allowed-refused")])
def test_refused_fields(subject, field, value, klass):
    c = case(SOURCE_EXAMPLE, **{field: value})
    (out,) = subject.run_batch([c])
    assert isinstance(out, Refused) and out.status == 400
    name = {"penalty_last_n": "dry_penalty_last_n", "allowed_length": "dry_allowed_length"}[field]
    assert out.message == f"Field '{name}': Value must be between 0 <= value <= 2147483647, but got -1"
    assert judge(c, out)[0] == klass


def test_breakers_required_and_empty_prompt(subject):
    status, body = subject.send({"prompt": [0, 0], "n_predict": 1, "samplers": ["dry"], "dry_multiplier": 1,
                                 "dry_sequence_breakers": []})
    assert status == 400 and body["error"]["message"] == \
        "Field 'dry_sequence_breakers': Error: dry_sequence_breakers must be a non-empty array of strings"
    (out,) = subject.run_batch([case(())])
    assert isinstance(out, Refused) and (out.status, out.message) == (400, '"prompt" must not be empty')
    assert judge(case(()), out)[0] == "served-empty-prompt"


def test_seed_slice_agrees_and_batches(subject):
    """Every history over 3 symbols up to length 7, the three seed configurations: one float per penalised
    candidate, every case agrees; the answers do not depend on how the cases are batched or ordered
    (cache_prompt leaks no state from one request into the next)."""
    hist = [h for n in range(1, 8) for h in itertools.product(range(3), repeat=n)]
    for kw in ({"penalty_last_n": 64}, {"penalty_last_n": 4}, {"penalty_last_n": 64, "breakers": ("c",)}):
        cases = [case(h, alphabet=3, **kw) for h in hist]
        outs = subject.run_batch(cases)
        verdicts = {judge(c, o)[0] for c, o in zip(cases, outs)}
        assert verdicts == {"agree"}, kw
        # reversed, one at a time: bit-identical
        sample = cases[::97]
        solo = [subject.run_batch([c])[0] for c in reversed(sample)][::-1]
        for c, a, b in zip(sample, [outs[cases.index(c)] for c in sample], solo):
            assert a.logits.tobytes() == b.logits.tobytes(), c


def test_deep_penalties_take_more_requests(subject):
    # 'a' x 10: the candidate a has L = 9, penalty 256: p = 0 at T = 1/2, recovered at T = 4
    c = case((0,) * 10, alphabet=3)
    (out,) = subject.run_batch([c])
    assert float(out.logits[0]) == -256.0 and out.requests == 2 and out.temps[0] == 4.0
    assert judge(c, out) == ("agree", "")


def test_killed_server_is_restarted_nothing_lost(subject):
    cases = [case(h, alphabet=3) for h in itertools.product(range(3), repeat=5)]
    before = subject.run_batch(cases)
    proc = next(iter(subject._procs.values()))
    os.kill(proc.proc.pid, signal.SIGKILL)
    restarts = subject.stats["restarts"]
    after = subject.run_batch(cases)
    assert subject.stats["restarts"] == restarts + 1
    assert [a.logits.tobytes() for a in before] == [b.logits.tobytes() for b in after]


def test_the_case_that_kills_the_server_is_a_crash(subject, monkeypatch):
    """A server killed (SIGKILL) while it holds one case's request: that case is a Crash with its request,
    every other case of the batch is answered, and the server is restarted."""
    cases = [case(h, alphabet=3) for h in itertools.product(range(3), repeat=4)]
    fatal = list(cases[17].history)
    real_post = ServerProcess.post

    def post(self, path, body, timeout=60.0):
        prompts = body["prompt"] if body["prompt"] and isinstance(body["prompt"][0], list) else [body["prompt"]]
        if fatal in prompts:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        return real_post(self, path, body, timeout)

    monkeypatch.setattr(ServerProcess, "post", post)
    outs = subject.run_batch(cases)
    monkeypatch.undo()
    assert isinstance(outs[17], Crash) and outs[17].request["prompt"] == fatal
    assert "SIGKILL" in outs[17].detail
    assert all(isinstance(o, ServedOutput) for i, o in enumerate(outs) if i != 17)
    assert judge(cases[17], outs[17])[0] == "crash"
    assert isinstance(subject.run_batch([cases[17]])[0], ServedOutput)  # restarted, answering again


def test_not_expressible_is_unrecoverable(subject):
    (z,) = subject.run_batch([case((0, 1), alphabet=3, candidates=((0, -0.0), (1, 0.0), (2, 0.0)))])
    assert isinstance(z, Unrecoverable) and "-0.0" in z.detail
    (s,) = subject.run_batch([case((0, 1), alphabet=3, sorted=True)])
    assert isinstance(s, Unrecoverable) and "sorted" in s.detail


def test_bad_input_is_one_line(server_bin, tmp_path):
    with pytest.raises(ServerError, match="no such file"):
        ServerSubject(tmp_path / "nope")
    with pytest.raises(ServerError, match="not a llama-server"):
        ServerSubject("/bin/true")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    p = ServerProcess(server_bin, bad, parallel=1)
    with pytest.raises(ServerError) as e:
        p.start()
    assert "before it was ready" in str(e.value) and "\n" not in str(e.value)
    assert not p.alive()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        sub = ServerSubject(server_bin, port=port)
        with pytest.raises(ServerError, match=f"port {port} on 127.0.0.1 is taken"):
            sub.run_batch([case((0, 0), alphabet=3)])
        sub.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_no_orphan_server(server_bin, sig):
    """The parent interrupted (SIGINT: Ctrl-C) or killed (SIGKILL): no llama-server remains."""
    script = textwrap.dedent(f"""
        import sys, time
        from dryz.case import Case
        from dryz.subject.server import ServerSubject
        s = ServerSubject({server_bin!r})
        s.run_batch([Case(history=(0, 0), alphabet=3, penalty_last_n=64)])
        print(next(iter(s._procs.values())).proc.pid, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parent.parent, preexec_fn=default_sigint)
    try:
        pid = int(parent.stdout.readline())
        assert pid in pids_of(server_bin)
        parent.send_signal(sig)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 10
        while pid in pids_of(server_bin) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pid not in pids_of(server_bin)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_witnesses_replay_on_the_server(subject):
    """Every served-* witness in the project corpus: its stored request sent again gives the stored status,
    message and probabilities."""
    from dryz.corpus import PROJECT_DIR, entries, load_entry
    seen = set()
    for p in entries(PROJECT_DIR):
        e = load_entry(p)
        if "http" not in e.data:
            continue
        seen.add(e.expect)
        status, body = subject.send(e.data["http"]["request"], e.case)
        stored = e.data["http"]["response"]
        assert status == stored["status"], p
        if status != 200:
            assert body["error"]["message"] == stored["body"]["error"]["message"]
        else:
            probs = lambda b: {t["id"]: t["prob"] for t in b["completion_probabilities"][0]["top_probs"]}  # noqa
            assert probs(body) == probs(stored["body"])
    assert seen == set(served.CLASSES)


def test_a_served_witness_checked_through_the_server_is_a_finding(server_bin):
    """served-* is the subject's doing (the registry: a finding): `dryz --subject server:PATH check` on the
    served-base-replaced witness names the class and exits 1, as README's exit codes say."""
    from dryz.corpus import PROJECT_DIR
    from dryz.verdict import is_finding
    witness = next(PROJECT_DIR.glob("findings/served-base-replaced-*.json"))
    p = subprocess.run([sys.executable, "-m", "dryz", "--subject", f"server:{server_bin}", "check", str(witness)],
                       capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent, timeout=300)
    assert is_finding("served-base-replaced")
    assert p.returncode == 1 and '"served-base-replaced"' in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]


def test_vendored_vocabulary_end_to_end(subject):
    """A case over llama-spm (32,000 tokens): its own tiny model, the breaker as the case has it, a candidate
    subset (every other token masked): the logits agree with the library model; without breakers the
    literal request is refused (the default breakers are not inert on a real vocabulary)."""
    from dryz.subject.vendored_vocabs import VocabUnavailable, resolve_vocab
    try:
        ref = resolve_vocab("llama-spm")
    except VocabUnavailable as e:
        if REQUIRE:
            raise
        pytest.skip(str(e))
    the, cat, nl = 278, 6635, 13
    kw = dict(alphabet=32000, vocab="llama-spm", vocab_sha256=ref.sha256, penalty_last_n=64,
              candidates=((the, 0.0), (cat, -1.5), (nl, 0.0)))
    c = case((the, cat, the, cat, nl, the), breakers=("\n",), **kw)
    (out,) = subject.run_batch([c])
    assert isinstance(out, ServedOutput) and judge(c, out) == ("agree", "")
    # the breaker cut the repetition: after '\n the', ' cat' is penalised as L 1 only (multiplier 1: -1.5 - 1)
    assert float(out.logits[1]) == -2.5 and out.widths[1] == 1
    (r,) = subject.run_batch([case((the, cat, the), **kw)])
    assert isinstance(r, Refused) and judge(case((the, cat, the), **kw), r)[0] == "served-breakers-required"


def test_hung_server_is_killed_and_restarted(server_bin):
    """A server that stops answering (SIGSTOP) is killed after the request timeout and restarted; the cases
    are asked again one at a time and all answered: no hang, nothing lost."""
    s = ServerSubject(server_bin, request_timeout=2.0)
    try:
        cases = [case(h, alphabet=3) for h in itertools.product(range(3), repeat=2)]
        first = s.run_batch(cases)
        proc = next(iter(s._procs.values())).proc
        os.kill(proc.pid, signal.SIGSTOP)
        again = s.run_batch(cases)  # answered after the request timeout: killed, restarted, asked again
        assert proc.poll() is not None and s.stats["restarts"] == 1
        assert [a.logits.tobytes() for a in first] == [b.logits.tobytes() for b in again]
    finally:
        s.close()


def test_a_logit_above_the_anchor_is_unrecoverable(subject):
    # a negative multiplier raises the repeated candidate above every other logit: the maximum is unknown
    c = case((0, 0), alphabet=3, multiplier=-1.0)
    (out,) = subject.run_batch([c])
    assert isinstance(out, Unrecoverable) and "above the anchor" in out.detail
    assert judge(c, out)[0] == "unrecoverable"


def test_planted_bug_is_found_through_the_server():
    """`dryz subject build --server --patch tests/patches/restart-limit-plus-one.diff` (Step 1's rep_limit one
    too large; ~1 min after the pristine build): the breaker configuration's histories up to 7 tokens through
    that server give mismatches, the first (shortest) being `cac`; the pristine server agrees on all of them
    (test_seed_slice_agrees_and_batches)."""
    from dryz.subject.build import BuildError, build
    try:
        b = build(server=True, patch=Path(__file__).parent / "patches" / "restart-limit-plus-one.diff",
                  log=lambda m: None)
    except (BuildError, OSError) as e:
        if REQUIRE:
            raise
        pytest.skip(f"cannot build the patched llama-server: {str(e).splitlines()[0]}")
    hist = [h for n in range(1, 8) for h in itertools.product(range(3), repeat=n)]
    cases = [case(h, alphabet=3, breakers=("c",)) for h in hist]
    with ServerSubject(b / "llama-server") as s:
        outs = s.run_batch(cases)
    klass = [judge(c, o)[0] for c, o in zip(cases, outs)]
    assert klass.count("mismatch") == 990 and klass.count("agree") == len(cases) - 990
    assert cases[klass.index("mismatch")].symbols == "cac"


def test_cli_build_prints_the_executable(server_bin):
    p = subprocess.run([sys.executable, "-m", "dryz", "subject", "build", "--server"], capture_output=True,
                       text=True, timeout=600, cwd=Path(__file__).resolve().parent.parent)
    assert p.returncode == 0 and p.stdout.strip() == server_bin, p.stderr


def test_a_tiny_penalty_is_unrecoverable_not_read_as_untouched():
    """The initial logit is read back only where no logit a penalty could leave (at least the multiplier, by
    DRY's definition) is consistent with the answer."""
    from dryz.subject.server import only_initial
    assert only_initial(1.0, 0.0, -1e-30, 1e-30)            # penalties >= 1 cannot hide within 1e-30
    assert not only_initial(6e-33, 0.0, -2e-17, 1.4e-17)    # one of 6e-33 can
    assert only_initial(0.0, 0.0, -1.0, 1.0)                # DRY off: nothing changes
    assert not only_initial(-1.0, 0.0, -1e-30, 1.5)         # a negative multiplier raises by >= 1
    assert only_initial(-1.0, 0.0, -1e-30, 0.5)


def test_fuzz_through_the_server_finds_nothing(server_bin, tmp_path):
    """A short campaign through llama-server: each libFuzzer job starts its own server from the spec; the
    pristine build gives no finding (a case the server's answer cannot be read back exactly is not judged)."""
    from conftest import dryz
    p = dryz("--subject", f"server:{server_bin}", "fuzz", "--time", "20", "--jobs", "1", "--workdir",
             str(tmp_path / "w"), "--json", str(tmp_path / "s.json"), timeout=600)
    s = json.loads((tmp_path / "s.json").read_text())
    assert p.returncode == 0 and s["execs"] > 100 and not s["findings"], p.stdout[-2000:] + p.stderr[-2000:]
    assert s["subject"]["kind"] == "server"
