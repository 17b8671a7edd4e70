"""The restart-sequence model (dryz.oracle.restarts_vocab) against the real library, on a real vocabulary.

The library does not expose the restart sequences init_dry builds, so they are probed through what Step 1 of
llama_sampler_dry_apply does with them: rep_limit is the distance back to the end of the restart sequence found
by scanning back from the last token for the first head whose tail follows it, and every candidate's L is
capped by it. All probes run with multiplier 1, base 2, allowed_length 0 (so no early exit: a candidate that
follows some window position gets exactly -2^L with L = min(M, rep_limit), 0 <= L < 128, every value exact in
float32), penalty_last_n 4096 (the window never cuts), on one sampler per breaker set (init_dry over a large
vocabulary is the expensive part), `llama_sampler_reset` between probes, every candidate array the distinct
tokens of the history plus the probe's own candidate `z`, every logit starting at 0.

The prediction is made independently of the library: the model's restart map, the shipped Step-1 scan
(restated in `rep_limit`, certified against the library on symbol vocabularies by `dryz exhaustive`'s breaker
configuration and the restart sweep), M from dryz's oracle A (`model._match_lengths_A_single`), and the
Step-4 rule that a candidate holding an empty-tail entry (a single-token breaker) is never penalized.

Probes, with f and z two tokens the model says are no head and appear in no tail:

* head probes, one per modelled entry (h, T): history Q z Q with Q = h T f. The model predicts rep_limit 1
  (only f after the restart) unless a later head inside T completes a restart of its own, and L_z = min(|Q|,
  rep_limit). Sound and sensitive: each probe is also predicted with (h, T) removed from the map; if the two
  predictions are equal the entry is *shadowed* (a restart inside T always completes after it, in every
  history, so no history can tell it apart) and is counted, not probed. Otherwise a library without (h, T) -
  or with a different tail for h, a shorter (the cap) or a longer one - answers differently. h is a candidate
  too: Step 4 exempts it exactly when the library has (h, []).
* non-head probes (group tests): a sample of tokens the model says are no head - random ones plus "near
  misses" (tokens holding a breaker's first byte: the ones a wrong containment or prefix test would catch) -
  in groups G: history G f z G f. No restart in the model's view, so rep_limit = the window; any member that
  the library treats as a single-token breaker cuts L_z (M_z = |G| + 1 > any cut) and is exempt as a
  candidate. For each tail T the model builds (tokenize(s[l:])[:20] over every breaker s and l), the same
  with B = t1 T t2 T ... in place of G: a library entry (t_j, T) for any member cuts L_z. A group whose
  model prediction already has a restart (T itself holds one) cannot tell its members apart and is skipped,
  counted as shadowed. Groups are at most 100 tokens so every L stays below the 2^128 clamp.

A disagreement is a probe whose library logits differ from the prediction; since the prediction is the model's
restart map run through the shipped Step 1 (which the symbol-vocabulary certificates pin down), it means the
library's restart set differs from the model's on that head or group.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import numpy as np

from ..check import check_batch
from ..oracle.seqindex import RestartSeqs, restart_scan
from ..oracle.shipped import Config, output_logits, shipped_lengths
from ..oracle.restarts_vocab import TextIndex, restart_model
from ..case import Case
from ..vocab_cases import construction
from ..subject.answers import Crash, Refused, SubjectCrashed, Unrecoverable, Unsupported

LAST_N = 4096
GROUP_TOKENS = 100
N_RANDOM = 192
N_NEAR = 192

DEFAULTS = ["\n", ":", "\"", "*"]


def _digits(n: int) -> str:
    return " ".join(str((i + 1) % 10) for i in range(n))


# Breaker sets: (name, breakers). Each set gets its own sampler (interactions within a set: shared heads,
# the duplicate check across breakers, contained breakers).
BREAKER_SUITE: tuple = (
    ("defaults", DEFAULTS),
    ("templates", ["<|im_end|>", "<|eot_id|>", "### Instruction:", "<end_of_turn>"]),
    ("whole-token", [" the", "ing", "Hello", "\n\n"]),
    ("split", ["qwertyuiop", "ational", "}}\n", "<|endoftext|>x"]),
    # 39 / 40 / 41 characters (the cut is at 40 bytes)
    ("char-limit", ["=" * 39, "=" * 40, "=" * 41, "The quick brown fox jumps over the lazy",
                    "The quick brown fox jumps over the lazy ", "The quick brown fox jumps over the lazy d"]),
    # tails of about 19, 20, 21+ tokens (digits split one per token in most vocabularies)
    ("tail-length", [_digits(10), _digits(11), _digits(12), _digits(20)]),
    # multi-byte UTF-8; 14 em dashes are 42 bytes: the cut at 40 splits the 14th in two
    ("non-ascii", ["—", "。", "🙂", "—" * 14, "🙂" * 11, "é"]),
    ("nested", ["ab", "abc"]),
)
BREAKER_SUITE = BREAKER_SUITE + (("all", sorted({b for _, bs in BREAKER_SUITE for b in bs})),)


@dataclass
class Disagreement:
    kind: str             # head | non-head | non-head-tail
    breaker_set: str
    hypothesis: str       # what the probe tests
    history: tuple
    candidates: tuple
    predicted: dict       # candidate -> predicted logit, only the differing ones
    library: dict


@dataclass
class Summary:
    vocab: str
    sha256: str
    tokens: int
    sets: list = field(default_factory=list)   # per breaker set: dict of counts and times
    probes: int = 0
    shadowed: int = 0
    disagreements: list = field(default_factory=list)
    model_seconds: float = 0.0
    probe_seconds: float = 0.0

    def line(self) -> str:
        return (f"{self.vocab}: {self.tokens} tokens, {self.probes} probes ({self.shadowed} shadowed entries/groups "
                f"not probeable), {len(self.disagreements)} disagreements")


# -- the prediction ---------------------------------------------------------------------------------------


def rep_limit(window, seqs: dict) -> int:
    """Step 1 as shipped (oracle.shipped.restart_scan) over the model's head -> tails map."""
    return restart_scan(list(window), seqs)[0]


