"""The reproduction script of an issue report: one Python file that runs the witness with the engine alone (its
own API, no dryz) and prints what llama.cpp gives (dryz's model of llama.cpp's DRY, bit for bit: numbers written
into the script), what the engine gives now, and whether it differs; exit 1 while it differs, 0 once the engine
gives llama.cpp's answer (the behaviour fixed), 2 when the engine cannot be loaded.

Every script has the same frame (FRAME below: the witness's constants, the comparison, the printing) and one
engine's part, from its module here (ENGINES: the engine's name in the subject's identity -> module): how to
install it, how to load it, and answer() (the witness's answer: ("logits", [...]) per candidate, or for a trace
("applies", [[...], ...]); ("raised", "ExceptionType: ..."), ("refused", message) or ("died", how)). An engine
whose DRY is native code runs the witness in a child process (ISOLATE), so a crash is an answer, not the end.
"""

from __future__ import annotations

import importlib
import json
import math
import re
import textwrap

import numpy as np

from ...case import Case
from ...causes import predicted_json
from ...symbols import SYMBOLS
from ..witness import IssueError, Witness, answer_words

# identity["engine"] -> the module writing its part
ENGINES = {"exllamav2": "exllamav2", "aphrodite-python": "aphrodite", "aphrodite": "aphrodite",
           "mistral.rs": "mistralrs", "mistral.rs-cached": "mistralrs", "ik_llama.cpp": "ik_llama"}


def part(w: Witness):
    """The engine's module (its part of the script); IssueError for an engine dryz writes no script for."""
    name = ENGINES.get(str(w.identity.get("engine")))
    if name is None:
        raise IssueError(f"{w.source}: dryz writes reproduction scripts for "
                         + ", ".join(sorted(set(ENGINES))) + f", not {w.identity.get('engine') or w.identity.get('kind')}")
    return importlib.import_module(f".{name}", __name__)


def recorded(w: Witness) -> tuple:
    """What the engine gave when dryz recorded the witness, as the script compares it."""
    a = answer_words(w)
    if "logits" in a:
        return ("logits", [_num(x) for x in a["logits"]])
    if "refused" in a:
        return ("refused", a["refused"])
    text = str(a.get("raised") or a.get("crash") or w.detail or "")
    if w.identity.get("kind") == "ik-llama" or "raised" not in a and re.search(r"SIG[A-Z]+|signal|died", text):
        m = re.search(r"SIG[A-Z]+", text)
        return ("died", m.group(0) if m else text[:80] or "the process died")
    m = re.search(r"raised: (\w+)", text) or re.search(r"^(\w+(?:Error|Exception))", text)
    return ("raised", m.group(1) if m else text[:80])


def llama_cpp(w: Witness) -> tuple:
    """What llama.cpp's DRY gives for the witness (dryz's model: the composed model with no deviation)."""
    abi = int(w.identity.get("init_dry_abi") or 7)
    if w.trace is not None:
        from ...oracle.trace_model import equivalent_cases  # on use: a trace witness
        return ("applies", [[_num(x) for x in predicted_json(c, (), abi)["logits"]]
                            for c in equivalent_cases(w.trace, abi)])
    p = predicted_json(w.case, (), abi)
    if "logits" not in p:
        raise IssueError(f"{w.source}: llama.cpp's model does not answer it ({p})")
    return ("logits", [_num(x) for x in p["logits"]])


def show_answer(a: tuple, w: Witness) -> str:
    """An answer as the script prints it (its show()), for the report."""
    given = list(zip(w.case.ids, w.case.logits)) if w.case is not None else \
        [(t, 0.0) for t in range(w.trace.alphabet)]

    def logits(vals):
        shown = [f"{SYMBOLS[t] if 0 <= t < len(SYMBOLS) else t} {v:.9g}" for (t, before), v in zip(given, vals)
                 if _bits(v) != _bits(float(before))]
        return ", ".join(shown) if shown else "every logit as given (nothing penalized)"
    if a[0] == "logits":
        return logits(a[1])
    if a[0] == "applies":
        return "; ".join(f"apply {k + 1}: {logits(r)}" for k, r in enumerate(a[1]))
    return f"{a[0]} {a[1]}".rstrip(": ")


