#!/usr/bin/env bash
# Runs GoogleTest binaries split into shards (GTEST_TOTAL_SHARDS), several at
# once: the sanitizer phases of CI (tools/sanitize.sh, tools/ci-sanitize.sh).
#
#   tools/run-shards.sh BUILD_DIR BINARY...
#
# One process per shard, not one per test as ctest runs them: under ASan every
# process start and exit (shadow memory, LeakSanitizer's scan) costs about a
# tenth of a second, which for ~1,400 tests was most of the phase; and many of
# the integration tests wait on timers (stall deadlines, drains), so a shard
# waiting leaves its core to another. Each binary runs in SHARDS shards
# (default: twice the number of cores), SHARD_JOBS processes at a time
# (default: the same). A shard's output goes to BUILD_DIR/shard-logs/<binary>.<shard>.log;
# a failed shard's log is printed. Exits non-zero if any shard failed.
# The sanitizer options (ASAN_OPTIONS, TSAN_OPTIONS, ...) come from the caller.
set -uo pipefail
build_dir=$1
shift
cores=$(nproc)
shards=${SHARDS:-$((2 * cores))}
jobs=${SHARD_JOBS:-$((2 * cores))}
logs=$build_dir/shard-logs
mkdir -p "$logs"

declare -A started_at=() name_of=()
failed=()
finish() {  # $1: pid, $2: its exit status
  local name=${name_of[$1]} secs=$((SECONDS - started_at[$1]))
  local summary
  summary=$(grep -E '^\[==========\] .* ran\.' "$logs/$name.log" | tail -1)
  if [ "$2" -eq 0 ]; then
    echo "run-shards: $name ok in ${secs}s ${summary#\[==========\] }"
  else
    echo "run-shards: $name FAILED (exit $2) in ${secs}s; its log ($logs/$name.log) ends:"
    tail -n 60 "$logs/$name.log" | sed 's/^/  | /'
    failed+=("$name")
  fi
}
reap() {  # waits for one job to end
  local pid status
  wait -n -p pid
  status=$?
  finish "$pid" "$status"
}
running=0
for bin in "$@"; do
  for ((i = 0; i < shards; ++i)); do
    if [ "$running" -ge "$jobs" ]; then
      reap
      running=$((running - 1))
    fi
    name="$bin.$i"
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$build_dir/bin/$bin" >"$logs/$name.log" 2>&1 &
    started_at[$!]=$SECONDS
    name_of[$!]=$name
    running=$((running + 1))
  done
done
while [ "$running" -gt 0 ]; do
  reap
  running=$((running - 1))
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "run-shards: ${#failed[@]} shard(s) failed: ${failed[*]}"
  exit 1
fi
