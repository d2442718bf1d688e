include(GNUInstallDirs)

# The core library: ops (validation, reference and fast kernels), the C ABI, .npy I/O, NumPy's
# generator. Its objects are compiled once and linked twice:
#   addnorm         static, the one the rest of this tree links (tests, nn, Python, CLI), and
#                   exported as addnorm::static;
#   addnorm_shared  libaddnorm.so.<ABI>, exported as addnorm::addnorm: Highway and OpenMP stay
#                   private to it, so a program linking it needs nothing but addnorm.
include(${CMAKE_CURRENT_LIST_DIR}/sources.cmake)

# include/addnorm/version.hpp is generated from project()'s version, its one definition.
configure_file(${PROJECT_SOURCE_DIR}/cmake/version.hpp.in
               ${PROJECT_BINARY_DIR}/include/addnorm/version.hpp @ONLY)

# dev/ only: the kernels' speed tunables overridden for an A/B build (dev/ab.py), as
# "kName=value,..." (src/ops/cpu/tuning.hpp). Every target of such a tree, tests included, sees
# the same values. cmake/tuning.cmake checks the string against the tunables the kernels define,
# so a misspelt name cannot pass unnoticed as the default.
set(ADDNORM_TUNING "" CACHE STRING
    "dev/ only: kernel tunables overridden, kName=value,... (src/ops/cpu/tuning.hpp)")
if(ADDNORM_TUNING)
  include("${CMAKE_CURRENT_LIST_DIR}/tuning.cmake")
  addnorm_check_tuning("${ADDNORM_TUNING}")
  add_compile_definitions("ADDNORM_TUNING_OVERRIDES=\"${ADDNORM_TUNING}\"")
endif()

add_library(addnorm_objects OBJECT ${ADDNORM_CORE_SOURCES})
target_include_directories(addnorm_objects
  PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
         $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
  PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(addnorm_objects PRIVATE hwy::hwy OpenMP::OpenMP_CXX)
# Hidden by default: what a public header declares between ADDNORM_PUBLIC_BEGIN and _END
# (include/addnorm/visibility.hpp) is all libaddnorm.so exports.
set_target_properties(addnorm_objects PROPERTIES POSITION_INDEPENDENT_CODE ON
                                                 CXX_VISIBILITY_PRESET hidden)
# Exact rounding is the product: never let the compiler fuse a multiply and an add on its own
# (explicit fused multiply-adds in SIMD kernels are unaffected).
target_compile_options(addnorm_objects PRIVATE -ffp-contract=off)
# SIMD targets: AVX-512, AVX2, SSE4 and the scalar fallback. Highway's SSSE3 target (CPUs from
# before SSE4.1, 2006-2013 Core 2 and Atom) is left out: it nearly duplicates SSE4 and would cost
# a fifth of the kernels' compile time; such CPUs run the scalar target, correct but slower.
# The sanitizer tree (CI's longest build) compiles AVX3 and SCALAR only: AVX2 and SSE4 run the
# same code paths with narrower vectors (F16C float16 like AVX3, integer float16 like SCALAR),
# and the release tree tests every target. ADDNORM_DISABLED_SIMD_TARGETS overrides the set (a
# Highway HWY_DISABLED_TARGETS expression) for a build that must compile fast, such as the test
# of add_subdirectory in scripts/test-cpp-package.sh.
if(ADDNORM_SANITIZE)
  set(addnorm_default_disabled_targets "(HWY_SSSE3|HWY_SSE4|HWY_AVX2)")
else()
  set(addnorm_default_disabled_targets "HWY_SSSE3")
endif()
set(ADDNORM_DISABLED_SIMD_TARGETS "${addnorm_default_disabled_targets}" CACHE STRING
    "Highway targets not compiled (HWY_DISABLED_TARGETS); the scalar one always is")
target_compile_definitions(addnorm_objects
                           PRIVATE "HWY_DISABLED_TARGETS=${ADDNORM_DISABLED_SIMD_TARGETS}")

add_library(addnorm STATIC $<TARGET_OBJECTS:addnorm_objects>)
add_library(addnorm_shared SHARED $<TARGET_OBJECTS:addnorm_objects>)
foreach(library addnorm addnorm_shared)
  target_include_directories(${library} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${library} PUBLIC cxx_std_20)
endforeach()
# Inside this tree the static library passes OpenMP's flags on (nn, the lab and the tests use
# OpenMP themselves); installed, a program linking it gets libgomp and Highway at link time only.
target_link_libraries(addnorm
  PUBLIC $<BUILD_INTERFACE:OpenMP::OpenMP_CXX>
  PRIVATE hwy::hwy
  INTERFACE $<INSTALL_INTERFACE:$<LINK_ONLY:OpenMP::OpenMP_CXX>>)
target_link_libraries(addnorm_shared PRIVATE hwy::hwy OpenMP::OpenMP_CXX)
# Only the public API leaves the shared library: the hidden visibility above keeps addnorm's
# internals in, and the version script the standard library's and Highway's template instances.
set_target_properties(addnorm_shared PROPERTIES
  OUTPUT_NAME addnorm
  VERSION ${PROJECT_VERSION}
  SOVERSION ${ADDNORM_ABI_VERSION}
  EXPORT_NAME addnorm
  LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/exports.map)
target_link_options(addnorm_shared PRIVATE
                    "LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/exports.map")
# Every symbol resolved at link time, so a missing dependency shows here and not in a user's
# program; not under the sanitizers, whose runtime a shared library may leave to the executable.
if(NOT ADDNORM_SANITIZE)
  target_link_options(addnorm_shared PRIVATE "LINKER:--no-undefined")
endif()
set_target_properties(addnorm PROPERTIES EXPORT_NAME static)

# The names a parent project (add_subdirectory, FetchContent) links, the same as an installed
# addnorm's.
add_library(addnorm::addnorm ALIAS addnorm_shared)
add_library(addnorm::static ALIAS addnorm)
