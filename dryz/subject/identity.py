"""How a subject is named: its one-line label and the lines under it (what exactly ran), and when two
identities name the same subject. Every result carries the identity (`Subject.identity`); reports, the gate and
the matrix print it through these."""

from __future__ import annotations


def subject_line(s: dict) -> str:
    """The subject's one-line name: a libllama's provider version, patch, commit and init_dry ABI; another kind's
    own label (its identity's "label"); then the fixes it declares, if any."""
    fixes = f", declaring the fix {', '.join(s['declares'])}" if s.get("declares") else ""
    return _named(s) + fixes


def _named(s: dict) -> str:
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


def subject_header(lib) -> str:
    """The subject a command judges, named before its results: its label, then what exactly ran."""
    return "\n".join([f"subject: {lib.label()}"] + [f"         {line}" for line in subject_details(lib.identity)])


def subject_details(s: dict) -> list[str]:
    """The lines under a subject's name: what exactly ran (a libllama's path and sha256; another kind's
    identity "shown" facts, or its spec)."""
    shown = s.get("shown") or {}
    if shown:
        return [f"{k} {v}" for k, v in shown.items()]
    if "libllama_path" in s:
        return [f"libllama {s['libllama_path']}", f"sha256 {s['libllama_sha256']}"]
    return [f"spec {s.get('spec', '?')}"]


def comparable(identity: dict) -> dict:
    """What two identities must share to name the same subject: everything but where its files lie (a libllama
    by its sha256, commit and ABI, wherever it is)."""
    return {k: v for k, v in identity.items() if not k.endswith("_path") and k != "spec"}


def same_subject(a: dict, b: dict) -> bool:
    return comparable(a) == comparable(b)
