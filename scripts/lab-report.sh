#!/usr/bin/env bash
# Regenerates the lab's results from real runs: every experiment of `addnorm lab-run` at the
# setting docs/lab.md documents, its JSON, its figure (scripts/lab_plot.py) and the tables of
# docs/lab-results.md (scripts/lab_report.py). docs/lab.md states the claims and links there;
# nothing in the results is copied by hand.
#
# usage: scripts/lab-report.sh [--quick] [--out DIR]
#   default      the documented settings; writes docs/lab-results.md and docs/figures/*.svg
#   --quick      every experiment's --quick setting (seconds), for the CI test of this script
#   --resume     keep the runs whose JSON (and figure) an interrupted report already wrote
#   --out DIR    write DIR/lab-results.md, DIR/figures/ and DIR/json/ instead of docs/ (the
#                JSON of the documented runs goes to build/lab-report-json/, not into docs/)
# ADDNORM_BIN names the addnorm binary (default: build/addnorm, built here when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
resume=0
out=docs
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --resume) resume=1 ;;
    --out) out="$2"; shift ;;
    *) echo "lab-report.sh: unknown argument $1 (expected --quick, --resume or --out DIR)" >&2; exit 2 ;;
  esac
  shift
done

bin="${ADDNORM_BIN:-build/addnorm}"
if [ ! -x "$bin" ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j2 --target addnorm_cli >/dev/null
fi

json="$out/json"
[ "$out" = docs ] && json=build/lab-report-json
mkdir -p "$json" "$out/figures"
# The machine the run times were measured on: cores and load average before and after.
[ "$resume" = 1 ] || : >"$json/times.txt"
echo "# before: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$json/times.txt"

# name|arguments: the documented runs. Each line is one `addnorm lab-run` the docs cite.
runs=(
  "gradient-flow|"
  "activation-growth|"
  "norm-steps|"
  "batch-vs-layer|"
  "init-gradients|"
  "init-gradients-ffn|--sublayers ffn"
  "update-size|"
  "update-size-perturbation|--mode perturbation"
  "update-size-admin|--placements post_norm,pre_norm,admin"
  "depth-training|"
  "rank-collapse|"
  "trainability-map|--seeds 4 --lrs 1e-3,3e-3,1e-2 --schedules constant,linear,noam"
)

for entry in "${runs[@]}"; do
  label="${entry%%|*}"
  args="${entry#*|}"
  name="$label"
  case "$label" in
    init-gradients-ffn) name=init-gradients ;;
    update-size-perturbation|update-size-admin) name=update-size ;;
  esac
  [ "$quick" = 1 ] && args="$args --quick"
  if [ "$resume" = 1 ] && [ -s "$json/$label.json" ] && [ -s "$out/figures/$label.svg" ]; then
    continue
  fi
  echo "lab-report: addnorm lab-run $name $args" >&2
  # The run's wall and CPU seconds go to times.txt (fd 3 keeps the progress bar on stderr).
  TIMEFORMAT="$label %R s wall %U s user"
  # shellcheck disable=SC2086  # args are words by design
  { time "$bin" lab-run "$name" $args --json --plot "$out/figures/$label.svg" \
      >"$json/$label.json" 2>&3; } 3>&2 2>>"$json/times.txt"
done

# The seed-stability check: each stochastic run again on the next, disjoint set of seeds (the
# first set is seed .. seed + n - 1, this one seed + n .. seed + 2n - 1; for gradient-flow and
# activation-growth the spread seeds). lab_report.py prints how far the medians moved.
mkdir -p "$json/second"
seed_count() { /usr/bin/python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['params']; print(p['seed'] + p[sys.argv[2]])" "$@"; }
for entry in "${runs[@]}"; do
  label="${entry%%|*}"
  args="${entry#*|}"
  name="$label"
  case "$label" in
    init-gradients-ffn) name=init-gradients ;;
    update-size-perturbation|update-size-admin) name=update-size ;;
    norm-steps|batch-vs-layer) continue ;;  # no random draws
  esac
  case "$name" in
    gradient-flow|activation-growth) next=$(seed_count "$json/$label.json" spread_seeds) ;;
    *) next=$(seed_count "$json/$label.json" seeds) ;;
  esac
  [ "$quick" = 1 ] && args="$args --quick"
  [ "$resume" = 1 ] && [ -s "$json/second/$label.json" ] && continue
  echo "lab-report: addnorm lab-run $name $args --seed $next (second seed set)" >&2
  # shellcheck disable=SC2086
  "$bin" lab-run "$name" $args --seed "$next" --json >"$json/second/$label.json"
done

echo "# after: load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$json/times.txt"

# The 60-second rule: every default run again, with one core kept busy (not in --quick).
if [ "$quick" = 0 ] && { [ "$resume" = 0 ] || [ ! -s "$json/busy-times.txt" ]; }; then
  echo "lab-report: every default run with one core kept busy" >&2
  bash scripts/lab-busy-times.sh "$bin" >"$json/busy-times.txt"
fi
/usr/bin/python3 scripts/lab_report.py "$json" "$out/lab-results.md" $([ "$quick" = 1 ] && echo --quick)
echo "lab-report: wrote $out/lab-results.md and $out/figures/" >&2
