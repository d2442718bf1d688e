#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, and runs the tour of the seed
# pages' worked examples. Arguments go to `addnorm tour` (for example --section cat or --json).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh >/dev/null
./build/addnorm tour "$@"
