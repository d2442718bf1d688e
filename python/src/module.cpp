// addnorm._addnorm: the compiled half of the Python package. Users call the functions in
// addnorm/__init__.py, which check arguments with friendly messages, allocate the outputs and
// call these. addnorm::Error (a bad argument found by the library) becomes TypeError (a wrong
// dtype) or ValueError (anything else).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"
#include "addnorm/simd.hpp"
#include "bindings.hpp"

PYBIND11_MODULE(_addnorm, module) {
  module.doc() =
      "addnorm's ops on NumPy arrays (float32: the fast kernels, float64: the "
      "reference kernels; both validated by the library). Use the wrappers in the addnorm "
      "package.";
  pybind11::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const addnorm::Error& bad_argument) {
      // NumPy's convention: a wrong dtype is a TypeError, any other bad argument a ValueError;
      // the message names the argument as this face does (weight, not gamma).
      PyObject* type =
          bad_argument.kind() == addnorm::ErrorKind::type ? PyExc_TypeError : PyExc_ValueError;
      PyErr_SetString(type, addnorm::face_message(bad_argument).c_str());
    }
  });
  module.attr("__version__") = ADDNORM_VERSION;
  addnorm::python::register_norms(module);
  addnorm::python::register_batch_norm(module);
  addnorm::python::register_residual(module);
  module.def(
      "default_eps", [](const std::string& norm) { return addnorm::default_eps_named(norm); },
      pybind11::arg("norm"),
      "The default eps of a norm op by name (addnorm/norm_kind.hpp's default_eps_named).");
  module.def(
      "norm_centres",
      [](const std::string& norm) {
        return addnorm::norm_traits(addnorm::norm_kind_from(norm)).centres;
      },
      pybind11::arg("norm"),
      "Whether a norm kind subtracts the row's mean, and so has a mean to save (norm_traits).");
  module.def("simd_target", &addnorm::simd_target,
             "The SIMD target addnorm's kernels dispatch to on this CPU (Highway's name).");
  module.def("simd_targets", &addnorm::simd_targets,
             "The SIMD targets compiled in that this CPU supports, best first.");
}
