"""`--subject cmd:"COMMAND"` — any engine's DRY through a JSON-lines adapter on its stdin and stdout.

dryz starts COMMAND (split as a POSIX shell splits words; no shell runs it), talks to it in the versioned schema
`dryz.adapter/1` (docs/adapters.md is the guide for engine authors: vLLM, Aphrodite, exllama, mistral.rs, ...),
and judges what it answers against llama.cpp's semantics like any subject's output. One JSON object per line:

  dryz -> adapter   {"schema": "dryz.adapter/1", "op": "hello"}
  adapter -> dryz   {"schema": "dryz.adapter/1", "engine": NAME, "version": V,
                     "deviations": [{"name": DEVIATION, "cited": WHERE THE ENGINE'S DOCUMENTATION SAYS IT}, ...],
                     "vocabularies": "any" | ["symbols", NAME, ...], "initial_logits": true,
                     "candidate_arrays": true, "sorted_flag": true, "batch": N, "sequences": false,
                     "instance_per_case": false}
  dryz -> adapter   {"op": "run", "id": I, "params": {"multiplier", "base", "allowed_length", "penalty_last_n",
                     "breakers"}, "vocab": {"name", "path", "sha256", "size"}, "history": [ids],
                     "candidates": [[id, logit], ...], "sorted": false}
  adapter -> dryz   {"id": I, "logits": [...], "sorted": false}        (logits in candidate order, "-inf" for
                                                                         -infinity)
                 or {"id": I, "error": "why this engine cannot run it"}   (not judged)
                 or {"id": I, "refused": "the engine's own refusal"}       (declared, or a mismatch)
                 or {"id": I, "crash": "what the engine raised"}           (class crash)
  dryz -> adapter   {"op": "sequence", "id": I, "requests": [R, ...]}  (only to an adapter whose hello says
                     "sequences": true; each R a run request's body: params, vocab, history, candidates, sorted)
  adapter -> dryz   {"id": I, "answers": [A, ...]}                      (A per request, in order: {"logits",
                                                                         "sorted"}, {"error"}, {"refused"} or
                                                                         {"crash"}, as a run's answer)

A sequence is requests sent in turn to ONE fresh instance of the engine (a new server, a new Runner), as the users
of one instance send them; each answer is what that instance answered for the request after the ones before it.
llama.cpp's semantics make requests independent, so dryz judges each request on its own (dryz.requests): an
instance that carries something from one request to the next (a prompt cache that changes what DRY reads) differs
on a later request. "instance_per_case": every case is the first request of a fresh instance (a sequence of one),
so each costs the instance's start-up: dryz does not run the modes that enumerate tens of thousands of cases on it.

A request is a fresh DRY state: the history as the tokens generated so far, one application of the sampler to
the candidates. Floats travel as JSON numbers with every digit (a float32 value's double is exact); dryz reads
the answers as float32. `vocab.name` "symbols" is dryz's symbol vocabulary (token i is the one character
SYMBOLS[i]; its GGUF is at `vocab.path`); any other name is a vendored vocabulary or a GGUF path.

The adapter declares its engine's documented deviations (dryz.oracle.deviations), each with where the engine's own
user documentation states it (a declaration without that citation is refused: what only an engine's code does is a
finding, not a declaration); dryz lists an output a declared deviation explains as class `declared-<name>`,
separately from undeclared differences (mismatches).

Faults: a command that cannot start, or that does not answer the handshake with the schema within the timeout,
is a subject that cannot be driven (one line, exit 2). Once running, an adapter that exits, hangs, or answers
something that is not an answer to the request is the subject failing on that case: a Crash (class crash, a
finding), and the adapter is started again for the next case; so is a `crash` answer (the engine raised or
panicked on the case). An `error` answer is a case the engine cannot express (dryz.subject.answers.Unrecoverable:
not judged); a `refused` answer is the engine's own refusal (answers.Refused: a declared deviation when one
covers it, else a mismatch: llama.cpp runs the case).
"""

from __future__ import annotations

import json
import math
import os
import select
import shlex
import signal
import subprocess
import sys
import time
from functools import cached_property

import numpy as np

