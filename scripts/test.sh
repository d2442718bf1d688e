#!/usr/bin/env bash
# The README's second command: installs what is missing, checks the format, builds, and runs
# every test: the C++ tests once under AddressSanitizer + UndefinedBehaviorSanitizer, then all
# tests (C++ and the Python tests against NumPy and PyTorch) on the release build, the fuzzers
# for a bounded time, the lab page's browser tests, and the C++ package as users install and
# link it. ONNX Runtime (npm) is installed for the Python tests that run addnorm's ONNX exports.
# The last lines are CTest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs="$(nproc)"

# Each stage's heading says how long the run has taken so far (bash's SECONDS), so a CI log shows
# what each stage costs against the 40-minute budget.
stage() { echo "== $* [${SECONDS} s into the run] =="; }

stage "format (clang-format, .clang-format)"
bash scripts/check-format.sh

stage "build (release)"
bash scripts/build.sh

stage "build (address + undefined-behaviour sanitizers)"
# Line tables only (-g1): a sanitizer report still names file and line, and the template-heavy
# kernels compile markedly faster than with full debug information. -O1, the sanitizers' usual
# level: on a 2-core AMD EPYC this tree built in 598 s against 868 s at -O2, and its tests ran
# in 149 s against 142 s (fresh clone of 0e067ea). Results are the same bits at either level:
# the library builds with -ffp-contract=off.
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DADDNORM_SANITIZE=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DADDNORM_BUILD_PYTHON=OFF >/dev/null
# Only the GoogleTest binary and the C ABI's test programs: they are all the sanitizer run executes
# (the CLI and Python tests run on the release build). Its kernels are compiled for AVX3 and SCALAR
# (cmake/core_library.cmake): the release build's tests cover AVX2 and SSE4 too.
cmake --build build-sanitize -j"$jobs" --target addnorm_tests addnorm_c_abi_tests

stage "tests under sanitizers"
# Less the one test that trains 12 transformer stacks for 300 steps (the trainability map's claim):
# under the sanitizers it took 137 s of a 326 s stage (fresh clone of 2dc8912), and the code it
# runs is the quick map's, which LabTrainabilityMap.ACellAloneIsTheSameCellOfTheMap and
# LabDeterminism run here. The release tests run it in full.
# Also left out here, run in full by the release tests: the scalar target's BatchNorm over 8 MiB
# outputs (56 s under ASan; the scalar target has no streaming stores, the AVX3 variant that has
# them runs here) and the gradient-flow factor averaged over many seeds (30 s; the single-seed
# gradient-flow tests run the same code here). Measured on a fresh clone of a7226ae.
# A parameterised test's CTest name ends in "  # GetParam() = ...": the pattern ends at a space
# or the end (the SCALAR BatchNorm test, 50 s, slipped past a pattern anchored at the end until
# ebd19c6's CI run showed it).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-sanitize --output-on-failure -j"$jobs" \
  -E '^(LabTrainabilityMap\.WarmupRescuesPostNormAtDepthSix|Targets/BatchNormEveryTarget\.MatchesTheReferenceWithStreamingStores/SCALAR|LabGradientFlow\.MatchesTheExpectedFactorOverSeeds)( |$)'

export FUZZ_SECONDS="${FUZZ_SECONDS:-20}"
stage "fuzzers (libFuzzer, ASan + UBSan), ${FUZZ_SECONDS} s each, beside the WebAssembly build"
# The lab page's static folder (Emscripten) builds while the fuzzers run, one process at a time.
static_log="build/web-static.log"
bash scripts/web-static.sh build/web-static >"$static_log" 2>&1 &
static_build=$!
bash scripts/fuzz.sh
if ! wait "$static_build"; then
  cat "$static_log"
  echo "test.sh: the static folder (scripts/web-static.sh) did not build"
  exit 1
fi
tail -n 1 "$static_log"

stage "browser tests: the lab page in headless Chromium, served and static"
ADDNORM_STATIC_DIR=build/web-static bash scripts/browser-tests.sh

stage "the C++ package: install, find_package, pkg-config, FetchContent, Debian packages"
bash scripts/test-cpp-package.sh build

stage "ONNX Runtime for the export tests (npm onnxruntime-node)"
bash scripts/onnx-runtime.sh

stage "all tests (release)"
ctest --test-dir build --output-on-failure -j"$jobs"
