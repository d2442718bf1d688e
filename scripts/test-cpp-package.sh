#!/usr/bin/env bash
# addnorm as a C++ user gets it (docs/cpp.md), checked end to end:
#   1. `cmake --install` of the release tree (build/) into a prefix; every installed header
#      compiles alone with GCC and Clang under -Werror (C++20; addnorm.h also as C11);
#   2. the consumer in examples/cpp/ built against that prefix with find_package (shared and
#      static library) and with pkg-config and a plain compiler line (C++ and the C ABI from C);
#   3. the same consumer with FetchContent of this checkout, where only the core is configured;
#   4. the Debian packages libaddnorm<ABI> and libaddnorm-dev made by `cpack -G DEB` from a
#      core-only configuration: their names, dependencies and contents, unpacked with dpkg -x
#      and built against; with CI=true as root, also really installed with dpkg -i, built against
#      from /usr and removed again.
# Each consumer program checks its own numbers against float64 and exits non-zero when one is
# off. Usage: scripts/test-cpp-package.sh [release build dir, default build]
set -euo pipefail
cd "$(dirname "$0")/.."
release_build="${1:-build}"
work="$PWD/build-package"
jobs="$(nproc)"
rm -rf "$work"
mkdir -p "$work"

step() { echo "-- $*"; }
fail() { echo "FAIL $*"; exit 1; }

# The two packages' names, dependencies and contents, as Debian splits a library: the runtime
# package holds only the versioned shared library, named after its SONAME; -dev the rest.
check_packages() {
  local debs="$1" runtime dev soname abi
  runtime="$(ls "$debs"/libaddnorm[0-9]*_*.deb)" || fail "no runtime package in $debs"
  dev="$(ls "$debs"/libaddnorm-dev_*.deb)" || fail "no -dev package in $debs"
  [ "$(ls "$debs"/*.deb | wc -l)" -eq 2 ] || fail "expected two packages, got $(ls "$debs")"
  abi="$(dpkg-deb -f "$runtime" Package | sed 's/^libaddnorm//')"
  dpkg-deb -x "$runtime" "$work/runtime-contents"
  soname="$(objdump -p "$work"/runtime-contents/usr/lib/*/libaddnorm.so.*.* | awk '/SONAME/ {print $2}')"
  [ "$soname" = "libaddnorm.so.$abi" ] || fail "SONAME $soname does not match package libaddnorm$abi"
  dpkg-deb -f "$runtime" Depends | grep -q "libhwy1" || fail "runtime package does not depend on libhwy1"
  dpkg-deb -f "$runtime" Depends | grep -q "libgomp1" || fail "runtime package does not depend on libgomp1"
  dpkg-deb -I "$runtime" shlibs >/dev/null || fail "runtime package has no shlibs file"
  dpkg-deb -f "$dev" Depends | grep -q "libaddnorm$abi (= " || fail "-dev does not depend on the runtime"
  dpkg-deb -c "$runtime" | awk '{print $6}' | grep -v '/$' | grep -vE 'libaddnorm\.so\.'"$abi"'(\.[0-9]+)*$' \
    | grep -v '^./usr/share/doc' && fail "runtime package holds more than the shared library"
  local listing
  listing="$(dpkg-deb -c "$dev" | awk '{print $6}')"
  for wanted in usr/include/addnorm/ops.hpp usr/include/addnorm/addnorm.h \
      usr/include/addnorm/version.hpp libaddnorm.so libaddnorm.a addnormConfig.cmake \
      addnormConfigVersion.cmake pkgconfig/addnorm.pc; do
    grep -q "$wanted" <<<"$listing" || fail "-dev package lacks $wanted"
  done
  grep -qE 'include/addnorm/(nn|lab)/|libaddnorm\.so\.' <<<"$listing" \
    && fail "-dev package holds what is not the core's development files"
  echo "$(basename "$runtime") and $(basename "$dev"): names, dependencies and contents as Debian splits them"
}

run_consumers() {  # $1: consumer build dir; runs both programs
  "$1/pre_norm_block" >"$1/shared.log"
  "$1/pre_norm_block_static" >"$1/static.log"
  tail -n 1 "$1/shared.log"
}

step "install the release tree into $work/prefix"
cmake --install "$release_build" --prefix "$work/prefix" >/dev/null
prefix="$work/prefix"
libdir="$(dirname "$(find "$prefix" -name 'libaddnorm.so.*.*' | head -n 1)")"

