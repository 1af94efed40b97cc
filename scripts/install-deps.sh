#!/usr/bin/env bash
# Installs what building, running and testing mcp-mqtt-bridge needs on Debian 12 (bookworm),
# skipping what is already there. Run as root. Used by the README commands, CI and the image.
#
#   scripts/install-deps.sh            build and run dependencies
#   scripts/install-deps.sh --test     also what the tests need (Node.js peers, linters)
#   scripts/install-deps.sh --demo     build dependencies and npm (README command 1 fetches the
#                                      pinned example server with it)
#   scripts/install-deps.sh --runtime  only what the built daemon needs to run, and Node.js for
#                                      npx-launched MCP servers (the container's runtime stage)
#   scripts/install-deps.sh --container  what scripts/container.sh needs to build the image and
#                                      run it with a broker: podman and its helpers, debootstrap
#   add --print to any of these to list the packages instead of installing them
set -euo pipefail

mode="build"
print=0
for arg in "$@"; do
  case "$arg" in
    --test) mode="test" ;;
    --runtime) mode="runtime" ;;
    --container) mode="container" ;;
    --demo) mode="demo" ;;
    --print) print=1 ;;
    *) echo "usage: $0 [--test|--runtime|--container|--demo] [--print]" >&2; exit 2 ;;
  esac
done

if [[ $mode == container ]]; then
  # podman with runc (crun refuses some machines' cgroup setup); netavark and aardvark-dns for
  # the compose network and its service names, iptables for netavark's NAT and published ports;
  # catatonit for `init: true`; debootstrap makes the pinned Debian base image locally (nothing
  # is pulled from a container registry); python3-yaml reads compose.yaml
  # (scripts/compose-podman.py).
  packages=(
    podman runc netavark aardvark-dns iptables catatonit debootstrap python3 python3-yaml
  )
elif [[ $mode == runtime ]]; then
  # The shared libraries the daemon links against (a test compares this list with what `ldd`
  # finds in the built binary, so it cannot fall behind), CA certificates for mqtts:// and
  # https:// upstreams, bash for the container's health check, and Node.js with npm for
  # servers started with `npx`.
  packages=(
    libc6 libgcc-s1 libstdc++6
    libpaho-mqtt1.3 libpaho-mqttpp3-1 libssl3 libspdlog1.10 libfmt9 libboost-system1.74.0
    libsqlite3-0
    ca-certificates bash
    nodejs npm
  )
else
  # ccache: compiles that an earlier build (any clone's, or the image's) made already are not
  # made again (CONTRIBUTING.md, "Builds").
  packages=(
    build-essential cmake ninja-build pkg-config ccache
    libboost-dev libboost-system-dev libpaho-mqttpp-dev libpaho-mqtt-dev rapidjson-dev
    libspdlog-dev libssl-dev libsystemd-dev libsqlite3-dev catch2
    mosquitto mosquitto-clients ca-certificates
  )
  if [[ $mode == test ]]; then
    # openssl: test certificates; systemd: systemd-analyze verify; clang-format: style check;
    # nodejs/npm: fetch the pinned MCP peers (SDK, conformance suite, Node 22) from npm;
    # python3 with python3-prometheus-client: the Prometheus project's own parser reads
    # GET /metrics in a test;
    # clang and libclang-rt-14-dev (libFuzzer, ASan, UBSan): scripts/fuzz.sh;
    # ejabberd: a second MQTT 5 broker beside Mosquitto, its mod_mqtt (tests/support/ejabberd.hpp
    # starts a private node per test; the package's own service is not used).
    packages+=(openssl systemd clang-format python3 python3-prometheus-client clang libclang-rt-14-dev
               haproxy ejabberd)
    command -v npm >/dev/null || packages+=(nodejs npm)
  elif [[ $mode == demo ]]; then
    # python3: scripts/demo.sh picks free ports with it.
    packages+=(python3)
    command -v npm >/dev/null || packages+=(nodejs npm)
  fi
fi

if (( print )); then
  printf '%s\n' "${packages[@]}"
  exit 0
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
  # The package enables a system ejabberd whose configuration listens for MQTT on port 1883 (the
  # tests start private nodes and never use it): one installed here is stopped and disabled.
  if [[ " ${missing[*]} " == *" ejabberd "* && -d /run/systemd/system ]]; then
    systemctl disable --now ejabberd >/dev/null 2>&1 || true
  fi
fi
