// NumPy arrays as addnorm views, without copying: the checks that make a raw pointer safe to hand
// to a kernel (an ndarray, the expected dtype, C-contiguous, writable for outputs, the expected
// number of elements). Wrong dtype raises TypeError; wrong layout or size raises ValueError.
// The Python layer (addnorm/_checks.py) gives the friendlier messages first; these are the
// guarantee that nothing reaches a kernel unchecked when _addnorm is called directly.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "addnorm/tensor.hpp"

namespace addnorm::python {

namespace py = pybind11;

// Whether x holds float64 (true) or float32 (false); TypeError for anything else.
bool is_float64(const char* name, const py::object& x);

// The array behind `object`, checked to hold T in C order (and to be writable when T is not
// const). TypeError when it is not an ndarray of T, ValueError when it is strided or read-only.
template <class T>
T* data_of(const char* name, const py::object& object);

// The array's shape (ValueError beyond addnorm's rank limit).
Shape shape_of(const py::object& object);

// A view of an array (float32, float64 or uint8 elements).
template <class T>
TensorView<T> view_of(const char* name, const py::object& object) {
  return {data_of<T>(name, object), shape_of(object)};
}
template <class T>
std::optional<TensorView<T>> optional_view_of(const char* name, const py::object& object) {
  if (object.is_none()) return std::nullopt;
  return view_of<T>(name, object);
}

// A pointer to an optional array's data, or nullptr for None.
template <class T>
T* optional_data_of(const char* name, const py::object& object) {
  return object.is_none() ? nullptr : data_of<T>(name, object);
}

// normalized_shape as a Shape.
Shape shape_from(const std::vector<int64_t>& dims);

}  // namespace addnorm::python
