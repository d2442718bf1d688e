#include "ops/staged_rows.hpp"

#include <algorithm>

#include "ops/cpu/convert.hpp"
#include "ops/cpu/kernels.hpp"

namespace addnorm::detail {

int64_t block_rows(int64_t dim) { return std::max<int64_t>(1, (int64_t{1} << 14) / dim); }

const float* input_rows(const AnyConstView& view, int64_t begin, int64_t count,
                        cpu::Scratch& scratch) {
  if (view.dtype == DType::float32) return static_cast<const float*>(view.data) + begin;
  float* rows = scratch.take<float>(count);
  cpu::to_float32(static_cast<const uint8_t*>(view.data) + begin * dtype_size(view.dtype),
                  view.dtype, rows, count);
  return rows;
}

float* output_rows(const AnyMutableView& view, int64_t begin, int64_t count,
                   cpu::Scratch& scratch) {
  if (view.dtype == DType::float32) return static_cast<float*>(view.data) + begin;
  return scratch.take<float>(count);
}

void store_rows(const AnyMutableView& view, const float* rows, int64_t begin, int64_t count) {
  if (view.dtype == DType::float32) return;
  const bool stream = cpu::streams_output(view.shape.numel() * dtype_size(view.dtype));
  cpu::from_float32(rows, static_cast<uint8_t*>(view.data) + begin * dtype_size(view.dtype),
                    view.dtype, count, stream);
}

const float* parameter_as_float32(const std::optional<AnyConstView>& view, cpu::Scratch& scratch) {
  if (!view) return nullptr;
  return input_rows(*view, 0, view->shape.numel(), scratch);
}

}  // namespace addnorm::detail
