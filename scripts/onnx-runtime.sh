#!/usr/bin/env bash
# ONNX Runtime for the export tests (tests/python/test_onnx_runtime.py): the npm package
# onnxruntime-node, pinned in tests/onnx/package-lock.json, installed into tests/onnx/node_modules.
# Installs Debian's nodejs and npm first when missing (as root or with sudo).
#
# --ignore-scripts: the package ships its CPU binaries for linux-x64; its install script only
# fetches optional GPU libraries from the internet, which this project's machines cannot reach.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then bash scripts/install-deps.sh "${missing[@]}"; fi

cd tests/onnx
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
node -e "import('onnxruntime-node').then(ort => console.log('onnxruntime-node', ort.env.versions.node))"
