#!/usr/bin/env bash
# Builds the suite with clang-14 ASan+UBSan (LeakSanitizer on) into
# build-asan/ and runs the GoogleTest binaries under it.
#   tools/sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."
LLMGATE_SKIP_BUILD=1 tools/setup.sh
for p in clang-14 libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" >/dev/null
done
CC=clang-14 CXX=clang++-14 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DLLMGATE_SANITIZE=address,undefined >/dev/null
# Only what runs below: the GoogleTest binaries (not the gateway, the tools,
# the benchmarks or the end-to-end tests' binaries).
ninja -C build-asan -j "${JOBS:-$(nproc)}" config_tests sim_tests providers_tests routing_tests \
  gateway_tests integration_tests conformance_tests security_tests
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan --output-on-failure -j 2 -L 'unit|integration|conformance|security'
