#!/usr/bin/env bash
# Builds the MQTT codec's libFuzzer targets (tests/fuzz) with clang++ and ASan+UBSan into
# build-fuzz/, then runs each on a copy of its committed corpus (tests/fuzz/corpus/<target>) for
# MCPMQTT_FUZZ_SECONDS (default 60), MCPMQTT_FUZZ_JOBS at a time (default: one per CPU).
# Ends non-zero on any crash, leak, timeout or sanitizer report; the input that caused it is
# kept in build-fuzz/artifacts/ and the run's log in build-fuzz/logs/. The repository's corpus
# is never modified: add an input to it by hand once what it found is fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

seconds=${MCPMQTT_FUZZ_SECONDS:-60}
parallel=${MCPMQTT_FUZZ_JOBS:-$(nproc)}
dir=build-fuzz
targets=(codec_stream codec_primitives codec_roundtrip)

# The rest of the tree is configured too (its packages are installed), but only the fuzz
# targets are built. RelWithDebInfo: fast enough to fuzz, symbols for the reports.
CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMCPMQTT_BUILD_TESTS=OFF -DMCPMQTT_BUILD_FUZZERS=ON -DMCPMQTT_WERROR=ON \
  -DMCPMQTT_SANITIZE=fuzzer-no-link,address,undefined >/dev/null
cmake --build "$dir" --target "${targets[@]/%/_fuzzer}" -j "$parallel"

rm -rf "$dir/corpus" "$dir/logs" "$dir/artifacts"
mkdir -p "$dir/corpus" "$dir/logs" "$dir/artifacts"

run() {
  local target=$1
  local corpus="$dir/corpus/$target" log="$dir/logs/$target.log"
  cp -r "tests/fuzz/corpus/$target" "$corpus"
  local before t0 rc=0
  before=$(find "$corpus" -type f | wc -l)
  t0=$(date +%s)
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$dir/tests/fuzz/${target}_fuzzer" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/$target-" "$corpus" >"$log" 2>&1 || rc=$?
  # Sanitizers are built not to recover, but a report that did not stop the run still fails it.
  if grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$log"; then
    (( rc != 0 )) || rc=1
  fi
  local execs rate
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  printf '%s: %s, %s execs (%s/s), corpus %s -> %s inputs, %s s\n' "$target" \
    "$([[ $rc == 0 ]] && echo ok || echo "FAILED (exit $rc)")" "${execs:-?}" "${rate:-?}" \
    "$before" "$(find "$corpus" -type f | wc -l)" "$(( $(date +%s) - t0 ))" >"$dir/logs/$target.summary"
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
