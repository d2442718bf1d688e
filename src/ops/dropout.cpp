// Dropout with counter-based masks (ops/reference/philox.hpp): element i of a tensor uses
// element offset + i of the seed's stream, whatever the thread count.
#include "ops/cpu/dropout.hpp"
#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/threading.hpp"
#include "ops/op_checks.hpp"

namespace addnorm {

namespace {

// output = dropout(input) for a whole tensor of `count` elements of one storage type (threads
// over ranges); output may be input. A kept value is input / (1 - p) in float64, rounded to
// float32 and then to the storage type; p = 0 copies.
void dropout_elements(const AnyConstView& input, const AnyMutableView& output, int64_t count,
                      const DropoutOptions& options) {
  const int64_t size = dtype_size(input.dtype);
  // Threads take contiguous element ranges; each element's mask depends only on its index.
  cpu::parallel_rows(count, 1, [&](int64_t begin, int64_t end) {
    cpu::apply_dropout(static_cast<const char*>(input.data) + begin * size,
                       static_cast<char*>(output.data) + begin * size, input.dtype, end - begin,
                       options, options.offset + static_cast<uint64_t>(begin));
  });
}

}  // namespace

void dropout(AnyConstView x, AnyMutableView y, const DropoutOptions& options) {
  const int64_t count = detail::check_dropout_op<float>("x", x, "y", y, options);
  dropout_elements(x, y, count, options);
}

// The same mask and scale as the forward: the derivative of a kept element is 1 / (1 - p).
void dropout_backward(AnyConstView dy, AnyMutableView dx, const DropoutOptions& options) {
  const int64_t count = detail::check_dropout_op<float>("dy", dy, "dx", dx, options);
  dropout_elements(dy, dx, count, options);
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
