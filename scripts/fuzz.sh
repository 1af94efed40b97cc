#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz: the MQTT codec, JSON-RPC and the 2026-07-28
# vocabulary, the HTTP request rules and the real HTTP server, configuration loading, the topic
# scheme) with clang++ and ASan+UBSan into build-fuzz/, then runs each on a copy of its committed
# corpus (tests/fuzz/corpus/<target>) for MCPMQTT_FUZZ_SECONDS (default 30), MCPMQTT_FUZZ_JOBS
# at a time (default: one per CPU). With 8 targets on 2 cores the runs take 2 minutes.
# Ends non-zero on any crash, leak, timeout or sanitizer report; the input that caused it is
# kept in build-fuzz/artifacts/ and the run's log in build-fuzz/logs/. The repository's corpus
# is never modified: add an input to it by hand once what it found is fixed.
#
# MCPMQTT_FUZZ_TARGETS="jsonrpc topics" runs only those.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

seconds=${MCPMQTT_FUZZ_SECONDS:-30}
parallel=${MCPMQTT_FUZZ_JOBS:-$(nproc)}
dir=build-fuzz
read -r -a targets <<<"${MCPMQTT_FUZZ_TARGETS:-codec_stream codec_primitives codec_roundtrip jsonrpc \
  topics config http_headers http_server}"

# The rest of the tree is configured too (its packages are installed), but only the fuzz
# targets (and the libraries they link) are built. RelWithDebInfo: fast enough to fuzz, symbols
# for the reports; without NDEBUG, so that assertions (ours, Beast's, RapidJSON's) hold too.
CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g" \
  -DMCPMQTT_BUILD_TESTS=OFF -DMCPMQTT_BUILD_FUZZERS=ON -DMCPMQTT_WERROR=ON \
  -DMCPMQTT_SANITIZE=fuzzer-no-link,address,undefined >/dev/null
# Two compile jobs at most: each Beast/Asio translation unit takes close to 1 GiB.
cmake --build "$dir" --target "${targets[@]/%/_fuzzer}" -j "${MCPMQTT_BUILD_JOBS:-2}"

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
    -rss_limit_mb=2048 -print_final_stats=1 $(options_of "$target") \
    -artifact_prefix="$dir/artifacts/$target-" "$corpus" </dev/null >"$log" 2>&1 || rc=$?
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
  printf '%s: %s, %s execs (%s/s), cov %s ft %s, corpus %s -> %s inputs, %s s\n' "$target" \
    "$([[ $rc == 0 ]] && echo ok || echo "FAILED (exit $rc)")" "${execs:-?}" "${rate:-?}" \
    "${cov:-?}" "${ft:-?}" "$before" "$(find "$corpus" -type f | wc -l)" \
    "$(( $(date +%s) - t0 ))" >"$dir/logs/$target.summary"
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
