// Residual add: out = x + r, the "Add" of Add & Norm.
#include "addnorm/ops.hpp"
#include "ops/op_checks.hpp"

namespace addnorm {

void add(ConstView x, ConstView r, MutableView out) {
  const int64_t count = detail::check_add(x, r, out);
  for (int64_t i = 0; i < count; ++i) out.data[i] = x.data[i] + r.data[i];
}

}  // namespace addnorm
