#!/usr/bin/env python3
"""A dryz engine adapter (schema dryz.adapter/1, docs/adapters.md) over llama-cpp-python's own binding.

    dryz --subject cmd:"python examples/adapters/llama_cpp_python_adapter.py" exhaustive

It reads one JSON request per line on stdin and answers one JSON line per request on stdout, as any engine's
adapter would; here the "engine" is llama.cpp itself, reached through llama-cpp-python (`llama_cpp`), so the
seed space certifies. Copy it and replace `run()` with your engine's DRY: build the engine's DRY state for the
request's parameters and breakers, feed it the history, apply it to the candidates, return their logits.

Options (for testing dryz itself, not for engines):
  --drop-breakers           ignore the request's sequence breakers (a planted bug: dryz must find it)
  --single-token-breakers   ignore breakers of more than one character (as engines with single-token breakers
                            do; on dryz's symbol vocabulary a longer breaker is several tokens)
  --declare NAME=WHERE      declare the deviation NAME (e.g. single-token-breakers), citing WHERE the engine's own
                            user documentation states it (without =WHERE: no citation, which dryz refuses)
"""

import ctypes
import json
import math
import sys

import llama_cpp
from llama_cpp import _internals

SCHEMA = "dryz.adapter/1"
_LOG = llama_cpp.llama_log_callback(lambda level, text, user: None)  # quiet, and kept alive
llama_cpp.llama_log_set(_LOG, ctypes.c_void_p(0))
llama_cpp.llama_backend_init()
_MODELS = {}


def vocab(path: str):
    """The vocabulary the request names, loaded once (vocab_only)."""
    if path not in _MODELS:
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        _MODELS[path] = _internals.LlamaModel(path_model=path, params=params, verbose=False)
    return _MODELS[path]


def run(req: dict, drop_breakers: bool, single_token: bool) -> dict:
    p = req["params"]
    breakers = [] if drop_breakers else [b for b in p["breakers"] if len(b) <= 1 or not single_token]
    chain = _internals.LlamaSampler()
    chain.add_dry(vocab(req["vocab"]["path"]), p["multiplier"], p["base"], p["allowed_length"],
                  p["penalty_last_n"], breakers)
    try:
        for t in req["history"]:
            llama_cpp.llama_sampler_accept(chain.sampler, t)
        cands = req["candidates"]
        data = (llama_cpp.llama_token_data * len(cands))()
        for i, (t, lg) in enumerate(cands):
            data[i].id, data[i].logit, data[i].p = t, -math.inf if lg == "-inf" else lg, 0.0
        arr = llama_cpp.llama_token_data_array(data=data, size=len(cands), selected=-1, sorted=req["sorted"])
        llama_cpp.llama_sampler_apply(chain.sampler, ctypes.byref(arr))
        logits = ["-inf" if d.logit == -math.inf else d.logit for d in data]
        return {"id": req["id"], "logits": logits, "sorted": bool(arr.sorted)}
    finally:
        chain.close()


def main(argv) -> int:
    drop, single = "--drop-breakers" in argv, "--single-token-breakers" in argv
    declared = [argv[i + 1] for i, a in enumerate(argv) if a == "--declare" and i + 1 < len(argv)]
    declared = [{"name": d.split("=", 1)[0], "cited": d.split("=", 1)[1]} if "=" in d else d for d in declared]
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("op") == "hello":
            answer = {"schema": SCHEMA, "engine": "llama-cpp-python", "version": llama_cpp.__version__,
                      "deviations": declared, "vocabularies": "any", "initial_logits": True,
                      "candidate_arrays": True, "batch": 256}
        else:
            try:
                answer = run(req, drop, single)
            except Exception as e:  # noqa: BLE001 (the engine refuses the case: say why)
                answer = {"id": req.get("id"), "error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
