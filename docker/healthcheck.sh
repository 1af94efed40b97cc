#!/bin/bash
# The container's HEALTHCHECK: GET /healthz on the bridge's own HTTP listener, healthy on 200.
#
# The image has no curl or wget; bash's /dev/tcp does the request. The port is taken from
# MCPMQTT_HTTP_LISTEN (set by the image) so a changed listen address is followed; the request
# goes to 127.0.0.1 with Host: localhost, which the bridge accepts without allowed_hosts.
#
#   healthcheck [PATH]        PATH defaults to /healthz (/readyz: also the broker connection)
#
# Environment: MCPMQTT_HTTP_LISTEN (HOST:PORT, default 127.0.0.1:8080),
# MCPMQTT_HEALTHCHECK_TIMEOUT_S (seconds to wait for the status line, default 5).
set -euo pipefail

listen="${MCPMQTT_HTTP_LISTEN:-127.0.0.1:8080}"
port="${listen##*:}"
path="${1:-/healthz}"
timeout_s="${MCPMQTT_HEALTHCHECK_TIMEOUT_S:-5}"

if [[ ! "$port" =~ ^[0-9]+$ ]]; then
  echo "healthcheck: cannot take a port from MCPMQTT_HTTP_LISTEN=\"$listen\"" >&2
  exit 2
fi
# The group keeps bash's own "connection refused" lines out of the health log.
if ! { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; then
  echo "healthcheck: nothing accepts connections on 127.0.0.1:$port" >&2
  exit 1
fi
printf 'GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' "$path" >&3
status_line=""
IFS= read -r -t "$timeout_s" status_line <&3 || true
status_line="${status_line%$'\r'}"
if [[ "$status_line" =~ ^HTTP/1\.[01]\ 200([[:space:]]|$) ]]; then
  exit 0
fi
echo "healthcheck: GET $path on 127.0.0.1:$port answered \"${status_line:-nothing within ${timeout_s} s}\"" >&2
exit 1
