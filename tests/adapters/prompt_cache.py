"""A dryz adapter for the tests: llama.cpp's DRY (dryz's shipped model) behind an instance with a prompt cache, as
mistral.rs's prefix cache behaves (a request whose prompt shares a prefix with an earlier request's on the same
instance is read from the end of the longest shared prefix on), written here from that description, not from dryz's
deviation model. It runs request sequences (a fresh cache per sequence); a single case is a fresh instance.

    prompt_cache.py [off]     off: the cache disabled (every request read whole: it must conform)
"""

import sys

import numpy as np

from dryz.case import Case
from dryz.check import model_logits
from dryz.subject.engines.serve import serve

cache_on = sys.argv[1:] != ["off"]


def answer(req, prompts):
    hist = tuple(req["history"])
    shared = 0
    for q in prompts:  # the longest prefix an earlier prompt shares with this one
        n = 0
        while n < min(len(q), len(hist)) and q[n] == hist[n]:
            n += 1
        shared = max(shared, n)
    read = hist[shared:] if cache_on and 0 < shared < len(hist) else hist
    p = req["params"]
    cands = tuple((int(t), float("-inf") if lg == "-inf" else float(lg)) for t, lg in req["candidates"])
    case = Case(history=read, alphabet=max([t for t, _ in cands] + list(hist)) + 1,
                penalty_last_n=p["penalty_last_n"], breakers=tuple(p["breakers"]), multiplier=p["multiplier"],
                base=p["base"], allowed_length=p["allowed_length"], candidates=cands, sorted=req["sorted"])
    return [float(x) for x in np.asarray(model_logits(case))], False


def sequence(reqs):
    return [lambda k=k: answer(reqs[k], [tuple(r["history"]) for r in reqs[:k]]) for k in range(len(reqs))]


sys.exit(serve({"engine": "prompt-cache" if cache_on else "prompt-cache-off", "version": "0", "deviations": [],
                "vocabularies": ["symbols"], "sorted_flag": False, "batch": 16},
               lambda req: answer(req, []), sequence=sequence))
