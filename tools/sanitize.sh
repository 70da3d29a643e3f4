#!/usr/bin/env bash
# Builds the suite with clang-14 ASan+UBSan (LeakSanitizer on) into
# build-asan/ and runs the GoogleTest binaries under it.
#   tools/sanitize.sh
#   LLMGATE_BUILD_ONLY=1 tools/sanitize.sh   # install and build only (CI's background build)
set -euo pipefail
cd "$(dirname "$0")/.."
LLMGATE_SKIP_BUILD=1 LLMGATE_WITH_CLANG=1 tools/setup.sh
# Only what runs below: the GoogleTest binaries (not the gateway, the tools,
# the benchmarks or the end-to-end tests' binaries).
binaries=(gateway_tests integration_tests conformance_tests security_tests routing_tests
          providers_tests sim_tests config_tests)
# Under the build directory's lock: .ci/run builds it in the background while
# the test suite runs, and this waits for that build.
mkdir -p build-asan
exec 9>build-asan/.build.lock
flock 9
# Debug (-O0) with line tables only (-g1): reports keep file and line, the
# build is about 30% faster than with full debug information.
CC=clang-14 CXX=clang++-14 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DLLMGATE_SANITIZE=address,undefined >/dev/null
ninja -C build-asan -j "${JOBS:-$(nproc)}" "${binaries[@]}"
flock -u 9
[ "${LLMGATE_BUILD_ONLY:-0}" != 1 ] || exit 0
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Each binary in shards, not a process per test (ctest's): under ASan a
# process's start and LeakSanitizer's scan at its exit cost ~0.1 s, most of
# the phase for ~1,400 tests. One test under ASan:
#   ctest --test-dir build-asan --output-on-failure -R 'GatewayTest.Name'
tools/run-shards.sh build-asan "${binaries[@]}"
