"""The subject protocol: what every mode (exhaustive, traces, restarts, fuzz, minimize, replay, matrix, gate) asks
of the thing it audits, and nothing more.

A subject runs llama.cpp's DRY semantics on a Case and returns what DRY left in the candidate array. It is an
explicit value: a command opens the one the user selected (`--subject KIND:ARG`, `--lib PATH` meaning
`libllama:PATH`; dryz.subject.registry) and passes it down; another process reopens it from its `spec`. The
oracles never see a subject; dryz.check compares what a subject returns with them.

A subject kind is one module with one class implementing this interface, plus one line in
dryz.subject.registry.KINDS. Only `run_batch` and `identity` are required: the walk of a tree of histories,
one case and the vocabulary facts have generic forms here, built on them; a subject with a faster native form
(libllama's C walker) overrides them.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..case import Case
from ..symbols import MAX_ALPHABET
from .answers import Capabilities, Crash, Outputs, Refused, SubjectCrashed, Unrecoverable, Unsupported
from .identity import subject_line
from .trace_driver import refuse_old_abi_crash, run_events
from .vendored_vocabs import reference_vocabulary
from .walker import resolve_roots, tables


class Subject:
    """The interface. `spec` reopens the same subject in another process (dryz.subject.registry.open_subject)."""

    kind = "abstract"
    spec: str = ""
    abi: int = 7   # llama_sampler_init_dry's argument count whose semantics the subject has (8: before PR #26524)
    caps = Capabilities()
    declares_fixes = False  # a llama.cpp subject: may declare a fix dryz models (registry.open_subject)
    declared: tuple = ()    # the fixes it declares (dryz.oracle.deviations.FIXES), judged as declared deviations

    def declare(self, names) -> None:
        """Judge this subject with the fixes it declares (checked by registry.check_declared): their models join
        its declared deviations, and its identity names them."""
        self.declared = tuple(names)
        if not isinstance(getattr(type(self), "caps", None), property):
            self.caps = replace(self.caps, deviations=tuple(self.caps.deviations) + self.declared)

    @property
    def identity(self) -> dict:
        """What names the subject in every result: kind, spec, and the kind's own facts (path, sha256, commit,
        version, build)."""
        raise NotImplementedError

    def label(self) -> str:
        """One line naming the subject, for reports."""
        return subject_line(self.identity)

    def run_batch(self, cases) -> list:
        """Per case, in order: an Output (a fresh sampler of the case's configuration, its history accepted,
        one apply on its candidate array) or a Crash."""
        raise NotImplementedError

    def run(self, case):
        return self.run_batch([case])[0]

    # -- traces: one sampler through a sequence of calls (dryz.trace) ------------------------------------------
    # The per-event sampler calls a subject that runs traces exposes (caps.calls has reset, clone and free):
    # new_sampler(multiplier, base, allowed_length, penalty_last_n, breakers, n_ctx_train=) -> sampler,
    # accept(s, token), apply_once(s, ids, logits, sorted_flag) -> Output, reset(s), clone(s) -> sampler, free(s).
    SAMPLER_CALLS = ("new_sampler", "accept", "apply_once", "reset", "clone", "free")

    def runs_traces(self) -> str | None:
        """Why this subject cannot run a trace, or None."""
        missing = {"reset", "clone", "free"} - set(self.caps.calls)
        if missing:
            return f"{self.kind} subjects expose no {', '.join(sorted(missing))} call"
        if not all(callable(getattr(self, n, None)) for n in self.SAMPLER_CALLS):
            return f"{self.kind} subjects do not run traces"
        return None

    def run_trace(self, trace) -> list:
        """The Output of every apply of a trace of calls on one sampler (dryz.trace), or a Crash. Generic form:
        the trace's events as this subject's own per-event sampler calls (SAMPLER_CALLS), sequenced by
        dryz.subject.trace_driver; a subject with a faster native form (libllama: one call into _drive.c)
        overrides run_trace_flat."""
        why = self.runs_traces()
        if why is not None:
            raise Unsupported(why)
        refuse_old_abi_crash(self, trace.sampler_args(), trace.n_ctx_train)
        return run_events(self, trace.sampler_args(), trace.events, trace.alphabet, trace.n_ctx_train)

    # -- request sequences: requests sent in turn to one instance (dryz.requests) ----------------------------------
    def runs_sequences(self) -> str | None:
        """Why this subject cannot run a request sequence, or None."""
        if not self.caps.sequences:
            return (f"the subject ({self.kind}) runs no request sequences: it is no instance that requests are sent "
                    "to in turn (an adapter that is one declares `sequences`: docs/adapters.md)")
        return None

    def run_sequence(self, requests) -> list:
        """Per request of the sequence (dryz.requests.Requests), in order: what one fresh instance of the engine
        answered for it after the requests before it (Output, Crash, Refused, Unrecoverable)."""
        raise Unsupported(self.runs_sequences() or f"{self.kind} subjects do not run request sequences")

    def run_trace_flat(self, trace):
        """run_trace's answer, flat (Outputs), or a Crash: what dryz.trace_check judges."""
        out = self.run_trace(trace)
        return out if isinstance(out, Crash) else Outputs.of(out)

    def run_many(self, sampler_args, n_ctx_train, tokens, counts, ids, logits, sizes, sorted_flags,
                 clone: bool = False):
        """Fresh samplers of one configuration of the symbol vocabulary (sampler_args: multiplier, base,
        allowed_length, penalty_last_n, breakers), flat: case i accepts the next counts[i] tokens and applies
        to the next sizes[i] candidates (ids, float32 logits) with its sorted flag. Outputs, or the first Crash.
        Generic form: the cases through run_batch (run()'s own sequence: a new sampler per case; `clone`, a
        clone of one never-used sampler per case, is the native form's choice, which leaves the same)."""
        multiplier, base, allowed, last_n, breakers = sampler_args
        toks, ids_, lg = np.asarray(tokens).tolist(), np.asarray(ids).tolist(), np.asarray(logits, np.float32)
        cases, t, c = [], 0, 0
        for n, k, s in zip(np.asarray(counts).tolist(), np.asarray(sizes).tolist(), np.asarray(sorted_flags).tolist()):
            cases.append(Case(history=tuple(toks[t:t + n]), alphabet=MAX_ALPHABET, penalty_last_n=last_n,
                              breakers=tuple(breakers), multiplier=multiplier, base=base, allowed_length=allowed,
                              candidates=tuple(zip(ids_[c:c + k], lg[c:c + k].tolist())), sorted=bool(s),
                              n_ctx_train=n_ctx_train))
            t, c = t + n, c + k
        outs: list = []
        step = max(1, self.caps.batch)
        for i in range(0, len(cases), step):
            outs.extend(self.run_batch(cases[i:i + step]))
        crash = next((o for o in outs if isinstance(o, Crash)), None)
        if crash is None:
            _expressed(outs)
        return crash if crash is not None else Outputs.of(outs)

    def walk(self, tree, max_len: int, params, sink, prefixes=((),)) -> int:
        """Every history of a tree (dryz.subject.walker: radix, labels, children(m), cands(m)) below the
        prefixes, up to max_len, in batches to sink(n, m, H, logits, cands); params = (multiplier, base,
        allowed_length, penalty_last_n, breakers[, vocab spec]). Generic form: one level at a time, each
        (length, state) group as one run_batch; a Crash raises SubjectCrashed. Histories the subject cannot
        express (a refusal, an unreadable answer) raise Unsupported, or, where the sink has an attribute
        not_judged, go to sink.not_judged(n, m, H, why) and not to the sink."""
        return walk_by_batches(self, tree, max_len, params, sink, prefixes)

    def vocabulary(self, spec):
        """A real vocabulary's facts for the oracles (token texts as init_dry reads them, pieces, tokenize),
        as this subject's tokenizer gives them. Generic form: the pinned llama-cpp-python's libllama's."""
        return reference_vocabulary(spec)

    def close(self) -> None:
        """Release what the subject holds (processes, samplers)."""


