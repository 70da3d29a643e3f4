#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: unit and
# integration tests (GoogleTest) and the end-to-end test with the official
# OpenAI Node SDK, all through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
# The e2e test installs its npm dependencies (openai@6) on first run.
# Twice as many tests at once as there are cores (at most 8): most of the
# integration and end-to-end tests wait on timers and sockets, not the CPU.
# TEST_JOBS overrides it.
cores=$(nproc)
jobs=$((2 * cores < 8 ? 2 * cores : 8))
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${TEST_JOBS:-$jobs}" "$@"