def oracle_config(seqs: dict, n_vocab: int) -> Config:
    """The probes' sampler (multiplier 1, base 2, allowed_length 0, window LAST_N) with the model's restart
    sequences, as the oracles take it."""
    return Config(1.0, 2.0, 0, LAST_N, RestartSeqs(((h, t) for h in seqs for t in seqs[h]), n_vocab))


def breaker_config(seqs: dict, n_vocab: int, drop: int | None = None, singles: Config | None = None) -> Config:
    """The probe sampler's Config with only the single-token restart sequences (what Steps 2-4 read: which
    candidates are breakers), optionally without head `drop`'s (from `singles`, the full one, when given)."""
    if singles is not None:
        return Config(1.0, 2.0, 0, LAST_N, RestartSeqs((x for x in singles.seqs if x[0] != drop), n_vocab))
    return Config(1.0, 2.0, 0, LAST_N, RestartSeqs(((h, ()) for h in seqs if () in seqs[h] and h != drop), n_vocab))


def predict(history, cands, seqs: dict, singles: Config) -> np.ndarray:
    """The logits (float32) the shipped model gives the probe sampler with the restart sequences `seqs` (every
    candidate starting at 0): oracle.shipped on oracle A, Step 1 read from the head -> tails map (a variant
    map per probe costs no tuple of every sequence); singles = breaker_config(seqs)."""
    H = np.asarray(list(history)[-LAST_N:], dtype=np.int64)[None, :]
    c = np.asarray(cands, dtype=np.int64)
    pred = shipped_lengths(H, c, singles, rep_fn=lambda W, _: np.array([restart_scan(W[0].tolist(), seqs)[0]]))
    return output_logits(np.zeros(len(c), dtype=np.float32), pred, singles)[0]


