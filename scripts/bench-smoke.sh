#!/usr/bin/env bash
# Every benchmark once at a tiny size, from an existing release build with the benchmarks
# (-DMCPMQTT_BUILD_BENCHMARKS=ON): proves they still build, run against a real Mosquitto and
# supergateway, and get every answer, event and delivery right (each exits non-zero when one
# goes missing). Not a measurement: the sizes are far too small for numbers (bench/README.md).
#
#   scripts/bench-smoke.sh [BUILD_DIR]    default build/ (the test command's release build)
#
# The test command runs it after the soak; scripts/bench.sh smoke runs it on build-bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
bin="$dir/bench"
failed=0

run() {
  local name=$1; shift
  local t0=$SECONDS rc=0
  "$bin/$name" "$@" >"$dir/bench-smoke-$name.log" 2>&1 || rc=$?
  if (( rc == 0 )); then
    echo "bench smoke: $name $* — ok ($(( SECONDS - t0 )) s)" >&2
  else
    echo "bench smoke: $name $* — FAILED (exit $rc); its output:" >&2
    tail -n 40 "$dir/bench-smoke-$name.log" >&2
    failed=1
  fi
}

run bench_relay --requests 2000
run bench_jwt --tokens 20 --runs 1
# Latency, throughput, sessions and payload, both engines, Mosquitto as shipped; supergateway's
# column too (its Node peers are in tests/node).
run bench_compare --only 1,2,3,4 --engines native,paho --brokers default --requests 40 \
  --latency-cap-s 5 --seconds 1 --concurrency 4 --sessions 40 --paho-sessions 40 \
  --idle-seconds 1 --payload-kib 64
# Scenario 1 with OAuth at the ingress (an issuer in-process; every series must get its answers).
run bench_compare --only 1 --engines native --brokers default --requests 40 --oauth RS256,ES256
# Scenario 1 through ingress replicas: every call relayed from one replica to another answered.
run bench_compare --only 1 --engines native --brokers default --requests 40 --replicas 2025
# Scenario 1 with every process on one CPU, and the replicas' interleaved floor on the way.
run bench_compare --only 1 --engines native --brokers default --requests 40 --replicas 2025 \
  --cpus one
run bench_fanout --streams 40 --per-session 10 --updates 3 --interval-ms 50
run bench_fanout --mode sessions --streams 20 --updates 3 --interval-ms 50
run bench_modern --seconds 1 --rounds 1 --requests 40 --concurrency 4
run bench_webhooks --registrations 20 --events 3
exit $failed
