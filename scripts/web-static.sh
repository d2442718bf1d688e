#!/usr/bin/env bash
# Builds the lab page as a folder of static files that compute in the browser: the page (web/),
# and the lab's API compiled to WebAssembly with Debian's Emscripten (wasm/: the core library, nn,
# the lab experiments and the server's experiment table, one thread). Any static host serves the
# folder; no addnorm process runs. docs/web-lab.md says how to publish it.
#
#   bash scripts/web-static.sh                 # writes build/web-static/
#   bash scripts/web-static.sh /some/folder    # writes there instead (emptied first)
#   /usr/bin/python3 -m http.server -d build/web-static 8000   # then open http://127.0.0.1:8000/
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-build/web-static}"
wasm_build="${ADDNORM_WASM_BUILD_DIR:-build-wasm}"

# Emscripten (its prebuilt libc and libc++ come with the package), and the headers the build
# takes from Debian.
bash scripts/install-deps.sh emscripten libhwy-dev nlohmann-json3-dev cmake
# Emscripten's JavaScript passes need the acorn parser from Debian's node modules.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}

emcmake cmake -S wasm -B "$wasm_build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$wasm_build" -j"$(nproc)"

rm -rf "$out"
mkdir -p "$out/wasm"
cp -r web/. "$out/"
cp "$wasm_build/addnorm_lab.js" "$wasm_build/addnorm_lab.wasm" "$out/wasm/"
# The page computes with the WebAssembly engine (web/js/api.js reads this).
sed -i 's|<meta name="addnorm-engine" content="server">|<meta name="addnorm-engine" content="wasm">|' \
  "$out/index.html"
grep -q 'content="wasm"' "$out/index.html" || { echo "web-static: could not mark $out/index.html"; exit 1; }
echo "web-static: $out ($(du -sk "$out" | cut -f1) KiB; the engine $(($(stat -c %s "$out/wasm/addnorm_lab.wasm") / 1024)) KiB)"