def probe_case(v, breakers, history, cands):
    """The probe sampler's configuration (multiplier 1, base 2, allowed_length 0, window LAST_N) on one
    history, candidates at logit 0, as a Case over the vocabulary: what the subject runs for a probe (through
    the protocol, as every mode does; a libllama clones one sampler initialized per breaker set)."""
    return Case(history=tuple(int(t) for t in history), alphabet=v.n_tokens, penalty_last_n=LAST_N,
                breakers=tuple(breakers), multiplier=1.0, base=2.0, allowed_length=0,
                candidates=tuple((int(c), 0.0) for c in cands), vocab=v.ref.name, vocab_sha256=v.ref.sha256)


class SubjectProbe:
    """Probes of one breaker set on one vocabulary, run on the subject (run_probe)."""

    def __init__(self, lib, vocab, breakers):
        self.lib, self.vocab, self.breakers = lib, vocab, tuple(breakers)

    def run(self, history, cands) -> np.ndarray:
        return run_probe(self.lib, self.vocab, self.breakers, history, cands)


def run_probe(lib, v, breakers, history, cands) -> np.ndarray:
    """The subject's logits for a probe (SubjectCrashed if it died on it; Unsupported, not judged, when its answer
    is not DRY's output read back exactly: a request layer's refusal, penalties a softmax cannot give back)."""
    case = probe_case(v, breakers, history, cands)
    why = lib.caps.lacks(case)
    if why is not None:
        raise Unsupported(f"{lib.kind} subject: {why}")
    out = lib.run(case)
    if isinstance(out, Crash):
        raise SubjectCrashed(out)
    if isinstance(out, (Unrecoverable, Refused)):
        raise Unsupported(f"{lib.kind} subject: {type(out).__name__.lower()}: "
                          f"{getattr(out, 'detail', None) or getattr(out, 'message', '')}")
    if tuple(out.ids) != tuple(cands):
        raise RuntimeError("the sampler changed the candidate ids")
    return out.logits


# -- the probe set ---------------------------------------------------------------------------------------


def _fillers(index: TextIndex, seqs: dict, tails_tokens: set, n: int = 2) -> list[int]:
    """n tokens that are no head, appear in no tail, and read as a plain word (deterministic)."""
    out = []
    for t in range(index.n):
        txt = index.texts[t].strip()
        if (len(txt) >= 4 and txt.isalpha() and txt.isascii() and t not in seqs and t not in tails_tokens):
            out.append(t)
            if len(out) == n:
                return out
    for t in range(index.n):  # a vocabulary without such words: any non-head
        if t not in seqs and t not in tails_tokens and t not in out and index.texts[t]:
            out.append(t)
            if len(out) == n:
                return out
    raise RuntimeError("the vocabulary has no two tokens outside every restart sequence")


def _sample_nonheads(index: TextIndex, seqs: dict, breakers: list[bytes], seed: str) -> list[int]:
    rng = random.Random(seed)
    non = [t for t in range(index.n) if t not in seqs]
    pick = set(rng.sample(non, min(N_RANDOM, len(non))))
    near = set()
    for s in breakers:
        near.update(t for t in index.containing(s[:1]).tolist() if t not in seqs)
    near = sorted(near)
    pick.update(rng.sample(near, min(N_NEAR, len(near))))
    return sorted(pick)


def _cands(history, z) -> tuple:
    return tuple(sorted(set(history) | {z}))


