#!/usr/bin/env bash
# README command 2: installs what is missing, builds every flavour the tiers need and runs the
# tiers, cheapest evidence first. CI runs exactly this (.ci/run). Ends non-zero on any failure,
# after a table of the phases' seconds and a last line `N passed, N failed`.
#
#   scripts/test.sh                 stops after the first phase that fails (fail fast)
#   scripts/test.sh --keep-going    runs every phase whatever fails (also MCPMQTT_KEEP_GOING=1)
#
# The phases (CONTRIBUTING.md, "The test command", says what each costs and proves):
#   install, checks (format, layers), the ASan+UBSan build, ASan unit tests, ASan integration
#   tests (every integration test on the native engine; the engine contract and the fault suite
#   on Paho) while the release, TSan and fuzz builds run in the background, release tests (unit
#   tests, and the integration tests whose evidence needs optimised code), soak, TSan unit
#   tests, container, fuzz (every committed input replayed, then 60 s of new inputs).
# Compiles go through ccache (CONTRIBUTING.md, "Builds"): CCACHE_DIR if set, else ccache's own
# default (~/.cache/ccache), outside the clone.
set -euo pipefail
cd "$(dirname "$0")/.."

keep_going=${MCPMQTT_KEEP_GOING:-0}
case "${1:-}" in
  --keep-going) keep_going=1 ;;
  "") ;;
  *) echo "usage: $0 [--keep-going]" >&2; exit 2 ;;
esac

start=$(date +%s)
jobs=${MCPMQTT_TEST_JOBS:-2}
logs=build-logs
rm -rf "$logs"
mkdir -p "$logs"
passed=0
failed=0
status=0
phases=()
stopped=""

# Everything the tests need is installed by the first phase: a test that finds a tool or
# prerequisite missing fails instead of warning and passing (tests/support/prerequisite.hpp).
export MCPMQTT_REQUIRE_TOOLS=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# CPU seconds (user + system) of the processes this script has waited for, from bash's `times`
# (its second line: the children's), read in this shell: a subshell would count its own (the
# background builds do, each shell in a file of its own).
cpu_seconds() {
  local file="$logs/.times.$BASHPID"  # named here: inside $(…) BASHPID is another process's
  times >"$file"
  cpu_now=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/)
                           printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$file")
}

# phase NAME COMMAND…: runs one phase, records its seconds and its result. A phase that fails
# ends the run (fail fast) unless --keep-going; a phase after that is listed as not run. The CPU
# seconds beside the wall-clock ones show a machine busy with something else (wall clock well
# above CPU ÷ cores in a CPU-bound phase such as a build); processes in containers are not
# counted.
phase() {
  local name=$1; shift
  if [[ -n $stopped ]]; then
    phases+=("$(printf '%-26s %6s' "$name" "not run")")
    return 0
  fi
  echo "=== $name ===" >&2
  local t0 c0 rc=0
  t0=$(date +%s)
  cpu_seconds
  c0=$cpu_now
  "$@" || rc=$?
  cpu_seconds
  local secs=$(( $(date +%s) - t0 )) cpu=$(( cpu_now - c0 ))
  phases+=("$(printf '%-26s %6d s  (CPU %5d s)  %s' "$name" "$secs" "$cpu" \
              "$([[ $rc == 0 ]] && echo ok || echo "FAILED")")")
  echo "--- $name: $secs s, CPU $cpu s (total $(( $(date +%s) - start )) s)$([[ $rc == 0 ]] || echo ", FAILED")" >&2
  if (( rc != 0 )); then
    status=1
    (( keep_going )) || stopped=$name
  fi
  return 0
}

# check NAME COMMAND…: one check that is not a CTest test, counted as one test.
check() {
  local name=$1; shift
  if "$@"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAILED: $name" >&2
    return 1
  fi
}

# build FLAVOUR COMMAND…: one build, and what ccache made of it: its own compiles only, from a
# stats log of this build (ccache's counters are the whole cache's, which other builds share).
build() {
  local flavour=$1 rc=0
  shift
  local stats="$PWD/$logs/ccache-$flavour.log"
  rm -f "$stats"
  CCACHE_STATSLOG=$stats "$@" || rc=$?
  local hits misses
  hits=$(grep -cE '^(direct|preprocessed)_cache_hit$' "$stats" 2>/dev/null || true)
  misses=$(grep -cx 'cache_miss' "$stats" 2>/dev/null || true)
  hits=${hits:-0} misses=${misses:-0}
  echo "ccache ($flavour): $hits hits, $misses misses" \
       "($(( (hits + misses) ? 100 * hits / (hits + misses) : 0 ))% hits)" >&2
  return $rc
}

