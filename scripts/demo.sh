#!/usr/bin/env bash
# README command 1: installs what is missing, builds, starts a Mosquitto on loopback and runs the
# bridge against it in the foreground. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/build.sh release >/dev/null

workdir=$(mktemp -d /tmp/mcp-mqtt-bridge-demo.XXXXXX)
port=1883
if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 18830)
fi
cat > "$workdir/mosquitto.conf" <<CONF
listener $port 127.0.0.1
allow_anonymous true
persistence false
CONF
mosquitto -c "$workdir/mosquitto.conf" >"$workdir/mosquitto.log" 2>&1 &
broker=$!
trap 'kill $broker 2>/dev/null; rm -rf "$workdir"' EXIT
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
echo "Mosquitto listening on mqtt://127.0.0.1:$port (log: $workdir/mosquitto.log)" >&2

./build/daemon/mcp-mqtt-bridge --config config/bridge.example.jsonc --broker "mqtt://127.0.0.1:$port"
