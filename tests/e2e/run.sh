#!/usr/bin/env bash
# Runs a node end-to-end test file (default: the OpenAI SDK tests).
# Usage: run.sh BUILD_BIN_DIR [TEST_FILE.mjs]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export LLMGATE_BIN_DIR=$(cd "$1" && pwd)
cd "$here"
# Every dependency package.json names (the SDKs the tests drive as clients).
for dep in $(node -p 'Object.keys(require("./package.json").dependencies).join(" ")'); do
  if [ ! -d "node_modules/$dep" ]; then
    npm install --no-audit --no-fund --loglevel=error >/dev/null
    break
  fi
done
exec node --test --test-reporter=spec "${2:-openai_sdk.test.mjs}"
