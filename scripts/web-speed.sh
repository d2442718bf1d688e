#!/usr/bin/env bash
# Measures the lab page's two engines widget by widget, native (`addnorm lab`) against the static
# folder's WebAssembly, and writes docs/web-lab-speed.md (scripts/web_speed.mjs). Builds what is
# missing: build/addnorm and the WebAssembly engine (scripts/web-static.sh).
#
#   bash scripts/web-speed.sh [--reps N]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/addnorm ] || bash scripts/build.sh
bash scripts/web-static.sh build/web-static >/dev/null
log="$(mktemp)"
build/addnorm lab --port 0 >"$log" 2>&1 &
server=$!
trap 'kill -TERM "$server" 2>/dev/null || true; rm -f "$log"' EXIT
url=""
for _ in $(seq 1 100); do
  url="$(grep -o 'http://127\.0\.0\.1:[0-9]*/' "$log" | head -n 1 || true)"
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "web-speed: the lab server did not start"; cat "$log"; exit 1; }
node scripts/web_speed.mjs --api "$url" --wasm build-wasm --out docs/web-lab-speed.md "$@"
