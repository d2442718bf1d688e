// Dropout with counter-based masks (ops/reference/philox.hpp): element i of a tensor uses
// element offset + i of the seed's stream, whatever the thread count.
#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"
#include "ops/dropout_detail.hpp"
#include "ops/reference/philox.hpp"
#include "ops/validate.hpp"

namespace addnorm {

using detail::region;

namespace detail {

void check_dropout(const DropoutOptions& options, int64_t count) {
  check_dropout_p(options.p);
  if (options.offset > UINT64_MAX - static_cast<uint64_t>(count)) {
    throw Error("offset is " + std::to_string(options.offset) +
                ", expected offset + element count to fit in 64 bits");
  }
}

float dropout_element(float value, int64_t i, const DropoutOptions& options) {
  if (options.p == 0.0f) return value;
  const uint32_t threshold = reference::dropout_threshold(options.p);
  if (!reference::dropout_keeps(options.seed, options.offset + static_cast<uint64_t>(i),
                                threshold)) {
    return 0.0f;
  }
  // One rounding: the scale 1 / (1 - p) is applied in float64.
  return static_cast<float>(static_cast<double>(value) / (1.0 - static_cast<double>(options.p)));
}

}  // namespace detail

void dropout(ConstView x, MutableView y, const DropoutOptions& options) {
  const int64_t count = detail::check_tensor("x", x);
  detail::check_shape("y", y, x.shape);
  detail::check_dropout(options, count);
  detail::check_disjoint({region("y", y)}, {region("x", x)}, {{"y", "x"}});
  for (int64_t i = 0; i < count; ++i) y.data[i] = detail::dropout_element(x.data[i], i, options);
}

// The same mask and scale as the forward: the derivative of a kept element is 1 / (1 - p).
void dropout_backward(ConstView dy, MutableView dx, const DropoutOptions& options) {
  const int64_t count = detail::check_tensor("dy", dy);
  detail::check_shape("dx", dx, dy.shape);
  detail::check_dropout(options, count);
  detail::check_disjoint({region("dx", dx)}, {region("dy", dy)}, {{"dx", "dy"}});
  for (int64_t i = 0; i < count; ++i) {
    dx.data[i] = detail::dropout_element(dy.data[i], i, options);
  }
}

void dropout_mask(TensorView<uint8_t> mask, const DropoutOptions& options) {
  const int64_t count = detail::check_tensor("mask", mask);
  detail::check_dropout(options, count);
  const uint32_t threshold = reference::dropout_threshold(options.p);
  for (int64_t i = 0; i < count; ++i) {
    mask.data[i] = reference::dropout_keeps(options.seed,
                                            options.offset + static_cast<uint64_t>(i), threshold)
                       ? 1
                       : 0;
  }
}

}  // namespace addnorm
