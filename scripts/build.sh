#!/usr/bin/env bash
# Configures and builds one flavour of the project.
#
#   scripts/build.sh            release build in build/
#   scripts/build.sh asan       AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
#   scripts/build.sh tsan       ThreadSanitizer build in build-tsan/
#   scripts/build.sh release --target mcp-mqtt-bridge
#                               only that target (and what it needs); other arguments go to cmake
#
# Compiles go through ccache when it is installed (MCPMQTT_CCACHE, CONTRIBUTING.md "Builds"): its
# cache is CCACHE_DIR if set, else ccache's default, ~/.cache/ccache; clones in different folders
# share it. integration_tests holds every integration test file unless
# -DMCPMQTT_INTEGRATION_FILES=release is given (the test command's release tier).
set -euo pipefail
cd "$(dirname "$0")/.."

flavour="${1:-release}"
case "$flavour" in
  release) dir=build; extra=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  asan)    dir=build-asan; extra=(-DCMAKE_BUILD_TYPE=Debug -DMCPMQTT_SANITIZE=address,undefined) ;;
  # Optimised: ThreadSanitizer makes everything 5-15 times slower already.
  tsan)    dir=build-tsan; extra=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCPMQTT_SANITIZE=thread) ;;
  *) echo "usage: $0 [release|asan|tsan]" >&2; exit 2 ;;
esac
configure=(-DMCPMQTT_INTEGRATION_FILES=all)
targets=()
shift || true
while (( $# )); do
  case "$1" in
    --target) targets+=(--target "$2"); shift 2 ;;
    *) configure+=("$1"); shift ;;
  esac
done
cmake -S . -B "$dir" -G Ninja -DMCPMQTT_WERROR=ON "${extra[@]}" "${configure[@]}"
# Two compile jobs at most: each Beast/Asio translation unit takes close to 1 GiB.
cmake --build "$dir" --parallel "${MCPMQTT_BUILD_JOBS:-2}" "${targets[@]}"
