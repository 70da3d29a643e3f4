#!/usr/bin/env bash
# Runs the OpenAI SDK end-to-end tests. Usage: run.sh BUILD_BIN_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export LLMGATE_BIN_DIR=$(cd "$1" && pwd)
cd "$here"
if [ ! -d node_modules/openai ]; then
  npm install --no-audit --no-fund --loglevel=error >/dev/null
fi
exec node --test --test-reporter=spec openai_sdk.test.mjs
