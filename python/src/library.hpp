// `library::layer_norm(...)` in the NumPy module (bindings.hpp) and the PyTorch operators
// (torch_ext/kernels.cpp): the public overload set over float32 and float64.
#pragma once

#include "addnorm/overloads.hpp"

namespace addnorm::python {

namespace library = addnorm::overloads;

}  // namespace addnorm::python
