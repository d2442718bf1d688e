#!/usr/bin/env bash
# Installs the Debian packages addnorm builds and tests with, when any is missing; or, given
# package names (scripts/bench.sh, browser-tests.sh, onnx-runtime.sh), those instead.
# Uses sudo when not run as root. Safe to run again: it does nothing when all are present.
set -euo pipefail

packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=(
  build-essential cmake pkg-config
  libgtest-dev libcli11-dev nlohmann-json3-dev libhwy-dev libopenblas-dev libcpp-httplib-dev
  clang libclang-rt-14-dev clang-format strace
  pybind11-dev python3-dev python3-venv python3-pip python3-setuptools python3-wheel
  python3 python3-numpy python3-torch python3-pytest python3-hypothesis python3-matplotlib
  python3-distributed
  libtorch-dev python3-onnx
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "addnorm: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