# tests NAME DIR CTEST-ARGS…: one ctest run; its tests counted from CTest's own summary.
tests() {
  local name=$1 dir=$2; shift 2
  local log="$logs/ctest-$name.log" rc=0
  ctest --test-dir "$dir" --output-on-failure --parallel "$jobs" "$@" 2>&1 | tee "$log" || rc=$?
  local line total nfailed
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true)
  if [[ -z $line ]]; then
    # CTest ended before its summary (no tests, or it could not start): one failure.
    failed=$((failed + 1))
    return 1
  fi
  total=${line##* }
  nfailed=$(sed -E 's/.* ([0-9]+) tests? failed.*/\1/' <<<"$line")
  passed=$((passed + total - nfailed))
  failed=$((failed + nfailed))
  echo "$name: $((total - nfailed)) of $total passed" >&2
  return $rc
}

# ---- phases, cheapest evidence first -------------------------------------------------------------

install() {
  scripts/install-deps.sh --test
  # The pinned Node peers (npm ci into tests/node/node_modules, from npm's cache on a machine
  # that has installed them before); CTest's fixture then finds them in place.
  scripts/setup-node.sh >/dev/null
}
phase "install" install

checks() {
  local rc=0
  check "format" scripts/check-format.sh || rc=1
  check "layers" scripts/check-layers.sh || rc=1
  check "layer check on seeded crossings" tests/check-layers-test.sh || rc=1
  return $rc
}
phase "checks (format, layers)" checks

# The layer checks ran above; CTest registers them too, for a developer's `ctest`.
no_checks='includes keep the layers|layer check reports seeded'

# The ASan build first, alone on the cores: the first tests need it. Only the targets each tier
# runs are built (`all` is the same for the first two).
phase "build (asan)" build asan scripts/build.sh asan --target unit_tests --target integration_tests

# The other flavours build in the background, one after the other, at the lowest CPU priority,
# while the ASan tests run: those mostly wait (on brokers, child processes, timeouts) and leave
# close to one of the two cores idle, which the builds take; a test that needs the CPU gets it
# first. Each build's output goes to build-logs/build-FLAVOUR.log and its seconds to the table
# (marked "overlapped"); each tier waits for its own build. A build that fails stops the run
# where its tier would start.
background_build() {
  local flavour=$1 rc=0 t0 c0
  shift
  t0=$(date +%s)
  cpu_seconds
  c0=$cpu_now
  build "$flavour" "$@" >"$logs/build-$flavour.log" 2>&1 || rc=$?
  cpu_seconds
  echo "$(( $(date +%s) - t0 )) $(( cpu_now - c0 )) $rc" >"$logs/build-$flavour.result"
  return $rc
}
background_builds() {
  renice -n 19 -p "$BASHPID" >/dev/null
  # The release tier's integration tests are those labelled integration-release: its
  # integration_tests program is built from the files that hold them (tests/CMakeLists.txt).
  background_build release scripts/build.sh release -DMCPMQTT_INTEGRATION_FILES=release \
      -DMCPMQTT_BUILD_BENCHMARKS=ON --target unit_tests --target integration_tests \
      --target mcp-mqtt-bridge --target mcp_test_server --target mcp_events_server \
      --target bench_relay --target bench_compare --target bench_fanout --target bench_modern \
      --target bench_webhooks --target bench_jwt --target bench_mqtt_echo_server &&
    background_build tsan scripts/build.sh tsan --target unit_tests &&
    background_build fuzz scripts/fuzz.sh --build-only
}
builds_pid=""
if [[ -z $stopped ]]; then
  # Started from a subshell that exits at once, so that the builds are not this shell's children:
  # their CPU seconds would otherwise land in the phase during which they end (bash's `times`).
  # Monitor mode gives them a process group of their own, which a failed run kills.
  (
    set -m
    background_builds </dev/null &
    echo $! >"$logs/builds.pid"
  )
  builds_pid=$(<"$logs/builds.pid")
fi
stop_builds() {
  [[ -n $builds_pid ]] && kill -TERM -- "-$builds_pid" 2>/dev/null || true
}
trap stop_builds EXIT

