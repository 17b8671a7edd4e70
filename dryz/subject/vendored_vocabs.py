"""Real vocabularies: the `ggml-vocab-*.gguf` files llama.cpp vendors for its tokenizer tests, or any GGUF.

`resolve_vocab(spec)` turns a NAME (`llama-bpe`, `gpt-2`, `gemma-4`, ...: the sdist's
`vendor/llama.cpp/models/ggml-vocab-NAME.gguf`) or a PATH into a `VocabRef(name, path, sha256)`. The vendored
files come from the pinned llama-cpp-python sdist (fetched once by `build.sdist` into
`~/.cache/dryz/sdists/`), extracted once into `~/.cache/dryz/vocabs/<version>/` under an exclusive flock, each
file written to a temporary name and renamed, and a manifest (name, size, sha256) written last, so a reader never
sees a half-written vocabulary. A vocabulary that cannot be had (an unknown name, a missing or unreadable file,
no sdist and no network) raises `VocabUnavailable` with a one-line message.

`load(ref)` loads it vocab_only through the subject binding (`Binding.load_vocab`) and returns a `LoadedVocab`,
cached per process (per library and sha256), whose `texts()` are every token's text exactly as
`get_overlapping_token_sequences` sees it: `vocab.detokenize({id}, true)`, i.e. the C API `llama_detokenize`
with remove_special false and unparse_special true. That is NOT `llama_token_to_piece(.., lstrip 0, ..)`
(`LoadedVocab.pieces`): detokenize strips the leading space of the first token when the vocabulary adds a
space prefix (SPM: the token "\u2581the" is "the", not " the") and, where the vocabulary cleans spaces,
drops the space of " ?", " !", " .", " ,", " 's", ... Token texts are bytes: a byte-level BPE token can be an
incomplete UTF-8 sequence, and the library compares bytes.

`tokenize(bytes)` is `vocab.tokenize(str, add_special false, parse_special false)` (`llama_tokenize` with the
same flags) on raw bytes: init_dry truncates a breaker to 40 *bytes* and may cut a character, and the tail
it tokenizes is then not valid UTF-8 (the library's tokenizer turns each invalid byte into U+FFFD).

dryz binds llama_detokenize here (on the binding's own handle, a separate function object), not in
binding.py: only this module needs it, and a library without it can still run every other command.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ..case import Case, CaseError
from ..errors import DryzError, unknown
from .binding import SubjectError
from .build import PINNED_VERSION, BuildError, sdist
from .cache import cache_dir, sha256_file
from .registry import opened

PREFIX = "ggml-vocab-"
MEMBER_DIR = "vendor/llama.cpp/models/"
MANIFEST = "MANIFEST.json"


class VocabUnavailable(DryzError):
    """A vocabulary that cannot be had; the message is one line."""


@dataclass(frozen=True)
class VocabRef:
    name: str
    path: Path
    sha256: str


def vocabs_dir(version: str = PINNED_VERSION) -> Path:
    return cache_dir() / "vocabs" / version


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _sdist(version: str) -> Path:
    """The cached sdist, else build.sdist's pip download; any failure is VocabUnavailable."""
    d = cache_dir() / "sdists"
    d.mkdir(parents=True, exist_ok=True)
    log_file = d / f"vocabs-{version}.log"
    try:
        return sdist(version, lambda msg: None, log_file)
    except (BuildError, OSError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise VocabUnavailable(f"the llama-cpp-python=={version} sdist (which vendors the ggml-vocab-*.gguf files) "
                               f"cannot be had: {first}") from None


def _read_manifest(d: Path) -> dict | None:
    try:
        m = json.loads((d / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) and isinstance(m.get("vocabs"), dict) else None


def extract(version: str = PINNED_VERSION) -> dict:
    """Every vendored vocabulary of the sdist, extracted once (flock, temporary names, rename, manifest last).
    Returns the manifest: {"version", "sdist", "vocabs": {name: {"file", "size", "sha256"}}}."""
    d = vocabs_dir(version)
    m = _read_manifest(d)
    if m is not None:
        return m
    with _locked(d / ".lock"):
        m = _read_manifest(d)  # another process may have finished while this one waited
        if m is not None:
            return m
        tgz = _sdist(version)
        vocabs = {}
        try:
            with tarfile.open(tgz, "r:gz") as tf:
                for member in tf:
                    base = member.name.rsplit("/", 1)[-1]
                    if not (member.isfile() and member.name.endswith(MEMBER_DIR + base)
                            and base.startswith(PREFIX) and base.endswith(".gguf")):
                        continue
                    name = base[len(PREFIX):-len(".gguf")]
                    dest = d / base
                    tmp = d / f".{base}.tmp{os.getpid()}"
                    src = tf.extractfile(member)
                    with open(tmp, "wb") as out:
                        while block := src.read(1 << 20):
                            out.write(block)
                    os.replace(tmp, dest)
                    vocabs[name] = {"file": base, "size": member.size, "sha256": sha256_file(dest)}
        except (OSError, tarfile.TarError, EOFError) as e:
            raise VocabUnavailable(f"cannot extract the vocabularies from {tgz}: {e}") from None
        if not vocabs:
            raise VocabUnavailable(f"{tgz} holds no {MEMBER_DIR}{PREFIX}*.gguf")
        m = {"version": version, "sdist": tgz.name, "vocabs": dict(sorted(vocabs.items()))}
        tmp = d / f".{MANIFEST}.tmp{os.getpid()}"
        tmp.write_text(json.dumps(m, indent=1) + "\n")
        os.replace(tmp, d / MANIFEST)
        return m


def vendored_names(version: str = PINNED_VERSION) -> list[str]:
    """The names of the sdist's vendored vocabularies (extracting them on first use)."""
    return sorted(extract(version)["vocabs"])


_SHA_CACHE: dict = {}


def _sha_of(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _SHA_CACHE:
        _SHA_CACHE[key] = sha256_file(path)
    return _SHA_CACHE[key]


def check_vocab(spec) -> None:
    """--vocab's value checked before any work: a vendored name (or its file name, ggml-vocab-NAME.gguf) or a
    GGUF file (its magic). VocabUnavailable (one line)."""
    resolve_vocab(spec)


def resolve_vocab(spec, version: str = PINNED_VERSION) -> VocabRef:
    """A vendored NAME, or a PATH to a GGUF, as a VocabRef. VocabUnavailable when it cannot be had."""
    if isinstance(spec, VocabRef):
        return spec
    s = str(spec)
    if "/" not in s and s.startswith(PREFIX) and s.endswith(".gguf") and not Path(s).exists():
        s = s.removeprefix(PREFIX).removesuffix(".gguf")  # the sdist's own file name: that vocabulary
        spec = s
    looks_like_path = isinstance(spec, os.PathLike) or "/" in s or s.endswith(".gguf")
    if looks_like_path:
        p = Path(s).expanduser()
        if not p.is_file():
            raise VocabUnavailable(f"vocabulary {s}: no such file")
        try:
            with open(p, "rb") as f:
                magic = f.read(4)
        except OSError as e:
            raise VocabUnavailable(f"vocabulary {s}: {e.strerror}") from None
        if magic != b"GGUF":
            raise VocabUnavailable(f"vocabulary {s}: not a GGUF file")
        return VocabRef(p.stem.removeprefix(PREFIX), p.resolve(), _sha_of(p.resolve()))
    m = extract(version)
    entry = m["vocabs"].get(s)
    if entry is None:
        raise VocabUnavailable(unknown("vocabulary", s, sorted(m["vocabs"]))[:-1]
                               + f": the llama-cpp-python {version} sdist's; or a GGUF path)")
    p = vocabs_dir(version) / entry["file"]
    if not p.is_file() or p.stat().st_size != entry["size"]:
        # Deleted or damaged since extraction: extract again.
        (vocabs_dir(version) / MANIFEST).unlink(missing_ok=True)
        m = extract(version)
        entry = m["vocabs"][s]
    return VocabRef(s, p, entry["sha256"])


class LoadedVocab:
    """One vocabulary loaded vocab_only into one library; texts and tokenizations cached."""

    def __init__(self, lib, ref: VocabRef):
        self.lib, self.ref = lib, ref
        L = lib.L
        try:
            self.model, self.handle = L.load_vocab(ref.path)
        except SubjectError as e:
            raise VocabUnavailable(f"vocabulary {ref.name} ({ref.path}) does not load: {e}") from None
        self.n_tokens = int(L.llama_vocab_n_tokens(self.handle))
        f = L.handle["llama_detokenize"]  # a new function object: the binding's own is untouched
        f.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_int32, ctypes.c_char_p,
                      ctypes.c_int32, ctypes.c_bool, ctypes.c_bool]
        f.restype = ctypes.c_int32
        self._detok = f
        self._texts = None
        self._pieces = None
        self._tok_cache: dict[bytes, tuple[int, ...]] = {}
        self._lock = threading.Lock()

    def detokenize(self, ids, special: bool = True) -> bytes:
        """vocab.detokenize(ids, special): llama_detokenize(remove_special false, unparse_special special)."""
        ids = list(ids)
        arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        cap = 64 + 16 * len(ids)
        while True:
            buf = ctypes.create_string_buffer(cap)
            n = self._detok(self.handle, arr, len(ids), buf, cap, False, special)
            if n >= 0:
                return buf.raw[:n]
            cap = -n + 1

    def texts(self) -> list[bytes]:
        """Every token's text as get_overlapping_token_sequences sees it: detokenize({id}, true)."""
        with self._lock:
            if self._texts is None:
                out = []
                one = (ctypes.c_int32 * 1)()
                cap = 256
                buf = ctypes.create_string_buffer(cap)
                detok, h = self._detok, self.handle
                for t in range(self.n_tokens):
                    one[0] = t
                    n = detok(h, one, 1, buf, cap, False, True)
                    if n < 0:
                        out.append(self.detokenize([t]))
                    else:
                        out.append(buf.raw[:n])
                self._texts = out
            return self._texts

    def pieces(self) -> list[bytes]:
        """Every token's piece as a streaming client prints it: llama_token_to_piece(lstrip 0, special true),
        no leading-space removal, no space cleaning (the text a model's output is made of)."""
        with self._lock:
            if self._pieces is None:
                L, h = self.lib.L, self.handle
                cap = 256
                buf = ctypes.create_string_buffer(cap)
                out = []
                for t in range(self.n_tokens):
                    n = L.llama_token_to_piece(h, t, buf, cap, 0, True)
                    if n < 0:
                        big = ctypes.create_string_buffer(-n)
                        n = L.llama_token_to_piece(h, t, big, -n, 0, True)
                        out.append(big.raw[:n])
                    else:
                        out.append(buf.raw[:n])
                self._pieces = out
            return self._pieces

    def tokenize(self, data: bytes | str, parse_special: bool = False) -> tuple[int, ...]:
        """vocab.tokenize(data, add_special false, parse_special), on raw bytes. parse_special false is what
        init_dry uses; true is how a chat model emits its template markers (one special token each)."""
        if isinstance(data, str):
            data = data.encode()
        if parse_special:
            return self._tokenize(data, True)
        hit = self._tok_cache.get(data)
        if hit is not None:
            return hit
        out = self._tokenize(data, False)
        self._tok_cache[data] = out
        return out

    def _tokenize(self, data: bytes, parse_special: bool) -> tuple[int, ...]:
        L = self.lib.L
        cap = len(data) + 8
        while True:
            toks = (ctypes.c_int32 * cap)()
            n = L.llama_tokenize(self.handle, data, len(data), toks, cap, False, parse_special)
            if n >= 0:
                break
            cap = -n
        return tuple(toks[:n])


_LOADED: dict = {}
_LOADED_LOCK = threading.Lock()


def load(spec, lib) -> LoadedVocab:
    """The vocabulary loaded into the libllama subject `lib`, once per process."""
    ref = resolve_vocab(spec)
    key = (str(lib.path), ref.sha256)
    with _LOADED_LOCK:
        if key not in _LOADED:
            _LOADED[key] = LoadedVocab(lib, ref)
        return _LOADED[key]


# -- the vocabulary a Case names (Case.vocab) ---------------------------------------------------------------
# A vocabulary that cannot be had, a sha256 that differs, or a size that differs is a VocabError (a CaseError:
# one line, exit 2 at the command line).


class VocabError(CaseError):
    """A case's vocabulary that cannot be had or does not match what the case records."""


_LOCK = threading.Lock()
_CHECKED: dict = {}


def reference_vocabulary(spec) -> LoadedVocab:
    """A vocabulary's facts from the pinned llama-cpp-python's libllama: the tokenizer the oracles use for a
    subject that has none of its own to offer (Subject.vocabulary's generic form). The tokenizer is not what
    dryz audits."""
    return load(spec, opened("libllama:"))


def load_vocab(spec, lib):
    """The vocabulary a NAME or PATH names, as the subject `lib` gives it (Subject.vocabulary); VocabError when
    it cannot be had."""
    try:
        return lib.vocabulary(spec)
    except VocabUnavailable as e:
        raise VocabError(str(e)) from None


def vocab_of(case: Case, lib, _loader=None, key=None):
    """The loaded vocabulary of a vocab case, checked once per (subject, vocab, sha256, size). _loader/key: the
    same checks on a vocabulary loaded otherwise (vocab_cases.pieces_for_people: the reference tokenizer)."""
    key = key or (id(lib), case.vocab, case.vocab_sha256, case.alphabet)
    v = _CHECKED.get(key)
    if v is not None:
        return v
    with _LOCK:
        try:
            v = _loader(case.vocab) if _loader else load_vocab(case.vocab, lib)
        except VocabUnavailable as e:
            raise VocabError(str(e)) from None
        if case.vocab_sha256 is not None and case.vocab_sha256 != v.ref.sha256:
            raise VocabError(f"vocabulary {case.vocab}: the case records sha256 {case.vocab_sha256[:16]}..., the "
                             f"file {v.ref.path} has {v.ref.sha256[:16]}... (another file of that name)")
        if case.alphabet != v.n_tokens:
            raise VocabError(f"the case's alphabet {case.alphabet} is not the size of vocabulary {case.vocab} "
                             f"({v.n_tokens} tokens)")
        _CHECKED[key] = v
        return v


