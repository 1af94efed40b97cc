#!/usr/bin/env bash
# Fails on an #include that crosses the layers of the design (docs/design/architecture.md):
# which folder may include which, folder by folder, subfolders included.
#
#   common/            logging, metrics, Expected: nothing of ours
#   auth/              OAuth access tokens (JWS, JWK Sets, RFC 9068 claims), no I/O: common/
#   bridge/jsonrpc/    the JSON-RPC message model: common/
#   bridge/protocol/   the MCP over MQTT vocabulary (topics, names, events): bridge/jsonrpc/
#   bridge/relay/      channels, splices, stream routing, directory, subscription hub: the above
#   bridge/modern/     the MCP 2026-07-28 era (vocabulary, gateway, upstream adapter): the above
#   config/            the configuration model: common/, bridge/protocol/
#   loop/              Asio support the transports share (the per-io_context timer list): common/
#   mqtt/codec/        the MQTT 5.0 codec: the standard library only
#   mqtt/protocol/     the native engine's MQTT client protocol, no I/O: common/, mqtt/codec/
#   mqtt/ http/ stdio/ the transports: common/, bridge/, loop/ and themselves; never config/ or
#                      one another (mqtt/ may use its codec); http/ may use auth/
#   events/            webhooks (SQLite store, outbox, delivery over HTTP): common/, bridge/,
#                      auth/, http/
#   directions/        the four directions' wiring: everything above
#   daemon/            the process: common/, bridge/, auth/, config/ and directions/ — the
#                      transports only through directions/
#
# The core (bridge/, common/) and auth/ have no I/O library in them (no Asio, Beast, Paho or
# SQLite header).
# tests/ and bench/ may include anything. Run from anywhere; `--root DIR` checks another tree
# (the test of this script uses it on seeded mistakes).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ ${1:-} == --root ]]; then
  root="$(cd "$2" && pwd)"
fi
cd "$root"

core="common bridge/jsonrpc bridge/protocol bridge/relay bridge/modern"
# What each folder may include, as folders of this repository (a folder's own subfolders are
# listed where they may be included).
declare -A allowed=(
  [common]="common"
  [auth]="common auth"
  [bridge/jsonrpc]="common bridge/jsonrpc"
  [bridge/protocol]="common bridge/jsonrpc bridge/protocol"
  [bridge/relay]="common bridge/jsonrpc bridge/protocol bridge/relay"
  [bridge/modern]="$core"
  [config]="common bridge/protocol config"
  [loop]="common loop"
  [mqtt/codec]="mqtt/codec"
  [mqtt/protocol]="common mqtt/codec mqtt/protocol"
  [mqtt]="$core loop mqtt mqtt/codec mqtt/protocol"
  [http]="$core auth loop http"
  [stdio]="$core stdio"
  [events]="$core auth http events"
  [directions]="$core auth config loop mqtt mqtt/codec http stdio events directions"
  [daemon]="$core auth config directions daemon"
)
# The folder a path belongs to, for the rules above: bridge/ and mqtt/codec/ by subfolder.
folder_of() {
  case "$1" in
    bridge/*/*) local rest=${1#bridge/}; echo "bridge/${rest%%/*}" ;;
    mqtt/codec/*) echo mqtt/codec ;;
    mqtt/protocol/*) echo mqtt/protocol ;;
    */*) echo "${1%%/*}" ;;
    *) echo "" ;;
  esac
}
# Every top-level folder that holds sources of ours, so that an include of one is recognised.
ours="common|auth|bridge|config|loop|mqtt|http|stdio|events|directions|daemon|tests|bench"

status=0
while IFS= read -r file; do
  layer=$(folder_of "$file")
  [[ -n $layer && -n ${allowed[$layer]+x} ]] || {
    echo "$file:1: in no layer of scripts/check-layers.sh (a new folder? give it a rule)" >&2
    status=1
    continue
  }
  while IFS= read -r hit; do
    line=${hit%%:*}
    target=$(sed -E 's/^[^"]*"([^"]+)".*$/\1/' <<<"${hit#*:}")
    to=$(folder_of "$target")
    ok=0
    for a in ${allowed[$layer]}; do
      [[ $to == "$a" ]] && ok=1
    done
    if (( !ok )); then
      echo "$file:$line: $layer/ may not include $to/ (allowed: ${allowed[$layer]})" >&2
      status=1
    fi
  done < <(grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]+\"($ours)/" "$file" || true)
  # The codec and the protocol include no library at all.
  if [[ $layer == mqtt/codec || $layer == mqtt/protocol ]]; then
    while IFS= read -r hit; do
      echo "$file:${hit%%:*}: $layer/ is standard C++ only" >&2
      status=1
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+<(boost|mqtt|MQTT|rapidjson|spdlog|openssl|sqlite)' "$file" || true)
  fi
done < <(find common auth bridge config loop mqtt http stdio events directions daemon \
           \( -name '*.cpp' -o -name '*.hpp' \) 2>/dev/null | sort)

# The core and auth/ have no I/O library in them (style.md: protocol cores without I/O).
while IFS= read -r hit; do
  echo "$hit: the core (common/, bridge/) and auth/ have no I/O: no Asio, Beast, Paho or SQLite header" >&2
  status=1
done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+<(boost/asio|boost/beast|mqtt/|MQTT|sqlite3)' \
           --include='*.cpp' --include='*.hpp' common auth bridge 2>/dev/null || true)

if (( status )); then
  echo "check-layers: includes cross the layers (see the rules at the top of $0)" >&2
fi
exit $status
