// The residual add alone (the add op, src/ops/add.cpp) for any stream and branch storage: the
// pre-norm's own residual stage (norm_forward-inl.h's add_rows), so its out is the fused op's h
// bit for bit, compiled for every SIMD target with its run-time dispatch, and spread over
// threads. A unit of its own: in a stream's forward unit its nine instances cost that unit 15 s
// of compile time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/residual_add_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "ops/cpu/norm_forward-inl.h"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {

void residual_add_rows(const NormForward& a, int64_t begin, int64_t end) {
  with_storage(a.storage, [&](auto stream) {
    with_storage(a.branch_storage,
                 [&](auto branch) { add_rows<decltype(stream), decltype(branch)>(a, begin, end); });
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "ops/cpu/threading.hpp"

namespace addnorm::cpu {

HWY_EXPORT(residual_add_rows);

void residual_add(const NormForward& args) {
  parallel_rows(args.rows, args.dim, [&](int64_t begin, int64_t end) {
    HWY_DYNAMIC_DISPATCH(residual_add_rows)(args, begin, end);
  });
}

}  // namespace addnorm::cpu
#endif  // HWY_ONCE
