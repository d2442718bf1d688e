// Shape and Tensor: the small value types behind every view.
#include <limits>
#include <sstream>

#include "addnorm/error.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm {

namespace {

void check_rank(size_t rank) {
  if (rank > static_cast<size_t>(kMaxRank)) {
    throw Error(
        ErrorKind::shape, "shape",
        "has rank " + std::to_string(rank) + ", expected at most " + std::to_string(kMaxRank));
  }
}

}  // namespace

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::span<const int64_t>(dims)) {}

Shape::Shape(std::span<const int64_t> dims) {
  check_rank(dims.size());
  rank_ = static_cast<int>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) dims_[i] = dims[i];
}

int64_t Shape::numel(const char* what) const {
  // Bound the element count so that the byte size of a float64 copy still fits in int64.
  // A dimension of 0 makes the count 0, but does not excuse the others: their product is
  // bounded too, so that every partial product of the dims (Shape::product, the ops' layouts)
  // fits in int64 ([0, 2^62, 4] is refused, as the .npy reader refuses it).
  constexpr int64_t kMaxElements = std::numeric_limits<int64_t>::max() / 8;
  int64_t count = 1;
  bool empty = false;
  for (int i = 0; i < rank_; ++i) {
    const int64_t dim = dims_[static_cast<size_t>(i)];
    if (dim < 0) {
      throw Error(ErrorKind::shape, what,
                  "has shape " + to_string() + ", expected non-negative dimensions");
    }
    if (dim == 0) {
      empty = true;
      continue;
    }
    // A multiply with an overflow check rather than a division: validation runs on every call,
    // and a 64-bit division per dimension was a fifth of a one-row call's time.
    int64_t product = 0;
    if (__builtin_mul_overflow(count, dim, &product) || product > kMaxElements) {
      throw Error(ErrorKind::shape, what,
                  "has shape " + to_string() +
                      ", whose element count (the product of its non-zero dimensions) overflows, "
                      "expected at most " +
                      std::to_string(kMaxElements) + " elements");
    }
    count = product;
  }
  return empty ? 0 : count;
}

int64_t Shape::product(int begin, int end) const {
  int64_t count = 1;
  for (int i = begin; i < end; ++i) count *= dims_[static_cast<size_t>(i)];
  return count;
}

Shape Shape::trailing(int count) const {
  return Shape(dims().subspan(static_cast<size_t>(rank_ - count)));
}

Shape Shape::leading(int count) const {
  return Shape(dims().first(static_cast<size_t>(rank_ - count)));
}

std::string Shape::to_string() const {
  std::ostringstream out;
  out << "[";
  for (int i = 0; i < rank_; ++i) out << (i ? ", " : "") << dims_[static_cast<size_t>(i)];
  out << "]";
  return out.str();
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.rank_ != b.rank_) return false;
  for (int i = 0; i < a.rank_; ++i) {
    if (a.dims_[static_cast<size_t>(i)] != b.dims_[static_cast<size_t>(i)]) return false;
  }
  return true;
}

template <class T>
BasicTensor<T>::BasicTensor(const Shape& shape)
    : shape_(shape), values_(static_cast<size_t>(shape.numel()), T(0)) {}

template <class T>
BasicTensor<T>::BasicTensor(const Shape& shape, std::vector<T> values)
    : shape_(shape), values_(std::move(values)) {
  if (static_cast<int64_t>(values_.size()) != shape.numel()) {
    throw Error(ErrorKind::shape, "values",
                "has " + std::to_string(values_.size()) + " elements, expected " +
                    std::to_string(shape.numel()) + " for shape " + shape.to_string());
  }
}

template class BasicTensor<float>;
template class BasicTensor<double>;

}  // namespace addnorm
