"""The semantic properties of llama.cpp's DRY a conformance matrix has as columns: each a bounded space of probes
(cases; traces for reset/clone; request sequences for requests sent in turn to one instance), shortest first, that
exercises that property and little else, and the deviation models (dryz.oracle.deviations) whose difference from
llama.cpp belongs to it (a campaign's witness is attributed to the property whose model reproduces it bit for
bit).

Every probe is judged like any case (check_batch on the subject's semantics); a property's probes are all built
here, from the symbol vocabulary, so every engine that runs dryz's symbols can be asked them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

from ..case import Case
from ..requests import Requests
from ..symbols import SYMBOLS, from_symbols
from ..trace_space import CONFIGS, iter_traces, trace_of

WHOLE = 256  # a window above every probe's history: the whole history is in it


@dataclass(frozen=True)
class Property:
    name: str        # the column's key
    title: str       # the column's heading
    what: str        # what llama.cpp does (one line)
    probes: Callable  # () -> list of Case (or Trace, or Requests), shortest first
    explains: tuple = ()  # deviation models (dryz.oracle.deviations names; N: any) whose difference belongs here
    traces: bool = False  # the probes are traces (the subject needs reset, clone and free)


def words(k: int, n_max: int, n_min: int = 1):
    """Every history over k symbols of length n_min..n_max, shortest first."""
    for n in range(n_min, n_max + 1):
        yield from itertools.product(range(k), repeat=n)


def _cases(hists, k: int, **kw) -> list[Case]:
    return [Case(history=tuple(h), alphabet=k, **{"penalty_last_n": WHOLE, **kw}) for h in hists]


def _periodic(p: int, n: int) -> tuple:
    return tuple(i % p for i in range(n))


def _repeats():
    return _cases(words(3, 6), 3)


def _allowed():
    return [c for a in (0, 2, 3) for c in _cases(words(2, 6), 2, allowed_length=a)]


def _sampled(k: int, n: int, count: int, seed: int) -> list[tuple]:
    """count histories of n tokens over k symbols, the same every run (a linear congruential walk), periodic
    ones first: a long repeat, then whatever the walk gives."""
    out = [tuple(i % p for i in range(n)) for p in range(1, k + 1)]
    x = seed
    while len(out) < count:
        h = []
        for _ in range(n):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
            h.append((x >> 16) % k)
        out.append(tuple(h))
    return out[:count]


def _window_cap():  # every window 1..5 over short histories; windows 18..24 (past an engine's n-gram limit of
    # 20, whose smaller windows raise) over longer ones, the tokens just before the window included
    return [c for w in range(1, 6) for c in _cases((h for h in words(2, 6) if len(h) > w), 2, penalty_last_n=w)] + \
        [c for w in range(18, 25) for n in (w + 1, w + 2, w + 4)
         for c in _cases(_sampled(2, n, 12, 1000 * w + n), 2, penalty_last_n=w)]


def _window_zero():
    return _cases(words(2, 5), 2, penalty_last_n=0)


def _window_negative():
    return [c for w in (-1, -2) for c in _cases(words(2, 5), 2, penalty_last_n=w)]


def _breakers():  # a single-token breaker in the history (the breaker itself not a candidate)
    return _cases(words(3, 5), 3, breakers=(SYMBOLS[2],), candidates=((0, 0.0), (1, 0.0)))


def _exemption():  # a single-token breaker as the candidate
    return _cases(words(2, 6), 2, breakers=(SYMBOLS[1],), candidates=((1, 0.0),))


def _multi_token():  # breakers of two and three tokens: restart sequences with a tail
    return [c for b in ("ab", "abc") for c in _cases(words(3, 5), 3, breakers=(b,))]


def _base():
    return [c for b in (0.5, 1.0) for c in _cases(words(2, 5), 2, base=b)]


def _negative():
    return _cases(words(2, 4), 2, multiplier=-1.0) + _cases(words(2, 4), 2, allowed_length=-1)


def _finite():  # penalties past the float32 range: base 10 from L 40, base 2 from L 129; short repeats with a base
    # whose square leaves the float32 range (1e20, L 1-5) or whose 11th power leaves the double range (1e30, L 10-13)
    return [Case(history=_periodic(2, n), alphabet=2, penalty_last_n=WHOLE, base=10.0) for n in range(30, 62, 2)] + \
        [Case(history=_periodic(2, n), alphabet=2, penalty_last_n=WHOLE) for n in range(126, 136, 2)] + \
        [Case(history=_periodic(2, n), alphabet=2, penalty_last_n=WHOLE, base=1e20) for n in range(3, 8)] + \
        [Case(history=_periodic(2, n), alphabet=2, penalty_last_n=WHOLE, base=1e30) for n in range(12, 16)]


def _match_caps():  # long repeats (L up to 150), base 1.01 so that no penalty overflows
    return [Case(history=_periodic(3, n), alphabet=3, penalty_last_n=WHOLE, base=1.01) for n in range(6, 154, 4)]


def _occurrences():  # the last token's oldest occurrence holds the longest repeat, behind N later ones
    out = []
    for r in range(1, 18):  # r later occurrences, each a one-token repeat followed by another token: X (24)
        # follows only the oldest (L 3); an engine reading only the r latest never sees it
        h = (0, 1, 2, 24) + (3, 2, 25) * r + (0, 1, 2)
        out.append(Case(history=h, alphabet=26, penalty_last_n=WHOLE))
    for n in range(1, 18):  # the oldest occurrence's repeat has n + 2 tokens (X follows it), a later one's n
        # (Y follows it): an engine stopping at the first repeat of n tokens never reaches X's
        body = tuple(range(4, 4 + n + 2))
        h = body + (1,) + (2,) + body[2:] + (3,) + (2,) + body
        out.append(Case(history=h, alphabet=4 + n + 2, penalty_last_n=WHOLE))
    return out


def _arithmetic():  # every history of 2 symbols, then every (multiplier, base) pair up to L 11 (one symbol repeated)
    return [c for m, b in ((0.8, 1.75), (2.0, 1.1), (1.3, 1.3), (0.5, 3.0))
            for c in _cases(words(2, 6), 2, multiplier=m, base=b)] + \
        [Case(history=(0,) * n, alphabet=1, penalty_last_n=WHOLE, multiplier=m, base=b)
         for m in (0.8, 1.3, 0.7, 2.5) for b in (1.1, 1.3, 1.5, 1.75, 3.0) for n in range(2, 13)]


def _candidates():  # order, subsets, initial logits and the sorted flag
    out = []
    for h in words(2, 5):
        out.append(Case(history=h, alphabet=2, penalty_last_n=WHOLE, candidates=((1, 1.5), (0, -0.25))))
        out.append(Case(history=h, alphabet=3, penalty_last_n=WHOLE, candidates=((2, 0.5), (1, 0.0))))
        out.append(Case(history=h, alphabet=2, penalty_last_n=WHOLE, candidates=((0, 3.0), (1, 1.0)), sorted=True))
    return out


# Requests sent in turn to one instance (the prefix cache's cases, from an investigation of mistral.rs's; symbols
# renamed in order of appearance): no shared prefix, a shared prefix of 1 and 3 tokens, an identical prompt, a
# prompt that is a prefix of an earlier one, unrelated requests in between, the longest match not the latest, the
# generated token, an earlier request without DRY, a chain of extensions, a breaker inside the shared prefix.
_TABLE = (("abab", "cdcd", "bcbc"), ("abcabcd", "abceabce"), ("ac", "abab"), ("abcabcd", "abceabce", "abceabce"),
          ("abcabcd", "abcab"), ("abcabcd", "efef", "dd", "abceabce"), ("abcde", "abe", "abcdabcd"),
          ("ab", "abcbcb"), ("ab", "aba"), ("abcabcd!", "abceabce"), ("abcabcd", "abceabce", "abceabcee"),
          ("abab", "ababab", "abababab"), ("abab", "ababa"), ("aaaa", "aaaab", "aaaabaaaa"),
          ("abcab/c", "abcabdab/c"))


def _sequence(prompts) -> Requests:
    """Requests of the given prompts (symbols; `!` after a prompt: DRY off for it; `/x`: the breaker x), the
    alphabet every symbol of the sequence, the window above every history."""
    out = []
    texts = [p.rstrip("!").split("/")[0] for p in prompts]
    k = max(from_symbols("".join(texts))) + 1
    for p, text in zip(prompts, texts):
        kw = {"breakers": (p.split("/")[1],)} if "/" in p else {}
        out.append(Case(history=tuple(from_symbols(text)), alphabet=k, penalty_last_n=WHOLE,
                        multiplier=0.0 if p.endswith("!") else 1.0, **kw))
    return Requests(tuple(out))


def _requests():  # an earlier prompt sharing 0..n-1 tokens with the last one then another, a prefix of it, the same
    # prompt, an extension of it; two earlier ones sharing 3 and 1 tokens (the longest not the latest); the table
    spelled = lambda h: "".join(SYMBOLS[t] for t in h)  # noqa: E731
    seqs = []
    for p in (h for h in words(2, 4, 2) if h[0] == 0):
        other = lambda j: p[:j] + (1 - p[j],)  # noqa: E731  (shares exactly j tokens)
        earlier = [other(j) for j in range(len(p))] + [p[:j] for j in range(1, len(p))] + [p, p + (0,)]
        seqs += [(spelled(q), spelled(p)) for q in earlier]
        if len(p) == 4:
            seqs += [(spelled(other(3)), spelled(other(1)), spelled(p)), (spelled(other(1)), spelled(other(3)),
                                                                          spelled(p))]
    out = list({r.dumps(): r for r in map(_sequence, list(_TABLE) + seqs)}.values())
    return sorted(out, key=lambda r: (r.tokens(), len(r)))


def _traces():
    return [trace_of(ev, 2, cfg) for cfg in (CONFIGS["base"], CONFIGS["window3"])
            for ev in iter_traces(4, 2)]


PROPERTIES = (
    Property("repeats", "repeat lengths", "L: the longest suffix a candidate extends into a repeat (window above "
             "the history)", _repeats, ("suffix:longest-only", "last-follower:unseen", "raises-history:N")),
    Property("allowed-length", "allowed_length 0/2/3", "a repeat of L >= allowed_length tokens is penalized",
             _allowed, ("repeat-min:N", "threshold:none", "exit:at-allowed", "exit:tail-at-allowed")),
    Property("window-cap", "window cap", "only the last penalty_last_n tokens are read", _window_cap,
             ("window:one-wider", "raises-window:N")),
    Property("window-zero", "window 0", "penalty_last_n 0: DRY off", _window_zero, ("window-zero:unlimited",)),
    Property("window-negative", "window -1", "a negative penalty_last_n: DRY off (the 7-argument init_dry)",
             _window_negative, ("window-negative:unlimited", "window-negative:refused", "window-context:N")),
    Property("breakers", "single-token breakers", "a breaker in the history ends every repeat that crosses it",
             _breakers, ("last-breaker:unchecked",)),
    Property("breaker-exemption", "breaker exemption", "a single-token breaker is never penalized", _exemption,
             ("breakers-not-exempt",)),
    Property("multi-token-breakers", "multi-token restart sequences",
             "a breaker of several tokens restarts where the whole sequence occurs", _multi_token,
             ("single-token-breakers", "breaker-form:last-token")),
    Property("base", "base < 1 and 1", "base < 1: DRY off; base 1: the multiplier itself", _base,
             ("base-below-one:applied", "base-below-one:refused")),
    Property("negative-parameters", "negative multiplier, allowed_length",
             "a negative multiplier raises; a negative allowed_length penalizes every follower", _negative,
             ("multiplier-negative:off", "multiplier-negative:refused", "allowed-negative:refused")),
    Property("finite-penalties", "finite penalties", "the exponent is clamped: a penalty stays finite",
             _finite, ("no-clamp", "finite-penalty:saturate", "raises-overflow")),
    Property("match-caps", "match length (no cap)", "a repeat counts every token it has (no cap)", _match_caps,
             ("match-cap:N", "suffix-cap:N")),
    Property("occurrence-caps", "every occurrence", "every earlier occurrence of the last token is extended",
             _occurrences, ("occurrence-cap:N", "early-exit:N")),
    Property("arithmetic", "penalty arithmetic", "multiplier * base^(L - allowed_length), rounded once, bit-exact",
             _arithmetic, ("arithmetic:float32", "penalty:times-count")),
    Property("candidate-order", "candidate order and sorted flag", "any candidate subset and order, initial "
             "logits kept, sorted flag cleared when DRY penalizes", _candidates),
    Property("reset-clone", "reset / clone", "a reset forgets the history; a clone carries it on", _traces,
             traces=True),
    Property("requests", "requests in turn", "each request is judged on its own history: an earlier request to "
             "the same instance changes nothing", _requests, ("prefix-cache:suffix",)),
)
BY_NAME = {p.name: p for p in PROPERTIES}
OTHER = "other"  # the column of a campaign's difference no property's model explains
