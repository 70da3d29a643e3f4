#!/usr/bin/env bash
# Installs what llmgate needs to build and test on Debian 12, then builds.
# Idempotent: packages already present are not reinstalled.
#   tools/setup.sh            # install + build (build/bin/llmgate, build/bin/llmgate-sim)
#   LLMGATE_SKIP_BUILD=1 tools/setup.sh   # install only
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake ninja-build g++ ccache pkg-config
  libboost1.81-dev libboost-url1.81-dev libboost-json1.81-dev
  nlohmann-json3-dev libssl-dev prometheus-cpp-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev
  nodejs npm curl ca-certificates openssl
  prometheus  # promtool: the suite checks /metrics with it
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node may come from outside Debian's packages (as on the dev image): accept any node >= 18.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}")
  missing=("${missing[@]/npm}")
fi
read -r -a missing <<<"${missing[*]}"
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "${LLMGATE_SKIP_BUILD:-0}" != 1 ]; then
  BUILD_DIR=${BUILD_DIR:-build}
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} >/dev/null
  # Beast translation units need ~700 MB each with g++: two jobs fit anywhere.
  ninja -C "$BUILD_DIR" -j "${JOBS:-$(nproc)}"
fi