# build_done FLAVOUR: waits for the background build of FLAVOUR (or for the builds to end),
# then puts its row in the table; fails if it failed. A build that never started (an earlier one
# failed, which is already counted) is listed as not run, and the run still ends non-zero.
build_done() {
  local flavour=$1 name="build ($1)" result="$logs/build-$1.result"
  if [[ -n $stopped ]]; then
    phases+=("$(printf '%-26s %6s' "$name" "not run")")
    return 0
  fi
  local waited=$SECONDS
  while [[ ! -e $result ]] && kill -0 "$builds_pid" 2>/dev/null; do sleep 1; done
  waited=$(( SECONDS - waited ))
  if [[ ! -e $result ]]; then
    phases+=("$(printf '%-26s %6s' "$name" "not run (an earlier build failed)")")
    status=1
    (( keep_going )) || stopped=$name
    return 0
  fi
  local secs cpu rc
  read -r secs cpu rc <"$result"
  grep -h '^ccache' "$logs/build-$flavour.log" >&2 || true
  phases+=("$(printf '%-26s %6d s  (CPU %5d s)  %s' "$name" "$secs" "$cpu" \
              "$([[ $rc == 0 ]] && echo ok || echo "FAILED"), overlapped; waited for: $waited s")")
  echo "--- $name: $secs s, CPU $cpu s, overlapped (waited for $waited s; total $(( $(date +%s) - start )) s)$([[ $rc == 0 ]] || echo ", FAILED")" >&2
  if [[ $rc != 0 ]]; then
    tail -n 60 "$logs/build-$flavour.log" >&2 || true
    failed=$((failed + 1))
    status=1
    (( keep_going )) || stopped=$name
  fi
  return 0
}

phase "tests (asan unit)" tests asan-unit build-asan -L '^unit$' -E "$no_checks"
# Integration tests start their own brokers on free ports, so they may run side by side.
phase "tests (asan integration)" tests asan-integration build-asan -L '^integration'
[[ -z $stopped ]] || stop_builds

build_done release
phase "tests (release)" tests release build -L '^(unit|integration-release)$' -E "$no_checks"

# The soak's CI variant (README, Reliability): 60 s of mixed traffic through the release build
# while the broker, children and ingress processes are killed; every request accounted for.
phase "soak" check "soak" scripts/soak.sh --seconds 60

# Each benchmark once at a tiny size on the release build: they still run, and every answer,
# event and delivery arrives (not a measurement; bench/README.md has those).
phase "bench smoke" check "bench smoke" scripts/bench-smoke.sh build

# ThreadSanitizer: the unit tests (the core's code under the loop, the Paho engine's gate and its
# callback threads, the I/O threads of the test support). The whole integration tier under TSan
# is a separate command (CONTRIBUTING.md).
tsan_tests() {
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    tests tsan-unit build-tsan -L '^unit$' -E "test names are safe|$no_checks"
}
build_done tsan
phase "tests (tsan unit)" tsan_tests

# The image for real: podman builds docker/Dockerfile (reusing the base image and the layers of
# earlier runs on this machine) and the broker's and HAProxy's images, runs the services of
# docker/compose.yaml, then those of docker/compose.replicas.yaml, and an MCP SDK client on the
# host uses each (tests/deploy/container.test.mjs, replicas.test.mjs). Alone on the machine's
# cores, after the ctest runs.
phase "container" check "container tier" scripts/container.sh test

# Every libFuzzer target: each committed corpus input once, then new inputs for 60 s in all.
# Deeper fuzzing is scripts/fuzz.sh alone (CONTRIBUTING.md, "Fuzzing").
fuzz() {
  local rc=0
  scripts/fuzz.sh --ci || rc=$?
  local n_ok n_failed
  n_ok=$(grep -c ': ok,' build-fuzz/logs/*.summary 2>/dev/null | awk -F: '{ s += $2 } END { print s + 0 }')
  n_failed=$(grep -c ': FAILED' build-fuzz/logs/*.summary 2>/dev/null | awk -F: '{ s += $2 } END { print s + 0 }')
  passed=$((passed + n_ok))
  failed=$((failed + n_failed))
  (( rc == 0 || n_failed > 0 )) || failed=$((failed + 1))
  return $rc
}
build_done fuzz
phase "fuzz" fuzz

echo "=== summary ===" >&2
printf '%s\n' "${phases[@]}" >&2
[[ -z $stopped ]] || echo "stopped after '$stopped' failed (--keep-going runs every phase)" >&2
echo "test command finished in $(( $(date +%s) - start )) s with status $status" >&2
echo "$passed passed, $failed failed"
exit $status
