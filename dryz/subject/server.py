"""`server:PATH` — llama-server end to end: DRY as a chat front-end reaches it, over HTTP.

A ServerSubject starts `llama-server` (built by `dryz subject build --server`) on 127.0.0.1 on a free port with
a tiny model over the case's vocabulary whose every logit is exactly 0 (dryz.subject.tinymodel), waits for
/health, and answers each Case with `/completion` requests as a front-end sends them
(dryz.oracle.served.request_for): the history as prompt token ids, the DRY fields, one token, the post-sampling
probabilities of the candidates. What a request adds to make the answer invertible:

* `samplers: ["dry", "temperature"]` with `temperature` a power of two T: the chain is logit_bias -> dry ->
  temperature -> dist (common_sampler_init), and dividing by 2^k is exact, so DRY's output is the logits times
  2^-k exactly; T scales the penalties into the range a float32 softmax resolves (dryz.subject.softmax);
* `logit_bias`: the case's initial logits (the model's are +0.0, and 0 + b = b exactly), `false` (-inf) for
  every token the request does not ask about, and an anchor token (not in the history, so DRY leaves it) at
  A = max(0, initial logits): its probability bounds the softmax sum;
* `n_probs` = the tokens asked about, `post_sampling_probs: true`; `response_fields` ["index",
  "completion_probabilities"] (a tenth of the JSON; it selects fields of the answer, nothing else).

The probabilities are inverted exactly (dryz.subject.softmax.preimage: the float32 logits consistent with the
observed float32 probability, by bisection over the float order, with glibc's expf, the one the server calls).
A candidate's logit is returned
  - exactly when its preimage is one float (`widths[i] == 1`);
  - as its initial logit when the preimage holds it (DRY left it, or changed it by less than float32 softmax
    precision can see: `widths[i]` > 1 records how many floats were indistinguishable);
  - otherwise the candidate is asked again alone at a better temperature (p = 0: T x 8; several floats: T so
    that |z/T| is in [32, 64)), up to MAX_ROUNDS requests; what is still not one float is reported as
    `Unrecoverable`, never guessed.
On the certificate spaces (logits 0, penalties 2^(L-1)) every penalised candidate is one float (T = 1/2 puts
penalty 1 at |z'| = 2; 64 and above come back at T = 4 or 32), and every unpenalised one is its initial 0.

Why inversion and not a forward check of the oracle's logits: every mode judges what a subject left with the
same check_batch, so the subject returns logits; the softmax model is used only to invert, and what it cannot
invert is reported. `ServedOutput.probs` keeps the observed probabilities, and softmax.probs() predicts them
bit for bit from any logits, for a judge that wants the forward comparison too.

The anchor rests on DRY's definition (it penalises only tokens that follow an earlier occurrence of the
history's suffix, so never a token absent from the history); a DRY that penalised the anchor would shift every
recovered logit by that penalty, a mismatch, not a silent pass.

Cases that share everything but the history go in one request (`prompt` a list of prompts: one task per
history); the first round of a whole canonical batch is a handful of requests. One slot by default: the server
samples in its one main loop, and more slots measured slower (README). A server that dies or hangs on a request is restarted; a multi-prompt request
is then replayed one case at a time, so the case that kills the server is a `Crash` with its request, and no
other case's answer is lost. The process is stopped by close(), at interpreter exit, on Ctrl-C (it runs in its
own session, so the terminal's SIGINT reaches only dryz, which stops it), and by the kernel if dryz itself is
killed (PR_SET_PDEATHSIG: SIGKILL; the kernel sends it when the *thread* that started the server ends, so
start it from the main thread or one that lives as long as the subject).

Not expressible through the server, reported as Unrecoverable without a request: an initial logit of -0.0
(logit_bias adds it to the model's +0.0 and gives +0.0, and a softmax cannot tell the sign of zero), an
initially sorted candidate array (the server's array is the vocabulary in id order, unsorted). The sorted flag
DRY leaves is not observable; Output.sorted is the array's flag, False.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import http.client
import json
import math
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..oracle import softmax as sm
from .binding import SubjectError
from .cache import sha256_file
from .answers import Capabilities, Crash as ProtocolCrash, Output, Refused, SubjectCrashed, Unrecoverable, \
    Unsupported
from .protocol import Subject
from ..case import Case
from ..oracle.served import request_for
from ..symbols import MAX_ALPHABET, SYMBOLS
from .symbol_vocab import symbol_vocab_path
from .tinymodel import tiny_model
from .vendored_vocabs import resolve_vocab
from .walker import resolve_roots, tables

KIND = "server"
ABI = 7  # llama_sampler_init_dry's arguments in the pinned release (the server calls it from common/sampling.cpp)
MAX_ROUNDS = 8
FIRST_T = 0.5
MIN_T, MAX_T = 2.0 ** -60, 2.0 ** 60
BATCH = 64  # histories per multi-prompt request
READY_TIMEOUT = 60.0
REQUEST_TIMEOUT = 120.0


class ServerError(SubjectError):
    """The harness cannot run the server (exit 2): binary missing or not a llama-server, port taken, a model
    that does not load, a server that keeps dying on start. One-line message."""


class ServerDied(Exception):
    """The server process died or hung during a request (the subject's doing)."""


@dataclass(frozen=True)
class Crash(ProtocolCrash):
    """The server died (or hung and was killed) on this case's request: protocol.Crash with the request."""
    request: dict | None = None


@dataclass
class ServedOutput(Output):
    """Output plus how it was read: per candidate, the probability last observed, the temperature of that
    request and how many float32 logits were indistinguishable (1: exact; >1: reported as the initial
    logit, which lies among them)."""
    probs: tuple = ()
    temps: tuple = ()
    widths: tuple = ()
    requests: int = 0

    def __post_init__(self):
        self.sorted = None  # the server's array is never sorted before DRY, and the flag after it is not seen


# -- the process -------------------------------------------------------------------------------------------------

_LIVE: "weakref.WeakSet[ServerProcess]" = weakref.WeakSet()


def _stop_all() -> None:
    for p in list(_LIVE):
        p.stop()


atexit.register(_stop_all)

_PR_SET_PDEATHSIG = 1


def _child_setup() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def check_binary(path) -> dict:
    """The binary exists, runs, and says it is a llama.cpp build (`--version`): its version line and commit."""
    p = Path(path)
    if not p.is_file():
        raise ServerError(f"llama-server {path}: no such file")
    if not os.access(p, os.X_OK):
        raise ServerError(f"llama-server {path}: not executable")
    try:
        r = subprocess.run([str(p), "--version"], capture_output=True, timeout=20, preexec_fn=_child_setup)
    except subprocess.TimeoutExpired:
        raise ServerError(f"{path} --version did not answer in 20 s: not a llama-server") from None
    except OSError as e:
        raise ServerError(f"{path}: cannot run ({e.strerror})") from None
    out = (r.stdout + r.stderr).decode(errors="replace")
    # "version: 0.5.0-dev (build 1, commit 0c1e570)" (older builds: "version: 4567 (abc1234)")
    m = re.search(r"version: ([^\s(]+) \((?:build (\d+), )?(?:commit )?([0-9a-f]{6,40})\)", out)
    if not m:
        raise ServerError(f"{path} is not a llama-server (its --version printed no llama.cpp version)")
    return {"version": m.group(0).removeprefix("version: "), "commit": m.group(3)}


class ServerProcess:
    """One llama-server on 127.0.0.1 with one model; started by start(), stopped by stop()."""

    def __init__(self, binary, model, *, parallel: int = 4, ctx_per_slot: int = 4096, threads: int = 1,
                 port: int | None = None, ready_timeout: float = READY_TIMEOUT, extra_args=()):
        self.binary, self.model = str(binary), str(model)
        self.parallel, self.ctx_per_slot, self.threads = parallel, ctx_per_slot, threads
        self.fixed_port, self.ready_timeout, self.extra_args = port, ready_timeout, list(extra_args)
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.conn: http.client.HTTPConnection | None = None
        self.log = None
        self.starts = 0
        self._lock = threading.Lock()

    def command(self, port: int) -> list[str]:
        return [self.binary, "-m", self.model, "--host", "127.0.0.1", "--port", str(port),
                "-t", str(self.threads), "-tb", str(self.threads), "-c", str(self.ctx_per_slot * self.parallel),
                "-np", str(self.parallel), "--no-webui", "--no-warmup", "-lv", "2", *self.extra_args]

    def start(self) -> None:
        if self.fixed_port is not None and port_taken(self.fixed_port):
            raise ServerError(f"port {self.fixed_port} on 127.0.0.1 is taken")
        last = ""
        for _ in range(3):  # a free port can be taken between the probe and the server's bind: try another
            port = self.fixed_port or free_port()
            self.log = tempfile.TemporaryFile(prefix="dryz-llama-server-")
            self.proc = subprocess.Popen(self.command(port), stdin=subprocess.DEVNULL, stdout=self.log,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=_child_setup)
            _LIVE.add(self)
            self.port = port
            self.starts += 1
            err = self._wait_ready()
            if err is None:
                return
            self.stop()
            last = err
            if "bind" not in err.lower() or self.fixed_port is not None:
                break
        if self.fixed_port is not None and "bind" in last.lower():
            raise ServerError(f"port {self.fixed_port} on 127.0.0.1 is taken ({last})")
        raise ServerError(last)

    def _log_tail(self, n: int = 400) -> str:
        try:
            self.log.seek(0)
            text = self.log.read().decode(errors="replace")
        except (OSError, ValueError, AttributeError):
            return ""
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        errs = [ln for ln in lines if re.search(r"error|failed|couldn't|cannot|unable", ln, re.I)]
        return (errs[-1] if errs else (lines[-1] if lines else ""))[:n]

    def _wait_ready(self) -> str | None:
        """None when /health answers 200; else the one-line reason."""
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                why = self._log_tail()
                return (f"llama-server exited ({_how(rc)}) before it was ready with model {self.model}"
                        + (f": {why}" if why else ""))
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/health")
                r = c.getresponse()
                r.read()
                c.close()
                if r.status == 200:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT)
                    return None
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.05)
        return f"llama-server was not ready within {self.ready_timeout:.0f} s (model {self.model})"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def post(self, path: str, body: dict, timeout: float = REQUEST_TIMEOUT) -> tuple[int, object]:
        """(HTTP status, parsed JSON body). ServerDied when the process dies or does not answer in time."""
        data = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
        with self._lock:
            for attempt in range(2):
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
                self.conn.timeout = timeout
                try:
                    self.conn.request("POST", path, data, {"Content-Type": "application/json"})
                    r = self.conn.getresponse()
                    raw = r.read()
                    break
                except socket.timeout:
                    self._kill()
                    raise ServerDied(f"no answer within {timeout:.0f} s (killed)") from None
                except (OSError, http.client.HTTPException) as e:
                    self.conn.close()
                    self.conn = None
                    try:
                        self.proc.wait(timeout=2)
                    except subprocess.TimeoutExpired:
                        pass
                    if not self.alive():
                        raise ServerDied(f"llama-server {_how(self.proc.returncode)} during the request") from None
                    if attempt:
                        self._kill()
                        raise ServerDied(f"the connection failed twice ({type(e).__name__}) (killed)") from None
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, {"raw": raw[:2000].decode(errors="replace")}

    def _kill(self) -> None:
        if self.alive():
            try:
                self.proc.kill()
            except OSError:
                pass
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after 5 s) and reap it."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    self.proc.terminate()
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._kill()
                except OSError:
                    pass
        _LIVE.discard(self)
        if self.log is not None:
            try:
                self.log.close()
            except OSError:
                pass
            self.log = None

    def restart(self) -> None:
        self.stop()
        self.start()


