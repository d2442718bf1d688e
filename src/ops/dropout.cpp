// Dropout with counter-based masks (ops/reference/philox.hpp): element i of a tensor uses
// element offset + i of the seed's stream, whatever the thread count.
#include <algorithm>

#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/dropout.hpp"
#include "ops/cpu/threading.hpp"
#include "ops/dropout_detail.hpp"
#include "ops/reference/philox.hpp"
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
  const uint32_t threshold = reference::dropout_threshold(options.p);
  cpu::parallel_rows(count, 1, [&](int64_t begin, int64_t end) {
    constexpr int64_t kBlock = 1024;
    uint32_t bits[kBlock];
    for (int64_t start = begin; start < end; start += kBlock) {
      const int64_t length = std::min(kBlock, end - start);
      cpu::philox_bits(options.seed, options.offset + static_cast<uint64_t>(start), bits, length);
      for (int64_t i = 0; i < length; ++i) mask.data[start + i] = bits[i] >= threshold ? 1 : 0;
    }
  });
}

}  // namespace addnorm