def _why(out) -> str | None:
    """Why an answer is not an output (a refusal, an unreadable answer), or None."""
    if isinstance(out, (Refused, Unrecoverable)):
        return f"{type(out).__name__.lower()}: {getattr(out, 'detail', None) or getattr(out, 'message', '')}"
    return None


def _expressed(outs) -> None:
    """A batch's answers are outputs: a case the subject answered with a refusal or an unreadable answer is one it
    cannot express here (Unsupported: the mode says so), never read as an output."""
    bad = next((w for w in map(_why, outs) if w is not None), None)
    if bad is not None:
        raise Unsupported(f"the subject answered {bad}")


def walk_by_batches(subject, tree, max_len, params, sink, prefixes=((),), top=None) -> int:
    """Subject.walk's generic form: the same histories, groups and sink calls as the C walker
    (dryz.subject.walker.walk), each (length, state) group of a level run as cases through run_batch. The prefixes
    are digit strings of the tree (a prefix itself is not evaluated); top=d: every history of length 1..d."""
    multiplier, base, allowed, last_n, breakers = params[:5]
    vocab = params[5] if len(params) > 5 else None
    if top is not None:
        max_len = top
    tab = tables(tree)
    kids = {m: [(int(t), int(c)) for t, c in zip(tab.kid_tok[tab.kid_off[m]:tab.kid_off[m + 1]],
                                                 tab.kid_m[tab.kid_off[m]:tab.kid_off[m + 1]])]
            for m in range(tab.S)}
    size = subject.vocabulary(vocab).n_tokens if vocab is not None else None
    roots = resolve_roots(tab, prefixes)
    if len({len(t) for t, _ in roots}) > 1:
        raise ValueError("walk: the prefixes must have one length")
    level: dict[int, list] = {}
    for toks, m in roots:
        level.setdefault(m, []).append(toks)
    total = 0
    n = len(roots[0][0]) if roots else max_len
    while n < max_len:
        nxt: dict[int, list] = {}
        for m, hs in sorted(level.items()):
            for t, c in kids[m]:
                nxt.setdefault(c, []).extend(h + (t,) for h in hs)
        n += 1
        for m, hs in sorted(nxt.items()):
            cands = tab.cands[m]
            k = size or int(max(int(cands.max(initial=0)), max(max(h) for h in hs))) + 1
            cand = tuple((int(t), 0.0) for t in cands)
            cases = [Case(history=h, alphabet=k, penalty_last_n=last_n, breakers=tuple(breakers),
                          multiplier=multiplier, base=base, allowed_length=allowed, candidates=cand, vocab=vocab)
                     for h in hs]
            outs: list = []
            step = max(1, subject.caps.batch)
            for i in range(0, len(cases), step):
                outs.extend(subject.run_batch(cases[i:i + step]))
            raised = getattr(sink, "raised", None)
            for c, o in zip(cases, outs):
                if isinstance(o, Crash) and not (raised is not None and o.signal == "exception"):
                    raise SubjectCrashed(o, c)  # the subject's process did not survive it: the slice ends here
            if raised is not None and any(isinstance(o, Crash) for o in outs):
                # an engine that raised on some histories and survived: each is class crash, the rest judged
                for w in sorted({o.detail for o in outs if isinstance(o, Crash)}):
                    raised(n, m, np.array([h for h, o in zip(hs, outs) if isinstance(o, Crash) and o.detail == w],
                                          dtype=np.int64).reshape(-1, n), w)
                kept = [i for i, o in enumerate(outs) if not isinstance(o, Crash)]
                hs, outs = [hs[i] for i in kept], [outs[i] for i in kept]
                if not hs:
                    continue
            skip = getattr(sink, "not_judged", None)
            if skip is None:
                _expressed(outs)
            else:  # the sink counts the histories the subject cannot express (with why); the rest are judged
                why = [_why(o) for o in outs]
                kept = [i for i, w in enumerate(why) if w is None]
                for w in sorted({w for w in why if w is not None}):
                    skip(n, m, np.array([hs[i] for i, x in enumerate(why) if x == w], dtype=np.int64), w)
                hs, outs = [hs[i] for i in kept], [outs[i] for i in kept]
                if not hs:
                    continue
            H = np.array(hs, dtype=np.int64).reshape(len(hs), n)
            logits = np.stack([np.asarray(o.logits, dtype=np.float32) for o in outs])
            sink(n, m, H, logits, cands)
            total += len(hs)
        level = nxt
    return total
