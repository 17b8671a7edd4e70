#!/usr/bin/env python3
"""OSS-Fuzz / ClusterFuzzLite fuzzer: dryz's trace target (dryz/fuzz/harness.py with DRYZ_FUZZ_TARGET=traces) on
the libllama llama-cpp-python installed (or the one DRYZ_LIB names). Packaged by .clusterfuzzlite/build.sh as
$OUT/dry_trace_fuzzer; run with libFuzzer's flags (-runs=N CORPUS_DIR, -dict=..., -max_total_time=...)."""

import os
import sys
import tempfile

os.environ["DRYZ_FUZZ_TARGET"] = "traces"
# dryz writes its symbol vocabulary (a small GGUF) into its cache once; a fuzzing bot's home may be read-only.
if "DRYZ_CACHE" not in os.environ and not os.access(os.path.expanduser("~"), os.W_OK):
    os.environ["DRYZ_CACHE"] = os.path.join(tempfile.gettempdir(), "dryz-cache")


def main():
    from dryz.fuzz.harness import main as harness
    harness()


if __name__ == "__main__":
    sys.exit(main())
