#!/usr/bin/env bash
# The soak: mixed MCP traffic through real bridges and Mosquitto on loopback while
# the broker, egress children, the HTTP ingress and stdio ingress processes are killed on a
# schedule; every request is accounted for (result, error, never unanswered) and the egress's
# RSS and descriptors are checked for drift. Prints a table; exits non-zero on any unanswered
# request or drift past the bounds. The driver is tests/node/soak.mjs (the official SDK client).
#
#   scripts/soak.sh                 10 minutes
#   scripts/soak.sh --minutes N
#   scripts/soak.sh --seconds N     (the CI variant: --seconds 60)
#   options after those go to the driver (--fault-every-s N, --workdir DIR)
#
# Needs a release build (build/: mcp-mqtt-bridge and mcp_test_server) and Mosquitto.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=600
extra=()
while (( $# )); do
  case "$1" in
    --minutes) seconds=$(( $2 * 60 )); shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) extra+=("$1"); shift ;;
  esac
done
build=${MCPMQTT_BUILD_DIR:-$root/build}
bridge=$build/daemon/mcp-mqtt-bridge
server=$build/tests/servers/mcp_test_server
for f in "$bridge" "$server"; do
  [[ -x $f ]] || { echo "soak.sh: $f is missing: build it first (scripts/build.sh release --target mcp-mqtt-bridge --target mcp_test_server)" >&2; exit 2; }
done
mosquitto=$(command -v mosquitto || echo /usr/sbin/mosquitto)
node=$("$root/scripts/setup-node.sh")
exec "$node" "$root/tests/node/soak.mjs" --bridge "$bridge" --server "$server" \
  --mosquitto "$mosquitto" --seconds "$seconds" "${extra[@]}"
