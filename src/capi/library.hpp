// `library::layer_norm(...)` in the C ABI's entry points: the public overload set over float32
// and float64, picked by the element type the call runs in (tensors.hpp's by_element_type).
#pragma once

#include "addnorm/overloads.hpp"

namespace addnorm::capi {

namespace library = addnorm::overloads;

}  // namespace addnorm::capi