def _how(rc) -> str:
    if rc is None:
        return "running"
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit {rc}"


# -- the subject -------------------------------------------------------------------------------------------------

@dataclass
class _Vocab:
    key: str  # "" for the symbol vocabulary, else the case's vocab string
    path: Path
    sha256: str
    n_vocab: int
    texts: list | None  # every token's text as bytes when known exactly (the symbol vocabulary), else None
    model: Path


@dataclass
class _State:
    """One case through its rounds."""
    case: object
    vocab: _Vocab
    anchor: int
    A: float
    init: dict  # id -> the pre-DRY logit in the server (f32(0.0 + bias))
    pending: dict = field(default_factory=dict)  # id -> temperature of its next request
    got: dict = field(default_factory=dict)  # id -> (logit, width, T, p)
    requests: int = 0
    result: object = None  # a final Refused / Unrecoverable / Crash


def code_sha256(binary: Path) -> str:
    """One sha256 for the server's code: its binary and every shared library beside it (a build's server code
    lies in libllama-server-impl.so, so a patched and a plain server share the binary's sha256), by name."""
    h = hashlib.sha256()
    for f in [binary] + sorted(p for p in binary.parent.glob("lib*.so*") if p.is_file() and not p.is_symlink()):
        h.update(f"{f.name} {sha256_file(f)}\n".encode())
    return h.hexdigest()


