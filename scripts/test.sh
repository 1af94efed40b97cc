#!/usr/bin/env bash
# README command 2: installs what is missing, builds the release and the ASan+UBSan flavours,
# and runs every test tier in both. Ends non-zero on any failure. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# Each phase says when it ends and what it cost, so a slow CI run shows where its time went.
phase_start=$start
phase_done() {
  local now; now=$(date +%s)
  echo "--- $1: $(( now - phase_start )) s (total $(( now - start )) s)" >&2
  phase_start=$now
}

scripts/install-deps.sh --test
phase_done "install"
# Everything the tests need is installed now: a test that finds a tool or prerequisite missing
# fails instead of warning and passing (tests/support/prerequisite.hpp).
export MCPMQTT_REQUIRE_TOOLS=1

status=0
# A formatting slip fails the run but does not hide what the tests say.
scripts/check-format.sh || status=1
phase_done "format"
for flavour in release asan; do
  scripts/build.sh "$flavour"
  phase_done "build ($flavour)"
  dir=build; [[ $flavour == asan ]] && dir=build-asan
  echo "=== tests ($flavour) ===" >&2
  # Integration tests start their own brokers on free ports, so they may run side by side.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$dir" --output-on-failure --parallel "${MCPMQTT_TEST_JOBS:-2}" \
    || status=1
  for label in unit integration; do
    n=$(ctest --test-dir "$dir" -N -L "^${label}\$" | sed -n 's/^Total Tests: //p')
    echo "$flavour: $n $label tests" >&2
  done
  phase_done "tests ($flavour)"
done

# The soak's CI variant (README, Reliability): 60 s of mixed traffic through the release build
# while the broker, children and ingress processes are killed; every request accounted for.
scripts/soak.sh --seconds 60 || status=1
phase_done "soak"

# ThreadSanitizer: the unit tests (the core's code under the loop, the Paho engine's gate and its
# callback threads, the I/O threads of the test support). The whole integration tier under TSan
# is a separate command (README, Development): it does not fit CI's time beside the two builds.
scripts/build.sh tsan --target unit_tests
phase_done "build (tsan)"
echo "=== tests (tsan) ===" >&2
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir build-tsan --output-on-failure --parallel "${MCPMQTT_TEST_JOBS:-2}" -L '^unit$' \
    -E 'test names are safe|includes keep the layers|layer check' || status=1
phase_done "tests (tsan)"

# The image for real: podman builds docker/Dockerfile and the broker's image, runs the services
# of docker/compose.yaml, and an MCP SDK client on the host uses them (tests/deploy/
# container.test.mjs). Alone on the machine's cores, after the ctest runs.
scripts/container.sh test || status=1
phase_done "container"

# Every libFuzzer target (clang++, ASan+UBSan), each for MCPMQTT_FUZZ_SECONDS: about 5 minutes.
scripts/fuzz.sh || status=1
phase_done "fuzz"

echo "test command finished in $(( $(date +%s) - start )) s with status $status" >&2
exit $status