def _bits(x: float) -> int:
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


def _num(x) -> float:
    return -math.inf if x == "-inf" else math.inf if x == "inf" else float(np.float32(float(x)))


def _py(x) -> str:
    if isinstance(x, float):
        return "-math.inf" if x == -math.inf else "math.inf" if x == math.inf else repr(x)
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_py(v) for v in x) + "]"
    return repr(x)


def constants(w: Witness) -> str:
    """The witness as the script's constants."""
    lines = ["SYMBOLS = " + repr(SYMBOLS) + "  # dryz's symbol vocabulary: token i is the one character SYMBOLS[i]"]
    if w.trace is not None:
        t = w.trace
        lines += [f"MULTIPLIER, BASE, ALLOWED_LENGTH, PENALTY_LAST_N = {_py(float(t.multiplier))}, "
                  f"{_py(float(t.base))}, {t.allowed_length}, {t.penalty_last_n}",
                  f"BREAKERS = {list(t.breakers)!r}",
                  f"N_TOKENS = {t.alphabet}  # an apply's candidates: tokens 0..N_TOKENS-1 at logit 0",
                  "EVENTS = " + repr([list(e) if e[0] != "accept" else ["accept", list(e[1])]
                                      for e in t.events]) + "  # calls on one sampler, in order",
                  "HISTORY = []", "CANDIDATES = [(t, 0.0) for t in range(N_TOKENS)]"]
    else:
        c = w.case
        lines += [f"HISTORY = {list(c.history)!r}  # {c.symbols!r}",
                  f"MULTIPLIER, BASE, ALLOWED_LENGTH, PENALTY_LAST_N = {_py(float(c.multiplier))}, "
                  f"{_py(float(c.base))}, {c.allowed_length}, {c.penalty_last_n}",
                  f"BREAKERS = {list(c.breakers)!r}",
                  "CANDIDATES = [" + ", ".join(f"({t}, {_py(_num(lg))})" for t, lg in zip(c.ids, c.logits))
                  + "]  # (token id, logit before DRY)", "EVENTS = None"]
        if w.requests is not None:
            lines.append("EARLIER = [" + ", ".join(
                f"dict(history={list(e.history)!r}, multiplier={_py(float(e.multiplier))}, base={_py(float(e.base))}, "
                f"allowed_length={e.allowed_length}, breakers={list(e.breakers)!r})" for e in w.earlier)
                + "]  # the requests the same instance answered before, in order: " + w.requests.spelled())
    lines += [f"LLAMA_CPP = {_tuple(llama_cpp(w))}  # llama.cpp's DRY (llama-cpp-python 0.3.36), bit for bit",
              f"REPORTED = {_tuple(recorded(w))}  # what {w.engine} {w.version} gave when dryz recorded it"]
    return "\n".join(lines)


def _tuple(t: tuple) -> str:
    return f"({t[0]!r}, {_py(t[1])})"


