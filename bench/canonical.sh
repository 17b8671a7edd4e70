#!/usr/bin/env bash
# Whole-process wall time and peak RSS of canonical `dryz exhaustive` runs (run on a quiet machine).
#   bench/canonical.sh [REPEATS]          the default sweep (3 symbols <= 11, three configurations), canonical
#                                          vs plain, alternating
#   bench/canonical.sh all N [CONFIG...]  every alphabet, lengths 1..N (default configs: base)
#   bench/canonical.sh shards N S [I...]  every alphabet, base, lengths 1..N as S shards (only shards I... if given;
#                                          all of them: then dryz merge), per-shard wall and peak RSS
# Writes the record bench/records/canonical.json (canonical-all.json, canonical-shards.json) through bench/record.py
# ($DRYZ_BENCH_RECORDS: elsewhere).
set -euo pipefail
cmd=("$0" "$@")
cd "$(dirname "$0")/.."
DRYZ=${DRYZ:-dryz}
PYTHON=${PYTHON:-python3}
lines=$(mktemp)
trap 'rm -f "$lines"' EXIT
record() {  # record NAME: the /usr/bin/time lines printed so far, as the record NAME
  "$PYTHON" bench/record.py time-lines "$1" "$lines" -- "${cmd[@]}"
}
if [ "${1:-}" = "all" ]; then
  n=${2:?usage: bench/canonical.sh all N [CONFIG...]}
  shift 2
  cfgs=()
  for c in "${@:-base}"; do cfgs+=(-c "$c"); done
  /usr/bin/time -f "all-alphabets n=$n ${*:-base}  %e s wall  %M KB peak RSS" "$DRYZ" exhaustive --all-alphabets \
    -n "$n" "${cfgs[@]}" --no-progress --json "/tmp/dryz-bench-all$n.json" 2>&1 \
    | grep -E "all-alphabets|canonical|CERTIFIED|MISMATCH|VOID" | tee "$lines"
  record canonical-all
  exit 0
fi
if [ "${1:-}" = "shards" ]; then
  n=${2:?usage: bench/canonical.sh shards N S [I...]}
  S=${3:?usage: bench/canonical.sh shards N S [I...]}
  shift 3
  which=("$@")
  [ ${#which[@]} -gt 0 ] || which=($(seq "$S"))
  for i in "${which[@]}"; do
    /usr/bin/time -f "shard $i/$S n=$n  %e s wall  %M KB peak RSS" "$DRYZ" exhaustive --all-alphabets -n "$n" -c base \
      --shard "$i/$S" --no-progress --json "/tmp/dryz-shard$n-$i-of-$S.json" 2>&1 | grep -E "^shard|canonical" \
      | tee -a "$lines"
  done
  if [ ${#which[@]} -eq "$S" ]; then
    "$DRYZ" merge $(for i in $(seq "$S"); do echo "/tmp/dryz-shard$n-$i-of-$S.json"; done) \
      --json "/tmp/dryz-merged$n.json" | grep -E "dryz exhaustive|canonical|merged|total"
  fi
  record canonical-shards
  exit 0
fi
reps=${1:-5}
for i in $(seq "$reps"); do
  for mode in --canonical --no-canonical; do
    /usr/bin/time -f "default sweep $mode  %e s wall  %M KB peak RSS" "$DRYZ" exhaustive $mode --no-progress \
      --json /tmp/dryz-bench.json >/dev/null
  done
done 2>&1 | grep "default sweep" | tee "$lines"
record canonical
