#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz: the MQTT codec, JSON-RPC and the 2026-07-28
# vocabulary, the HTTP request rules and the real HTTP server, configuration loading, the topic
# scheme, access tokens and JWK Sets) with clang++ and ASan+UBSan into build-fuzz/, then runs
# them.
#
#   scripts/fuzz.sh               deeper fuzzing: each target for MCPMQTT_FUZZ_SECONDS (default
#                                 600) on a copy of its committed corpus (tests/fuzz/corpus/
#                                 <target>), MCPMQTT_FUZZ_JOBS at a time (default: one per CPU):
#                                 10 targets on 2 cores take 50 minutes
#   scripts/fuzz.sh --merge       the same, then the new inputs that add coverage are merged into
#                                 tests/fuzz/corpus/<target> (libFuzzer -merge=1), to be committed
#   scripts/fuzz.sh --ci          what the test command runs: every committed input of every
#                                 target once, then new inputs for MCPMQTT_FUZZ_CI_SECONDS in all
#                                 (default 60: each target gets its share of the CPUs' time)
#   scripts/fuzz.sh --build-only  configure and build the targets, nothing else
#
# Ends non-zero on any crash, leak, timeout or sanitizer report; the input that caused it is
# kept in build-fuzz/artifacts/ and the run's log in build-fuzz/logs/. A crash is never merged:
# add its input to the corpus by hand as regression-* once what it found is fixed.
#
# MCPMQTT_FUZZ_TARGETS="jsonrpc topics" runs only those.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

mode=deep
case "${1:-}" in
  --ci) mode=ci ;;
  --merge) mode=merge ;;
  --build-only) mode=build ;;
  "") ;;
  *) echo "usage: $0 [--ci|--merge|--build-only]" >&2; exit 2 ;;
esac
parallel=${MCPMQTT_FUZZ_JOBS:-$(nproc)}
dir=build-fuzz
read -r -a targets <<<"${MCPMQTT_FUZZ_TARGETS:-codec_stream codec_primitives codec_roundtrip jsonrpc \
  topics config http_headers http_server jwt jwks}"
if [[ $mode == ci ]]; then
  # The total is shared out: rounds of `parallel` targets, each round an equal slice.
  rounds=$(( (${#targets[@]} + parallel - 1) / parallel ))
  seconds=$(( ${MCPMQTT_FUZZ_CI_SECONDS:-60} / rounds ))
  (( seconds > 0 )) || seconds=1
else
  seconds=${MCPMQTT_FUZZ_SECONDS:-600}
fi

# The rest of the tree is configured too (its packages are installed), but only the fuzz
# targets (and the libraries they link) are built. RelWithDebInfo: fast enough to fuzz, symbols
# for the reports; without NDEBUG, so that assertions (ours, Beast's, RapidJSON's) hold too.
CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g" \
  -DMCPMQTT_BUILD_TESTS=OFF -DMCPMQTT_BUILD_FUZZERS=ON -DMCPMQTT_WERROR=ON \
  -DMCPMQTT_SANITIZE=fuzzer-no-link,address,undefined >/dev/null
# Two compile jobs at most: each Beast/Asio translation unit takes close to 1 GiB.
cmake --build "$dir" --target "${targets[@]/%/_fuzzer}" -j "${MCPMQTT_BUILD_JOBS:-2}"
[[ $mode != build ]] || exit 0

rm -rf "$dir/corpus" "$dir/logs" "$dir/artifacts"
mkdir -p "$dir/corpus" "$dir/logs" "$dir/artifacts"

# Options of one target. http_server runs the whole server per input, and each input touches
# some 20,000 coverage features: libFuzzer's entropic schedule then spends half the time
# reweighing them, so it is off there.
options_of() {
  case $1 in
    http_server) echo "-entropic=0" ;;
  esac
}

# One target under libFuzzer, its output appended to the target's log.
fuzzer() {
  local target=$1; shift
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$dir/tests/fuzz/${target}_fuzzer" -timeout=10 -rss_limit_mb=2048 $(options_of "$target") \
    -artifact_prefix="$dir/artifacts/$target-" "$@" </dev/null >>"$dir/logs/$target.log" 2>&1
}

run() {
  local target=$1
  local corpus="$dir/corpus/$target" log="$dir/logs/$target.log"
  cp -r "tests/fuzz/corpus/$target" "$corpus"
  local before t0 rc=0 replay=""
  before=$(find "$corpus" -type f | wc -l)
  t0=$(date +%s)
  : >"$log"
  if [[ $mode == ci ]]; then
    # Every committed input once, each by its name (a regression seed that fails says which).
    fuzzer "$target" -runs=1 "$corpus"/* || rc=$?
    replay="replayed $before inputs in $(( $(date +%s) - t0 )) s, "
  fi
  if (( rc == 0 )); then
    fuzzer "$target" -max_total_time="$seconds" -print_final_stats=1 "$corpus" || rc=$?
  fi
  if (( rc == 0 )) && [[ $mode == merge ]]; then
    # Only what adds coverage to the committed corpus goes into it.
    fuzzer "$target" -merge=1 "tests/fuzz/corpus/$target" "$corpus" || rc=$?
  fi
  # Sanitizers are built not to recover, but a report that did not stop the run still fails it.
  if grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$log"; then
    (( rc != 0 )) || rc=1
  fi
  local execs rate cov ft
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  # Edges and features covered, from libFuzzer's last status line.
  cov=$(sed -n 's/.* cov: \([0-9]*\) .*/\1/p' "$log" | tail -1)
  ft=$(sed -n 's/.* ft: \([0-9]*\) .*/\1/p' "$log" | tail -1)
  local merged=""
  [[ $mode != merge ]] || merged=", committed corpus now $(find "tests/fuzz/corpus/$target" -type f | wc -l)"
  printf '%s: %s, %s%s execs (%s/s), cov %s ft %s, corpus %s -> %s inputs%s, %s s\n' "$target" \
    "$([[ $rc == 0 ]] && echo ok || echo "FAILED (exit $rc)")" "$replay" "${execs:-?}" \
    "${rate:-?}" "${cov:-?}" "${ft:-?}" "$before" "$(find "$corpus" -type f | wc -l)" \
    "$merged" "$(( $(date +%s) - t0 ))" >"$dir/logs/$target.summary"
  echo "$rc" >"$dir/logs/$target.rc"
}

for target in "${targets[@]}"; do
  while (( $(jobs -rp | wc -l) >= parallel )); do wait -n || true; done
  run "$target" &
done
wait

status=0
for target in "${targets[@]}"; do
  cat "$dir/logs/$target.summary"
  if [[ $(cat "$dir/logs/$target.rc") != 0 ]]; then
    status=1
    echo "--- $target: end of $dir/logs/$target.log ---" >&2
    tail -n 60 "$dir/logs/$target.log" >&2
    find "$dir/artifacts" -name "$target-*" -printf 'input kept: %p\n' >&2
  fi
done
echo "fuzzing finished in $(( $(date +%s) - start )) s with status $status" >&2
exit $status
