#!/usr/bin/env bash
# The test suite on a fresh machine, as README states it: `.ci/run` (a fresh virtual environment, dryz installed,
# then README's test command) in a fresh clone of this repository's HEAD, with an empty dryz cache, so every
# libllama, llama-server and vocabulary the tests need is built or extracted inside the timing. pip's own cache
# is left as it is (the llama-cpp-python wheel a first install builds is kept there, as on a newcomer's machine
# after the set-up command).
#   bench/suite.sh
# Writes the record bench/records/ci-fresh.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere); README's
# sentence on the suite's time is made from it (python -m dryz.docs).
set -euo pipefail
cmd=("$0" "$@")
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
here=$(pwd)
work=$(mktemp -d)
lines=$(mktemp)
trap 'rm -rf "$work" "$lines"' EXIT
git clone -q "$here" "$work/dryz"
export DRYZ_BENCH_COMMIT=$(git -C "$work/dryz" rev-parse --short HEAD)  # the commit measured (committed work only)
mkdir "$work/cache"
( cd "$work/dryz" && DRYZ_CACHE="$work/cache" /usr/bin/time -f "suite  %e s wall  %M KB peak RSS" .ci/run ) 2>&1 \
  | tail -n 5 | tee "$lines"
"$PYTHON" bench/record.py time-lines ci-fresh "$lines" -- "${cmd[@]}"
