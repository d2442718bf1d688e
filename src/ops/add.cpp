// Residual add: out = x + r, the "Add" of Add & Norm, by the pre-norm's own residual stage
// (src/ops/cpu/norm_forward-inl.h's add_rows): SIMD, over threads, and the same h bit for bit.
#include "addnorm/ops.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/op_checks.hpp"

namespace addnorm {

void add(AnyConstView x, AnyConstView r, AnyMutableView out) {
  const int64_t count = detail::check_add<float>(x, r, out);
  if (count == 0) return;
  cpu::NormForward args;
  args.x = x.data;
  args.residual = r.data;
  args.h = out.data;
  args.y = const_cast<void*>(r.data);  // never written: keeps row_pointers' y within r's bounds
  args.storage = x.dtype;
  args.branch_storage = r.dtype;
  args.rows = count;  // elements as rows of one: threads split the tensor anywhere
  args.dim = 1;
  cpu::residual_add(args);
}

}  // namespace addnorm
