// tuned_in (src/ops/cpu/tuning.hpp): how a dev/ build's override string reaches a tunable. The
// string's form is checked by CMake; here, that a named value is found whole, in any position,
// and that anything else leaves the default.
#include <gtest/gtest.h>

#include "ops/cpu/tuning.hpp"

namespace addnorm::cpu {
namespace {

// At compile time, as the kernels use it.
static_assert(tuned_in("kMaxGroup=4", "kMaxGroup", 8) == 4);
static_assert(tuned_in("", "kMaxGroup", 8) == 8);

TEST(Tuning, FindsTheNamedValueAnywhereInTheList) {
  EXPECT_EQ(tuned_in("kMaxGroup=4,kGroupBytes=8192", "kGroupBytes", 16384), 8192);
  EXPECT_EQ(tuned_in("kMaxGroup=4,kGroupBytes=8192", "kMaxGroup", 8), 4);
  EXPECT_EQ(tuned_in("kShortRowMaxDim=0", "kShortRowMaxDim", 1024), 0);
  EXPECT_EQ(tuned_in("kParallelThreshold=1048576", "kParallelThreshold", 1), 1048576);
}

TEST(Tuning, KeepsTheDefaultForAnotherName) {
  EXPECT_EQ(tuned_in("kMaxGroup=4", "kGroupBytes", 16384), 16384);
  // A name that is a prefix or an extension of the one asked for is another name.
  EXPECT_EQ(tuned_in("kMaxGroupRows=4", "kMaxGroup", 8), 8);
  EXPECT_EQ(tuned_in("kMax=4", "kMaxGroup", 8), 8);
}

TEST(Tuning, ANameNoOverrideCanHoldKeepsItsDefault) {
  // CMake refuses an override of a name that no kernel defines, so in any build this one is
  // its default.
  EXPECT_EQ(tuned("kNotATunable", -3), -3);
}

}  // namespace
}  // namespace addnorm::cpu
