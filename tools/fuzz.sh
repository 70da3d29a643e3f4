#!/usr/bin/env bash
# Builds the libFuzzer targets in tests/fuzz/ (clang-14, ASan + UBSan) into
# build-fuzz/ and runs each one for a while.
#
#   tools/fuzz.sh                     # every target, 60 s each
#   tools/fuzz.sh 600 sse_parser      # one target ("fuzz_" may be left out), 10 min
#   tools/fuzz.sh 0                   # build, then replay the corpus once (no fuzzing)
#
# Each run starts from the committed seeds (tests/fuzz/corpus/<target>, only
# read; among them regression-* replays of fixed findings, see
# tests/fuzz/findings/README.md) plus what earlier runs found
# (build-fuzz/corpus/<target>, where new inputs are written), so longer runs
# keep their progress and the committed seeds stay as they are. Crashes, leaks, timeouts and OOMs are saved as
# build-fuzz/artifacts/<target>/{crash,leak,timeout,oom}-<sha1>; the full log
# of a run is build-fuzz/logs/<target>.log. Replay one with
#   build-fuzz/fuzz_<target> build-fuzz/artifacts/<target>/crash-...
# Exits non-zero if any target fails.
#
# Environment: JOBS (build parallelism, default nproc), FUZZ_JOBS (targets
# fuzzed at once, default nproc: each is one single-threaded process), FUZZ_BUILD_DIR
# (default build-fuzz), FUZZ_ARGS (extra libFuzzer flags for every target),
# LLMGATE_FUZZ_OPT (the optimisation level, default -O1; CI's smoke: -O0),
# LLMGATE_BUILD_ONLY=1 (install and build, run nothing: CI's background build),
# LLMGATE_FUZZ_VERBOSE=1 (targets print each input's outcome; for replays).
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_TARGETS=(fuzz_chat_request fuzz_sse_parser fuzz_route_override fuzz_redact fuzz_config
             fuzz_anthropic_stream fuzz_gemini_stream fuzz_response_path fuzz_resp
             fuzz_trace_context fuzz_http_auth fuzz_upstream_parser fuzz_chunked_request
             fuzz_continuation fuzz_messages fuzz_event_stream fuzz_bedrock_stream fuzz_oauth)
# Largest input per target: requests and configs of realistic size, an SSE
# stretch of a few events; small enough to keep executions fast.
declare -A MAX_LEN=(
  [fuzz_chat_request]=4096
  [fuzz_sse_parser]=8192
  [fuzz_event_stream]=2048
  [fuzz_route_override]=2048
  [fuzz_redact]=2048
  [fuzz_config]=6144
  [fuzz_anthropic_stream]=8192
  [fuzz_gemini_stream]=8192
  [fuzz_bedrock_stream]=4096
  [fuzz_oauth]=4096
  [fuzz_response_path]=1024
  [fuzz_resp]=4096
  [fuzz_trace_context]=1024
  [fuzz_http_auth]=1024
  [fuzz_upstream_parser]=4096
  [fuzz_chunked_request]=4096
  [fuzz_continuation]=8192
  [fuzz_messages]=8192
)
# Longest time one input may take (-timeout, seconds) before libFuzzer reports
# it as a timeout finding: every target handles an input in milliseconds, so
# these only catch hangs (for fuzz_config, e.g. the endless yaml-cpp loop of
# tests/fuzz/findings/config-yaml-loadall-endless-loop.yaml). Runaway memory is
# caught by -rss_limit_mb / -malloc_limit_mb (2 GiB).
declare -A TIMEOUT=(
  [fuzz_chat_request]=10
  [fuzz_sse_parser]=10
  [fuzz_event_stream]=10
  [fuzz_route_override]=10
  [fuzz_redact]=10
  [fuzz_config]=10
  [fuzz_anthropic_stream]=10
  [fuzz_gemini_stream]=10
  [fuzz_bedrock_stream]=10
  [fuzz_oauth]=10
  [fuzz_response_path]=10
  [fuzz_resp]=10
  [fuzz_trace_context]=10
  [fuzz_http_auth]=10
  [fuzz_upstream_parser]=10
  [fuzz_chunked_request]=10
  [fuzz_continuation]=10
  [fuzz_messages]=10
)

