"""A patch to an engine's DRY source (`--subject engine:NAME+patch=FILE`): a unified diff dryz applies to the
engine's own files as the adapter loads them, so the patched DRY is judged exactly as the engine's (`dryz gate`
on it against the unpatched engine proves what the patch changes).

Only engines whose DRY dryz executes from source take a patch (dryz.subject.engines.ENGINES: `patchable`, the files
a patch may touch): exllamav2's installed generator/sampler.py, Aphrodite's Python fallback read from its wheel. A
compiled DRY (mistral.rs's Rust, Aphrodite's CUDA wheel op) cannot be rebuilt here.

The file: free text (the rationale) above the first `--- `, then one or more file diffs as `diff -u` or `git diff`
writes them (`--- a/PATH`, `+++ b/PATH`, hunks `@@ -L,N +L,N @@`); PATH relative to the engine's package root, as
in `patchable`. A hunk applies at exactly its line, its context and removed lines equal to the installed file's
(no offset, no fuzz: the engines are pinned, a patch that does not match the pinned source is refused). The
subject's identity names the patch and its sha256.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ...errors import DryzError

HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError, DryzError):
    """A patch dryz cannot read or apply (one line)."""


@dataclass(frozen=True)
class Hunk:
    start: int        # the old file's first line (1-based; 0 for an empty old range)
    old: tuple        # the old lines (context and removed), in order
    new: tuple        # the new lines (context and added), in order


@dataclass(frozen=True)
class FilePatch:
    path: str
    hunks: tuple


def _strip(name: str) -> str:
    name = name.split("\t", 1)[0].strip()
    return name[2:] if name[:2] in ("a/", "b/") else name


def parse(text: str, where: str = "the patch") -> tuple[FilePatch, ...]:
    """The file diffs of a unified diff (the text above the first `--- ` is its rationale); PatchError."""
    lines = text.splitlines()
    out: list[FilePatch] = []
    i = 0
    while i < len(lines):
        if not (lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")):
            i += 1
            continue
        path = _strip(lines[i + 1][4:])
        if path == "/dev/null" or _strip(lines[i][4:]) == "/dev/null":
            raise PatchError(f"{where}: creates or deletes {path}: a patch changes the engine's existing files")
        i += 2
        hunks = []
        while i < len(lines) and lines[i].startswith("@@"):
            m = HUNK.match(lines[i])
            if not m:
                raise PatchError(f"{where}: line {i + 1}: not a hunk header: {lines[i][:60]!r}")
            start, n_old = int(m.group(1)), int(m.group(2) or 1)
            n_new = int(m.group(4) or 1)
            old, new = [], []
            i += 1
            while i < len(lines) and (len(old) < n_old or len(new) < n_new):
                ln = lines[i]
                tag, body = (ln[:1], ln[1:]) if ln else (" ", "")
                if tag == " ":
                    old.append(body)
                    new.append(body)
                elif tag == "-":
                    old.append(body)
                elif tag == "+":
                    new.append(body)
                elif tag != "\\":  # "\ No newline at end of file"
                    raise PatchError(f"{where}: line {i + 1}: a hunk line starts with {tag!r}, not ' ', '-' or '+'")
                i += 1
            if len(old) != n_old or len(new) != n_new:
                raise PatchError(f"{where}: a hunk of {path} ends early ({len(old)} of {n_old} old lines, "
                                 f"{len(new)} of {n_new} new)")
            hunks.append(Hunk(start, tuple(old), tuple(new)))
        if not hunks:
            raise PatchError(f"{where}: no hunk for {path}")
        out.append(FilePatch(path, tuple(hunks)))
    if not out:
        raise PatchError(f"{where}: not a unified diff (no '--- a/PATH' and '+++ b/PATH' lines)")
    return tuple(out)


def read(path, patchable: tuple, engine: str) -> tuple[FilePatch, ...]:
    """The patch file at path, read and checked against the files the engine's DRY may be patched in."""
    p = Path(path)
    if not p.is_file():
        raise PatchError(f"+patch={path}: no such file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PatchError(f"+patch={path}: cannot read it as UTF-8 text ({e})") from None
    files = parse(text, f"+patch={path}")
    for f in files:
        if f.path not in patchable:
            raise PatchError(f"+patch={path}: it changes {f.path}; a patch of engine:{engine} changes "
                             + ", ".join(patchable))
    return files


def apply(source: str, fp: FilePatch, where: str) -> str:
    """The file's text with the patch's hunks applied, each at exactly its line; PatchError where a hunk's old
    lines are not the file's."""
    lines = source.splitlines()
    end = source.endswith("\n")
    out: list[str] = []
    at = 0  # lines of the original consumed
    for h in fp.hunks:
        first = max(h.start - 1, 0) if h.old else h.start
        if first < at:
            raise PatchError(f"{where}: {fp.path}: hunks out of order at line {h.start}")
        got = tuple(lines[first:first + len(h.old)])
        if got != h.old:
            bad = next((k for k, (a, b) in enumerate(zip(got, h.old)) if a != b), min(len(got), len(h.old)))
            is_ = got[bad].strip()[:48] if bad < len(got) else "past the end"
            want = h.old[bad].strip()[:48] if bad < len(h.old) else "nothing"
            raise PatchError(f"{where}: does not apply: {fp.path.rsplit('/', 1)[-1]} line {first + bad + 1} is "
                             f"{is_!r}, the patch expects {want!r}")
        out += lines[at:first] + list(h.new)
        at = first + len(h.old)
    out += lines[at:]
    return "\n".join(out) + ("\n" if end else "")


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class Patched:
    """A patch as an adapter applies it while it loads the engine's files: source(member, text) is the file's
    text, patched where the patch changes it; done() refuses a patch whose files were not all loaded."""

    def __init__(self, path: str | None, patchable: tuple, engine: str):
        self.path = path
        self.files = {f.path: f for f in read(path, patchable, engine)} if path else {}
        self.applied: set = set()

    def source(self, member: str, text: str) -> str:
        fp = self.files.get(member)
        if fp is None:
            return text
        self.applied.add(member)
        return apply(text, fp, f"+patch={Path(self.path).name}")

    def done(self) -> None:
        missing = set(self.files) - self.applied
        if missing:
            raise PatchError(f"+patch={self.path}: {', '.join(sorted(missing))} is not loaded by the adapter")

    def label(self) -> str:
        """What the handshake's version adds: the patch and its sha256."""
        return f" + patch {Path(self.path).name} (sha256 {sha256(self.path)[:12]})" if self.path else ""


def argument(argv: list[str]) -> str | None:
    """The adapter's `--patch FILE` argument (EngineSubject passes it), or None."""
    return argv[argv.index("--patch") + 1] if "--patch" in argv[:-1] else None


def adapter_main(make, engine: str, *args) -> int:
    """An adapter's process: its handshake and answers from make(*args, patch=FILE) (the --patch argument), served;
    a patch that does not apply is the handshake's failure (its one line on stderr, exit 3)."""
    import sys  # on use: an adapter's process
    from .serve import answers_stream, serve  # on use: an adapter's process
    out = answers_stream()
    try:
        hello, run = make(*args, patch=argument(sys.argv))
    except PatchError as e:
        print(f"engine:{engine}{e}", file=sys.stderr, flush=True)
        return 3
    return serve(hello, run, out)
