// Which SIMD instruction set the fast kernels use. addnorm compiles its kernels for several
// targets (Highway's static and dynamic dispatch) and picks the best one this CPU supports the
// first time a kernel runs; these name that choice, for `addnorm --version`-style reports.
#pragma once

#include <string>
#include <vector>

#include "addnorm/visibility.hpp"

ADDNORM_PUBLIC_BEGIN
namespace addnorm {

// The target the kernels dispatch to now, by Highway's name ("AVX3_ZEN4", "AVX3", "AVX2", ...).
std::string simd_target();

// Every target compiled into this build that this CPU supports, best first. simd_target() is
// the first of them unless a test forced another.
std::vector<std::string> simd_targets();

}  // namespace addnorm
ADDNORM_PUBLIC_END
