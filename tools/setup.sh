#!/usr/bin/env bash
# Installs what llmgate needs to build and test on Debian 12, then builds.
# Idempotent: packages already present are not reinstalled.
#   tools/setup.sh            # install + build (build/bin/llmgate, build/bin/llmgate-sim)
#   LLMGATE_SKIP_BUILD=1 tools/setup.sh   # install only
#   LLMGATE_DEPS=build tools/setup.sh     # only the build packages, no test suite
#                                         # (the Dockerfile's build stage)
#   LLMGATE_DEPS=demo tools/setup.sh      # what tools/demo.sh needs: the build packages and
#                                         # curl; builds the gateway, the simulator and the
#                                         # load generator only (tools/test.sh builds the rest)
#   LLMGATE_WITH_CLANG=1 ...              # also clang-14 and its sanitizer runtimes
#                                         # (tools/sanitize.sh, tools/fuzz.sh, tools/ci-sanitize.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_PACKAGES=(
  cmake ninja-build g++ ccache pkg-config
  libboost1.81-dev libboost-url1.81-dev libboost-json1.81-dev
  nlohmann-json3-dev libssl-dev prometheus-cpp-dev libyaml-cpp-dev
)
TEST_PACKAGES=(
  libgtest-dev libgmock-dev
  nodejs npm curl ca-certificates openssl
  prometheus  # promtool: the suite checks /metrics with it
  redis-server  # shared_state: the scale-out test runs three gateways on a real Redis
  python3 python3-yaml  # the benchmark runners' unit tests (bench/*/test_*.py)
  chromium  # the console's browser test (headless, driven by npm playwright-core)
)
# LLMGATE_DEPS=all (default): build and test. LLMGATE_DEPS=build: the binaries
# only; the test suite is then not configured (-DLLMGATE_BUILD_TESTS=OFF).
BUILD_DIR=${BUILD_DIR:-build}
TARGETS=()  # none: all of them
case "${LLMGATE_DEPS:-all}" in
  all) PACKAGES=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}"); BUILD_TESTS=ON ;;
  build) PACKAGES=("${BUILD_PACKAGES[@]}"); BUILD_TESTS=OFF ;;
  demo)
    PACKAGES=("${BUILD_PACKAGES[@]}" curl ca-certificates)
    TARGETS=(llmgate llmgate-sim llmgate-loadgen)
    # A build directory the test suite configured keeps its tests (the
    # targets built here are the same either way).
    BUILD_TESTS=$(sed -n 's/^LLMGATE_BUILD_TESTS:BOOL=//p' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null ||
      true)
    BUILD_TESTS=${BUILD_TESTS:-OFF}
    ;;
  *) echo "setup: LLMGATE_DEPS must be 'all', 'build' or 'demo', not '${LLMGATE_DEPS}'" >&2; exit 2 ;;
esac

[ "${LLMGATE_WITH_CLANG:-0}" != 1 ] || PACKAGES+=(clang-14 libclang-rt-14-dev)

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
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} \
    -DLLMGATE_BUILD_TESTS=$BUILD_TESTS -DLLMGATE_WERROR=${LLMGATE_WERROR:-OFF} >/dev/null
  # Beast translation units need ~700 MB each with g++: two jobs fit anywhere.
  ninja -C "$BUILD_DIR" -j "${JOBS:-$(nproc)}" "${TARGETS[@]}"
fi
