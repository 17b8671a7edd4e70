"""The ClusterFuzzLite / OSS-Fuzz packaging of the atheris targets (.clusterfuzzlite/build.sh runs it).

    python3 -m dryz.fuzz.ossfuzz package OUT  # OUT/<fuzzer>_seed_corpus.zip and OUT/<fuzzer>.dict per fuzzer

Two fuzzers (fuzz/ossfuzz/<fuzzer>.py, packaged by compile_python_fuzzer), the two targets of
dryz/fuzz/harness.py: `dry_case_fuzzer` (bytes -> Case -> check(), as `dryz
fuzz` runs it) and `dry_trace_fuzzer` (bytes -> Trace -> check_trace(), as `dryz fuzz --traces`). Each one's
seed corpus is what `dryz fuzz` seeds its campaign with (dryz.fuzz.campaign.Campaign.seed: every entry of the
project corpus, corpus/, as the JSON the decoder reads back; case entries seed the trace target as one-apply
traces), zipped flat as OSS-Fuzz wants it; its dictionary holds the JSON keys and event names of that input
format and the parameter values the decoders treat as edges (windows around 0 and -1, allowed_length 0, the
float32 extremes), so libFuzzer can splice them into the JSON seeds.
"""

from __future__ import annotations

import json
import sys
import tempfile
import zipfile
from pathlib import Path

FUZZERS = {"dry_case_fuzzer": "cases", "dry_trace_fuzzer": "traces"}

CASE_KEYS = ("schema", "dryz.case/1", "history", "history_symbols", "alphabet", "penalty_last_n", "breakers",
             "multiplier", "base", "allowed_length", "candidates", "sorted", "n_ctx_train")
TRACE_KEYS = ("schema", "dryz.trace/1", "alphabet", "penalty_last_n", "breakers", "multiplier", "base",
              "allowed_length", "events", "accept", "apply", "reset", "clone", "free", "null")
EDGE_VALUES = ("-1", "-2", "0", "1", "2", "64", "4096", "1.0", "2.0", "0.5", "3.4e38", "1e-45", "true", "false",
               "[]", "[[", "]]", "\"a\"", "\"ab\"", "\"abc\"", "-Infinity")


def _entry(s: str) -> str:
    """One libFuzzer dictionary line: the bytes as a quoted string (\\" and \\\\ escaped)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dictionary(target: str) -> str:
    keys = CASE_KEYS if target == "cases" else TRACE_KEYS
    words = [f'"{k}"' for k in keys] + [f'"{k}":' for k in keys if "/" not in k] + list(EDGE_VALUES)
    return "".join(f"{_entry(w)}\n" for w in dict.fromkeys(words))


def seed_files(target: str, work: Path) -> list[Path]:
    """The campaign's seeds for this target (Campaign.seed), written under work."""
    from .campaign import Campaign  # on use: the fuzzer entry imports only what its mode needs
    camp = Campaign(seconds=1, jobs=1, workdir=work, artifacts=work / "artifacts", target=target)
    camp.log = lambda m: None
    return sorted(camp.seed().iterdir())


def package(out: Path) -> dict:
    """Write each fuzzer's seed corpus zip and dictionary into out; returns {fuzzer: seeds}."""
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name, target in FUZZERS.items():
        with tempfile.TemporaryDirectory() as tmp:
            seeds = seed_files(target, Path(tmp))
            with zipfile.ZipFile(out / f"{name}_seed_corpus.zip", "w", zipfile.ZIP_DEFLATED) as z:
                for p in seeds:
                    z.write(p, p.name)
        (out / f"{name}.dict").write_text(dictionary(target))
        counts[name] = len(seeds)
    return counts


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "package":
        print(json.dumps(package(Path(args[1]))))
        return 0
    print("usage: python3 -m dryz.fuzz.ossfuzz package OUT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())


def fuzzer_main(target: str) -> None:
    """What a packaged fuzzer (fuzz/ossfuzz/dry_<target>_fuzzer.py) runs: dryz's harness on that target, with a
    writable cache where a fuzzing bot's home is read-only (dryz writes its symbol vocabulary there once)."""
    import os
    os.environ["DRYZ_FUZZ_TARGET"] = target
    if "DRYZ_CACHE" not in os.environ and not os.access(os.path.expanduser("~"), os.W_OK):
        os.environ["DRYZ_CACHE"] = os.path.join(tempfile.gettempdir(), "dryz-cache")
    from .harness import main as harness  # on use: the fuzzer entry imports only what its mode needs
    harness()