FRAME = '''

def _bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0] if math.isfinite(x) or math.isinf(x) else -1


def same(a, b):
    """Two answers are the same: the same kind, the same logits bit for bit (float32), the same exception type."""
    if a[0] != b[0]:
        return False
    if a[0] == "logits":
        return [_bits(x) for x in a[1]] == [_bits(x) for x in b[1]]
    if a[0] == "applies":
        return [[_bits(x) for x in r] for r in a[1]] == [[_bits(x) for x in r] for r in b[1]]
    if a[0] == "raised":
        return a[1].split(":")[0] == b[1].split(":")[0]
    return True  # refused, died: the kind is the answer


def _logits(values, given):
    shown = [f"{SYMBOLS[t] if 0 <= t < len(SYMBOLS) else t} {v:.9g}" for (t, before), v in zip(given, values)
             if _bits(v) != _bits(before)]
    return ", ".join(shown) if shown else "every logit as given (nothing penalized)"


def show(a):
    if a[0] == "logits":
        return _logits(a[1], CANDIDATES)
    if a[0] == "applies":
        return "; ".join(f"apply {k + 1}: " + _logits(r, CANDIDATES) for k, r in enumerate(a[1]))
    return f"{a[0]} {a[1]}".rstrip(": ")


def run():
    """The engine's answer: in a child process where its DRY is native code (a crash is an answer)."""
    if not ISOLATE:
        return answer()
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", *sys.argv[1:]], capture_output=True,
                       text=True)
    if p.returncode < 0:
        return ("died", signal.Signals(-p.returncode).name)
    if p.returncode != 0:
        sys.exit(f"the child process failed (exit {p.returncode}): {p.stderr.strip()[-500:]}")
    return tuple(json.loads(p.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    sys.stdout = os.fdopen(os.dup(1), "w", buffering=1)  # this script's result; the engine's own logs (some write
    os.dup2(2, 1)                                         # to stdout) go to stderr
    if sys.argv[1:2] == ["--child"]:
        sys.argv[1:2] = []
        print(json.dumps(answer()))
        sys.exit(0)
    got = run()
    print(f"input:     {INPUT}")
    print(f"llama.cpp: {show(LLAMA_CPP)}")
    print(f"{ENGINE}: {show(got)}")
    if same(got, LLAMA_CPP):
        print(f"{ENGINE} gives what llama.cpp gives: the reported difference is gone")
        sys.exit(0)
    print(f"DIFFERS: {ENGINE} differs from llama.cpp" + (", as reported" if same(got, REPORTED) else
                                                          f" (reported: {show(REPORTED)})"))
    sys.exit(1)
'''


def input_line(w: Witness) -> str:
    """The witness in one line, as the script prints it."""
    if w.trace is not None:
        t = w.trace
        return (f"trace {t.spelled()}, penalty_last_n {t.penalty_last_n}, allowed_length {t.allowed_length}, "
                f"multiplier {t.multiplier:g}, base {t.base:g}, breakers {list(t.breakers)}")
    c: Case = w.case
    before = (f"after {' then '.join(repr(e.symbols) for e in w.earlier)} on the same instance: "
              if w.requests is not None else "")
    return (f"{before}history {c.symbols!r}, penalty_last_n {c.penalty_last_n}, allowed_length {c.allowed_length}, "
            f"multiplier {c.multiplier:g}, base {c.base:g}, breakers {list(c.breakers)}")


def script(w: Witness, title: str) -> str:
    """The whole script for the witness."""
    eng = part(w)
    why = eng.refuses(w) or (None if w.requests is None or getattr(eng, "REQUESTS", False) else
                             f"requests in turn to one instance: the {eng.NAME} script sends one request")
    if why:
        raise IssueError(f"{w.source}: {why}")
    about = (f"A reproduction with {eng.NAME} alone (no dryz), generated by `dryz export --as issue` from the "
             f"witness {w.source} ({w.shortest or 'not minimized'}). {eng.HOW}")
    runs = ("Tokens are one character each (a, b, c, ... are ids 0, 1, 2, ...). It prints what llama.cpp's DRY "
            "gives and what the engine gives; exit 1 while they differ, 0 once the engine gives llama.cpp's answer.")
    doc = (f'"""{title}\n\n' + textwrap.fill(about, 110) + "\n\n" + "".join(f"    {ln}\n" for ln in eng.INSTALL)
           + "    python THIS_FILE.py\n\n" + textwrap.fill(runs, 110) + '\n"""\n')
    head = "\n".join(["", "import json", "import math", "import os", "import signal", "import struct",
                      "import subprocess", "import sys", eng.IMPORTS.strip("\n"), "", constants(w),
                      f"ENGINE = {eng.NAME!r}", f"INPUT = {input_line(w)!r}", f"ISOLATE = {eng.ISOLATE!r}",
                      getattr(eng, "setup", lambda _: "")(w)])
    return doc + head + eng.BODY + FRAME
