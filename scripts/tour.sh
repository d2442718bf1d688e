#!/usr/bin/env bash
# The README's first command: installs what is missing, builds the addnorm command (only that
# target: the tests and benchmarks are not needed for the tour), and runs the tour of the two
# tutorials' worked examples. Arguments go to `addnorm tour` (for example --section cat or --json).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target addnorm_cli >/dev/null
./build/addnorm tour "$@"
