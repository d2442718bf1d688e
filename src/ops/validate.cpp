#include "ops/validate.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"
#include "ops/shortest_text.hpp"

namespace addnorm::detail {

// A tensor may have zero elements (an empty batch, as PyTorch allows); its data may then be null.
template <class T>
int64_t check_tensor(const char* name, const TensorView<T>& view) {
  const int64_t count = view.shape.numel(name);
  if (view.data == nullptr && count > 0) {
    throw Error(ErrorKind::value, name,
                std::string("has no data (null pointer), expected ") + std::to_string(count) +
                    " elements of data");
  }
  return count;
}

template <class T>
void check_shape(const char* name, const TensorView<T>& view, const Shape& expected) {
  if (!(view.shape == expected)) {
    throw Error(
        ErrorKind::shape, name,
        std::string("has shape ") + view.shape.to_string() + ", expected " + expected.to_string());
  }
  check_tensor(name, view);
}

template <class T>
void check_count(const char* name, const TensorView<T>& view, int64_t count, const char* per) {
  const int64_t actual = check_tensor(name, view);
  if (actual != count) {
    throw Error(ErrorKind::shape, name,
                std::string("has ") + std::to_string(actual) + " elements (shape " +
                    view.shape.to_string() + "), expected " + std::to_string(count) + " (one " +
                    per + ")");
  }
}

// The element types of the ops' tensors: float32 and float64 data, uint8 dropout masks.
template int64_t check_tensor(const char*, const TensorView<const float>&);
template int64_t check_tensor(const char*, const TensorView<float>&);
template int64_t check_tensor(const char*, const TensorView<const double>&);
template int64_t check_tensor(const char*, const TensorView<double>&);
template int64_t check_tensor(const char*, const TensorView<uint8_t>&);
template int64_t check_tensor(const char*, const TensorView<const void>&);
template void check_shape(const char*, const TensorView<const void>&, const Shape&);
template void check_shape(const char*, const TensorView<const float>&, const Shape&);
template void check_shape(const char*, const TensorView<float>&, const Shape&);
template void check_shape(const char*, const TensorView<const double>&, const Shape&);
template void check_shape(const char*, const TensorView<double>&, const Shape&);
template void check_count(const char*, const TensorView<const float>&, int64_t, const char*);
template void check_count(const char*, const TensorView<float>&, int64_t, const char*);
template void check_count(const char*, const TensorView<const double>&, int64_t, const char*);
template void check_count(const char*, const TensorView<double>&, int64_t, const char*);

namespace {
// A DType the library knows: a value cast from an integer out of the enum's range (a caller's
// bug, or memory read as a DType) is refused by name rather than read as some other type.
void check_dtype(const char* name, DType dtype) {
  switch (dtype) {
    case DType::float32:
    case DType::bfloat16:
    case DType::float16:
      return;
  }
  throw Error(ErrorKind::type, name,
              "has dtype " + std::to_string(static_cast<int>(dtype)) +
                  ", expected an addnorm::DType (float32, bfloat16 or float16)");
}
}  // namespace

int64_t check_tensor(const char* name, const AnyConstView& view) {
  check_dtype(name, view.dtype);
  return check_tensor(name, TensorView<const void>{view.data, view.shape});
}
void check_shape(const char* name, const AnyConstView& view, const Shape& expected) {
  check_dtype(name, view.dtype);
  check_shape(name, TensorView<const void>{view.data, view.shape}, expected);
}

void check_same_storage(const char* name, const AnyConstView& view, const char* other_name,
                        const AnyConstView& other, const char* group) {
  if (view.dtype == other.dtype) return;
  throw Error(ErrorKind::type, name,
              std::string("is stored as ") + dtype_name(view.dtype) + ", expected " +
                  dtype_name(other.dtype) + " like " + other_name + " (" + group + ")");
}

RowLayout row_layout(const Shape& x_shape, const Shape& normalized_shape, const char* x_name) {
  if (normalized_shape.rank() == 0) {
    throw Error(ErrorKind::shape, "normalized_shape", "is empty, expected at least one dimension");
  }
  normalized_shape.numel("normalized_shape");
  const int count = normalized_shape.rank();
  if (count > x_shape.rank() || !(x_shape.trailing(count) == normalized_shape)) {
    throw Error(ErrorKind::shape, "normalized_shape",
                normalized_shape.to_string() + " does not match the trailing dims of " + x_name +
                    " " + x_shape.to_string());
  }
  return {x_shape.product(0, x_shape.rank() - count), normalized_shape.product(0, count)};
}

namespace {

// eps and momentum may be any finite value, as in PyTorch and ONNX, whose own tests pass eps < 0
// and momentum outside [0, 1]: a row whose variance + eps is negative then has a NaN rstd, and
// NaN outputs (docs/numerics.md); a momentum outside [0, 1] extrapolates. NaN and infinity have
// no meaning, and are refused.
template <class T>
void check_eps_as(T eps) {
  if (!std::isfinite(eps)) {
    throw Error(ErrorKind::value, "eps",
                std::string("is ") + shortest_text(eps) + ", expected a finite value");
  }
}

template <class T>
void check_momentum_as(T momentum) {
  if (!std::isfinite(momentum)) {
    throw Error(ErrorKind::value, "momentum",
                std::string("is ") + shortest_text(momentum) + ", expected a finite value");
  }
}

template <class T>
void check_dropout_p_as(T p) {
  if (!(p >= T(0) && p < T(1))) {
    throw Error(
        ErrorKind::value, "p",
        std::string("is ") + shortest_text(p) + ", expected a dropout probability in [0, 1)");
  }
}

}  // namespace

std::string format_value(float value) {
  return shortest_text(value);
}
std::string format_value(double value) {
  return shortest_text(value);
}

void check_eps(float eps) {
  check_eps_as(eps);
}
void check_eps(double eps) {
  check_eps_as(eps);
}
void check_momentum(float momentum) {
  check_momentum_as(momentum);
}
void check_momentum(double momentum) {
  check_momentum_as(momentum);
}
void check_dropout_p(float p) {
  check_dropout_p_as(p);
}
// The mask is drawn at float32's precision for every element type (dropout_threshold takes a
// float p), so a float64 p that rounds to 1 in float32 would drop every element: refused, as the
// float32 path refuses it after rounding.
void check_dropout_p(double p) {
  check_dropout_p_as(p);
  if (static_cast<float>(p) >= 1.0f) {
    throw Error(
        ErrorKind::value, "p",
        std::string("is ") + shortest_text(p) +
            ", which rounds to 1 in float32 (the dropout mask's precision); expected a value "
            "below 1");
  }
}

void refuse_gradient_without_parameter(const char* grad_name, const char* param_name) {
  throw Error(ErrorKind::value, grad_name,
              std::string("was requested but ") + param_name + " is absent, expected no " +
                  grad_name + " without " + param_name);
}

namespace {

bool may_coincide(const Region& output, const Region& other,
                  std::initializer_list<AliasPair> may_alias) {
  for (const AliasPair& pair : may_alias) {
    if (std::string_view(pair.output) == output.name && std::string_view(pair.other) == other.name)
      return true;
  }
  return false;
}

void check_pair(const Region& output, const Region& other,
                std::initializer_list<AliasPair> may_alias) {
  if (output.bytes == 0 || other.bytes == 0) return;
  const auto out_begin = reinterpret_cast<uintptr_t>(output.begin);
  const auto other_begin = reinterpret_cast<uintptr_t>(other.begin);
  const auto out_end = out_begin + static_cast<uintptr_t>(output.bytes);
  const auto other_end = other_begin + static_cast<uintptr_t>(other.bytes);
  if (out_begin >= other_end || other_begin >= out_end) return;
  const bool allowed = may_coincide(output, other, may_alias);
  if (allowed && out_begin == other_begin && output.bytes == other.bytes &&
      output.element == other.element) {
    return;
  }
  throw Error(
      ErrorKind::overlap, output.name,
      std::string("overlaps ") + other.name + ", expected " +
          (allowed ? (output.element == other.element ? "exactly the same memory or separate memory"
                                                      : "separate memory (it stores another type)")
                   : "separate memory"));
}

}  // namespace

void check_disjoint(std::initializer_list<Region> outputs, std::initializer_list<Region> inputs,
                    std::initializer_list<AliasPair> may_alias) {
  for (auto output = outputs.begin(); output != outputs.end(); ++output) {
    for (auto other = output + 1; other != outputs.end(); ++other) {
      check_pair(*output, *other, may_alias);
    }
    for (const Region& input : inputs) check_pair(*output, input, may_alias);
  }
}

}  // namespace addnorm::detail

namespace addnorm {

double checked_dropout_p(double p) {
  detail::check_dropout_p(p);
  return p;
}

double checked_eps(double eps) {
  detail::check_eps(eps);
  return eps;
}

double checked_momentum(double momentum) {
  detail::check_momentum(momentum);
  return momentum;
}

float narrow_to_float(const char* name, double value) {
  if (std::isfinite(value) && std::fabs(value) > double(std::numeric_limits<float>::max())) {
    throw Error(ErrorKind::value, name,
                std::string("is ") + detail::format_value(value) + ", beyond float32's range (" +
                    kFloat32RangeLimit + ")");
  }
  return static_cast<float>(value);
}

}  // namespace addnorm
