#!/usr/bin/env bash
# README command 1: installs what is missing, builds, starts a Mosquitto on loopback and runs the
# bridge against it in the foreground, publishing the MCP reference server (server-everything,
# pinned in tests/node and run with the pinned Node, so nothing is fetched at run time), and serves
# Streamable HTTP on 127.0.0.1:8080 (or a free port), printing the URL to point a client at.
# Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --demo   # --demo: npm too, to fetch the pinned example server
# Only the daemon: the tests are built by the test command.
scripts/build.sh release --target mcp-mqtt-bridge >/dev/null
node=$(scripts/setup-node.sh)
everything="$PWD/tests/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

workdir=$(mktemp -d /tmp/mcp-mqtt-bridge-demo.XXXXXX)
port=1883
if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
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

http_port=8080
if (exec 3<>/dev/tcp/127.0.0.1/$http_port) 2>/dev/null; then
  http_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fi

cat > "$workdir/bridge.jsonc" <<CONF
{
  "mqtt": { "url": "mqtt://127.0.0.1:$port" },
  "http": { "listen": "127.0.0.1:$http_port" },
  "ingress": { "default_server": "demo/everything" },
  "mcpServers": {
    "demo/everything": {
      "command": "$node",
      "args": ["$everything", "stdio"],
      "description": "The MCP reference server (tools, resources, prompts)"
    }
  }
}
CONF
cat >&2 <<MSG
Mosquitto: mqtt://127.0.0.1:$port (log: $workdir/mosquitto.log)
Published on MQTT: demo/everything — see its presence with
  mosquitto_sub -V 5 -p $port -t '\$mcp-server/presence/+/#' -v

Point a Streamable HTTP MCP client at:
  http://127.0.0.1:$http_port/mcp                       (demo/everything, over MQTT)
  http://127.0.0.1:$http_port/servers/{server-name}/mcp (any server on the broker)
  http://127.0.0.1:$http_port/servers                   (the servers online now)
For example: npx @modelcontextprotocol/inspector, transport "Streamable HTTP", that URL.
MSG
# As the systemd unit and the image run it: the heap on transparent huge pages.
GLIBC_TUNABLES=glibc.malloc.hugetlb=1 ./build/daemon/mcp-mqtt-bridge --config "$workdir/bridge.jsonc"
