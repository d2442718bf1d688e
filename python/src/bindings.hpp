// The pieces of the _addnorm module, one registration function per family of ops. Each bound
// function writes into output arrays the Python layer allocated (addnorm/_norms.py and its
// siblings) and calls the library: float32 arrays go to its float32 ops (addnorm/ops.hpp),
// float64 arrays to its float64 ops (addnorm/float64.hpp). Both validate every argument, with the
// same checks, before anything is written; the GIL is released while the kernel runs.
#pragma once

#include <pybind11/pybind11.h>

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

}  // namespace addnorm::python
