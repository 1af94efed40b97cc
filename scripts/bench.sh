#!/usr/bin/env bash
# The benchmarks: installs what is missing, builds a release build with them (build-bench/),
# as optimised as the release build (-O2; GCC 12 warns falsely at -O3), and runs each, printing one table per benchmark. Arguments go to every benchmark.
#
#   scripts/bench.sh                         the fan-out benchmark at 1,000 and 10,000 streams
#   scripts/bench.sh --streams 500           smaller runs
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCPMQTT_BUILD_BENCHMARKS=ON \
  -DMCPMQTT_WERROR=ON >/dev/null
cmake --build build-bench --parallel "${MCPMQTT_BUILD_JOBS:-2}" \
  --target bench_fanout mcp-mqtt-bridge mcp_test_server
echo "== fan-out: one resource update → N subscriptions/listen streams over HTTP (issue 7) =="
build-bench/bench/bench_fanout "$@"
