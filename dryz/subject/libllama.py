"""The libllama subject: a libllama.so (the pip build, or any file --lib names), driven through dryz's own binding.

Nothing of the sampler is re-implemented here: a sampler is made with llama_sampler_init_dry, fed with
llama_sampler_accept, shared between histories with llama_sampler_clone, and run with llama_sampler_apply.
"""

from __future__ import annotations

import array
import ctypes
import importlib.metadata
import importlib.util
import json
import os
from functools import cached_property
from pathlib import Path

import numpy as np

from ..symbols import MAX_ALPHABET
from .cache import sha256_file
from .symbol_vocab import symbol_vocab_path
from .binding import N_CTX_TRAIN_DEFAULT, TOKEN_DATA, Binding, SubjectError, check_path_arg, llama_token_data, \
    llama_token_data_array, resolve
from .build import BUILD_INFO, PINNED_VERSION  # noqa: F401 (PINNED_VERSION: read by callers)
from .answers import Capabilities, Output, Outputs
from .protocol import Subject
from .trace_driver import refuse_old_abi_crash, run_events as _run_events
from .build import runtime_env
from .vendored_vocabs import load, vocab_of
from .walker import walk

try:
    from . import _drive as _DRIVE  # the C call sequencer (dryz/subject/_drive.c), built by pip install
except ImportError:
    _DRIVE = None
if os.environ.get("DRYZ_DRIVE") == "ctypes":
    _DRIVE = None




def _loaded_path(fragment: str) -> str | None:
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and os.path.basename(parts[-1]).startswith(fragment):
                    return parts[-1]
    except OSError:
        pass
    return None


def _mapped(path: Path) -> bool:
    """The file is mapped into this process (its sha256 then names what actually runs)."""
    real = str(path.resolve())
    try:
        with open("/proc/self/maps") as f:
            return any(line.rstrip().endswith(real) for line in f)
    except OSError:
        return False


def layout() -> tuple[int, ...]:
    """llama_token_data and llama_token_data_array as dryz's binding declares them, in the order
    dryz.subject._drive.layout() reports its own: sizes and field offsets."""
    T, A = llama_token_data, llama_token_data_array
    return (ctypes.sizeof(T), T.id.offset, T.logit.offset, T.p.offset, ctypes.sizeof(A), A.data.offset,
            A.size.offset, A.selected.offset, A.sorted.offset)


def pip_library() -> Path | None:
    """The libllama llama-cpp-python installed (found without importing its bindings)."""
    return package_library("llama_cpp")


