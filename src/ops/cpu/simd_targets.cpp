// The SIMD targets compiled into this binary, and the switch the tests use to run the kernels
// on each (kernels.hpp): Highway's chosen target is process-wide, so forcing it here moves every
// unit's dispatch (norm_forward_unit.inc, norm_backward_unit.inc, BatchNorm, dropout) at once.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/simd_targets.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "ops/cpu/kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {

// The name of the target this copy was compiled for (for the tests).
const char* compiled_target_name() {
  return hwy::TargetName(HWY_TARGET);
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace addnorm::cpu {

HWY_EXPORT(compiled_target_name);

std::vector<int64_t> available_targets() {
  std::vector<int64_t> targets;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) targets.push_back(target);
  return targets;
}

void force_target(int64_t target) {
  hwy::SetSupportedTargetsForTest(target);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

std::string target_name(int64_t target) {
  return hwy::TargetName(target);
}

std::string current_target_name() {
  return HWY_DYNAMIC_DISPATCH(compiled_target_name)();
}

}  // namespace addnorm::cpu
#endif  // HWY_ONCE
