"""Results JSON, the printed certificate, and a stderr progress bar."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

from . import __version__


def quiet() -> bool:
    """--quiet (DRYZ_QUIET=1): no progress output, for scripts."""
    return os.environ.get("DRYZ_QUIET") == "1"


class Progress:
    """Progress on stderr once a run has taken more than a second: a bar with rate and ETA on a terminal, one
    plain line every 10 s otherwise (a log file, CI), nothing with --quiet."""

    def __init__(self, total: int, label: str = "", stream=None, enabled: bool = True, interval: float | None = None):
        self.total, self.label, self.done = max(total, 1), label, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled and not quiet()
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.interval = interval if interval is not None else (0.1 if self.tty else 10.0)
        self.t0 = time.perf_counter()
        self.last = 0.0
        self.shown = False

    def __call__(self, n: int):
        self.done += n
        now = time.perf_counter()
        if not self.enabled or now - self.t0 < 1.0 or now - self.last < self.interval:
            return
        self.last = now
        frac = min(self.done / self.total, 1.0)
        rate = self.done / (now - self.t0)
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        if self.tty:
            bar = "#" * int(frac * 30)
            self.stream.write(f"\r{self.label} [{bar:<30}] {frac:6.1%} {self.done:,}/{self.total:,} "
                              f"({rate:,.0f}/s, ETA {fmt_seconds(eta)})")
            self.shown = True
        else:
            self.stream.write(f"{self.label}: {self.done:,}/{self.total:,} ({frac:.1%}), {rate:,.0f}/s, "
                              f"ETA {fmt_seconds(eta)}\n")
        self.stream.flush()

    def close(self):
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def fmt_seconds(s: float) -> str:
    if s != s or s == float("inf"):
        return "?"
    s = int(round(s))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def environment() -> dict:
    return {"python": platform.python_version(), "platform": platform.platform(), "dryz": __version__,
            "cpu_count": os.cpu_count()}


def write_json(path: str | Path, data: dict) -> None:
    """Atomic write: a result is never half-written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def crash_lines(v: dict) -> str:
    """dryz explain of a verdict of class crash or memory: the detail (a sanitizer report's summary) and the
    subject's last words (a report's first frames, not the tail of its shadow-byte legend)."""
    tail = "\n".join(f"  #{i} {f}" for i, f in enumerate(v["frames"])) if v.get("frames") else v.get("stderr", "")
    return f"class {v['class']}: {v.get('summary') or v['detail']}\n{tail}"


def subject_line(s: dict) -> str:
    """The subject's one-line name: a libllama's provider version, patch, commit and init_dry ABI; another kind's
    own label (its identity's "label")."""
    if s.get("label"):
        return s["label"]
    who = (f"llama-cpp-python {s['llama_cpp_python']}" if s.get("llama_cpp_python")
           else s.get("distribution") or "libllama")
    b = s.get("built_by_dryz") or {}
    if b.get("patch_sha256"):
        who += f" + patch {b.get('patch')} (sha256 {b['patch_sha256'][:12]})"
    elif b:
        who += " (built by dryz subject build)"
    if b.get("sanitize"):
        who += f" [sanitized: {','.join(b['sanitize'])}]"
    abi = f", init_dry ABI {s['init_dry_abi']} arguments" if s.get("init_dry_abi") else ""
    return f"{who} (llama.cpp {s.get('llama_cpp_commit') or '?'}{abi})"


def subject_details(s: dict) -> list[str]:
    """The lines under a subject's name: what exactly ran (a libllama's path and sha256; another kind's
    identity "shown" facts, or its spec)."""
    shown = s.get("shown") or {}
    if shown:
        return [f"{k} {v}" for k, v in shown.items()]
    if "libllama_path" in s:
        return [f"libllama {s['libllama_path']}", f"sha256 {s['libllama_sha256']}"]
    return [f"spec {s.get('spec', '?')}"]


def _confirmation(controls: dict) -> str:
    c = controls.get("abi_confirmation")
    if c is None:
        return ""
    return abi_confirmation_text(c) + "; "


def abi_confirmation_text(c: dict) -> str:
    """The control in a certificate's controls line."""
    if c["passed"]:
        return "ABI confirmation case passed (aa, allowed_length 1: logit -1)"
    if not c["oracles_passed"]:
        return "ABI confirmation case: the ORACLES miss logit -1: harness in doubt"
    return f"ABI confirmation case MISSED BY THE LIBRARY (aa, allowed_length 1: logit {c['observed_logit']}, not -1)"


def certificate_text(r: dict) -> str:
    s = r["subject"]
    lines = [
        f"dryz exhaustive: {r['verdict'].upper()}",
        f"subject   {subject_line(s)}",
        *(f"          {x}" for x in subject_details(s)),
        f"space     every history of length {r['space']['min_length']}..{r['space']['max_length']} over "
        f"{r['space']['alphabet']} symbols, every symbol a candidate",
    ]
    for c in r["configs"]:
        brk = f" breakers={c['breakers']}" if c["breakers"] else ""
        lines.append(f"  {c['name']:<9} last_n={c['penalty_last_n']:<3}{brk}  cases {c['cases']:>11,}  "
                     f"mismatches {c['mismatches']:,}  oracle disagreements {c['oracle_disagreements']:,}  "
                     f"penalized {c['penalized_cases']:,}  max L {c['max_L']}")
    t = r["totals"]
    lines.append(f"  {'total':<9} {'':<10} cases {t['cases']:>11,}  mismatches {t['mismatches']:,}  "
                 f"oracle disagreements {t['oracle_disagreements']}")
    c = r["controls"]
    per = c["periodic"]
    lines.append(f"controls  periodic {'passed' if per['passed'] else 'MISSED BY THE LIBRARY'} "
                 f"({len(per['cases'])} closed forms"
                 f"{'' if per.get('oracles_passed', True) else '; the ORACLES miss one: harness in doubt'}); "
                 f"{_confirmation(c)}off-by-one reference flagged "
                 f"{c['off_by_one']['flagged']:,} cases; multiplier 0: " + (
                     f"the subject CRASHED ({c['multiplier_zero']['crash']['detail']})" if "crash" in
                     c["multiplier_zero"] else f"{c['multiplier_zero']['nonzero_deltas']} non-zero deltas in "
                                               f"{c['multiplier_zero']['cases']:,} cases"))
    for c in r["configs"]:
        for x in c.get("crashes", []):
            what = f"class memory: {x['summary']}" if x.get("sanitizer") else x["detail"]
            lines.append(f"crash     ({c['name']}) the subject failed ({x['signal']}) walking the slice "
                         f"{x['slice']}: {what}")
    lines.append(f"wall      {r['wall_seconds']:.2f} s")
    return "\n".join(lines)


class ClosedPipeSafe:
    """stdout that drops what it cannot write once the reader has gone (dryz check ... | head): the command's
    own exit code stands (click would otherwise turn the EPIPE into exit 1, the findings code)."""

    def __init__(self, stream):
        self._s, self.closed_pipe = stream, False

    def write(self, text):
        if self.closed_pipe:
            return len(text)
        try:
            return self._s.write(text)
        except BrokenPipeError:
            self.closed_pipe = True
            return len(text)

    def flush(self):
        if not self.closed_pipe:
            try:
                self._s.flush()
            except BrokenPipeError:
                self.closed_pipe = True

    def __getattr__(self, name):
        return getattr(self._s, name)
