#!/usr/bin/env bash
# The benchmarks: installs what is missing, builds a release build with them (build-bench/,
# as optimised as the release build: -O2; GCC 12 warns falsely at -O3) and runs each, printing
# one table per benchmark. Results and method: bench/README.md.
#
#   scripts/bench.sh                          every benchmark, full size (about 14 minutes)
#   scripts/bench.sh compare [ARGS…]          the bridge against the floor and supergateway, per
#                                             MQTT engine and broker set-up (about 7 minutes)
#   scripts/bench.sh fanout [ARGS…]           the fan-out to 1,000 and 10,000 listen streams, then
#                                             one event to 1,000 subscribed sessions (in-band)
#   scripts/bench.sh modern [ARGS…]           MCP 2026-07-28 requests against 2025 session ones
#                                             through the same bridge (about 2 minutes)
#   scripts/bench.sh webhooks [ARGS…]         events to 1,000 webhook registrations, outbox on
#                                             disk (about 1 minute)
#   scripts/bench.sh relay [ARGS…]            the relay core's own cost per request, no I/O
#                                             (seconds; under callgrind for instruction counts)
#   scripts/bench.sh jwt [ARGS…]              validating an access token with a cached JWK Set,
#                                             per algorithm, no I/O (under a minute)
#   scripts/bench.sh smoke                    each of them once at a tiny size, failing when an
#                                             answer, event or delivery goes missing (about 2
#                                             minutes; the test command runs it on build/)
#
# e.g. scripts/bench.sh compare --only 1,2 --requests 500,
#      scripts/bench.sh compare --only 3 --engines native --brokers default (one cell),
#      scripts/bench.sh fanout --streams 500
set -euo pipefail
cd "$(dirname "$0")/.."
which=all
case "${1:-}" in
  compare | fanout | modern | webhooks | relay | jwt | smoke)
    which=$1
    shift
    ;;
  "") ;;
  *)
    echo "usage: scripts/bench.sh [compare|fanout|modern|webhooks|relay|jwt [ARGS…]|smoke]" >&2
    exit 2
    ;;
esac
scripts/install-deps.sh --test
scripts/setup-node.sh >/dev/null  # supergateway and the Node it runs on (tests/node)
cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCPMQTT_BUILD_BENCHMARKS=ON \
  -DMCPMQTT_WERROR=ON >/dev/null
cmake --build build-bench --parallel "${MCPMQTT_BUILD_JOBS:-2}" \
  --target bench_fanout bench_compare bench_modern bench_webhooks bench_relay bench_jwt \
  bench_mqtt_echo_server mcp-mqtt-bridge mcp_test_server mcp_events_server
[[ $which != smoke ]] || exec scripts/bench-smoke.sh build-bench
if [[ $which == all || $which == compare ]]; then
  echo "== the bridge against the floor and supergateway, per MQTT engine and broker: latency, throughput, sessions, payload =="
  build-bench/bench/bench_compare "$@"
fi
if [[ $which == all || $which == fanout ]]; then
  if [[ " $* " == *" --mode "* ]]; then
    build-bench/bench/bench_fanout "$@"
  else
    echo "== fan-out: one resource update → N subscriptions/listen streams over HTTP =="
    build-bench/bench/bench_fanout "$@"
    echo "== fan-out: one event:// update → 1,000 sessions subscribed in-band (SEP-1803) =="
    build-bench/bench/bench_fanout --mode sessions
  fi
fi
if [[ $which == all || $which == modern ]]; then
  echo "== MCP 2026-07-28 requests against 2025 session requests through the same bridge =="
  build-bench/bench/bench_modern "$@"
fi
if [[ $which == all || $which == webhooks ]]; then
  echo "== webhooks: events of one server to 1,000 registrations, outbox on disk =="
  build-bench/bench/bench_webhooks "$@"
fi
if [[ $which == all || $which == relay ]]; then
  echo "== the relay core: one splice, request/response pairs in memory =="
  build-bench/bench/bench_relay "$@"
fi
if [[ $which == all || $which == jwt ]]; then
  echo "== access tokens: parse_token + verify with a cached JWK Set, per algorithm =="
  build-bench/bench/bench_jwt "$@"
fi