def package_library(package: str) -> Path | None:
    """PACKAGE/lib/libllama.so of an installed Python package (found without importing it), or None."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    for d in spec.submodule_search_locations:
        p = Path(d) / "lib" / "libllama.so"
        if p.exists():
            return p.resolve()
    return None


def default_library() -> Path:
    """The libllama `libllama:` names with no path: LLAMA_CPP_LIB_PATH (a folder, as llama-cpp-python reads it),
    else the one llama-cpp-python installed."""
    v = os.environ.get("LLAMA_CPP_LIB_PATH")
    if v:
        return resolve(v)
    p = pip_library()
    if p is None:
        raise SubjectError("no libllama selected (--lib PATH or --subject libllama:PATH) and llama-cpp-python is "
                           "not installed")
    return p


def owning_distribution(path: Path) -> tuple[str, str] | None:
    """(name, version) of the installed Python distribution whose files include `path` (llama-cpp-python for
    the pip build, xllamacpp for its extension module): the dist-info beside the package whose RECORD names
    the file (a text search, not a parse of every distribution's file list)."""
    site = path.parent
    for _ in range(3):  # site-packages is at most a few levels above the library
        site = site.parent
        try:
            rel = str(path.relative_to(site))
            infos = list(site.glob("*.dist-info"))
        except (OSError, ValueError):
            continue
        for info in infos:
            try:
                record = (info / "RECORD").read_text(errors="replace")
            except OSError:
                continue
            if f"\n{rel}," in "\n" + record:
                try:
                    meta = (info / "METADATA").read_text(errors="replace")
                except OSError:
                    continue
                fields = dict(ln.split(": ", 1) for ln in meta.split("\n\n", 1)[0].splitlines() if ": " in ln)
                if "Name" in fields and "Version" in fields:
                    return fields["Name"], fields["Version"]
    return None


def symbol_vocabulary(L) -> tuple:
    """(path, model, vocab): dryz's symbol vocabulary loaded through a binding L (its load_vocab), checked to have
    MAX_ALPHABET tokens."""
    path = symbol_vocab_path()
    model, vocab = L.load_vocab(path)
    n = L.llama_vocab_n_tokens(vocab)
    if n != MAX_ALPHABET:
        raise SubjectError(f"vocabulary has {n} tokens, expected {MAX_ALPHABET}")
    return path, model, vocab


class LibLlama(Subject):
    """One loaded libllama plus the symbol vocabulary (`--subject libllama:PATH`, `--lib PATH`)."""

    kind = "libllama"
    # Every sampler call; any vocabulary; candidate arrays as given. One case at a time through the C sequencer
    # (a batch is a loop over it); native code in this process, so modes isolate it (dryz.subject.isolation).
    caps = Capabilities(batch=1, in_process=True)
    declares_fixes = True

    @staticmethod
    def check_arg(arg: str) -> None:
        """The spec's argument, checked before anything is loaded (registry.check_spec): a file or folder."""
        check_path_arg("libllama", arg)

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = resolve(path) if path else default_library()
        self.spec = f"libllama:{self.path}"
        self.L = Binding(self.path)
        self.vocab_path, self.model, self.vocab = symbol_vocabulary(self.L)
        self.abi = self.L.detect_abi(self.vocab)
        if _DRIVE is not None and _DRIVE.layout() != layout():
            raise SubjectError(f"dryz.subject._drive assumes the llama.h struct layout {_DRIVE.layout()}, the "
                               f"binding declares {layout()}: rebuild dryz")
        self.clone = self.L.llama_sampler_clone
        self.accept = self.L.llama_sampler_accept
        self.apply = self.L.llama_sampler_apply
        self.free = self.L.llama_sampler_free
        self.reset = self.L.llama_sampler_reset

    @staticmethod
    def runtime_env(spec: str, fuzzer: bool = False) -> dict:
        """The registry's hook (registry.runtime_env, child_env): a libllama built with --sanitize loads only into
        a process started with its sanitizer runtime preloaded (subject.build.runtime_env); others need nothing."""
        _, _, arg = spec.partition(":")
        return runtime_env(arg or None, fuzzer=fuzzer)

    # -- identity -------------------------------------------------------------------------------
    @cached_property
    def identity(self) -> dict:
        if not _mapped(self.path):
            raise SubjectError(f"{self.path} is not mapped into this process")
        ident = {
            "kind": self.kind,
            "spec": self.spec,
            "libllama_path": str(self.path),
            "libllama_sha256": sha256_file(self.path),
            "llama_cpp_commit": self.L.commit(),
            "init_dry_abi": self.abi,
            "init_dry_abi_evidence": self.L.abi_evidence,  # what decided it: sampler kinds, not DRY's penalties
            "vocab_path": str(self.vocab_path),
            "vocab_sha256": sha256_file(self.vocab_path),
            **({"declares": list(self.declared)} if self.declared else {}),
        }
        owner = owning_distribution(self.path)
        if owner is not None:
            name, version = owner
            ident["distribution"] = f"{name} {version}"
            if name.lower().replace("_", "-") == "llama-cpp-python":
                ident["llama_cpp_python"] = version
        info = self.path.parent / BUILD_INFO
        if info.exists():
            try:
                built = json.loads(info.read_text())
            except (OSError, ValueError):
                built = {"unreadable": str(info)}
            ident["built_by_dryz"] = {k: built.get(k) for k in (
                "llama_cpp_python", "vendored_commit", "dry_fingerprint", "patch", "patch_sha256", "build_seconds")}
            if built.get("sanitize"):
                ident["built_by_dryz"]["sanitize"] = built["sanitize"]
            ident.setdefault("llama_cpp_python", built.get("llama_cpp_python"))
        return ident

    # -- samplers ---------------------------------------------------------------------------------
    def new_sampler(self, multiplier, base, allowed_length, penalty_last_n, breakers=(), vocab=None,
                    n_ctx_train=N_CTX_TRAIN_DEFAULT):
        if breakers:
            arr = (ctypes.c_char_p * len(breakers))(*[b.encode() for b in breakers])
        else:
            arr = None
        vocab = self.vocab if vocab is None else vocab  # vocab: another loaded vocabulary's handle
        s = self.L.init_dry(vocab, multiplier, base, allowed_length, penalty_last_n, arr, len(breakers),
                            n_ctx_train=n_ctx_train)
        if not s:
            raise SubjectError("llama_sampler_init_dry returned NULL")
        return s

    def sampler_for(self, case):
        return self.new_sampler(case.multiplier, case.base, case.allowed_length, case.penalty_last_n,
                                case.breakers, n_ctx_train=case.n_ctx_train)

    def run(self, case) -> Output:
        """A new sampler for the case's configuration (llama_sampler_init_dry), the whole history accepted,
        one apply on the case's candidate array, the sampler freed. The sequence runs in dryz.subject._drive
        (one call from Python, which also fills and reads the candidate array) unless DRYZ_DRIVE=ctypes or the
        extension is not built; both make the same libllama calls.

        A case over a real vocabulary (case.vocab) runs on that vocabulary (dryz.vocab_cases: loaded once per
        process) through run_vocab: a clone of a sampler initialized once per configuration."""
        if case.vocab is not None:
            return self.run_vocab(case)
        if _DRIVE is None:
            return self._accept_apply_free(self.sampler_for(case), case)
        ids, logits, sorted_flag = _DRIVE.run(*self.addresses, self.vocab_address, self.abi, case.n_ctx_train,
                                              case.multiplier, case.base, case.allowed_length,
                                              case.penalty_last_n, case.breakers, case.history, case.ids,
                                              case.logits, case.sorted)
        return Output(tuple(array.array("i", ids)), np.frombuffer(logits, dtype=np.float32), sorted_flag,
                      len(ids) // 4)

    # -- many applies per call -----------------------------------------------------------------------
    def run_batch(self, cases) -> list[Output]:
        """run() of every case, in order: the symbol vocabulary's cases of one configuration in one call into
        dryz.subject._drive (run_many: run()'s own sequence per case), the rest one by one."""
        cases = list(cases)
        out: list = [None] * len(cases)
        groups: dict = {}
        for i, c in enumerate(cases):
            if c.vocab is None and _DRIVE is not None:
                groups.setdefault((c.multiplier, c.base, c.allowed_length, c.penalty_last_n, tuple(c.breakers),
                                   c.n_ctx_train), []).append(i)
            else:
                out[i] = self.run(c)
        for key, rows in groups.items():
            sel = [cases[i] for i in rows]
            hist = [t for c in sel for t in c.history]
            ids = [t for c in sel for t in c.ids]
            logits = [x for c in sel for x in c.logits]
            got = self.run_many(key[:5], key[5], np.array(hist, dtype=np.int32),
                                np.array([len(c.history) for c in sel], dtype=np.int32), np.array(ids, dtype=np.int32),
                                np.array(logits, dtype=np.float32), np.array([len(c.ids) for c in sel], dtype=np.int32),
                                np.array([c.sorted for c in sel], dtype=np.bool_))
            for i, o in zip(rows, got.outputs()):
                out[i] = o
        return out

    def run_many(self, sampler_args, n_ctx_train, tokens, counts, ids, logits, sizes, sorted_flags,
                 clone: bool = False) -> Outputs:
        """Fresh samplers of one configuration (sampler_args: multiplier, base, allowed_length, penalty_last_n,
        breakers), flat: case i accepts the next counts[i] tokens and applies to the next sizes[i] candidates.
        One call into _drive.run_many: each case on a new sampler from init_dry, as run() makes it, or with
        `clone` on llama_sampler_clone of one sampler made by init_dry that never accepts a token (the clone
        copies the parameters, the processed breakers and the empty state: run_vocab's fresh sampler; init_dry
        processes the breakers again each time, ~11 us per breaker on the symbol vocabulary)."""
        multiplier, base, allowed, last_n, breakers = sampler_args
        if _DRIVE is None:
            outs, t, c = [], 0, 0
            proto = self.new_sampler(multiplier, base, allowed, last_n, breakers, n_ctx_train=n_ctx_train) \
                if clone else None
            try:
                for n, k, s in zip(counts.tolist(), sizes.tolist(), sorted_flags.tolist()):
                    smpl = self.clone(proto) if clone else self.new_sampler(
                        multiplier, base, allowed, last_n, breakers, n_ctx_train=n_ctx_train)
                    case = _Flat(tokens[t:t + n].tolist(), tuple(ids[c:c + k].tolist()), logits[c:c + k].tolist(),
                                 s)
                    outs.append(self._accept_apply_free(smpl, case))
                    t, c = t + n, c + k
            finally:
                if proto is not None:
                    self.free(proto)
            return Outputs.of(outs)
        return Outputs.of_buffers(*_DRIVE.run_many(
            self.addresses + (self.clone_address,), self.vocab_address, self.abi, n_ctx_train, multiplier, base,
            allowed, last_n, tuple(breakers), tokens, counts, ids, logits, sizes,
            np.asarray(sorted_flags, dtype=np.bool_), clone))

    def run_trace(self, trace) -> list[Output]:
        """One sampler through the trace's events: the Output of every apply, in order (run_trace_flat's)."""
        return self.run_trace_flat(trace).outputs()

    def run_trace_flat(self, trace) -> Outputs:
        """run_trace, flat: one call into _drive.run_trace (init_dry, then one library call per event; every
        sampler freed exactly once), or the same calls through ctypes (dryz.subject.trace_driver.run_events)
        when DRYZ_DRIVE=ctypes or the extension is not built."""
        args = trace.sampler_args()
        refuse_old_abi_crash(self, args, trace.n_ctx_train)
        if _DRIVE is None:
            return Outputs.of(_run_events(self, args, trace.events, trace.alphabet, trace.n_ctx_train))
        multiplier, base, allowed, last_n, breakers = args
        p = trace.program()
        return Outputs.of_buffers(*_DRIVE.run_trace(
            self.trace_addresses, self.vocab_address, self.abi, trace.n_ctx_train, multiplier, base, allowed,
            last_n, breakers, p.ops, p.tokens, p.counts, p.ids, p.logits, p.sizes, p.sorted))

    @cached_property
    def trace_addresses(self) -> tuple[int, ...]:
        """llama_sampler_{init_dry,clone,accept,apply,reset,free} (for _drive.run_trace)."""
        return tuple(self.L.address("llama_sampler_" + n) for n in ("init_dry", "clone", "accept", "apply", "reset",
                                                                    "free"))

    # Initialized samplers per (vocabulary, parameters, breakers): init_dry processes the breakers over the whole
    # vocabulary (30-80 ms on 128k-262k tokens); a clone copies them. At most this many are kept (LRU).
    PROTOTYPES = 512

    def prototype(self, case, v):
        """An initialized DRY sampler for the case's configuration on real vocabulary v (a loaded vocabulary)
        that never accepts a token (in clone mode): llama_sampler_clone of it is what init_dry with these
        arguments returns (the clone copies the parameters, the processed breakers and the, empty, state:
        llama_sampler_dry_clone).

        In clone mode the prototype kept is, when it can be, llama_sampler_clone of init_dry's sampler (which is
        then freed): the same state, its processed breakers (thousands of hash nodes on a real vocabulary) made
        in one burst of allocations instead of scattered among the strings init_dry detokenized and freed.
        Copying them for every case then reads memory nearly in order: on llama-bpe's default breakers a
        case's clone, accepts and apply took ~30% less (perf put a fifth of a fuzz input's samples on the load
        after each node's allocation in the hash table's copy, a cache miss per node). A case then runs on a
        clone of a clone, which would hide a clone that alters what it copies in a way a second clone undoes
        (two parameters swapped, say): so the compact prototype is kept only when a clone of it and a clone of
        init_dry's sampler leave bit-identical outputs on the probes (_clone_probes); otherwise init_dry's
        sampler is kept and each case is one clone of it. Which was kept: prototype_kinds."""
        protos = self.__dict__.setdefault("_prototypes", {})
        # The mode is part of the key: a prototype run in reset mode has accepted tokens and is never cloned.
        key = (self.reuse_samplers, v.ref.sha256, case.multiplier, case.base, case.allowed_length,
               case.penalty_last_n, tuple(case.breakers), case.n_ctx_train if self.abi == 8 else None)
        s = protos.pop(key, None)
        if s is None:
            s = self.new_sampler(case.multiplier, case.base, case.allowed_length, case.penalty_last_n,
                                 case.breakers, vocab=v.handle, n_ctx_train=case.n_ctx_train)
            s = s if isinstance(s, int) else ctypes.cast(s, ctypes.c_void_p).value
            if not self.reuse_samplers:
                s = self._compact(s, case, v, key)
            while len(protos) >= self.PROTOTYPES:
                old = next(iter(protos))
                self.free(protos.pop(old))
        protos[key] = s  # most recently used last
        return s

    def _compact(self, s: int, case, v, key) -> int:
        """init_dry's sampler s, or a clone of it where one more clone changes no probe's output (prototype)."""
        c = self.clone(s)
        if not c:
            self.free(s)
            raise SubjectError("llama_sampler_clone returned NULL")
        c = c if isinstance(c, int) else ctypes.cast(c, ctypes.c_void_p).value
        kinds = self.__dict__.setdefault("prototype_kinds", {})
        for probe in _clone_probes(case.breakers, v):
            if self._probe(s, probe) != self._probe(c, probe):
                self.free(c)
                kinds[key] = "init_dry (a clone of a clone differs from a clone)"
                return s
        self.free(s)
        kinds[key] = "clone"
        return c

    def _probe(self, proto: int, probe) -> tuple:
        """(ids, logit bits, sorted) a clone of proto leaves after the probe's history and one apply, made as
        run_vocab makes a case's (dryz.subject._drive.run_clone, or through ctypes)."""
        if _DRIVE is not None:
            ids, logits, sorted_flag = _DRIVE.run_clone(self.clone_address, *self.addresses[1:], proto,
                                                        probe.history, probe.ids, probe.logits, probe.sorted)
            return bytes(ids), bytes(logits), sorted_flag
        c = self.clone(proto)
        if not c:
            raise SubjectError("llama_sampler_clone returned NULL")
        out = self._accept_apply_free(c, probe)
        return tuple(out.ids), np.asarray(out.logits, dtype=np.float32).tobytes(), out.sorted

    def run_vocab(self, case) -> Output:
        """run() for a real vocabulary: llama_sampler_clone of the configuration's prototype, the history
        accepted, one apply, the clone freed (in dryz.subject._drive.run_clone, or through ctypes)."""
        v = vocab_of(case, self)
        proto = self.prototype(case, v)
        if _DRIVE is None:
            if self.reuse_samplers:
                self.reset(proto)
                return self._accept_apply_free(proto, case, free=False)
            return self._accept_apply_free(self.clone(proto), case)
        if self.reuse_samplers:
            ids, logits, sorted_flag = _DRIVE.run_clone(self.reset_address, *self.addresses[1:], proto,
                                                        case.history, case.ids, case.logits, case.sorted, True)
        else:
            ids, logits, sorted_flag = _DRIVE.run_clone(self.clone_address, *self.addresses[1:], proto,
                                                        case.history, case.ids, case.logits, case.sorted)
        return Output(tuple(array.array("i", ids)), np.frombuffer(logits, dtype=np.float32), sorted_flag,
                      len(ids) // 4)

    def _accept_apply_free(self, s, case, free: bool = True) -> Output:
        """The ctypes path (DRYZ_DRIVE=ctypes): accept the case's history on sampler s, apply once, free s."""
        try:
            for t in case.history:
                self.accept(s, t)
            return self.apply_once(s, case.ids, case.logits, case.sorted)
        finally:
            if free:
                self.free(s)

    @cached_property
    def clone_address(self) -> int:
        return self.L.address("llama_sampler_clone")

    @cached_property
    def reset_address(self) -> int:
        return self.L.address("llama_sampler_reset")

    @cached_property
    def reuse_samplers(self) -> bool:
        """DRYZ_VOCAB_SAMPLER=reset: a real-vocabulary case runs on its prototype after llama_sampler_reset (no
        clone: a DRY clone copies the processed breakers, ~0.1-0.3 ms on llama-bpe with the default breakers).
        reset leaves what a fresh sampler holds (apply reassigns the repeat counts and clears the maximum per
        token; reset clears the ring buffer): tests/test_vocab_cases.py compares both. Default: clone."""
        mode = os.environ.get("DRYZ_VOCAB_SAMPLER", "clone")
        if mode not in ("clone", "reset"):
            raise SubjectError(f"DRYZ_VOCAB_SAMPLER must be clone or reset, got {mode!r}")
        return mode == "reset"

    @cached_property
    def addresses(self) -> tuple[int, int, int, int]:
        """Addresses of llama_sampler_init_dry, llama_sampler_{accept,apply,free} in the loaded libllama (for
        dryz.subject._drive)."""
        return tuple(self.L.address(name) for name in ("llama_sampler_init_dry", "llama_sampler_accept",
                                                       "llama_sampler_apply", "llama_sampler_free"))

    @cached_property
    def vocab_address(self) -> int:
        return self.vocab if isinstance(self.vocab, int) else ctypes.cast(self.vocab, ctypes.c_void_p).value

    @cached_property
    def raw_calls(self):
        """llama_sampler_{clone,accept,apply,free} with address-sized arguments (c_void_p in and out), so a
        call makes no ctypes pointer objects."""
        return (self.L.llama_sampler_clone, self.L.llama_sampler_accept, self.L.llama_sampler_apply,
                self.L.llama_sampler_free)

    @property
    def drive(self):
        """The C call sequencer (dryz.subject._drive), or None: DRYZ_DRIVE=ctypes or not built."""
        return _DRIVE

    def vocabulary(self, spec):
        """A real vocabulary (a vendored NAME or a GGUF PATH) loaded vocab_only into this library, once."""
        return load(spec, self)

    def walk(self, tree, max_len: int, sampler_args, sink, prefixes=((),)) -> int:
        """Every history of the tree below the prefixes (dryz.subject.walker: depth-first in C, clones)."""
        return walk(self, tree, max_len, sampler_args, sink, prefixes)

    def apply_once(self, smpl, ids, logits, sorted_flag) -> Output:
        buf = self._buffer(len(ids))
        buf.fill(ids, logits, sorted_flag)
        self.apply(smpl, buf.arr_addr)
        return buf.output()

    def _buffer(self, n: int) -> "CandidateBuffer":
        bufs = self.__dict__.setdefault("_buffers", {})
        if n not in bufs:
            bufs[n] = CandidateBuffer(self.L, n)
        return bufs[n]


def _clone_probes(breakers, v) -> list:
    """Histories on which a clone and a clone of a clone must agree (LibLlama._compact): text holding every
    breaker between words, said three times (repeats for Step 3, breakers for Step 1's restart sequences); prose
    said three times; one token eight times and two tokens alternating (repeats that end within a window of
    three). Candidates: every distinct token, logits 0 (sorted) or 1.5 (unsorted)."""
    said = list(v.tokenize("".join(f"a{b}b " for b in breakers) + "the cat sat")) * 3
    prose = list(v.tokenize("the cat sat on the mat, the cat sat on the")) * 3
    t1, t2 = prose[1], prose[2]
    out = []
    for h, logit, sorted_flag in ((said, 0.0, True), (prose, 1.5, False), ([t1] * 8, 0.0, False),
                                  ([t1, t2] * 5, 1.5, True)):
        ids = sorted(set(h))
        out.append(_Flat(h, tuple(ids), [logit] * len(ids), sorted_flag))
    return out


class _Flat:
    """The fields of a case _accept_apply_free reads (the ctypes path of run_many)."""

    def __init__(self, history, ids, logits, sorted_flag):
        self.history, self.ids, self.logits, self.sorted = history, ids, logits, sorted_flag


class CandidateBuffer:
    """One candidate array of n entries (llama_token_data) and the llama_token_data_array header pointing at
    it, both viewed through numpy so a case fills and reads them without ctypes attribute access. One per
    size is kept and refilled; output() copies what the sampler left before the next case."""

    def __init__(self, L, n: int):
        self.L, self.n = L, n
        self.data = (L.llama_token_data * n)()
        self.view = np.frombuffer(self.data, dtype=TOKEN_DATA)
        A = L.llama_token_data_array
        self.arr = A(self.data, n, -1, False)
        self.header = np.frombuffer(self.arr, dtype=np.dtype({
            "names": ["data", "size", "selected", "sorted"],
            "formats": [np.uint64, np.uint64, np.int64, np.bool_],
            "offsets": [A.data.offset, A.size.offset, A.selected.offset, A.sorted.offset],
            "itemsize": ctypes.sizeof(A)}))
        self.data_addr, self.arr_addr = ctypes.addressof(self.data), ctypes.addressof(self.arr)

    def fill(self, ids, logits, sorted_flag: bool) -> None:
        v = self.view
        v["id"], v["logit"], v["p"] = ids, logits, 0.0
        self.header[0] = (self.data_addr, self.n, -1, sorted_flag)

    def output(self) -> Output:
        data, size, _, sorted_flag = self.header[0].item()
        view = self.view
        if data != self.data_addr or size != self.n:
            # The sampler swapped the data pointer or resized (DRY never should): read what it points to.
            view = np.frombuffer((self.L.llama_token_data * size).from_address(data), dtype=TOKEN_DATA)
        return Output(tuple(view["id"].tolist()), view["logit"].copy(), bool(sorted_flag), int(size))