seconds=60
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
targets=()
for t in "$@"; do
  t=fuzz_${t#fuzz_}
  if [ -z "${MAX_LEN[$t]+x}" ]; then
    echo "fuzz: unknown target '$t' (targets: ${ALL_TARGETS[*]})" >&2
    exit 2
  fi
  targets+=("$t")
done
[ ${#targets[@]} -gt 0 ] || targets=("${ALL_TARGETS[@]}")

# ---- toolchain ------------------------------------------------------------
# cmake, ninja, nlohmann, yaml-cpp; clang-14 and its sanitizer runtimes.
LLMGATE_SKIP_BUILD=1 LLMGATE_DEPS=build LLMGATE_WITH_CLANG=1 tools/setup.sh

# ---- build ----------------------------------------------------------------
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Under the build directory's lock (.ci/run builds it in the background).
mkdir -p "$BUILD_DIR"
exec 9>"$BUILD_DIR/.build.lock"
flock 9
# The optimisation level, passed at every run so that a build directory
# configured by CI's smoke (-O0) is built at -O1 again for deep fuzzing.
CXX=clang++-14 cmake -S tests/fuzz -B "$BUILD_DIR" -G Ninja \
  -DLLMGATE_FUZZ_OPT="${LLMGATE_FUZZ_OPT:--O1}" >/dev/null
ninja -C "$BUILD_DIR" -j "${JOBS:-$(nproc)}" "${targets[@]}"
flock -u 9
[ "${LLMGATE_BUILD_ONLY:-0}" != 1 ] || exit 0

# ---- run ------------------------------------------------------------------
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
read -r -a extra_args <<<"${FUZZ_ARGS:-}"

stat_of() {  # stat_of LOG NAME -> libFuzzer's "stat::NAME: value"
  sed -n "s/^stat::$2:[[:space:]]*//p" "$1" | tail -n 1
}
field_of() {  # field_of LINE KEY -> the value after "KEY: " on a status line
  sed -n "s/.* $2: \([^ ]*\).*/\1/p" <<<"$1"
}

# One target: its log, then its summary line in $BUILD_DIR/logs/$t.result
# ("ok" or "FAILED ..." first); the end of the log and the reproducers on
# stderr when it failed.
run_target() {
  local t=$1
  local corpus="$BUILD_DIR/corpus/$t"
  local artifacts="$BUILD_DIR/artifacts/$t"
  local log="$BUILD_DIR/logs/$t.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  local mode
  if [ "$seconds" -gt 0 ]; then
    mode=(-max_total_time="$seconds")
  else
    mode=(-runs=0)  # replay the corpus only
  fi
  echo "fuzz: $t for ${seconds}s (log: $log)"
  local rc=0
  "$BUILD_DIR/$t" "${mode[@]}" -print_final_stats=1 -max_len="${MAX_LEN[$t]}" \
    -timeout="${TIMEOUT[$t]}" -rss_limit_mb=2048 -dict="tests/fuzz/dict/$t.dict" \
    -artifact_prefix="$artifacts/" "${extra_args[@]}" \
    "$corpus" "tests/fuzz/corpus/$t" </dev/null >"$log" 2>&1 || rc=$?

  # The last status line ("#N DONE cov: .. ft: .. corp: N/SIZE ..." or the
  # last one before a crash) and the final stats.
  local status execs rate cov ft corp result=ok
  status=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  execs=$(stat_of "$log" number_of_executed_units)
  rate=$(stat_of "$log" average_exec_per_sec)
  cov=$(field_of "$status" cov)
  ft=$(field_of "$status" ft)
  corp=$(field_of "$status" corp)
  if [ "$rc" -ne 0 ]; then
    result="FAILED (exit $rc)"
    {
      echo "fuzz: $t failed; the end of $log:"
      tail -n 40 "$log"
      echo "fuzz: reproducer(s): $(find "$artifacts" -type f | tr '\n' ' ')"
    } >&2
  fi
  local line
  line=$(printf '%-20s %-18s execs=%-9s exec/s=%-7s cov=%-6s ft=%-7s corpus=%s' "$t" "$result" \
    "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}")
  echo "fuzz: $line"
  echo "$line" >"$BUILD_DIR/logs/$t.result"
}

# Each target is one single-threaded process: FUZZ_JOBS (default: one per
# CPU) run at once.
jobs_max=${FUZZ_JOBS:-$(nproc)}
for t in "${targets[@]}"; do
  rm -f "$BUILD_DIR/logs/$t.result"
  while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
  run_target "$t" &
done
wait

failed=()
summary=()
for t in "${targets[@]}"; do
  line=$(cat "$BUILD_DIR/logs/$t.result" 2>/dev/null ||
    printf '%-20s %s' "$t" "FAILED (no result)")
  summary+=("$line")
  [[ $line == "$t"*" ok "* ]] || failed+=("$t")
done

echo "fuzz: summary (${seconds}s per target; corpus = inputs/bytes)"
printf '  %s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
