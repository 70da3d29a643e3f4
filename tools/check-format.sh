#!/usr/bin/env bash
# Checks that every C++ file in the repository is formatted with
# clang-format-14 and the repository's .clang-format (installs it if missing).
# Fix with: git ls-files '*.cpp' '*.h' | xargs clang-format-14 -i
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format-14 >/dev/null; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang-format-14 >/dev/null
fi
if ! git ls-files '*.cpp' '*.h' | xargs clang-format-14 --dry-run --Werror; then
  echo "check-format: the files above are not formatted (fix: git ls-files '*.cpp' '*.h' | xargs clang-format-14 -i)" >&2
  exit 1
fi
echo "check-format: $(git ls-files '*.cpp' '*.h' | wc -l) files formatted"
