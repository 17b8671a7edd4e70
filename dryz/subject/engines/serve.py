"""The adapter side of dryz.adapter/1 for the shipped engine adapters: read one JSON request per line on stdin,
answer one JSON line on stdout (the engine's own output, if any, goes to stderr: stdout carries answers only).

An adapter gives `serve` its handshake (engine, version, declared deviations with citations, vocabularies,
capabilities) and `run(request) -> (logits, sorted)`; an adapter that runs request sequences (the `sequence` op:
requests sent in turn to one fresh instance) gives `sequence(requests)` too: per request, in order, a call that
answers it as run does (each called after the ones before it). What a call raises is the answer:
  NotExpressible   the engine cannot take the case as llama.cpp's parameters state it: {"error": why} (not judged)
  Refusal          the engine's own API refuses the parameters: {"refused": message}
  EngineRaised     a call into the engine (made through `engine(...)`) raised or panicked: {"crash": what}, judged
                   class crash
  anything else    the adapter itself failed (dryz's bug, not the engine's): {"adapter_error": what}; dryz stops
                   with one line, exit 2 (the harness in doubt)
"""

from __future__ import annotations

import json
import math
import os
import sys
from contextlib import contextmanager

SCHEMA = "dryz.adapter/1"


class NotExpressible(Exception):
    """The engine has no way to take this case (a parameter it lacks, a vocabulary it cannot load): not judged."""


class Refusal(Exception):
    """The engine's own API refuses the request (its validation): the message it gives."""


class EngineRaised(Exception):
    """A call into the engine raised (its __cause__ is what it raised)."""


def engine(fn, *args, **kwargs):
    """Call into the engine: what it raises is the engine's (class crash), never taken for the adapter's own."""
    try:
        return fn(*args, **kwargs)
    except (NotExpressible, Refusal, KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 (whatever the engine raises; a Rust panic is a BaseException)
        raise EngineRaised(str(e)) from e


def _where(e: BaseException) -> str:
    """What raised and where: the innermost frame of its traceback (walked, not extracted: no source is read)."""
    tb = e.__traceback__
    if tb is None:
        return f"{type(e).__name__}: {e}"
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f"{type(e).__name__}: {e} ({os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno})"


def answers_stream():
    """The process's stdout for answers, with fd 1 moved to stderr (engines print logs on stdout)."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def logit_json(x: float):
    return "-inf" if x == -math.inf else "inf" if x == math.inf else "nan" if math.isnan(x) else float(x)


def _answer(call) -> dict:
    """One request's answer: what call() returns (logits, sorted), or what it raised."""
    try:
        logits, sorted_flag = call()
        return {"logits": [logit_json(float(x)) for x in logits], "sorted": bool(sorted_flag)}
    except NotExpressible as e:
        return {"error": str(e)}
    except Refusal as e:
        return {"refused": str(e)}
    except EngineRaised as e:  # the engine raised on the case: class crash
        return {"crash": _where(e.__cause__)}
    except Exception as e:  # noqa: BLE001 (the adapter's own failure: the harness in doubt)
        return {"adapter_error": _where(e)}


def respond(hello: dict, run, req: dict, sequence=None) -> dict:
    """The answer to one request (the handshake's, a run's, a sequence's): what the adapter writes as one JSON line.
    An in-process transport (dryz.subject.command.InProcessEngine) takes the same answers without the pipe."""
    rid = req.get("id")
    if req.get("op") == "hello":
        return {"schema": SCHEMA, **hello, "sequences": sequence is not None}
    if req.get("op") == "sequence":
        answers = [_answer(call) for call in sequence(req["requests"])] if sequence is not None else \
            [{"adapter_error": "a sequence sent to an adapter that runs none"}]
        failed = next((a for a in answers if "adapter_error" in a), None)
        return {"id": rid, **failed} if failed else {"id": rid, "answers": answers}
    return {"id": rid, **_answer(lambda: run(req))}


def serve(hello: dict, run, out=None, sequence=None) -> int:
    """The request loop: the handshake, then one answer per request (or per sequence) until stdin closes."""
    out = out or answers_stream()
    for line in sys.stdin:
        out.write(json.dumps(respond(hello, run, json.loads(line), sequence)) + "\n")
        out.flush()
    return 0


def initial_logits(req, size: int) -> list[float]:
    """Every token's logit before DRY (0, the candidates' as the request gives them), as a list: one tensor is made
    of it at once (setting a tensor's items one by one costs an engine adapter more than the engine's own DRY)."""
    row = [0.0] * size
    for t, lg in req["candidates"]:
        row[t] = float("-inf") if lg == "-inf" else float(lg)
    return row


def symbol_pieces() -> list[str]:
    """dryz's symbol vocabulary: token i is the one character SYMBOLS[i]."""
    from ...symbols import SYMBOLS  # on use: keeps the adapters' start-up small
    return list(SYMBOLS)


def containing(pieces: list[str], s: str) -> set[int]:
    """Every token whose piece contains the string s (how exllamav2 builds its own breaker set, and llama.cpp's
    single-token breakers)."""
    return {i for i, p in enumerate(pieces) if s and s in p}


@contextmanager
def stand_ins(stubs: dict, own=()):
    """sys.modules with the stand-in modules `stubs` (the engine's imports its DRY code does not use) while the
    engine's files are executed; afterwards every name (and `own`, the modules the loading registers) as before."""
    saved = {k: sys.modules.get(k) for k in list(stubs) + list(own)}
    sys.modules.update(stubs)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