class ServerSubject(Subject):
    """llama-server as a subject (`--subject server:PATH`: the llama-server binary, or the folder `dryz subject
    build --server` prints): run_batch(cases) -> list[ServedOutput | Refused | Unrecoverable | Crash]."""

    kind = KIND
    abi = ABI

    @staticmethod
    def check_arg(arg: str) -> None:
        """The spec's argument, checked before anything starts (registry.check_spec): the binary, or its folder."""
        if not str(arg).strip():
            raise ServerError("server: needs the llama-server binary (--subject server:PATH; `dryz subject build "
                              "--server` builds one and prints its folder)")
        p = Path(arg).expanduser()
        p = p / "llama-server" if p.is_dir() else p
        if not p.is_file():
            raise ServerError(f"server:{arg}: no such file" + (" (the folder has no llama-server)" if p != Path(arg)
                                                                  .expanduser() else ""))
        if not os.access(p, os.X_OK):
            raise ServerError(f"server:{arg}: not executable")

    def __init__(self, binary, *, parallel: int = 1, batch: int = BATCH, threads: int = 1,
                 ctx_per_slot: int = 4096, port: int | None = None, request_timeout: float = REQUEST_TIMEOUT):
        if not str(binary).strip():
            raise ServerError("server: needs the llama-server binary (--subject server:PATH; `dryz subject build "
                              "--server` builds one and prints its folder)")
        if Path(binary).is_dir():
            binary = Path(binary) / "llama-server"
        self.binary = str(Path(binary).resolve()) if Path(binary).exists() else str(binary)
        self.version = check_binary(self.binary)
        self.parallel, self.batch, self.threads = parallel, batch, threads
        self.ctx_per_slot, self.port, self.request_timeout = ctx_per_slot, port, request_timeout
        self._vocabs: dict[str, _Vocab] = {}
        self._procs: dict[str, ServerProcess] = {}
        self._inv_cache: dict = {}
        self.stats = {"requests": 0, "prompts": 0, "restarts": 0, "crashes": 0, "seconds_http": 0.0}
        self._identity = None
        self.spec = f"{KIND}:{self.binary}"

    declares_fixes = True
    REQUEST_LAYER = "llama-server"

    # -- what it is ----------------------------------------------------------------------------------------------
    @property
    def identity(self) -> dict:
        if self._identity is None:
            info_path = Path(self.binary).parent / "dryz-subject.json"
            try:
                build = json.loads(info_path.read_text())
            except (OSError, ValueError):
                build = None
            lib = Path(self.binary).parent / "libllama.so"
            libs = {"libllama_path": str(lib.resolve()), "libllama_sha256": sha256_file(lib)} if lib.exists() else {}
            sha = sha256_file(self.binary)
            code = code_sha256(Path(self.binary))
            self._identity = {"kind": KIND, "spec": self.spec, "label": self.label(), "path": self.binary,
                              "sha256": sha, "code_sha256": code,
                              "shown": {"llama-server": self.binary, "sha256": sha, "code sha256": code}, **libs,
                              "version": self.version["version"], "llama_cpp_commit": self.version["commit"],
                              "init_dry_abi": ABI, "built_by_dryz": build,
                              **({"declares": list(self.declared)} if self.declared else {}),
                              "llama_cpp_python": (build or {}).get("llama_cpp_python"),
                              "models": {k or "symbols": {"path": str(v.model), "vocab_sha256": v.sha256}
                                         for k, v in self._vocabs.items()}}
        return self._identity

    @property
    def caps(self) -> Capabilities:
        # Every request builds a chain, accepts the whole prompt into it, applies and frees it: no reset, clone
        # or free between calls. Any vocabulary (a server process per vocabulary); initial logits through
        # logit_bias (not -0.0: Unrecoverable); any candidate subset; the array is never sorted before DRY and
        # its flag after it is not seen.
        return Capabilities(calls=frozenset({"accept", "apply"}), initial_logits=True, candidate_arrays=True,
                            sorted_flag=False, batch=self.batch, in_process=False, request_layer="llama-server",
                            deviations=self.declared)

    def resend(self, case, http: dict) -> dict:
        """A served-* witness's stored request sent again, unchanged: the witness with the fresh response in
        place of the stored one (judged by the caller: corpus.py), or a ServerDied."""
        status, body = self.send(http["request"], case)
        return dict(http, response={"status": status, "body": body})

    def label(self) -> str:
        return f"llama-server {self.version['version']} ({self.binary})"

    # -- vocabularies and processes ------------------------------------------------------------------------------
    def _vocab(self, case) -> _Vocab:
        key = case.vocab or ""
        if key not in self._vocabs:
            if not key:
                path = symbol_vocab_path()
                sha = sha256_file(path)
                n, texts = len(SYMBOLS), [s.encode() for s in SYMBOLS]
            else:
                ref = resolve_vocab(case.vocab)
                path, sha, texts = ref.path, ref.sha256, None
                n = case.alphabet
            self._vocabs[key] = _Vocab(key, Path(path), sha, n, texts, tiny_model(path, sha))
            self._identity = None
        v = self._vocabs[key]
        if case.vocab_sha256 is not None and case.vocab_sha256 != v.sha256:
            raise ServerError(f"case vocabulary {case.vocab}: sha256 {case.vocab_sha256[:12]}... but the file "
                              f"is {v.sha256[:12]}...")
        return v

    def _proc(self, v: _Vocab) -> ServerProcess:
        p = self._procs.get(v.key)
        if p is None:
            p = ServerProcess(self.binary, v.model, parallel=self.parallel, ctx_per_slot=self.ctx_per_slot,
                              threads=self.threads, port=self.port)
            p.start()
            self._procs[v.key] = p
        elif not p.alive():
            self._restart(p)
        return p

    def _restart(self, p: ServerProcess) -> None:
        self.stats["restarts"] += 1
        p.restart()

    def start(self, case=None) -> None:
        """Start the server for case's vocabulary (the symbol vocabulary when None) now rather than at the
        first request, so a model that does not load or a taken port is reported before any work."""
        self._proc(self._vocab(case if case is not None else Case(history=(), alphabet=1, penalty_last_n=0)))

    def close(self) -> None:
        for p in self._procs.values():
            p.stop()
        self._procs.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- one case as requests ------------------------------------------------------------------------------------
    def _state(self, case) -> _State:
        v = self._vocab(case)
        st = _State(case, v, -1, 0.0, {})
        if case.sorted:
            st.result = Unrecoverable("an initially sorted candidate array: the server's array is the vocabulary "
                                      "in id order, never sorted before DRY")
            return st
        if len(case.history) + 1 > self.ctx_per_slot:
            st.result = Unrecoverable(f"a history of {len(case.history)} tokens does not fit the server's "
                                      f"context of {self.ctx_per_slot} tokens per slot (ServerSubject ctx_per_slot)")
            return st
        ids, logits = case.ids, case.logits
        if any(lg == 0.0 and math.copysign(1.0, lg) < 0 for lg in logits):
            st.result = Unrecoverable("an initial logit of -0.0: logit_bias adds it to the model's +0.0, which "
                                      "gives +0.0, and a softmax cannot tell the sign of zero")
            return st
        hist = set(case.history)
        cand = set(ids)
        anchor = next((t for t in range(v.n_vocab) if t not in hist and t not in cand), None)
        finite = [lg for lg in logits if lg != -math.inf]
        A = max([0.0, *finite])
        if anchor is None:
            # every token is a candidate or in the history: a candidate outside the history is the anchor
            anchor = next((t for t, lg in zip(ids, logits) if t not in hist and lg == A), None)
            if anchor is None:
                st.result = Unrecoverable("no anchor: every token of the vocabulary is in the history or a "
                                          "candidate below the highest initial logit")
                return st
        st.anchor, st.A = anchor, A
        st.init = {t: sm.f32(0.0 + lg) for t, lg in zip(ids, logits)}
        st.pending = {t: FIRST_T for t in ids if t != anchor}
        if anchor in cand:
            st.got[anchor] = (A, 0, None, None)  # the anchor is never asked: it is the reference
        return st

    def _body(self, st: _State, ask, T: float) -> dict:
        bias = []
        ask = set(ask)
        for t in range(st.vocab.n_vocab):
            if t == st.anchor:
                if st.A != 0.0:
                    bias.append([t, st.A])
            elif t in ask:
                lg = st.init[t]
                if lg == -math.inf:
                    bias.append([t, False])
                elif lg != 0.0:
                    bias.append([t, lg])
            else:
                bias.append([t, False])
        return request_for(st.case, st.vocab.texts, {
            "samplers": ["dry", "temperature"], "temperature": T, "n_probs": len(ask) + 1,
            "logit_bias": bias, "response_fields": ["index", "completion_probabilities"]})

    def run_batch(self, cases) -> list:
        """Each case's ServedOutput (or Refused, Unrecoverable, Crash), in order."""
        out: list = [None] * len(cases)
        states = [self._state(c) for c in cases]
        # round 1: cases with the same request but for the prompt go together, a batch of histories at a time
        groups: dict = {}
        for i, st in enumerate(states):
            if st.result is not None:
                continue
            body = self._body(st, st.pending, FIRST_T)
            if not st.case.history:
                groups[("solo", i)] = (body, [i])  # `[]` alone is what a front-end sends (HTTP 400)
                continue
            k = (st.vocab.key, json.dumps({k: v for k, v in body.items() if k != "prompt"}, sort_keys=True))
            groups.setdefault(k, (body, []))[1].append(i)
        for body, idx in groups.values():
            for j in range(0, len(idx), self.batch):
                chunk = idx[j:j + self.batch]
                self._round(states, chunk, body, FIRST_T)
        # further rounds: one case at a time, the candidates still pending grouped by temperature
        for i, st in enumerate(states):
            while st.result is None and st.pending:
                if st.requests >= MAX_ROUNDS:
                    st.result = Unrecoverable(f"candidates {sorted(st.pending)} not recovered in {MAX_ROUNDS} "
                                              "requests")
                    break
                T = min(st.pending.values())
                ask = [t for t, tt in st.pending.items() if tt == T]
                body = self._body(st, ask, T)
                self._round(states, [i], body, T, ask=ask)
        for i, st in enumerate(states):
            out[i] = st.result if st.result is not None else self._output(st)
        return out

    def _output(self, st: _State) -> ServedOutput:
        ids = st.case.ids
        rows = [st.got[t] for t in ids]
        return ServedOutput(ids=tuple(ids), logits=np.array([r[0] for r in rows], dtype=np.float32),
                            sorted=False, size=len(ids), probs=tuple(r[3] for r in rows),
                            temps=tuple(r[2] for r in rows), widths=tuple(r[1] for r in rows),
                            requests=st.requests)

    def _round(self, states, idx, body, T, ask=None) -> None:
        """One request for the cases idx (their histories as prompts): decode each case's answer."""
        prompts = [list(states[i].case.history) for i in idx]
        req = dict(body)
        req["prompt"] = prompts[0] if len(idx) == 1 else prompts
        p = self._proc(states[idx[0]].vocab)
        t0 = time.perf_counter()
        try:
            status, resp = p.post("/completion", req, timeout=self.request_timeout * max(1, len(idx) // 8))
        except ServerDied as e:
            self.stats["seconds_http"] += time.perf_counter() - t0
            self._restart(p)
            if len(idx) > 1:  # replay one case at a time: the one that kills the server is the crash
                for i in idx:
                    self._round(states, [i], body, T, ask)
                return
            self.stats["crashes"] += 1
            states[idx[0]].result = Crash(f"llama-server: {e}", "server", "", request=req)
            return
        self.stats["seconds_http"] += time.perf_counter() - t0
        self.stats["requests"] += 1
        self.stats["prompts"] += len(idx)
        results = resp if isinstance(resp, list) else [resp]
        if status != 200:
            if len(idx) > 1:  # a refusal can depend on the prompt: ask each case alone
                for i in idx:
                    self._round(states, [i], body, T, ask)
                return
            msg = resp.get("error", {}).get("message", "") if isinstance(resp, dict) else ""
            for i in idx:
                one = dict(req)
                one["prompt"] = list(states[i].case.history)
                states[i].result = Refused(status, str(msg), one, resp)
            return
        if len(results) != len(idx):
            raise ServerError(f"llama-server answered {len(results)} results to {len(idx)} prompts")
        results = sorted(results, key=lambda r: r.get("index", 0)) if len(results) > 1 else results
        for i, r in zip(idx, results):
            st = states[i]
            st.requests += 1
            one = dict(req)
            one["prompt"] = list(st.case.history)
            self._decode(st, r, T, list(st.pending) if ask is None else ask, one)

    def _decode(self, st: _State, r: dict, T: float, ask, req) -> None:
        try:
            top = r["completion_probabilities"][0]["top_probs"]
            probs = {int(e["id"]): e["prob"] for e in top}
        except (KeyError, IndexError, TypeError, ValueError):
            st.result = Unrecoverable("the answer holds no post-sampling probabilities", req)
            return
        for t, pv in probs.items():
            if not isinstance(pv, (int, float)) or sm.f32(float(pv)) != pv:
                st.result = Unrecoverable(f"token {t}'s probability {pv!r} is not a float32 value", req)
                return
        allowed = set(ask) | {st.anchor}
        stray = sorted(t for t in probs if t not in allowed)
        if stray:
            st.result = Unrecoverable(f"masked tokens {stray[:5]} came back with p > 0 (logit_bias -inf did not "
                                      "hold)", req)
            return
        pa = probs.get(st.anchor, 0.0)
        if pa <= 0.0 or any(pv > pa for pv in probs.values()):
            st.result = Unrecoverable("a logit above the anchor's: the maximum is unknown (e.g. a negative "
                                      "multiplier raised a candidate)", req)
            return
        m = sm.f32(st.A / T)
        S_lo, S_hi = sm.sum_interval(float(pa))
        for t in ask:
            pv = float(probs.get(t, 0.0))
            ck = (pv, float(pa), T, m)
            iv = self._inv_cache.get(ck)
            if iv is None:
                iv = self._inv_cache[ck] = sm.preimage(pv, T, m, S_lo, S_hi)
            init = st.init[t]
            if iv is None:
                st.result = Unrecoverable(f"token {t}: probability {pv!r} is consistent with no float32 logit "
                                          f"(T {T}, anchor p {pa!r})", req)
                return
            lo, hi = iv
            if pv == 0.0:
                if init == -math.inf:
                    st.got[t] = (init, sm.width(lo, hi), T, pv)
                    st.pending.pop(t, None)
                elif T * 8 <= MAX_T:
                    st.pending[t] = T * 8
                else:
                    st.result = Unrecoverable(f"token {t}: probability 0 even at temperature {T}", req)
                    return
                continue
            if lo == hi:
                st.got[t] = (lo, 1, T, pv)
                st.pending.pop(t, None)
            elif sm.key(lo) <= sm.key(init) <= sm.key(hi) and only_initial(st.case.multiplier, init, lo, hi):
                st.got[t] = (init, sm.width(lo, hi), T, pv)
                st.pending.pop(t, None)
            else:
                z = (lo + hi) / 2 - st.A
                T2 = 2.0 ** math.floor(math.log2(abs(z) / 32)) if z != 0 else 0.0
                if st.A != 0.0 or not MIN_T <= T2 < T:
                    among = sm.key(lo) <= sm.key(init) <= sm.key(hi)
                    st.result = Unrecoverable(f"token {t}: {sm.width(lo, hi)} float32 logits in [{lo!r}, {hi!r}] "
                                              f"give probability {pv!r} (T {T}), " + (
                                                  f"the initial {init!r} and logits a penalty of multiplier "
                                                  f"{st.case.multiplier!r} or more leaves among them" if among
                                                  else f"the initial {init!r} not among them"), req)
                    return
                st.pending[t] = T2

    # -- a tree of histories (dryz exhaustive) -------------------------------------------------------------------
    def walk(self, tree, max_len: int, sampler_args, sink, prefixes=((),), top: int | None = None, *,
             rows: int = 8192, on_other=None) -> int:
        """Every history of `tree` below the prefixes (digits; the prefix itself not evaluated) up to max_len
        (or top=d: lengths 1..d), candidates tree.cands(m) at logit 0, as dryz.subject.walker.walk gives them:
        sink(n, m, H int64 (rows, n), logits float32 (rows, C), cands int64) per batch of one (n, m) group.
        A case the server did not answer with logits (Refused, Unrecoverable, Crash) is left out of its batch
        and given to on_other(case, result) (the caller's; by default it raises ServerError). Returns the number
        of histories asked."""
        if top is not None:
            max_len, prefixes = top, ((),)
        tab = tables(tree)
        mult, base, allowed, last_n, breakers = sampler_args[:5]
        pending: dict = {}
        count = 0

        def flush(n, m):
            nonlocal count
            hs = pending.pop((n, m), [])
            if not hs:
                return
            cands = tab.cands[m]
            cl = tuple((int(c), 0.0) for c in cands)
            cases = [Case(history=h, alphabet=MAX_ALPHABET, penalty_last_n=last_n, breakers=tuple(breakers),
                          multiplier=mult, base=base, allowed_length=allowed, candidates=cl) for h in hs]
            outs = self.run_batch(cases)
            count += len(cases)
            good = []
            for c, o in zip(cases, outs):
                if isinstance(o, Output):
                    good.append(o)
                elif on_other is not None:
                    on_other(c, o)
                elif isinstance(o, ProtocolCrash):
                    raise SubjectCrashed(o, c)
                else:
                    raise Unsupported(f"history {list(c.history)}: {type(o).__name__}: "
                                      f"{getattr(o, 'detail', '') or getattr(o, 'message', '')}")
            if good:
                H = np.array([o_case.history for o_case, o in zip(cases, outs) if isinstance(o, Output)],
                             dtype=np.int64).reshape(len(good), n)
                sink(n, m, H, np.stack([o.logits for o in good]), cands)

        def visit(toks, m):
            for _d, t, c in tree.children(m):
                h = toks + (t,)
                group = pending.setdefault((len(h), c), [])
                group.append(h)
                if len(group) >= rows:
                    flush(len(h), c)
                if len(h) < max_len:
                    visit(h, c)

        for toks, m in resolve_roots(tab, prefixes):
            if len(toks) < max_len:
                visit(toks, m)
        for n, m in sorted(pending):
            flush(n, m)
        return count

    # -- a stored request, as is ---------------------------------------------------------------------------------
    def send(self, body: dict, case=None) -> tuple[int, object]:
        """POST a /completion body unchanged (a corpus witness's request) on the server for case's vocabulary
        (the symbol vocabulary when None): (status, parsed body). ServerDied restarts the server and raises."""
        v = self._vocab(case if case is not None else Case(history=(), alphabet=1, penalty_last_n=0))
        p = self._proc(v)
        try:
            return p.post("/completion", body, timeout=self.request_timeout)
        except ServerDied:
            self._restart(p)
            raise


def only_initial(multiplier: float, init: float, lo: float, hi: float) -> bool:
    """The initial logit is the one logit DRY can have left among the float32 values [lo, hi] the answer allows.
    By DRY's definition a penalty is 0 or multiplier * base^e with e >= 0 and base >= 1 (when DRY runs), so
    any logit it changes lies at or beyond f32(init - multiplier) (rounding is monotone): the interval must
    stop short of that. A tiny multiplier leaves tiny penalties the softmax cannot resolve: then the answer is
    Unrecoverable, never read as untouched. (A DRY that penalizes by less than its multiplier, against its
    definition, would be read as untouched where the softmax cannot see it.)"""
    m = sm.f32(multiplier)
    if m == 0.0:
        return True  # DRY off: nothing changes
    bound = sm.f32(init - m)
    if m > 0:
        return bound < init and sm.key(lo) > sm.key(bound)
    return bound > init and sm.key(hi) < sm.key(bound)

