// From the C ABI's descriptors to the C++ API's views. A call runs in one of two element types:
// T = float (the float32 ops, tensors of any 32- or 16-bit storage) or T = double (the float64
// ops, every tensor float64), chosen by x's dtype (h's in the pre-norm backward:
// by_element_type). Each reader throws addnorm::Error naming the argument, so a bad descriptor
// is refused before the op runs, and the op itself validates everything before it writes.
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>

#include "addnorm/addnorm.h"
#include "addnorm/float64.hpp"
#include "addnorm/ops.hpp"

namespace addnorm::capi {

// The descriptor's shape, after checking that it is there, its rank and its dtype value.
Shape shape_of(const char* name, const addnorm_tensor& tensor);
// The descriptor, which a required argument may not leave NULL.
const addnorm_tensor& required(const char* name, const addnorm_tensor* tensor);

// Throws unless `tensor` is stored as `dtype`; `why` ends the message.
void expect_dtype(const char* name, const addnorm_tensor& tensor, addnorm_dtype dtype,
                  const char* why);
// Throws unless `tensor` fits a call of element type T: float64 when T is double, one of the
// 32- and 16-bit types when T is float.
void expect_float32_call(const char* name, const addnorm_tensor& tensor);
void expect_float64_call(const char* name, const addnorm_tensor& tensor);
template <class T>
void expect_call_type(const char* name, const addnorm_tensor& tensor) {
  if constexpr (std::is_same_v<T, double>) {
    expect_float64_call(name, tensor);
  } else {
    expect_float32_call(name, tensor);
  }
}

// Runs body(T{}) with T = double when `lead` is float64, float otherwise.
template <class Body>
void by_element_type(const char* lead_name, const addnorm_tensor* lead, Body&& body) {
  if (required(lead_name, lead).dtype == ADDNORM_FLOAT64) {
    body(double{});
  } else {
    body(float{});
  }
}

// A tensor the norm reads (x, dy, gamma, ...): any storage type for T = float.
template <class T>
NormConst<T> input(const char* name, const addnorm_tensor* tensor) {
  const addnorm_tensor& t = required(name, tensor);
  expect_call_type<T>(name, t);
  if constexpr (std::is_same_v<T, double>) {
    return TensorView<const double>{static_cast<const double*>(t.data), shape_of(name, t)};
  } else {
    return AnyConstView(t.data, shape_of(name, t), static_cast<DType>(t.dtype));
  }
}
template <class T>
std::optional<NormConst<T>> optional_input(const char* name, const addnorm_tensor* tensor) {
  if (tensor == nullptr) return std::nullopt;
  return input<T>(name, tensor);
}

// A tensor the norm writes (y, h, dx, ...): any storage type for T = float.
template <class T>
NormMutable<T> output(const char* name, const addnorm_tensor* tensor) {
  const addnorm_tensor& t = required(name, tensor);
  expect_call_type<T>(name, t);
  if constexpr (std::is_same_v<T, double>) {
    return TensorView<double>{static_cast<double*>(t.data), shape_of(name, t)};
  } else {
    return AnyMutableView(t.data, shape_of(name, t), static_cast<DType>(t.dtype));
  }
}

// A tensor of exactly the element type T (const for one the op reads): statistics, parameter
// gradients, BatchNorm's tensors.
template <class T>
TensorView<T> exact(const char* name, const addnorm_tensor* tensor) {
  const addnorm_tensor& t = required(name, tensor);
  if constexpr (std::is_same_v<std::remove_const_t<T>, double>) {
    expect_call_type<double>(name, t);
  } else {
    expect_dtype(name, t, ADDNORM_FLOAT32,
                 "(statistics, parameter gradients and BatchNorm's tensors are float32 unless "
                 "the call is float64)");
  }
  return {static_cast<T*>(t.data), shape_of(name, t)};
}
template <class T>
std::optional<TensorView<T>> optional_exact(const char* name, const addnorm_tensor* tensor) {
  if (tensor == nullptr) return std::nullopt;
  return exact<T>(name, tensor);
}

// Two optional tensors that come together (mean and rstd): both or neither.
void expect_pair(const char* first_name, const addnorm_tensor* first, const char* second_name,
                 const addnorm_tensor* second);
// An argument the call has no use for, which must be NULL; `why` ends the message.
void expect_absent(const char* name, const addnorm_tensor* tensor, const char* why);

// The forward statistics asked for (mean and rstd, both or neither), or none.
template <class T>
std::optional<BasicNormStats<T>> stats_out(const addnorm_tensor* mean, const addnorm_tensor* rstd) {
  expect_pair("mean", mean, "rstd", rstd);
  if (rstd == nullptr) return std::nullopt;
  return BasicNormStats<T>{exact<T>("mean", mean), exact<T>("rstd", rstd)};
}
// The saved statistics a backward was given (both or neither), or none.
template <class T>
std::optional<BasicSavedStats<T>> stats_in(const addnorm_tensor* mean, const addnorm_tensor* rstd) {
  expect_pair("saved_mean", mean, "saved_rstd", rstd);
  if (rstd == nullptr) return std::nullopt;
  return BasicSavedStats<T>{exact<const T>("saved_mean", mean), exact<const T>("saved_rstd", rstd)};
}

// The trailing normalized_ndim dims of x (named x_name): 1 to x's rank of them.
Shape trailing_dims(const char* x_name, const Shape& x_shape, int32_t normalized_ndim);

// eps as every op takes it: absent (the default of the kind it runs) when negative.
template <class T>
std::optional<T> optional_eps(double eps) {
  if (eps < 0) return std::nullopt;
  return eps_as<T>(eps);
}

NormKind norm_kind(int32_t norm);

// The one description every norm entry point builds, in the C ABI's argument order: gamma and
// beta (null: absent), zero_centered_gamma (non-zero: set), eps (negative: the kind's default).
template <class T>
BasicNormOptions<T> norm_options(NormKind norm, const addnorm_tensor* gamma,
                                 const addnorm_tensor* beta, int32_t zero_centered_gamma,
                                 double eps) {
  BasicNormOptions<T> options;
  options.norm = norm;
  options.gamma = optional_input<T>("gamma", gamma);
  options.beta = optional_input<T>("beta", beta);
  options.zero_centered_gamma = zero_centered_gamma != 0;
  options.eps = optional_eps<T>(eps);
  return options;
}
MomentumConvention momentum_convention(int32_t convention);

}  // namespace addnorm::capi