def compare_set(lib, vocab, index: TextIndex, name: str, breakers, summary: Summary, deadline=None,
                tokenize=None) -> dict:
    """deadline (time.monotonic()): stop probing there; the set's stats say complete False. index and tokenize:
    the construction the subject's restart sequences are modelled from (vocab_cases.construction)."""
    t0 = time.perf_counter()
    model = restart_model(breakers, index, tokenize or vocab.tokenize)
    t_model = time.perf_counter() - t0
    seqs = model.seqs
    tails = sorted({t for ts in seqs.values() for t in ts if t})
    tail_tokens = {x for t in tails for x in t}
    f, z = _fillers(index, seqs, tail_tokens)
    stats = {"set": name, "breakers": len(breakers), "heads": len(seqs), "entries": len(model.pairs()),
             "model_s": t_model, "probes": 0, "shadowed": 0, "disagreements": 0,
             "tail_full_lengths": sorted(set(model.full_tail_lengths.values())), "complete": True}
    t1 = time.perf_counter()

    class _Late(Exception):
        pass

    cfg = oracle_config(seqs, index.n)
    singles = breaker_config(seqs, index.n)

    def late():
        if deadline is not None and time.monotonic() > deadline:
            raise _Late

    def check(kind, hyp, history, cands, pred):
        try:
            got = run_probe(lib, vocab, breakers, history, cands)
        except Unsupported as why:  # not judged: counted, with why
            stats.setdefault("not_judged", {})[str(why)] = stats.get("not_judged", {}).get(str(why), 0) + 1
            return
        stats["probes"] += 1
        H = np.asarray(list(history)[-LAST_N:], dtype=np.int64)[None, :]
        b = check_batch(cfg, H, np.asarray(cands, dtype=np.int64), got[None, :])  # the one verdict
        if b.codes.any():
            bad = np.flatnonzero(b.codes[0]).tolist()
            stats["disagreements"] += 1
            summary.disagreements.append(Disagreement(
                kind, name, hyp, tuple(history), tuple(cands),
                {cands[i]: float(pred[i]) for i in bad}, {cands[i]: float(got[i]) for i in bad}))

    try:
        # head probes
        for h, T in model.pairs():
            late()
            Q = [h, *T, f]
            hist = Q + [z] + Q
            cands = _cands(hist, z)
            pred = predict(hist, cands, seqs, singles)
            without = dict(seqs)
            without[h] = seqs[h] - {T}
            if np.array_equal(pred, predict(hist, cands, without, breaker_config(seqs, index.n, h, singles) if T == () else singles)):
                stats["shadowed"] += 1
                continue
            check("head", f"({h}, {list(T)}) is a restart sequence", hist, cands, pred)
        # non-head group tests
        sample = _sample_nonheads(index, seqs, model.breakers, f"{summary.sha256}:{name}")
        for T in [()] + tails:
            per = max(1, GROUP_TOKENS // (1 + len(T)))
            for g in range(0, len(sample), per):
                late()
                members = sample[g:g + per]
                B = [x for t in members for x in (t, *T)]
                hist = B + [f, z] + B + [f]
                cands = _cands(hist, z)
                if rep_limit(hist, seqs) != len(hist):
                    stats["shadowed"] += 1
                    continue
                pred = predict(hist, cands, seqs, singles)
                kind = "non-head" if not T else "non-head-tail"
                check(kind, f"none of {members} is a head with tail {list(T)}", hist, cands, pred)
    except _Late:
        stats["complete"] = False
    stats["probe_s"] = time.perf_counter() - t1
    summary.probes += stats["probes"]
    summary.shadowed += stats["shadowed"]
    summary.model_seconds += t_model
    summary.probe_seconds += stats["probe_s"]
    summary.sets.append(stats)
    return stats


def compare_vocab(vocab_spec, lib, breakers=None, deadline=None) -> Summary:
    """Probe the model's restart sequences against the library for one vocabulary. `breakers`: a list of
    strings (one set), a sequence of (name, list) sets, or None for BREAKER_SUITE. deadline (time.monotonic()):
    no probe starts after it (Summary.sets says which sets were complete)."""
    vocab = lib.vocabulary(vocab_spec)
    index, tokenize = construction(vocab, lib.caps.deviations)  # init_dry's, or a fix the subject declares
    summary = Summary(vocab.ref.name, vocab.ref.sha256, vocab.n_tokens)
    if breakers is None:
        sets = BREAKER_SUITE
    elif breakers and isinstance(breakers[0], str):
        sets = (("custom", list(breakers)),)
    else:
        sets = tuple(breakers)
    for name, bs in sets:
        if deadline is not None and time.monotonic() > deadline:
            break
        compare_set(lib, vocab, index, name, bs, summary, deadline, tokenize)
    return summary