from .binding import SubjectError
from ..environment import duration, read
from .cache import sha256_file
from .answers import Capabilities, Crash, Output, Refused, Unrecoverable, Unsupported
from .protocol import Subject
from ..oracle.deviations import DeviationError, parse
from .symbol_vocab import symbol_vocab_path

SCHEMA = "dryz.adapter/1"
HELLO_TIMEOUT = 60.0   # seconds for the adapter to start and answer the handshake
CASE_TIMEOUT = 30.0  # seconds for one answer, unless DRYZ_ADAPTER_TIMEOUT says otherwise (case_timeout)
MAX_LINE = 1 << 24     # an answer longer than this is not an answer


def case_timeout() -> float:
    """Seconds an adapter may take for one answer: DRYZ_ADAPTER_TIMEOUT (a duration as --time takes it)."""
    return read("DRYZ_ADAPTER_TIMEOUT", duration(0.001, 86400), CASE_TIMEOUT)


class Command(Subject):
    kind = "cmd"

    @staticmethod
    def check_arg(arg: str) -> None:
        """The spec's argument, checked before anything starts (registry.check_spec): a command that splits."""
        if not arg.strip():
            raise SubjectError('cmd: needs the adapter\'s command (--subject cmd:"python my_adapter.py")')
        try:
            shlex.split(arg)
        except ValueError as e:
            raise SubjectError(f"cmd: cannot split the command {arg!r}: {e}") from None

    def __init__(self, arg: str):
        if not arg.strip():
            raise SubjectError('cmd: needs the adapter\'s command (--subject cmd:"python my_adapter.py")')
        try:
            self.argv = shlex.split(arg)
        except ValueError as e:
            raise SubjectError(f"cmd: cannot split the command {arg!r}: {e}") from None
        self.spec = f"cmd:{arg}"
        self.proc = None
        self.restarts = 0
        self._next_id = 0
        self._buf = b""
        hello = self._start()
        self.hello = hello
        declared = hello.get("deviations", [])
        if not isinstance(declared, list):
            raise SubjectError(f"cmd: the adapter's deviations must be a list, got {declared!r}")
        deviations, self.citations = [], {}
        for d in declared:
            name = d.get("name") if isinstance(d, dict) else d
            cited = d.get("cited") if isinstance(d, dict) else None
            if not isinstance(name, str):
                raise SubjectError(f"cmd: a declared deviation must be {{\"name\": ..., \"cited\": ...}}, got {d!r}")
            if not isinstance(cited, str) or not cited.strip():
                raise SubjectError(f"cmd: the adapter declares {name!r} without citing where its engine's own user "
                                   "documentation states it ({\"name\": ..., \"cited\": \"...\"}): what only the "
                                   "code does is a finding, not a declaration")
            try:
                parse(name)
            except DeviationError as e:
                raise SubjectError(f"cmd: the adapter declares {e}") from None
            deviations.append(name)
            self.citations[name] = cited.strip()
        self.sources = {}
        for d in hello.get("sources", []) or []:  # the engine's source line behind a model dryz may fit
            if not (isinstance(d, dict) and isinstance(d.get("name"), str) and isinstance(d.get("source"), str)):
                raise SubjectError(f"cmd: a source must be {{\"name\": MODEL, \"source\": \"FILE:LINE ...\"}}, "
                                   f"got {d!r}")
            try:
                parse(d["name"].replace(":N", ":1"))
            except DeviationError as e:
                raise SubjectError(f"cmd: the adapter cites the source of {e}") from None
            self.sources[d["name"]] = d["source"].strip()
        domain = hello.get("domain") or {}
        min_history = domain.get("min_history", 0) if isinstance(domain, dict) else None
        if not (isinstance(min_history, int) and min_history >= 0) or \
                (min_history and not str(domain.get("cited", "")).strip()):
            raise SubjectError(f"cmd: 'domain' must be {{\"min_history\": N, \"cited\": \"where the engine "
                               f"refuses shorter histories\"}}, got {domain!r}")
        vocabularies = hello.get("vocabularies", "symbols")
        if vocabularies != "any" and not (isinstance(vocabularies, list) and all(isinstance(v, str)
                                                                                 for v in vocabularies)):
            raise SubjectError(f"cmd: 'vocabularies' must be \"any\" or a list of names, got {vocabularies!r}")
        batch = hello.get("batch", 64)
        if not (isinstance(batch, int) and 1 <= batch <= 4096):
            raise SubjectError(f"cmd: 'batch' must be an integer in 1..4096, got {batch!r}")
        for key in ("sequences", "instance_per_case"):
            if not isinstance(hello.get(key, False), bool):
                raise SubjectError(f"cmd: {key!r} must be true or false, got {hello.get(key)!r}")
        self.vocab_names = None if vocabularies == "any" else set(vocabularies)
        self.caps = Capabilities(calls=frozenset({"accept", "apply"}),
                                 vocabularies="any" if self.vocab_names != {"symbols"} else "symbols",
                                 initial_logits=bool(hello.get("initial_logits", True)),
                                 candidate_arrays=bool(hello.get("candidate_arrays", True)),
                                 sorted_flag=bool(hello.get("sorted_flag", True)), batch=batch,
                                 in_process=False, deviations=tuple(deviations), min_history=min_history,
                                 domain=str(domain.get("cited", "")).strip() if min_history else "",
                                 sequences=bool(hello.get("sequences", False)),
                                 instance_per_case=bool(hello.get("instance_per_case", False)))

    # -- the adapter process ---------------------------------------------------------------------------------
    def _start(self) -> dict:
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            raise SubjectError(f"cmd: cannot start {self.argv[0]!r}: {e.strerror or e}") from None
        os.set_blocking(self.proc.stderr.fileno(), False)
        self._buf = b""
        self._tail = b""
        try:
            self._send({"schema": SCHEMA, "op": "hello"})
            line = self._line(HELLO_TIMEOUT)
        except _Gone as e:
            self._kill()
            raise SubjectError(f"cmd: the adapter {self.argv[0]!r} did not answer the handshake: it {e}"
                               f"{self._last_words()}") from None
        try:
            hello = json.loads(line)
        except ValueError:
            self._kill()
            raise SubjectError(f"cmd: the adapter's handshake is not JSON: {line[:120]!r}") from None
        if not isinstance(hello, dict) or hello.get("schema") != SCHEMA:
            self._kill()
            raise SubjectError(f"cmd: the adapter's handshake does not name the schema {SCHEMA!r}: "
                               f"{line[:120]!r}")
        return hello

    def _send(self, obj) -> None:
        try:
            self.proc.stdin.write((json.dumps(obj, separators=(",", ":")) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise _Gone(f"exited ({self._status()})") from None

    def _line(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        out = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Gone(f"gave no answer within {timeout:.0f} s", hang=True)
            ready, _, _ = select.select([out, self.proc.stderr.fileno()], [], [], left)
            self._drain()
            if out in ready:
                b = os.read(out, 1 << 16)
                if not b:
                    raise _Gone(f"exited ({self._status()})")
                self._buf += b
                if len(self._buf) > MAX_LINE:
                    raise _Gone("answered a line longer than 16 MiB")
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode(errors="replace")

    def _drain(self) -> None:
        try:
            while True:
                b = os.read(self.proc.stderr.fileno(), 1 << 16)
                if not b:
                    return
                self._tail = (self._tail + b)[-4096:]
        except (BlockingIOError, OSError):
            pass

    def _status(self) -> str:
        try:
            rc = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "still running"
        return f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit {rc}"

    def _last_words(self) -> str:
        last = self._tail.decode(errors="replace").strip().splitlines()
        return f" (its last words: {last[-1][:200]})" if last else ""

    def _kill(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass
        self.proc = None

    def close(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._kill()

    # -- identity ------------------------------------------------------------------------------------------
    @cached_property
    def identity(self) -> dict:
        h = self.hello
        exe = self.argv[0]
        path = exe if os.path.sep in exe else (next((os.path.join(d, exe) for d in
                                                     os.environ.get("PATH", "").split(os.pathsep)
                                                     if os.path.isfile(os.path.join(d, exe))), exe))
        ident = {"kind": self.kind, "spec": self.spec, "command": self.argv, "schema": SCHEMA,
                 "engine": h.get("engine"), "engine_version": h.get("version"),
                 "deviations": list(self.caps.deviations), "init_dry_abi": self.abi}
        if self.citations:
            ident["citations"] = dict(self.citations)
        if self.sources:
            ident["sources"] = dict(self.sources)
        if self.caps.min_history:
            ident["domain"] = {"min_history": self.caps.min_history, "cited": self.caps.domain}
        scripts = [a for a in self.argv[1:] if os.path.isfile(a)]
        files = {a: sha256_file(a) for a in ([path] if os.path.isfile(path) else []) + scripts}
        ident["files_sha256"] = files
        ident["label"] = (f"{h.get('engine') or 'engine'} {h.get('version') or ''} through the adapter "
                          f"{' '.join(self.argv)}").replace("  ", " ")
        ident["shown"] = {"command": " ".join(self.argv),
                          "declared": ", ".join(self.caps.deviations) or "no deviations"}
        return ident

    # -- the protocol -----------------------------------------------------------------------------------------
    def run_batch(self, cases) -> list:
        out: list = []
        for i in range(0, len(cases), self.caps.batch):
            out.extend(self._run_chunk(cases[i:i + self.caps.batch]))
        return out

    def run_sequence(self, requests) -> list:
        """The sequence's requests sent to one fresh instance (the `sequence` op): an answer per request; an adapter
        that dies or hangs on it is a Crash for each request (the first says how)."""
        why = self.runs_sequences()
        if why is not None:
            raise Unsupported(why)
        if self.proc is None:
            self.restarts += 1
            self._start()
        self._next_id += 1
        rid = self._next_id
        cases = list(requests.requests)
        try:
            self._send({"op": "sequence", "id": rid, "requests": [
                {k: v for k, v in self._request(c, rid).items() if k not in ("op", "id")} for c in cases]})
            d = self._reply(rid, case_timeout() * len(cases))
            got = d.get("answers")
            if not isinstance(got, list) or len(got) != len(cases):
                raise _Gone(f"answered {len(got) if isinstance(got, list) else 'no'} answers for a sequence of "
                            f"{len(cases)} requests")
            out = []
            for c, a in zip(cases, got):
                if not isinstance(a, dict):
                    raise _Gone(f"answered a request of the sequence with {str(a)[:120]!r}")
                out.append(self._output(c, self._parse(a, len(c.ids))))
            return out
        except _Gone as e:
            self._kill()
            died = Crash(f"the adapter {e}{self._last_words()}", e.signal, self._tail.decode(errors="replace")[-500:])
            return [died] + [Crash("not answered: the adapter died on the sequence", "skipped")] * (len(cases) - 1)

    def _output(self, case, answer):
        """An answer as the judge reads it: an Output from (logits, sorted), else the answer itself."""
        if not isinstance(answer, tuple):  # not judged, a refusal, or the engine raising
            return answer
        logits, sorted_flag = answer
        if not self.caps.sorted_flag or not self.caps.candidate_arrays:
            sorted_flag = None  # an engine without the flag: not judged
        return Output(tuple(case.ids), logits, sorted_flag, len(case.ids))

    def _symbols(self) -> dict:
        """The symbol vocabulary as a request names it (its file written and hashed once per subject)."""
        if getattr(self, "_symbols_vocab", None) is None:
            p = symbol_vocab_path()
            self._symbols_vocab = {"name": "symbols", "path": str(p), "sha256": sha256_file(p), "size": 64}
        return self._symbols_vocab

    def _request(self, case, rid: int) -> dict:
        if case.vocab is None:
            vocab = self._symbols()
        else:
            if self.vocab_names is not None and case.vocab not in self.vocab_names:
                raise Unsupported(f"the adapter runs the vocabularies {sorted(self.vocab_names)}, not {case.vocab}")
            v = self.vocabulary(case.vocab)
            vocab = {"name": case.vocab, "path": str(v.ref.path), "sha256": v.ref.sha256, "size": v.n_tokens}
        return {"op": "run", "id": rid,
                "params": {"multiplier": case.multiplier, "base": case.base, "allowed_length": case.allowed_length,
                           "penalty_last_n": case.penalty_last_n, "breakers": list(case.breakers)},
                "vocab": vocab, "history": list(case.history),
                "candidates": [[t, "-inf" if lg == -math.inf else lg] for t, lg in zip(case.ids, case.logits)],
                "sorted": case.sorted}

    def _run_chunk(self, cases) -> list:
        if self.proc is None:
            self.restarts += 1
            self._start()
        ids = []
        try:
            for c in cases:
                self._next_id += 1
                ids.append(self._next_id)
                self._send(self._request(c, self._next_id))
        except _Gone as e:
            self._kill()
            return [Crash(f"the adapter {e}{self._last_words()}", e.signal)] + [
                Crash("not run: the adapter died on an earlier case of the batch", "skipped")] * (len(cases) - 1)
        out: list = []
        for c, rid in zip(cases, ids):
            try:
                answer = self._answer(rid, len(c.ids))
            except _Gone as e:
                self._kill()
                out.append(Crash(f"the adapter {e}{self._last_words()}", e.signal, self._tail.decode(
                    errors="replace")[-500:]))
                # the rest of the batch was sent to a process that is gone: run them again, one by one
                out.extend(self.run_batch(list(cases[len(out):])))
                return out
            out.append(self._output(c, answer))
        return out

    def _decoded(self, timeout: float):
        """The adapter's next line, decoded."""
        line = self._line(timeout)
        try:
            return json.loads(line)
        except ValueError:
            raise _Gone(f"answered something that is not JSON: {line[:120]!r}") from None

    def _reply(self, rid: int, timeout: float) -> dict:
        """The adapter's next answer, which answers request rid."""
        d = self._decoded(timeout)
        if not isinstance(d, dict) or d.get("id") != rid:
            raise _Gone(f"answered out of order or without the request's id {rid}: {json.dumps(d)[:120]!r}")
        self._adapter_failed(d)
        return d

    def _adapter_failed(self, d: dict) -> None:
        """dryz's own adapter failed (engine:NAME): never the engine's finding (one line, exit 2)."""
        if "adapter_error" in d:
            raise SubjectError(f"{self.spec}: the adapter itself failed, not the engine (a bug in dryz's adapter, "
                               f"please report it): {str(d['adapter_error'])[:300]}")

    def _answer(self, rid: int, n: int):
        return self._parse(self._reply(rid, case_timeout()), n)

    def _parse(self, d: dict, n: int):
        """One answer (of a run, or of a sequence's request): (logits, sorted), Unrecoverable, Refused or Crash."""
        self._adapter_failed(d)
        if "error" in d:
            return Unrecoverable(f"the engine cannot run the case: {str(d['error'])[:500]}")
        if "refused" in d:
            return Refused(0, str(d["refused"])[:500])
        if "crash" in d:
            return Crash(f"the engine raised: {str(d['crash'])[:500]}", "exception", self._tail.decode(
                errors="replace")[-500:])
        lg = d.get("logits")
        if not isinstance(lg, list) or len(lg) != n:
            raise _Gone(f"answered {len(lg) if isinstance(lg, list) else 'no'} logits for {n} candidates")
        try:
            vals = np.array([-math.inf if x == "-inf" else math.inf if x == "inf" else
                             math.nan if x == "nan" else float(x) for x in lg], dtype=np.float32)
        except (TypeError, ValueError):
            raise _Gone(f"answered logits that are not numbers: {str(lg)[:120]}") from None
        sorted_flag = d.get("sorted", False)
        if not isinstance(sorted_flag, bool):
            raise _Gone(f"answered a sorted flag that is not true or false: {sorted_flag!r}")
        return vals, sorted_flag


class _Gone(Exception):
    """The adapter did not answer (exited, hung, or answered something that is not an answer)."""

    def __init__(self, why: str, hang: bool = False):
        super().__init__(why)
        self.signal = "hang" if hang else "adapter"


class EngineSubject(Command):
    """`--subject engine:NAME`: one of the engine adapters dryz ships (dryz.subject.engines), run as a `cmd:`
    subject: `python -m dryz.subject.engines.NAME`. A missing engine package is one line naming the extra.
    `engine:NAME+patch=FILE`: the engine's DRY with a patch applied as the adapter loads it
    (dryz.subject.engines.patching); the identity names the patch and its sha256."""
    kind = "engine"

    @staticmethod
    def split(arg: str) -> tuple[str, str | None]:
        """(the engine's name, its patch file or None) of NAME[+patch=FILE]."""
        name, sep, patch = arg.strip().partition(PATCH)
        return name.strip(), (patch if sep else None)

    @staticmethod
    def check_arg(arg: str) -> None:
        """The engine's name, checked against the engines dryz ships, and its patch (a readable unified diff of
        the files its DRY may be patched in), before anything starts."""
        from .engines import ENGINES  # on use: keeps start-up fast (a kind's module loads when it is selected)
        from .engines.patching import PatchError, read  # on use: a patched engine only
        name, patch = EngineSubject.split(arg)
        if name not in ENGINES:
            from ..errors import unknown  # on use
            raise SubjectError(f"engine:{name}: " + unknown("engine", name, ENGINES))
        if patch is None:
            return
        e = ENGINES[name]
        if not e.patchable:
            raise SubjectError(f"engine:{name}{PATCH}{patch}: {e.compiled}")
        try:
            read(patch, e.patchable, name)
        except PatchError as err:
            raise SubjectError(f"engine:{name}{err}") from None

    @staticmethod
    def normal_arg(arg: str) -> str:
        """The argument with its patch's path made absolute (a child in another folder means the same file)."""
        name, patch = EngineSubject.split(arg)
        return name if patch is None else f"{name}{PATCH}{os.path.abspath(patch)}"

    def __init__(self, arg: str):
        from .engines import ENGINES  # on use: keeps start-up fast (a kind's module loads when it is selected)
        self.check_arg(arg)
        name, patch = self.split(self.normal_arg(arg))
        engine = ENGINES.get(name)
        why = engine.missing()
        if why is not None:
            raise SubjectError(why)
        self.patch = patch
        super().__init__(shlex.join([sys.executable, "-m", engine.module] + (["--patch", patch] if patch else [])))
        self.spec = f"engine:{name}" + (f"{PATCH}{patch}" if patch else "")

    @cached_property
    def identity(self) -> dict:
        ident = super().identity
        if self.patch:
            ident["patch"] = {"file": self.patch, "sha256": sha256_file(self.patch)}  # (its version names it too)
        return ident


class InProcessEngine(EngineSubject):
    """An engine adapter dryz ships, run in this process (a fuzz job's: no pipe between the job and the engine): the
    adapter module's make() gives the handshake and run, dryz.subject.engines.serve.respond each answer, as the
    adapter's own process would write it, read by the same code. A request and its answer are the dicts the pipe's
    JSON carries, passed as they are: plain JSON values both (a request as _request builds it; an answer as
    respond makes it, its logits through logit_json), which a JSON round trip gives back unchanged, so it is not
    made per case (it cost a fuzz job more than a tenth of its time). Only for engines that say so
    (Engine.in_process: Python, fork-safe)."""

    def __init__(self, arg: str):
        from .engines import ENGINES  # on use: keeps start-up fast (a kind's module loads when it is selected)
        self._engine = ENGINES.get(EngineSubject.split(arg)[0])
        if self._engine is None or not self._engine.in_process:
            raise SubjectError(f"engine:{arg.strip()} runs in its own process only")
        self._queue: list = []
        super().__init__(arg)

    def _start(self) -> dict:
        import importlib  # on use: an in-process engine only
        from .engines.serve import respond  # on use: an in-process engine only
        from .engines.patching import PatchError  # on use: an in-process engine only
        make = importlib.import_module(self._engine.module).make
        try:
            hello, run = make(patch=self.patch) if self.patch else make()
        except PatchError as e:
            raise SubjectError(f"engine:{self._engine.name}{e}") from None
        self._respond = lambda req: respond(hello, run, req)
        self.proc = self  # (what the pipe's transport checks to know it runs)
        self._tail = b""
        return json.loads(json.dumps(self._respond({"op": "hello"})))

    def _send(self, obj) -> None:
        self._queue.append(self._respond(obj))

    def _decoded(self, timeout: float):
        return self._queue.pop(0)

    def _kill(self) -> None:
        self._queue.clear()

    def close(self) -> None:
        self._queue.clear()


PATCH = "+patch="
