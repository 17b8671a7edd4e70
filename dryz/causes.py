"""The causes of a subject (the judge's side of `dryz conformance`)'s differences from llama.cpp: the smallest set of deviation models (dryz.oracle.deviations)
whose composition with llama.cpp's DRY explains, bit for bit, every answer the subject gave (pure: the answers are
given; no subject runs here).

An answer is explained by a set of models when the composed model (dryz.oracle.composed; refusals:
deviations.REFUSALS) predicts exactly it: the same logits bit for bit (and the sorted flag, where the subject has
one), the refusal the engine gave, or a raise where the engine raised. `fit` grows the set greedily, each step
adding the model that explains the most answers still unexplained without losing any, then drops every model the
others make redundant (the set is 1-minimal: no model can be removed; greedy, so not proven the smallest); what
no set explains is the residual, listed, never hidden.

What is explained is a probe: a Case (a fresh sampler over its history), or one request of a request sequence
(dryz.requests.Request: the request's case and the prompts sent before it to the same instance), whose history
DRY reads as the context models say (deviations.context: the history itself under llama.cpp's semantics).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from .case import Case, json_number
from .config import case_config, symbol_tokenize
from .oracle import composed
from .oracle.deviations import REFUSALS, REGISTRY, compose, context, instances, pattern
from .requests import Request, Requests, case_of
from .subject.answers import Crash, Output, Refused

SAMPLE = 400  # unexplained answers a candidate's gain is first estimated on (then counted on all of them)
TRIED = 6     # the candidates (each its pattern's best number on the samples) counted on every answer per step


def candidates(kinds=("output", "refusal", "raise", "fix", "context")) -> list[str]:
    """Every model the fit may choose: each registry model, every number of a numbered one."""
    return [n for m in REGISTRY if m.kind in kinds for n in instances(m.name)]


def items(probe) -> list:
    """What a probe gives the fit: a case itself, each request of a sequence (with the ones before it); a trace
    nothing (its class is its own)."""
    if isinstance(probe, Case):
        return [probe]
    return probe.items() if isinstance(probe, Requests) else []


def _config(case: Case, models: tuple, abi: int):
    if case.vocab is not None:
        raise ValueError("the causes are fitted on dryz's symbol vocabulary")
    return _composed(case.multiplier, case.base, case.allowed_length, case.penalty_last_n, case.breakers,
                     case.n_ctx_train, abi, models)


@lru_cache(maxsize=1 << 16)
def _composed(multiplier, base, allowed_length, penalty_last_n, breakers, n_ctx_train, abi, models):
    case = Case(history=(), alphabet=1, multiplier=multiplier, base=base, allowed_length=allowed_length,
                penalty_last_n=penalty_last_n, breakers=breakers, n_ctx_train=n_ctx_train)
    return compose(case_config(case, abi), models, breakers, symbol_tokenize)


def prediction(probe: Case | Request, models: tuple, abi: int = 7):
    """What llama.cpp's DRY with these models does to the probe (a case, or a request of a sequence): Refused,
    composed.Raises, or (logits, sorted)."""
    case = case_of(probe)
    for m in models:
        if m in REFUSALS and REFUSALS[m](case):
            return Refused(0, m)
    cfg = _config(case, models, abi)
    history = context(models, case.history, probe.earlier) if isinstance(probe, Request) else case.history
    return composed.predict(cfg, history, np.array(case.ids, dtype=np.int64),
                            np.array(case.logits, dtype=np.float32), case.sorted)


def _bits(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32).view(np.uint32)


def same_prediction(a, b) -> bool:
    """Two predictions (prediction()) say the same: the same refusal or raise, or the same logits bit for bit and
    the same sorted flag."""
    if isinstance(a, (Refused, composed.Raises)) or isinstance(b, (Refused, composed.Raises)):
        return type(a) is type(b)
    return np.array_equal(_bits(a[0]), _bits(b[0])) and bool(a[1]) == bool(b[1])


def explains(case: Case | Request, answer, models: tuple, sorted_flag: bool = True, abi: int = 7) -> bool:
    """The models' composition predicts this answer exactly (on the semantics of an init_dry ABI)."""
    got = prediction(case, models, abi)
    if isinstance(answer, Refused):
        return isinstance(got, Refused)
    if isinstance(answer, Crash):  # an engine's exception, or a native library's process dying
        return isinstance(got, composed.Raises) and answer.signal not in ("hang", "skipped")
    if not isinstance(answer, Output) or isinstance(got, (Refused, composed.Raises)):
        return False
    logits, srt = got
    if not np.array_equal(_bits(answer.logits), _bits(logits)):
        return False
    return not sorted_flag or answer.sorted is None or bool(answer.sorted) == bool(srt)


