// Storage types: float32, bfloat16 and float16. Ops compute in float32 (and float64 for
// reductions) whatever the storage; narrow types are widened on load and rounded to nearest-even
// once on store. Views carrying their dtype let the tensors of a call be stored differently
// (ops.hpp says which may differ): a float32 residual stream beside bfloat16 activations, as
// large-model training keeps them.
#pragma once

#include <cstdint>

#include "addnorm/tensor.hpp"
#include "addnorm/visibility.hpp"

ADDNORM_PUBLIC_BEGIN
namespace addnorm {

enum class DType : uint8_t { float32, bfloat16, float16 };

int64_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);

// The bit patterns of the two 16-bit formats.
struct bfloat16 {
  uint16_t bits = 0;
};
struct float16 {
  uint16_t bits = 0;
};

float to_float(bfloat16 value);     // exact
float to_float(float16 value);      // exact
bfloat16 to_bfloat16(float value);  // round to nearest even; NaN stays NaN
float16 to_float16(float value);    // round to nearest even; overflow to Inf, NaN stays NaN

// A read-only view of any storage type.
struct AnyConstView {
  const void* data = nullptr;
  Shape shape;
  DType dtype = DType::float32;

  AnyConstView() = default;
  AnyConstView(const void* values, const Shape& dims, DType type)
      : data(values), shape(dims), dtype(type) {}
  AnyConstView(ConstView view) : data(view.data), shape(view.shape) {}
  AnyConstView(const float* values, const Shape& dims) : data(values), shape(dims) {}
  AnyConstView(TensorView<const bfloat16> view)
      : data(view.data), shape(view.shape), dtype(DType::bfloat16) {}
  AnyConstView(TensorView<const float16> view)
      : data(view.data), shape(view.shape), dtype(DType::float16) {}
  // Writable views read as well (one conversion, so they pass where an AnyConstView is asked).
  AnyConstView(MutableView view) : AnyConstView(ConstView(view)) {}
  AnyConstView(TensorView<bfloat16> view) : AnyConstView(TensorView<const bfloat16>(view)) {}
  AnyConstView(TensorView<float16> view) : AnyConstView(TensorView<const float16>(view)) {}
};

// A writable view of any storage type.
struct AnyMutableView {
  void* data = nullptr;
  Shape shape;
  DType dtype = DType::float32;

  AnyMutableView() = default;
  AnyMutableView(void* values, const Shape& dims, DType type)
      : data(values), shape(dims), dtype(type) {}
  AnyMutableView(MutableView view) : data(view.data), shape(view.shape) {}
  AnyMutableView(float* values, const Shape& dims) : data(values), shape(dims) {}
  AnyMutableView(TensorView<bfloat16> view)
      : data(view.data), shape(view.shape), dtype(DType::bfloat16) {}
  AnyMutableView(TensorView<float16> view)
      : data(view.data), shape(view.shape), dtype(DType::float16) {}
  operator AnyConstView() const { return {data, shape, dtype}; }
};

}  // namespace addnorm
ADDNORM_PUBLIC_END
