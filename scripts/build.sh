#!/usr/bin/env bash
# Configures and builds one flavour of the project.
#
#   scripts/build.sh            release build in build/
#   scripts/build.sh asan       AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."

flavour="${1:-release}"
case "$flavour" in
  release) dir=build; extra=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  asan)    dir=build-asan; extra=(-DCMAKE_BUILD_TYPE=Debug -DMCPMQTT_SANITIZE=address,undefined) ;;
  *) echo "usage: $0 [release|asan]" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" -G Ninja -DMCPMQTT_WERROR=ON "${extra[@]}" "${@:2}"
# Two compile jobs at most: each Beast/Asio translation unit takes close to 1 GiB.
cmake --build "$dir" --parallel "${MCPMQTT_BUILD_JOBS:-2}"
