#!/usr/bin/env bash
# Checks that the lab never runs slower with default threads than with one while another process
# keeps a core busy: update-size at depth 6 for d_model 16..512, timed with OMP_NUM_THREADS=1 and
# with the default, and the two JSON outputs compared (docs/lab.md, "Threads measured").
# usage: scripts/lab-threads-check.sh [ADDNORM_BIN] [SEEDS] [PLACEMENTS]
#   one run:    scripts/lab-threads-check.sh build/addnorm 1 post_norm
#   eight runs: scripts/lab-threads-check.sh build/addnorm 4 post_norm,pre_norm
set -uo pipefail
bin=${1:-build/addnorm}
seeds=${2:-1}
placements=${3:-post_norm}
tmp=$(mktemp -d)
yes > /dev/null &
busy=$!
trap 'kill $busy; rm -rf "$tmp"' EXIT
for d in 16 32 64 128 256 512; do
  args="update-size --depths 6 --placements $placements --lrs 1e-5 --seeds $seeds --d-model $d --d-ff $((2*d)) --n-heads 4 --json"
  TIMEFORMAT=%R
  # shellcheck disable=SC2086  # args are words by design
  t1=$( { time OMP_NUM_THREADS=1 "$bin" lab-run $args >"$tmp/one.json" 2>/dev/null; } 2>&1 )
  # shellcheck disable=SC2086
  t2=$( { time "$bin" lab-run $args >"$tmp/default.json" 2>/dev/null; } 2>&1 )
  same=$(cmp -s "$tmp/one.json" "$tmp/default.json" && echo identical || echo DIFFERENT)
  echo "d_model $d, $placements, seeds $seeds: 1 thread $t1 s, default threads $t2 s, JSON $same"
done
