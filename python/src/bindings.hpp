// The pieces of the _addnorm module, one registration function per family of ops. Each bound
// function writes into output arrays the Python layer allocated (addnorm/_functional.py), takes
// float32 arrays to the library's API (include/addnorm/ops.hpp) and float64 arrays to the
// reference kernels (float64_ops.hpp), and releases the GIL while the kernel runs.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "addnorm/tensor.hpp"
#include "float64_ops.hpp"

namespace addnorm::python {

void register_norms(pybind11::module_& module);
void register_batch_norm(pybind11::module_& module);
void register_residual(pybind11::module_& module);

// Rows and row length of x for normalized_shape (its trailing dims), with the library's rule
// and message; used by the float64 path, which does not go through the library's checks.
inline float64::Rows rows_of(const Shape& x_shape, const std::vector<int64_t>& normalized_shape,
                             const char* x_name = "x") {
  const int count = static_cast<int>(normalized_shape.size());
  const Shape wanted(std::span<const int64_t>(normalized_shape.data(), normalized_shape.size()));
  if (count == 0) throw Error("normalized_shape is empty, expected at least one dimension");
  if (count > x_shape.rank() || !(x_shape.trailing(count) == wanted)) {
    throw Error("normalized_shape " + wanted.to_string() + " does not match the trailing dims of " +
                x_name + " " + x_shape.to_string());
  }
  const int64_t dim = wanted.numel("normalized_shape");
  return {x_shape.numel(x_name) / (dim == 0 ? 1 : dim), dim};
}

}  // namespace addnorm::python
