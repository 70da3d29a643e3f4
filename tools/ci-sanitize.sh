#!/usr/bin/env bash
# shellcheck disable=SC2317  # the phase_* functions are called as "phase_$2"
# CI, after the normal test suite: the sanitizer builds and the fuzzers, each
# phase bounded in time.
#   asan  tools/sanitize.sh: clang-14 ASan+UBSan build of the test binaries in
#         build-asan/, the unit, integration, conformance and security tests under it
#   tsan  g++ TSan build in build-tsan/, integration_tests, conformance_tests and
#         routing_tests under it (halt_on_error=1; the conformance suite's
#         many-idle-connections row opens 2,000 sockets)
#   fuzz  tools/fuzz.sh: every libFuzzer target for LLMGATE_FUZZ_SECONDS (10) s,
#         after replaying the seeds (with the regression-* seeds of the fixed
#         findings, tests/fuzz/findings/README.md)
#
#   tools/ci-sanitize.sh              # all three phases
#   tools/ci-sanitize.sh tsan fuzz    # only these
#   tools/ci-sanitize.sh --install    # only the packages they need (clang-14 and
#                                     # its sanitizer runtimes, the build packages)
#   LLMGATE_BUILD_ONLY=1 tools/ci-sanitize.sh   # only their builds (.ci/run runs
#                                     # this in the background while the tests run)
#
# Every phase runs even if an earlier one failed; a line per phase gives its
# time and result, and the script exits non-zero if any phase failed or ran
# out of time. Time limits (seconds): LLMGATE_CI_ASAN_TIMEOUT (3600),
# LLMGATE_CI_TSAN_TIMEOUT (2400), LLMGATE_CI_FUZZ_TIMEOUT (build allowance of
# 900 plus the fuzzing time). JOBS sets the build parallelism (default nproc).
set -euo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."

# 10 s a target in CI: a smoke over the committed seeds and what grows from
# them (and a replay of the fixed findings). Deep fuzzing is a command of its
# own (tools/fuzz.sh 600 TARGET; docs/operations.md, "CI").
FUZZ_SECONDS=${LLMGATE_FUZZ_SECONDS:-10}
FUZZ_TARGETS=15  # tests/fuzz: chat_request, sse_parser, route_override, redact, config,
                 # anthropic_stream, gemini_stream, response_path, resp, trace_context,
                 # http_auth, upstream_parser, chunked_request, continuation, messages
                 # (tools/fuzz.sh runs them all)

phase_asan() {
  tools/sanitize.sh
}

phase_tsan() {
  LLMGATE_SKIP_BUILD=1 tools/setup.sh
  # g++: -DLLMGATE_SANITIZE=thread adds -Wno-tsan for it (Asio's fences).
  # -O1 -g1 (line tables): a third less build time than -O2 -g (gateway.cpp:
  # 39 s instead of 63 s), reports still name file and line.
  # Under the build directory's lock (.ci/run builds it in the background).
  mkdir -p build-tsan
  exec 9>build-tsan/.build.lock
  flock 9
  CC=${TSAN_CC:-gcc} CXX=${TSAN_CXX:-g++} cmake -S . -B build-tsan -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLLMGATE_SANITIZE=thread \
    -DLLMGATE_RELWITHDEBINFO_FLAGS="-O1 -g1 -DNDEBUG" >/dev/null
  ninja -C build-tsan -j "${JOBS:-$(nproc)}" integration_tests conformance_tests routing_tests
  flock -u 9
  [ "${LLMGATE_BUILD_ONLY:-0}" != 1 ] || return 0
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1}
  # In shards, several at once (many of these tests wait on timers: stall
  # deadlines, drains); every shard runs, the phase fails if any did.
  # routing_tests: the router's shared statistics (entry locks, lock-free
  # fast paths).
  tools/run-shards.sh build-tsan conformance_tests integration_tests routing_tests
}

phase_fuzz() {
  # -O0: the smoke builds in about two thirds of -O1's time (deep fuzzing,
  # tools/fuzz.sh alone, builds at -O1).
  LLMGATE_FUZZ_OPT=-O0 tools/fuzz.sh "$FUZZ_SECONDS"
}

phase_timeout() {
  case $1 in
    asan) echo "${LLMGATE_CI_ASAN_TIMEOUT:-3600}" ;;
    tsan) echo "${LLMGATE_CI_TSAN_TIMEOUT:-2400}" ;;
    fuzz) echo "${LLMGATE_CI_FUZZ_TIMEOUT:-$((900 + FUZZ_TARGETS * (FUZZ_SECONDS + 30)))}" ;;
  esac
}

# Internal: one phase, run under timeout(1) by the loop below.
if [ "${1:-}" = --run-phase ]; then
  "phase_$2"
  exit 0
fi

if [ "${1:-}" = --install ]; then
  LLMGATE_SKIP_BUILD=1 LLMGATE_WITH_CLANG=1 tools/setup.sh
  exit 0
fi

phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(asan tsan fuzz)
for p in "${phases[@]}"; do
  case $p in
    asan | tsan | fuzz) ;;
    *) echo "ci-sanitize: unknown phase '$p' (phases: asan tsan fuzz)" >&2; exit 2 ;;
  esac
done

results=()
failed=0
for p in "${phases[@]}"; do
  limit=$(phase_timeout "$p")
  echo "ci-sanitize: == $p (time limit ${limit}s)"
  start=$SECONDS
  rc=0
  # timeout(1) signals the phase's whole process group (ninja, ctest, fuzzers).
  timeout --kill-after=30 "$limit" "$self" --run-phase "$p" || rc=$?
  elapsed=$((SECONDS - start))
  if [ "$rc" -eq 0 ]; then
    status=ok
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    status="FAILED (time limit ${limit}s reached)"
  else
    status="FAILED (exit $rc)"
  fi
  [ "$rc" -eq 0 ] || failed=1
  line=$(printf '%-5s %5ds  %s' "$p" "$elapsed" "$status")
  echo "ci-sanitize: $line"
  results+=("$line")
done

echo "ci-sanitize: summary"
printf '  %s\n' "${results[@]}"
exit "$failed"
