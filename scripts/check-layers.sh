#!/usr/bin/env bash
# Fails on an #include that crosses the layers of the design (README "Architecture"):
#
#   bridge/      the core (bridge/protocol/: the MCP over MQTT vocabulary): includes only bridge/,
#                and no I/O library (Asio, Beast, Paho)
#   config/      the configuration model: bridge/ and itself
#   mqtt/ http/ stdio/
#                the transports: bridge/ and themselves, never config/ or one another
#   directions/  the four directions' orchestration: the core, config/ and the transports
#   daemon/      the process: anything above
#
# tests/ and bench/ may include anything. Run from anywhere; `--root DIR` checks another tree
# (the test of this script uses it on seeded mistakes).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ ${1:-} == --root ]]; then
  root="$(cd "$2" && pwd)"
fi
cd "$root"

# What each layer may include, as folders of this repository.
declare -A allowed=(
  [bridge]="bridge"
  [config]="bridge config"
  [mqtt]="bridge mqtt"
  [http]="bridge http"
  [stdio]="bridge stdio"
  [directions]="bridge config mqtt http stdio directions"
  [daemon]="bridge config mqtt http stdio directions daemon"
)
# Every top-level folder that holds sources of ours, so that an include of one is recognised.
ours="bridge|config|mqtt|http|stdio|directions|daemon|tests|bench"

status=0
for layer in bridge config mqtt http stdio directions daemon; do
  [[ -d $layer ]] || continue
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    line=${rest%%:*}
    target=$(sed -E 's/^[^"]*"([^"/]+)\/.*$/\1/' <<<"${rest#*:}")
    ok=0
    for a in ${allowed[$layer]}; do
      [[ $target == "$a" ]] && ok=1
    done
    if (( !ok )); then
      echo "$file:$line: $layer/ may not include $target/ (allowed: ${allowed[$layer]})" >&2
      status=1
    fi
  done < <(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]+\"($ours)/" \
             --include='*.cpp' --include='*.hpp' "$layer" || true)
done

# The core has no I/O library in it (style.md: protocol cores without I/O).
while IFS= read -r hit; do
  echo "$hit: bridge/ is the core without I/O: no Asio, Beast or Paho header" >&2
  status=1
done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+<(boost/asio|boost/beast|mqtt/|MQTT)' \
           --include='*.cpp' --include='*.hpp' bridge 2>/dev/null || true)

if (( status )); then
  echo "check-layers: includes cross the layers (see the rules at the top of $0)" >&2
fi
exit $status
