#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build for dryz: the two atheris targets of dryz/fuzz/harness.py as
# $OUT/dry_case_fuzzer and $OUT/dry_trace_fuzzer, each with $OUT/<fuzzer>_seed_corpus.zip (the project corpus,
# corpus/, as `dryz fuzz` seeds its campaigns) and $OUT/<fuzzer>.dict.
#
# The subject is the libllama llama-cpp-python builds from its sdist (pip compiles it here; GGML_NATIVE off so
# the package runs on any fuzzing bot). A fork auditing its own libllama sets DRYZ_LIB at run time.
# tests/test_ossfuzz.py runs this script with a local compile_python_fuzzer and DRYZ_SKIP_INSTALL=1 (dryz
# already installed) and then each fuzzer as OSS-Fuzz invokes it.
cd "$SRC/dryz"
if [ -z "${DRYZ_SKIP_INSTALL:-}" ]; then
  CMAKE_ARGS="-DGGML_NATIVE=OFF" pip3 install .
fi
for fuzzer in fuzz/ossfuzz/*_fuzzer.py; do
  # pyinstaller (inside compile_python_fuzzer) bundles dryz, its data (corpus/, the C driver) and libllama.
  compile_python_fuzzer "$fuzzer" --collect-all dryz --collect-all llama_cpp --collect-all gguf \
    --collect-submodules numpy
done
python3 -m dryz.fuzz.ossfuzz package "$OUT"
