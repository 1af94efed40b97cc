#!/usr/bin/env bash
# Installs what building, running and testing mcp-mqtt-bridge needs on Debian 12 (bookworm),
# skipping what is already there. Run as root. Used by the README commands, CI and the image.
#
#   scripts/install-deps.sh            build and run dependencies
#   scripts/install-deps.sh --test     also what the tests need (Node.js peers, linters)
set -euo pipefail

want_test=0
[[ "${1:-}" == "--test" ]] && want_test=1

packages=(
  build-essential cmake ninja-build pkg-config
  libboost-dev libboost-system-dev libpaho-mqttpp-dev libpaho-mqtt-dev rapidjson-dev
  libspdlog-dev libssl-dev libsystemd-dev catch2
  mosquitto mosquitto-clients ca-certificates
)
if (( want_test )); then
  # openssl: test certificates; systemd: systemd-analyze verify; clang-format: style check;
  # nodejs/npm: fetch the pinned MCP peers (SDK, conformance suite, Node 22) from npm.
  packages+=(openssl systemd clang-format)
  command -v npm >/dev/null || packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} )); then
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
