#!/usr/bin/env bash
# Whole-process wall time and peak RSS of `dryz exhaustive` on the default space (seed sweep),
# repeated, alternating worker counts. Usage: bench/exhaustive.sh [REPEATS]
# Writes the record bench/records/exhaustive.json (bench/record.py; $DRYZ_BENCH_RECORDS: elsewhere).
set -euo pipefail
cmd=("$0" "$@")
cd "$(dirname "$0")/.."
DRYZ=${DRYZ:-dryz}
PYTHON=${PYTHON:-python3}
lines=$(mktemp)
trap 'rm -f "$lines"' EXIT
n=${1:-3}
for i in $(seq "$n"); do
  for j in 2 1; do
    /usr/bin/time -f "workers=$j  %e s wall  %M KB peak RSS" "$DRYZ" exhaustive --no-progress -j "$j" \
      --json /tmp/dryz-bench.json >/dev/null
  done
done 2>&1 | grep workers | tee "$lines"
"$PYTHON" bench/record.py time-lines exhaustive "$lines" -- "${cmd[@]}"
