// Residual add: out = x + r, the "Add" of Add & Norm.
#include "addnorm/ops.hpp"
#include "ops/validate.hpp"

namespace addnorm {

void add(ConstView x, ConstView r, MutableView out) {
  const int64_t count = detail::check_tensor("x", x);
  detail::check_shape("r", r, x.shape);
  detail::check_shape("out", out, x.shape);
  detail::check_disjoint({detail::region("out", out)},
                         {detail::region("x", x), detail::region("r", r)},
                         {{"out", "x"}, {"out", "r"}});
  for (int64_t i = 0; i < count; ++i) out.data[i] = x.data[i] + r.data[i];
}

}  // namespace addnorm
