#!/usr/bin/env bash
# Builds and runs addnorm's benchmark (bench/, addnorm-bench): addnorm against the copy ceiling,
# oneDNN, PyTorch 1.13 (libtorch), its reference kernel and the textbook loop, in one run.
# Installs what is missing (the benchmark alone needs libdnnl-dev and libtorch-dev), configures
# build-bench/ with -DADDNORM_BUILD_BENCH=ON, builds, and runs. Arguments go to addnorm-bench:
#   bash scripts/bench.sh --quick                     # about a minute on a quiet machine
#   bash scripts/bench.sh --json bench.json --markdown bench.md    # the full run (about 20 min)
#   bash scripts/bench.sh --ops layer_norm_fwd --dims 768 --threads 2 --impls addnorm,onednn
#   /usr/bin/python3 bench/targets.py bench.json      # issue 10's targets, met / not met
# PyTorch is measured as installed and, in a child process the benchmark starts itself, with
# GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1099511627776:
# glibc.malloc.tcache_count=0 (freed outputs stay in the heap and are reused, and the heap stops
# growing, so its fresh outputs take no page faults). Every timed
# loop's page faults are counted: a run where any implementation but PyTorch as installed faults
# beyond the allowance lists them and exits with status 3 (docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

# libdnnl-dev's CMake package needs the OpenCL headers, which it only Recommends.
bash scripts/install-deps.sh libdnnl-dev ocl-icd-opencl-dev libtorch-dev

# ccache, when installed, shares compiles with the other build trees.
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DADDNORM_BUILD_BENCH=ON "${launcher[@]}" \
  >/dev/null
cmake --build build-bench -j"$(nproc)" --target addnorm_bench addnorm_cli
exec ./build-bench/bench/addnorm-bench "$@"
