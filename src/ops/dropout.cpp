// Dropout with counter-based masks (ops/reference/philox.hpp): element i of a tensor uses
// element offset + i of the seed's stream, whatever the thread count.
#include "ops/cpu/dropout.hpp"
#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/threading.hpp"
#include "ops/dropout_detail.hpp"
#include "ops/op_checks.hpp"

namespace addnorm {

namespace detail {

void dropout_elements(const float* input, float* output, int64_t count,
                      const DropoutOptions& options) {
  // Threads take contiguous element ranges; each element's mask depends only on its index.
  cpu::parallel_rows(count, 1, [&](int64_t begin, int64_t end) {
    cpu::apply_dropout(input + begin, output + begin, end - begin, options,
                       options.offset + static_cast<uint64_t>(begin));
  });
}

}  // namespace detail

void dropout(ConstView x, MutableView y, const DropoutOptions& options) {
  const int64_t count = detail::check_dropout_op("x", x, "y", y, options);
  detail::dropout_elements(x.data, y.data, count, options);
}

// The same mask and scale as the forward: the derivative of a kept element is 1 / (1 - p).
void dropout_backward(ConstView dy, MutableView dx, const DropoutOptions& options) {
  const int64_t count = detail::check_dropout_op("dy", dy, "dx", dx, options);
  detail::dropout_elements(dy.data, dx.data, count, options);
}

void dropout_mask(TensorView<uint8_t> mask, const DropoutOptions& options) {
  const int64_t count = detail::check_tensor("mask", mask);
  detail::check_dropout(options, count);
  cpu::parallel_rows(count, 1, [&](int64_t begin, int64_t end) {
    cpu::keep_mask(options.seed, options.p, options.offset + static_cast<uint64_t>(begin),
                   mask.data + begin, end - begin);
  });
}

}  // namespace addnorm
