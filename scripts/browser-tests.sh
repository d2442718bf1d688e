#!/usr/bin/env bash
# End-to-end tests of the lab page (`addnorm lab`) in Debian's headless Chromium, then a short
# load test of the server. Installs what the browser tests alone need when missing (chromium,
# nodejs, npm; as root or with sudo), installs playwright-core and axe-core from
# tests/browser/package-lock.json, starts the server on a free loopback port, runs
# tests/browser/*.test.mjs with Node's test runner (the widgets, the layout at 390, 1280 and
# 1920 px with axe-core's accessibility check, the load test), then builds the static folder
# (scripts/web-static.sh: the page computing with the API compiled to WebAssembly), serves it with
# Python's http.server and runs the page's tests again against it, their expected numbers still
# from the server's API; saves screenshots and the load test's latencies under build/screenshots/
# and build/, and stops both servers. Exits non-zero when anything fails, with a one-line summary at the end.
#
#   bash scripts/browser-tests.sh            # uses build/addnorm (built first if missing)
#   ADDNORM_BUILD_DIR=build-x bash scripts/browser-tests.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
build_dir="${ADDNORM_BUILD_DIR:-build}"
case "$build_dir" in /*) ;; *) build_dir="$root/$build_dir" ;; esac
screenshots="$build_dir/screenshots"
chromium="${CHROMIUM:-/usr/bin/chromium}"

# Debian packages for the browser tests only (the build's own are in install-deps.sh).
missing=()
[ -x "$chromium" ] || missing+=(chromium fonts-dejavu-core)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then bash scripts/install-deps.sh "${missing[@]}"; fi

if [ ! -x "$build_dir/addnorm" ]; then
  echo "browser-tests: $build_dir/addnorm is missing; building it"
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build_dir" -j"$(nproc)" --target addnorm_cli
fi

echo "== browser tests: npm packages (playwright-core, axe-core) =="
(cd tests/browser && { npm ci --no-audit --no-fund --loglevel=error || npm install --no-audit --no-fund --loglevel=error; })

mkdir -p "$screenshots/server" "$screenshots/wasm"
rm -f "$screenshots"/*.png "$screenshots"/*/*.png
log="$build_dir/lab-server.log"
"$build_dir/addnorm" lab --port 0 >"$log" 2>&1 &
server_pid=$!
stop_server() {
  if kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
}
trap stop_server EXIT

# The server prints its address once it listens.
url=""
for _ in $(seq 1 200); do
  url="$(grep -o 'http://127\.0\.0\.1:[0-9]*/' "$log" | head -n 1 || true)"
  [ -n "$url" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$url" ]; then
  echo "browser-tests: the lab server did not start:"
  cat "$log"
  exit 1
fi
echo "== browser tests against $url =="

results="$build_dir/browser-tests.tap"
: >"$results"
status=0
# run_tests PAGE_URL ENGINE SECONDS FILE...: one file at a time (the load test measures latencies
# and must not share the machine with the browser), each bounded in time. The expected numbers
# always come from the server's API at $url.
run_tests() {
  local page_url="$1" engine="$2" seconds="$3"
  shift 3
  for file in "$@"; do
    if ! (cd tests/browser && LAB_URL="$page_url" API_URL="$url" LAB_ENGINE="$engine" \
          SCREENSHOT_DIR="$screenshots/$engine" CHROMIUM="$chromium" \
          ADDNORM_PYTHONPATH="$build_dir/python" timeout "$seconds" node --test "$file") 2>&1 |
        tee -a "$results"; then
      status=1
    fi
  done
}
# The widgets and the tutorials' numbers, the layout and axe-core: against both engines. The
# page's own behaviour (links, resets, the learner's explanations) does not depend on the engine:
# once, against the server.
page_tests=(lab.test.mjs layout.test.mjs)
run_tests "$url" server 240 chart_scale.test.mjs diagnosis_file.test.mjs "${page_tests[@]}" \
  learner.test.mjs url_state.test.mjs

# The static folder: no addnorm process serves it (the server above only answers the tests' own
# questions). The in-browser engine runs one thread without AVX-512: its runs take longer.
echo "== browser tests against the static folder (WebAssembly) =="
# ADDNORM_STATIC_DIR: a folder scripts/web-static.sh has just built (scripts/test.sh builds it
# beside the fuzzers); otherwise it is built here.
static_dir="${ADDNORM_STATIC_DIR:-}"
if [ -z "$static_dir" ] || [ ! -f "$static_dir/wasm/addnorm_lab.wasm" ]; then
  static_dir="$build_dir/web-static"
  bash scripts/web-static.sh "$static_dir"
fi
static_log="$build_dir/static-server.log"
/usr/bin/python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$static_dir" >"$static_log" 2>&1 &
static_pid=$!
stop_servers() {
  kill -TERM "$static_pid" 2>/dev/null || true
  stop_server
}
trap stop_servers EXIT
static_url=""
for _ in $(seq 1 100); do
  port="$(grep -o 'port [0-9]*' "$static_log" | head -n 1 | cut -d' ' -f2 || true)"
  if [ -n "$port" ]; then static_url="http://127.0.0.1:$port/"; break; fi
  sleep 0.1
done
if [ -z "$static_url" ]; then
  echo "browser-tests: the static file server did not start:"
  cat "$static_log"
  exit 1
fi
run_tests "$static_url" wasm 480 "${page_tests[@]}"
kill -TERM "$static_pid" 2>/dev/null || true
wait "$static_pid" 2>/dev/null || true
trap stop_server EXIT

run_tests "$url" server 240 load.test.mjs

# The server must stop cleanly on SIGTERM, as on Ctrl-C.
kill -TERM "$server_pid"
if ! wait "$server_pid"; then
  echo "browser-tests: the lab server did not exit cleanly:"
  status=1
fi
grep -q "addnorm lab: stopped" "$log" || { echo "browser-tests: no clean stop in $log"; status=1; }
trap - EXIT

passed="$(grep -E '^# pass [0-9]+' "$results" | awk '{sum += $3} END {print sum + 0}')"
failed="$(grep -E '^# fail [0-9]+' "$results" | awk '{sum += $3} END {print sum + 0}')"
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "screenshots: $screenshots; load-test latencies: $build_dir/load-test.json"
echo "browser-tests: $passed passed, $failed failed"
exit "$status"
