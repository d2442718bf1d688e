// Shapes and non-owning tensor views: what every op takes. Views never allocate, so the hot
// paths never do; Tensor (owning) is a convenience for callers, tests and the command line.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "addnorm/visibility.hpp"

ADDNORM_PUBLIC_BEGIN
namespace addnorm {

// The largest rank a tensor may have. Fixed so that a Shape lives on the stack.
inline constexpr int kMaxRank = 8;

// A tensor shape: up to kMaxRank non-negative dimensions, C order (last dimension contiguous).
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);     // throws Error when rank > kMaxRank
  explicit Shape(std::span<const int64_t> dims);  // throws Error when rank > kMaxRank

  int rank() const { return rank_; }
  int64_t operator[](int axis) const { return dims_[static_cast<size_t>(axis)]; }
  std::span<const int64_t> dims() const { return {dims_.data(), static_cast<size_t>(rank_)}; }

  // The product of all dimensions (1 for rank 0). Throws Error, naming `what`, when a
  // dimension is negative or the product does not fit in int64 bytes of float64.
  int64_t numel(const char* what = "tensor") const;
  // The product of dimensions [begin, end).
  int64_t product(int begin, int end) const;
  // The trailing `count` dimensions (count <= rank).
  Shape trailing(int count) const;
  // The leading dimensions, all but the trailing `count`.
  Shape leading(int count) const;

  // "[2, 3, 4]"
  std::string to_string() const;
  friend bool operator==(const Shape& a, const Shape& b);

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// A non-owning view of a C-contiguous tensor. T is `float` for outputs, `const float` for inputs.
template <class T>
struct TensorView {
  T* data = nullptr;
  Shape shape;

  int64_t numel() const { return shape.numel(); }
  // Any view converts to its read-only form.
  operator TensorView<const T>() const { return {data, shape}; }
};

using ConstView = TensorView<const float>;
using MutableView = TensorView<float>;
using OptionalConst = std::optional<ConstView>;
using OptionalMutable = std::optional<MutableView>;

// An owning tensor of element type T (float, or double for the float64 ops), zero-initialised.
// For callers that do not manage their own memory.
template <class T>
class BasicTensor {
 public:
  BasicTensor() = default;
  explicit BasicTensor(const Shape& shape);
  BasicTensor(const Shape& shape, std::vector<T> values);  // throws Error when sizes disagree

  const Shape& shape() const { return shape_; }
  int64_t numel() const { return static_cast<int64_t>(values_.size()); }
  T* data() { return values_.data(); }
  const T* data() const { return values_.data(); }
  std::vector<T>& values() { return values_; }
  const std::vector<T>& values() const { return values_; }
  T& operator[](int64_t i) { return values_[static_cast<size_t>(i)]; }
  T operator[](int64_t i) const { return values_[static_cast<size_t>(i)]; }

  TensorView<T> view() { return {values_.data(), shape_}; }
  TensorView<const T> view() const { return {values_.data(), shape_}; }
  TensorView<const T> cview() const { return {values_.data(), shape_}; }

 private:
  Shape shape_;
  std::vector<T> values_;
};
// Defined for these two only (src/ops/shape.cpp).
extern template class BasicTensor<float>;
extern template class BasicTensor<double>;
using Tensor = BasicTensor<float>;

}  // namespace addnorm
ADDNORM_PUBLIC_END
