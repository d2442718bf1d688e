#!/usr/bin/env bash
# Times every `addnorm lab-run` experiment at its defaults while another process keeps one core
# busy: docs/lab.md's rule that each default run finishes within 60 s on a 2-core machine that is
# doing something else. Prints "# machine ..." then one line per run: NAME WALL_S USER_S.
# scripts/lab-report.sh writes it to its JSON folder (busy-times.txt) and lab_report.py puts it in
# docs/lab-results.md.
#
# usage: scripts/lab-busy-times.sh [ADDNORM_BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-${ADDNORM_BIN:-build/addnorm}}"
runs=(gradient-flow activation-growth norm-steps batch-vs-layer init-gradients update-size
      depth-training rank-collapse trainability-map)

# The other process: one core's worth of busy loop for as long as the runs take.
( trap 'exit 0' TERM; while :; do :; done ) &
busy=$!
trap 'kill "$busy" 2>/dev/null || true' EXIT
echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), one kept busy by a shell loop; load average before $(cut -d' ' -f1-3 /proc/loadavg)"
for name in "${runs[@]}"; do
  TIMEFORMAT="$name %R %U"
  { time "$bin" lab-run "$name" --json >/dev/null 2>&1; } 2>&1
done
