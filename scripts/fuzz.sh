#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with AddressSanitizer + UndefinedBehaviorSanitizer)
# and runs each for FUZZ_SECONDS (default 30) from its seed corpus in fuzz/corpus/. Fails on any
# crash, sanitizer report, leak, timeout or out-of-memory. New inputs found along the way go to
# build-fuzz/corpus/ (not the repository's corpus).
# Usage: bash scripts/fuzz.sh [TARGET...]     (default: every target)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-30}"
cmake -S fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"$(nproc)" >/dev/null
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_npy_reader fuzz_lab_request fuzz_cli_numbers fuzz_raw_head)
for target in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$target" "build-fuzz/artifacts/$target"
  echo "== fuzzing $target for ${seconds} s =="
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "build-fuzz/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/artifacts/$target/" \
    "build-fuzz/corpus/$target" "fuzz/corpus/$target" 2>&1 | grep -E "^(#|==|Done|stat::number_of_executed_units|SUMMARY|ERROR)" | tail -n 4
  # grep's status hides the fuzzer's: ask PIPESTATUS for the fuzzer's own exit code.
  status=${PIPESTATUS[0]}
  if [ "$status" -ne 0 ]; then
    echo "fuzz: $target failed (exit $status); the input is in build-fuzz/artifacts/$target/" >&2
    exit 1
  fi
done
echo "fuzz: every target ran ${seconds} s without a finding"
