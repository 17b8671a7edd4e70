"""Equivalence shown by object code: the disassembly of every DRY function in a mutant's libllama.so against the
pristine build's. When every function whose symbol names DRY (accept, apply, reset, clone, init, with their
`.cold` parts; get_overlapping_token_sequences is inlined into init) disassembles to the same instructions, the
mutant's DRY code is the pristine's: no test can tell them apart, and the mutant is equivalent (proven).

The listing is normalised so only instructions count: addresses and encodings are dropped, a branch or call
keeps its symbolic target (`<sym+0x40>`), a RIP-relative operand its symbol, not its displacement.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

_DRY = re.compile(r"dry|overlapping_token_sequences")
_ADDR = re.compile(r"^\s*[0-9a-f]+:\s*")
_TARGET = re.compile(r"\b[0-9a-f]+ (<[^>]+>)")
_RIP = re.compile(r"-?0x[0-9a-f]+\(%rip\)")
_COMMENT = re.compile(r"#\s*[0-9a-f]+ (<[^>]+>)")


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


def dry_symbols(lib: Path) -> list[tuple[str, int, int]]:
    """(name, start, size) of each function symbol of the DRY code in lib, sorted by name."""
    nm = shutil.which("nm")
    if nm is None:
        raise RuntimeError("nm (binutils) is needed to compare object code")
    p = subprocess.run([nm, "-S", "--defined-only", str(lib)], capture_output=True, text=True, env=_env(),
                       check=True)
    out = []
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW" and _DRY.search(parts[3]):
            out.append((parts[3], int(parts[0], 16), int(parts[1], 16)))
    return sorted(out)


def normalised(lib: Path) -> dict[str, str]:
    """symbol -> its normalised disassembly."""
    objdump = shutil.which("objdump")
    if objdump is None:
        raise RuntimeError("objdump (binutils) is needed to compare object code")
    out = {}
    for name, start, size in dry_symbols(lib):
        p = subprocess.run([objdump, "-d", "--no-show-raw-insn", f"--start-address={start:#x}",
                            f"--stop-address={start + size:#x}", str(lib)], capture_output=True, text=True,
                           env=_env(), check=True)
        body = []
        started = False
        for line in p.stdout.splitlines():
            if line.endswith(">:"):
                started = True
                continue
            if not started or not _ADDR.match(line):
                continue
            ins = _ADDR.sub("", line).strip()
            ins = _COMMENT.sub(r"# \1", ins)
            ins = _TARGET.sub(r"\1", ins)
            ins = _RIP.sub("RIP", ins)
            body.append(re.sub(r"\s+", " ", ins))
        out[name] = "\n".join(body)
    return out


def fingerprint(lib: Path) -> dict:
    """{"sha256": of the whole normalised DRY code, "functions": {symbol: sha256 of its code}}."""
    code = normalised(lib)
    if not code:
        raise RuntimeError(f"{lib} has no DRY function symbols (stripped?)")
    per = {k: hashlib.sha256(v.encode()).hexdigest()[:16] for k, v in code.items()}
    whole = hashlib.sha256("\n".join(f"{k}\n{v}" for k, v in sorted(code.items())).encode()).hexdigest()
    return {"sha256": whole, "functions": per}


def differing(a: dict, b: dict) -> list[str]:
    """The symbols whose code differs between two fingerprints (or that only one has)."""
    fa, fb = a["functions"], b["functions"]
    return sorted(k for k in set(fa) | set(fb) if fa.get(k) != fb.get(k))
