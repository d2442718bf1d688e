// The ops as one overload set per op over both element types: the float32 functions
// (addnorm/ops.hpp, views of any storage type) and the float64 ones (addnorm/float64.hpp)
// take the same arguments, each with its own element type, so code templated on the element
// type T calls addnorm::overloads::layer_norm(...) and gets the right one. The NumPy module,
// the PyTorch operators and the C ABI are written this way.
#pragma once

#include "addnorm/float64.hpp"
#include "addnorm/ops.hpp"

namespace addnorm::overloads {

using addnorm::add;
using addnorm::add_norm_post;
using addnorm::add_norm_post_backward;
using addnorm::add_norm_pre;
using addnorm::add_norm_pre_backward;
using addnorm::batch_norm;
using addnorm::batch_norm_backward;
using addnorm::dropout;
using addnorm::dropout_backward;
using addnorm::group_norm;
using addnorm::group_norm_backward;
using addnorm::layer_norm;
using addnorm::layer_norm_backward;
using addnorm::norm;
using addnorm::norm_backward;
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
using float64::dropout_backward;
using float64::group_norm;
using float64::group_norm_backward;
using float64::layer_norm;
using float64::layer_norm_backward;
using float64::norm;
using float64::norm_backward;
using float64::rms_norm;
using float64::rms_norm_backward;

}  // namespace addnorm::overloads
