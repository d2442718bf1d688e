// The pieces of the _addnorm module, one registration function per family of ops. Each bound
// function writes into output arrays the Python layer allocated (addnorm/_norms.py and its
// siblings) and calls the library: float32 arrays go to its float32 ops (addnorm/ops.hpp),
// float64 arrays to its float64 ops (addnorm/float64.hpp). Both validate every argument, with the
// same checks, before anything is written; the GIL is released while the kernel runs.
#pragma once

#include <pybind11/pybind11.h>

#include <type_traits>

#include "addnorm/float64.hpp"
#include "addnorm/ops.hpp"
#include "arrays.hpp"

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

// One overload set per op over both element types: the float32 and the float64 functions take
// the same arguments, each with its own element type.
namespace library {
using addnorm::add;
using addnorm::add_norm_post;
using addnorm::add_norm_post_backward;
using addnorm::add_norm_pre;
using addnorm::add_norm_pre_backward;
using addnorm::batch_norm;
using addnorm::batch_norm_backward;
using addnorm::dropout;
using addnorm::layer_norm;
using addnorm::layer_norm_backward;
using addnorm::rms_norm;
using addnorm::rms_norm_backward;
using float64::add;
using float64::add_norm_post;
using float64::add_norm_post_backward;
using float64::add_norm_pre;
using float64::add_norm_pre_backward;
using float64::batch_norm;
using float64::batch_norm_backward;
using float64::dropout;
using float64::layer_norm;
using float64::layer_norm_backward;
using float64::rms_norm;
using float64::rms_norm_backward;
}  // namespace library

}  // namespace addnorm::python
