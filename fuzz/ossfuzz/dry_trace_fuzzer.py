#!/usr/bin/env python3
"""OSS-Fuzz / ClusterFuzzLite fuzzer: dryz's trace target (dryz/fuzz/harness.py, DRYZ_FUZZ_TARGET=traces) on the
libllama llama-cpp-python installed (or the one DRYZ_LIB names). Packaged by .clusterfuzzlite/build.sh as
$OUT/dry_trace_fuzzer; run with libFuzzer's flags (-runs=N CORPUS_DIR, -dict=..., -max_total_time=...)."""

from dryz.fuzz.ossfuzz import fuzzer_main

if __name__ == "__main__":
    fuzzer_main("traces")
