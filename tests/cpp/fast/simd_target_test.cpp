// addnorm::simd_target() and simd_targets() (include/addnorm/simd.hpp) name the target that
// really runs: forcing each compiled target makes simd_target() follow, and without forcing it is
// the first (best) of simd_targets().
#include <gtest/gtest.h>

#include "addnorm/simd.hpp"
#include "ops/cpu/kernels.hpp"

namespace addnorm {
namespace {

TEST(SimdTarget, NamesTheDispatchedTarget) {
  const std::vector<std::string> targets = simd_targets();
  ASSERT_EQ(targets.size(), cpu::available_targets().size());
  for (int64_t target : cpu::available_targets()) {
    cpu::force_target(target);
    EXPECT_EQ(simd_target(), cpu::target_name(target));
  }
  cpu::force_target(0);
  EXPECT_EQ(simd_target(), targets.front());
}

TEST(SimdTarget, CompilesSeveralTargets) {
  // SSE4 or AVX2 next to the best target: the same binary runs without AVX-512.
  EXPECT_GE(cpu::available_targets().size(), 2u) << cpu::current_target_name();
}

}  // namespace
}  // namespace addnorm
