// Argument checks shared by every public entry point. Each throws addnorm::Error with a message
// that names the argument and what was expected; none of them writes anything.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>

#include "addnorm/dtype.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm::detail {

// How LayerNorm and RMSNorm see x: `rows` independent rows of `dim` contiguous values.
struct RowLayout {
  int64_t rows = 0;
  int64_t dim = 0;
};

// Checks that `view` has no negative dimension, an element count that fits, and data unless it
// has no elements; returns its element count.
template <class T>
int64_t check_tensor(const char* name, const TensorView<T>& view);

// Checks that `view` has exactly `expected` shape (and data).
template <class T>
void check_shape(const char* name, const TensorView<T>& view, const Shape& expected);

// The same for views of any storage type.
int64_t check_tensor(const char* name, const AnyConstView& view);
void check_shape(const char* name, const AnyConstView& view, const Shape& expected);

// Checks that `view` stores `other`'s type: two tensors of one group of a call (the residual
// stream x and h, the branch r and y, a tensor and its gradient). `group` says which, for the
// message.
void check_same_storage(const char* name, const AnyConstView& view, const char* other_name,
                        const AnyConstView& other, const char* group);

// Checks that `view` holds exactly `count` elements (used for per-row statistics).
template <class T>
void check_count(const char* name, const TensorView<T>& view, int64_t count, const char* per);

// Checks that normalized_shape is non-empty and equals the trailing dims of the input named
// x_name (x, or h in the pre-norm backward).
RowLayout row_layout(const Shape& x_shape, const Shape& normalized_shape, const char* x_name = "x");

// A float for an error message, with enough digits that a value just outside a range never
// prints as one inside it.
std::string format_value(float value);
std::string format_value(double value);

// The scalar options, float32 or float64 as the op's data.
void check_eps(float eps);
void check_eps(double eps);
void check_momentum(float momentum);
void check_momentum(double momentum);
void check_dropout_p(float p);
void check_dropout_p(double p);

// gamma and beta (each optional) must have normalized_shape.
template <class Gamma, class Beta>
void check_affine(const std::optional<Gamma>& gamma, const std::optional<Beta>& beta,
                  const Shape& normalized_shape) {
  if (gamma) check_shape("gamma", *gamma, normalized_shape);
  if (beta) check_shape("beta", *beta, normalized_shape);
}
// A parameter's gradient may only be asked for when the parameter exists, and has its shape.
void refuse_gradient_without_parameter(const char* grad_name, const char* param_name);
template <class T, class Param>
void check_parameter_grad(const char* grad_name, const std::optional<TensorView<T>>& grad,
                          const char* param_name, const std::optional<Param>& param,
                          const Shape& param_shape) {
  if (!grad) return;
  if (!param) refuse_gradient_without_parameter(grad_name, param_name);
  check_shape(grad_name, *grad, param_shape);
}

// The byte range an argument occupies, for overlap checks; absent arguments occupy nothing.
// `element` names the element type: an output may replace an input only when both store the
// same type (a bfloat16 y over float16 x would be the same bytes read as something else).
struct Region {
  const char* name;
  const void* begin;
  int64_t bytes;
  int element = -1;
};
// float32 typed views share the tag of float32 storage (DType::float32) with AnyConstView.
template <class T>
int element_tag() {
  using Plain = std::remove_const_t<T>;
  if constexpr (std::is_same_v<Plain, float>) return static_cast<int>(DType::float32);
  if constexpr (std::is_same_v<Plain, double>) return 100;
  return 101;
}
template <class T>
Region region(const char* name, const TensorView<T>& view) {
  return {name, static_cast<const void*>(view.data),
          view.shape.numel() * static_cast<int64_t>(sizeof(T)), element_tag<T>()};
}
inline Region region(const char* name, const AnyConstView& view) {
  return {name, view.data, view.shape.numel() * dtype_size(view.dtype),
          static_cast<int>(view.dtype)};
}
inline Region region(const char* name, const AnyMutableView& view) {
  return region(name, AnyConstView(view));
}
template <class View>
Region region(const char* name, const std::optional<View>& view) {
  return view ? region(name, *view) : Region{name, nullptr, 0};
}

// For members of optional structs: a null pointer is an absent argument.
template <class T>
Region region(const char* name, const TensorView<T>* view) {
  return view ? region(name, *view) : Region{name, nullptr, 0};
}

// Two argument names that may share exactly the same memory (an output replacing an input).
struct AliasPair {
  const char* output;
  const char* other;
};
// Checks that no output overlaps another output or an input, except the pairs in may_alias,
// which may coincide exactly (same start, same size) but not partially overlap.
void check_disjoint(std::initializer_list<Region> outputs, std::initializer_list<Region> inputs,
                    std::initializer_list<AliasPair> may_alias = {});

}  // namespace addnorm::detail