def _refine(chosen: list, i: int, ok: list, explained) -> tuple[list, list]:
    """A numbered model's number that explains the most (the first such: the smallest number on a tie)."""
    pat = pattern(chosen[i])
    if not pat.endswith(":N"):
        return chosen, ok
    for m in instances(pat):
        if m == chosen[i]:
            continue
        trial = explained(chosen[:i] + [m] + chosen[i + 1:])
        if sum(trial) > sum(ok):
            chosen, ok = chosen[:i] + [m] + chosen[i + 1:], trial
    return chosen, ok


@dataclass
class Fit:
    models: tuple                      # the fitted set, in the order the fit chose them
    explained_by: dict = field(default_factory=dict)  # model -> answers only it explains (removing it loses them)
    residual: list = field(default_factory=list)      # indices of the answers no set explained
    judged: int = 0                    # answers fitted
    llama: int = 0                     # answers llama.cpp's DRY alone explains


def fit(pairs, sorted_flag: bool = True, start: tuple = (), pool=None, abi: int = 7, log=lambda m: None) -> Fit:
    """The fitted set for (case, answer) pairs (answers a subject gave: Output, Crash, Refused; others are not
    passed). start: models tried first as they are (a subject's declared deviations, kept only where they explain);
    pool: the models to choose from (default: every registry model)."""
    pool = list(pool if pool is not None else candidates())
    ok = [explains(c, a, (), sorted_flag, abi) for c, a in pairs]
    llama = sum(ok)
    chosen: list = []

    def explained(models) -> list:
        return [explains(c, a, tuple(models), sorted_flag, abi) for c, a in pairs]

    for m in start:  # a declared deviation joins only where it explains more
        trial = explained(chosen + [m])
        if sum(trial) > sum(ok):
            chosen, ok = chosen + [m], trial
    while True:
        todo = [i for i, e in enumerate(ok) if not e]
        if not todo:
            break
        sample = todo[::max(1, len(todo) // SAMPLE)][:SAMPLE]
        done = [i for i, e in enumerate(ok) if e]
        kept = done[::max(1, len(done) // (SAMPLE // 2))][:SAMPLE // 2]  # what a candidate may lose
        taken = {pattern(m) for m in chosen}
        best_of: dict = {}  # pattern -> (net gain on the samples, model)
        for m in pool:
            if m in chosen or pattern(m) in taken:
                continue
            models = tuple(chosen + [m])
            g = sum(explains(pairs[i][0], pairs[i][1], models, sorted_flag, abi) for i in sample)
            if not g:
                continue
            g -= sum(not explains(pairs[i][0], pairs[i][1], models, sorted_flag, abi) for i in kept)
            if g > best_of.get(pattern(m), (0, None))[0]:
                best_of[pattern(m)] = (g, m)
        if not best_of:
            break
        best = None
        for _, m in sorted(best_of.values(), key=lambda x: -x[0])[:TRIED]:  # counted on every answer
            trial = explained(chosen + [m])
            if sum(trial) > sum(ok) and (best is None or sum(trial) > sum(best[1])):
                best = (m, trial)
        if best is None:
            break
        chosen, ok = chosen + [best[0]], best[1]
        chosen, ok = _refine(chosen, len(chosen) - 1, ok, explained)
        log(f"fit: + {chosen[-1]}: {sum(ok):,} of {len(pairs):,} explained")
    for i in range(len(chosen)):  # every number again, with the whole set known
        chosen, ok = _refine(chosen, i, ok, explained)
    for m in list(chosen):  # 1-minimal: drop what the others make redundant
        rest = [x for x in chosen if x != m]
        if sum(explained(rest)) >= sum(ok):
            chosen = rest
    own = {}
    for m in chosen:
        rest = explained([x for x in chosen if x != m])
        own[m] = [i for i, (a, b) in enumerate(zip(ok, rest)) if a and not b]
    return Fit(tuple(chosen), own, [i for i, e in enumerate(ok) if not e], len(pairs), llama)


def answer_json(answer) -> dict:
    """What a subject answered, as a witness shows it."""
    if isinstance(answer, Output):
        return {"logits": [json_number(float(x)) for x in answer.logits]}
    if isinstance(answer, Crash):
        return {"raised" if answer.signal == "exception" else "crash": answer.detail}
    if isinstance(answer, Refused):
        return {"refused": answer.message}
    return {}


def predicted_json(case: Case | Request, models: tuple, abi: int) -> dict:
    """What llama.cpp's DRY (with models) gives for the case (or a request of a sequence), as a witness shows
    it."""
    p = prediction(case, models, abi)
    if isinstance(p, composed.Raises):
        return {"raised": p.why}
    if isinstance(p, Refused):
        return {"refused": p.message}
    return {"logits": [json_number(float(x)) for x in p[0]]}


def answer_of(case: Case | Request, d: dict):
    """An answer from its JSON (answer_json): Output, Crash or Refused."""
    case = case_of(case)
    if "logits" in d:
        logits = np.array([float(x) for x in d["logits"]], dtype=np.float32)
        return Output(tuple(case.ids), logits, None, len(logits))
    if "refused" in d:
        return Refused(0, d["refused"])
    return Crash(d.get("raised") or d.get("crash") or "", "exception" if "raised" in d else "")