step "each installed header compiles alone (g++ and clang++, C++20, -Wall -Wextra -Wpedantic -Werror)"
for header in "$prefix"/include/addnorm/*; do
  name="addnorm/$(basename "$header")"
  for compiler in g++ clang++; do
    echo "#include <$name>" | "$compiler" -std=c++20 -Wall -Wextra -Wpedantic -Werror \
      -fsyntax-only -x c++ -I"$prefix/include" - || { echo "FAIL $name with $compiler"; exit 1; }
  done
done
for compiler in gcc clang; do
  echo "#include <addnorm/addnorm.h>" | "$compiler" -std=c11 -Wall -Wextra -Wpedantic -Werror \
    -fsyntax-only -x c -I"$prefix/include" - || { echo "FAIL addnorm.h as C with $compiler"; exit 1; }
done
echo "$(ls "$prefix"/include/addnorm | wc -l) headers"

step "consumer: find_package(addnorm CONFIG REQUIRED) from the prefix"
cmake -S examples/cpp -B "$work/find-package" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/find-package" -j"$jobs" >/dev/null
run_consumers "$work/find-package"

step "consumer: pkg-config --cflags --libs addnorm and a plain compiler line (C++, and C)"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
# With both compilers, warnings as errors: the public API is clean for GCC and Clang users.
for compiler in g++ clang++; do
  # shellcheck disable=SC2046  # pkg-config's output is a list of flags
  "$compiler" -std=c++20 -Wall -Wextra -Wpedantic -Werror examples/cpp/pre_norm_block.cpp \
    $(pkg-config --cflags --libs addnorm) -Wl,-rpath,"$libdir" -o "$work/pkg-config-$compiler"
  echo "$compiler: $("$work/pkg-config-$compiler" | tail -n 1)"
done
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Wextra -Werror examples/c/layer_norm.c $(pkg-config --cflags --libs addnorm) \
  -lm -Wl,-rpath,"$libdir" -o "$work/pkg-config-c"
"$work/pkg-config-c" | tail -n 1
unset PKG_CONFIG_PATH

# The two builds of the core below compile the scalar target alone instead of four: they only show
# that a parent project gets the library and that the packages hold the right files, and the
# consumers' results are the same on any target (the release tree tests every target, the
# sanitizer tree AVX3 and SCALAR). CI's time is short: with AVX3 beside the scalar target this
# stage took 177 s of a 42-minute run (fresh clone of e74d74d).
fast_targets="(HWY_SSSE3|HWY_SSE4|HWY_AVX2|HWY_AVX3)"

step "consumer: FetchContent of this checkout (addnorm not top level: the core alone)"
cmake -S examples/cpp -B "$work/fetch-content" -DADDNORM_FROM=source \
  -DADDNORM_SOURCE_DIR="$PWD" -DADDNORM_DISABLED_SIMD_TARGETS="$fast_targets" >/dev/null
if cmake --build "$work/fetch-content" --target help | grep -qE "addnorm_(cli|tests|python|lab)"; then
  echo "FAIL FetchContent configured more than addnorm's core"
  exit 1
fi
cmake --build "$work/fetch-content" -j"$jobs" >/dev/null
run_consumers "$work/fetch-content"

step "Debian packages: cpack -G DEB from the core-only configuration"
cmake -S . -B "$work/deb-build" -DADDNORM_CORE_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX=/usr -DADDNORM_DISABLED_SIMD_TARGETS="$fast_targets" >/dev/null
cmake --build "$work/deb-build" -j"$jobs" >/dev/null
(cd "$work/deb-build" && cpack -G DEB -B "$work/debs" >/dev/null)
check_packages "$work/debs"

step "consumer: against the packages unpacked with dpkg -x"
for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$work/deb-root"; done
cmake -S examples/cpp -B "$work/deb-consumer" -DCMAKE_PREFIX_PATH="$work/deb-root/usr" >/dev/null
cmake --build "$work/deb-consumer" -j"$jobs" >/dev/null
run_consumers "$work/deb-consumer"

if [ "${CI:-}" = "true" ] && [ "$(id -u)" -eq 0 ]; then
  step "consumer: against the packages installed with dpkg -i (CI, as root), then removed"
  dpkg -i "$work"/debs/*.deb >/dev/null
  cmake -S examples/cpp -B "$work/dpkg-consumer" >/dev/null
  cmake --build "$work/dpkg-consumer" -j"$jobs" >/dev/null
  run_consumers "$work/dpkg-consumer"
  dpkg -r libaddnorm-dev "$(dpkg-deb -f "$work"/debs/libaddnorm[0-9]*.deb Package)" >/dev/null
fi
echo "C++ package: every way in works"
