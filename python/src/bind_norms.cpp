// layer_norm and rms_norm, forward and backward, on float32 or float64 arrays.
#include <pybind11/stl.h>

#include <optional>
#include <vector>

#include "bindings.hpp"

namespace addnorm::python {

namespace {

using py::arg;
using Dims = std::vector<int64_t>;

void layer_norm(const py::object& x, const Dims& normalized_shape, const py::object& gamma,
                const py::object& beta, const py::object& y, const py::object& mean,
                const py::object& rstd, double eps) {
  with_element_type("x", x, [&](auto zero) {
    using T = decltype(zero);
    const TensorView<const T> x_view = view_of<const T>("x", x);
    const TensorView<T> y_view = view_of<T>("y", y);
    const BasicNormOptions<T> options =
        norm_options_of<T>(NormKind::layer_norm, gamma, beta, false, eps);
    const std::optional<BasicNormStats<T>> stats = stats_of<T>(mean, rstd);
    const Shape shape = shape_from(normalized_shape);
    py::gil_scoped_release release;
    library::layer_norm(x_view, shape, y_view, options, stats);
  });
}

void layer_norm_backward(const py::object& dy, const py::object& x, const Dims& normalized_shape,
                         const py::object& gamma, const py::object& beta, const py::object& dx,
                         const py::object& dgamma, const py::object& dbeta, double eps) {
  with_element_type("x", x, [&](auto zero) {
    using T = decltype(zero);
    const TensorView<const T> dy_view = view_of<const T>("dy", dy);
    const TensorView<const T> x_view = view_of<const T>("x", x);
    const BasicLayerNormGrads<T> grads{view_of<T>("dx", dx), optional_view_of<T>("dweight", dgamma),
                                       optional_view_of<T>("dbias", dbeta)};
    const BasicNormOptions<T> options =
        norm_options_of<T>(NormKind::layer_norm, gamma, beta, false, eps);
    const Shape shape = shape_from(normalized_shape);
    py::gil_scoped_release release;
    library::layer_norm_backward(dy_view, x_view, shape, grads, options);
  });
}

void rms_norm(const py::object& x, const Dims& normalized_shape, const py::object& gamma,
              bool zero_centered_gamma, const py::object& y, const py::object& rstd, double eps) {
  with_element_type("x", x, [&](auto zero) {
    using T = decltype(zero);
    const TensorView<const T> x_view = view_of<const T>("x", x);
    const TensorView<T> y_view = view_of<T>("y", y);
    const BasicNormOptions<T> options =
        norm_options_of<T>(NormKind::rms_norm, gamma, py::none(), zero_centered_gamma, eps);
    const std::optional<TensorView<T>> rstd_view = optional_view_of<T>("rstd", rstd);
    const Shape shape = shape_from(normalized_shape);
    py::gil_scoped_release release;
    library::rms_norm(x_view, shape, y_view, options, rstd_view);
  });
}

void rms_norm_backward(const py::object& dy, const py::object& x, const Dims& normalized_shape,
                       const py::object& gamma, bool zero_centered_gamma, const py::object& dx,
                       const py::object& dgamma, double eps) {
  with_element_type("x", x, [&](auto zero) {
    using T = decltype(zero);
    const TensorView<const T> dy_view = view_of<const T>("dy", dy);
    const TensorView<const T> x_view = view_of<const T>("x", x);
    const BasicRmsNormGrads<T> grads{view_of<T>("dx", dx), optional_view_of<T>("dweight", dgamma)};
    const BasicNormOptions<T> options =
        norm_options_of<T>(NormKind::rms_norm, gamma, py::none(), zero_centered_gamma, eps);
    const Shape shape = shape_from(normalized_shape);
    py::gil_scoped_release release;
    library::rms_norm_backward(dy_view, x_view, shape, grads, options);
  });
}

void group_norm(const py::object& x, int64_t num_groups, const py::object& gamma,
                const py::object& beta, const py::object& y, const py::object& mean,
                const py::object& rstd, double eps) {
  with_element_type("x", x, [&](auto zero) {
    using T = decltype(zero);
    const TensorView<const T> x_view = view_of<const T>("x", x);
    const TensorView<T> y_view = view_of<T>("y", y);
    const BasicGroupNormOptions<T> options{
        norm_options_of<T>(NormKind::layer_norm, gamma, beta, false, eps), num_groups};
    const std::optional<BasicNormStats<T>> stats = stats_of<T>(mean, rstd);
    py::gil_scoped_release release;
    library::group_norm(x_view, y_view, options, stats);
  });
}

void group_norm_backward(const py::object& dy, const py::object& x, int64_t num_groups,
                         const py::object& gamma, const py::object& beta, const py::object& dx,
                         const py::object& dgamma, const py::object& dbeta, double eps) {
  with_element_type("x", x, [&](auto zero) {
    using T = decltype(zero);
    const TensorView<const T> dy_view = view_of<const T>("dy", dy);
    const TensorView<const T> x_view = view_of<const T>("x", x);
    const BasicGroupNormGrads<T> grads{view_of<T>("dx", dx), optional_view_of<T>("dweight", dgamma),
                                       optional_view_of<T>("dbias", dbeta)};
    const BasicGroupNormOptions<T> options{
        norm_options_of<T>(NormKind::layer_norm, gamma, beta, false, eps), num_groups};
    py::gil_scoped_release release;
    library::group_norm_backward(dy_view, x_view, grads, options);
  });
}

}  // namespace

void register_norms(py::module_& module) {
  module.def("group_norm", &group_norm, arg("x"), arg("num_groups"), arg("weight"), arg("bias"),
             arg("y"), arg("mean"), arg("rstd"), arg("eps"));
  module.def("group_norm_backward", &group_norm_backward, arg("dy"), arg("x"), arg("num_groups"),
             arg("weight"), arg("bias"), arg("dx"), arg("dweight"), arg("dbias"), arg("eps"));
  module.def("layer_norm", &layer_norm, arg("x"), arg("normalized_shape"), arg("weight"),
             arg("bias"), arg("y"), arg("mean"), arg("rstd"), arg("eps"));
  module.def("layer_norm_backward", &layer_norm_backward, arg("dy"), arg("x"),
             arg("normalized_shape"), arg("weight"), arg("bias"), arg("dx"), arg("dweight"),
             arg("dbias"), arg("eps"));
  module.def("rms_norm", &rms_norm, arg("x"), arg("normalized_shape"), arg("weight"),
             arg("zero_centered_weight"), arg("y"), arg("rstd"), arg("eps"));
  module.def("rms_norm_backward", &rms_norm_backward, arg("dy"), arg("x"), arg("normalized_shape"),
             arg("weight"), arg("zero_centered_weight"), arg("dx"), arg("dweight"), arg("eps"));
}

}  // namespace addnorm::python
