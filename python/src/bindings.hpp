// The pieces of the _addnorm module, one registration function per family of ops. Each bound
// function writes into output arrays the Python layer allocated (addnorm/_norms.py and its
// siblings) and calls the library: float32 arrays go to its float32 ops (addnorm/ops.hpp),
// float64 arrays to its float64 ops (addnorm/float64.hpp). Both validate every argument, with the
// same checks, before anything is written; the GIL is released while the kernel runs.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <type_traits>

#include "arrays.hpp"
#include "library.hpp"

namespace addnorm::python {

void register_norms(pybind11::module_& module);
void register_batch_norm(pybind11::module_& module);
void register_residual(pybind11::module_& module);

// Calls body(T{}) with T = double when the array `name` holds float64, float otherwise
// (TypeError for any other dtype or a non-array): the element type of the call.
template <class Body>
void with_element_type(const char* name, const pybind11::object& array, const Body& body) {
  if (is_float64(name, array)) {
    body(double{});
  } else {
    body(float{});
  }
}

// The one norm description (addnorm/ops.hpp's NormOptions) from the Python layer's arguments,
// for the plain and the fused ops alike: weight and bias may be None; eps is a number (the
// Python layer resolved None to the kind's default, which it reads from the library).
template <class T>
BasicNormOptions<T> norm_options_of(std::optional<NormKind> norm, const pybind11::object& weight,
                                    const pybind11::object& bias, bool zero_centered_weight,
                                    double eps) {
  return {norm, optional_view_of<const T>("weight", weight),
          optional_view_of<const T>("bias", bias), zero_centered_weight, eps_as<T>(eps)};
}

// mean and rstd when rstd is given (mean may be None: RMSNorm has none).
template <class T>
std::optional<BasicNormStats<T>> stats_of(const pybind11::object& mean,
                                          const pybind11::object& rstd) {
  if (rstd.is_none()) return std::nullopt;
  BasicNormStats<T> stats{};
  if (!mean.is_none()) stats.mean = view_of<T>("mean", mean);
  stats.rstd = view_of<T>("rstd", rstd);
  return stats;
}

}  // namespace addnorm::python
