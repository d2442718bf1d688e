// The public names of the dispatched SIMD target (include/addnorm/simd.hpp), read from the
// kernels' own dispatch table so that the answer is the target that really runs.
#include "addnorm/simd.hpp"

#include "ops/cpu/kernels.hpp"

namespace addnorm {

std::string simd_target() {
  return cpu::current_target_name();
}

std::vector<std::string> simd_targets() {
  std::vector<std::string> names;
  for (int64_t target : cpu::available_targets()) names.push_back(cpu::target_name(target));
  return names;
}

}  // namespace addnorm
