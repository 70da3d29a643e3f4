#!/usr/bin/env bash
# Runs one node test file of the deployment-artifact suite (tests/deploy).
# Usage: run.sh BUILD_BIN_DIR TEST_FILE.mjs
# Installs the npm dependencies (package-lock.json) on first use.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export LLMGATE_BIN_DIR=$(cd "$1" && pwd)
export LLMGATE_SOURCE_DIR=$(cd "$here/../.." && pwd)
cd "$here"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi
exec node --test --test-reporter=spec "$2"
