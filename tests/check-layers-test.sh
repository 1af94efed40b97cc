#!/usr/bin/env bash
# scripts/check-layers.sh on seeded trees: each crossing include is reported, the clean tree passes.
set -uo pipefail
check="$(cd "$(dirname "$0")/.." && pwd)/scripts/check-layers.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

seed() {  # seed NAME FILE INCLUDE: a tree with one file holding one include
  local dir="$tmp/$1"
  mkdir -p "$dir/$(dirname "$2")"
  printf '#include %s\n' "$3" >"$dir/$2"
  echo "$dir"
}
expect() {  # expect ok|fail NAME FILE INCLUDE
  local dir out rc
  dir=$(seed "$2" "$3" "$4")
  out=$("$check" --root "$dir" 2>&1); rc=$?
  if [[ $1 == ok && $rc -ne 0 ]] || [[ $1 == fail && $rc -eq 0 ]]; then
    echo "FAIL: $3 including $4: expected $1, got exit $rc: $out"
    fail=1
  elif [[ $1 == fail && $out != *"$3:1:"* ]]; then
    echo "FAIL: $3 including $4: the report does not name the file and line: $out"
    fail=1
  fi
}

expect ok   clean1 bridge/relay/splice.cpp '"bridge/relay/channel.hpp"'
expect ok   clean2 mqtt/x.cpp '"bridge/protocol/topics.hpp"'
expect ok   clean3 directions/x.cpp '"http/client_channel.hpp"'
expect ok   clean4 daemon/x.cpp '"directions/egress.hpp"'
expect ok   clean5 tests/x.cpp '"daemon/daemon.hpp"'
expect ok   clean6 bridge/modern/x.cpp '"bridge/relay/splice.hpp"'
expect ok   clean7 events/x.cpp '"http/client_connection.hpp"'
expect ok   clean8 mqtt/codec/x.cpp '<vector>'
expect ok   clean9 http/x.cpp '"auth/token.hpp"'
expect ok   clean10 daemon/x.cpp '"auth/token.hpp"'
expect ok   clean11 auth/x.cpp '"common/expected.hpp"'
expect ok   clean12 http/x.cpp '"loop/timer_list.hpp"'
expect ok   clean13 mqtt/native/x.cpp '"loop/timer_list.hpp"'
expect fail core1  bridge/relay/x.cpp '"mqtt/broker_connection.hpp"'
expect fail core2  bridge/relay/x.cpp '<boost/asio/io_context.hpp>'
expect fail core3  bridge/protocol/x.cpp '"config/config.hpp"'
expect fail core4  bridge/protocol/x.cpp '"bridge/modern/protocol.hpp"'
expect fail core5  bridge/jsonrpc/x.cpp '"bridge/relay/channel.hpp"'
expect fail core6  common/x.cpp '"bridge/jsonrpc/jsonrpc.hpp"'
expect fail core7  bridge/x.cpp '"common/log.hpp"'
expect fail core8  bridge/relay/x.cpp '<sqlite3.h>'
expect fail tr1    mqtt/x.hpp '"config/config.hpp"'
expect fail tr2    http/x.cpp '"mqtt/broker_options.hpp"'
expect fail tr3    stdio/x.cpp '"http/server_options.hpp"'
expect fail tr4    http/x.cpp '"directions/options.hpp"'
expect fail tr5    http/x.cpp '"events/webhooks.hpp"'
expect fail auth1  auth/x.cpp '"bridge/protocol/principal.hpp"'
expect fail auth2  auth/x.cpp '<boost/asio/io_context.hpp>'
expect fail auth3  bridge/relay/x.cpp '"auth/token.hpp"'
expect fail auth4  mqtt/x.cpp '"auth/token.hpp"'
expect fail codec1 mqtt/codec/x.cpp '"common/expected.hpp"'
expect fail codec2 mqtt/codec/x.cpp '<boost/asio/buffer.hpp>'
expect fail cfg1   config/x.cpp '"mqtt/engine.hpp"'
expect fail dir1   directions/x.cpp '"daemon/cli.hpp"'
expect fail dmn1   daemon/x.cpp '"mqtt/directory_observer.hpp"'
expect fail dmn2   daemon/x.cpp '"http/server_listener.hpp"'
expect fail dmn3   daemon/x.cpp '"stdio/child_channel.hpp"'
expect fail loop1  loop/x.cpp '"mqtt/engine.hpp"'
expect fail loop2  bridge/relay/x.cpp '"loop/timer_list.hpp"'
exit $fail
