// layer_norm and rms_norm, forward and backward.
#include <pybind11/stl.h>

#include <optional>

#include "addnorm/ops.hpp"
#include "arrays.hpp"
#include "bindings.hpp"

namespace addnorm::python {

namespace {

using py::arg;
using Dims = std::vector<int64_t>;

std::optional<NormStats> stats_of(const py::object& mean, const py::object& rstd) {
  if (rstd.is_none()) return std::nullopt;
  NormStats stats{};
  if (!mean.is_none()) stats.mean = view_of<float>("mean", mean);
  stats.rstd = view_of<float>("rstd", rstd);
  return stats;
}

void layer_norm(const py::object& x, const Dims& normalized_shape, const py::object& gamma,
                const py::object& beta, const py::object& y, const py::object& mean,
                const py::object& rstd, double eps) {
  if (is_float64("x", x)) {
    const float64::Rows layout = rows_of(shape_of(x), normalized_shape);
    require_count("weight", gamma, layout.dim);
    require_count("bias", beta, layout.dim);
    require_count("y", y, layout.count());
    require_count("mean", mean, layout.rows);
    require_count("rstd", rstd, layout.rows);
    const double* x_data = data_of<const double>("x", x);
    const double* gamma_data = optional_data_of<const double>("weight", gamma);
    const double* beta_data = optional_data_of<const double>("bias", beta);
    double* y_data = data_of<double>("y", y);
    double* mean_data = optional_data_of<double>("mean", mean);
    double* rstd_data = optional_data_of<double>("rstd", rstd);
    py::gil_scoped_release release;
    float64::layer_norm(x_data, gamma_data, beta_data, y_data, mean_data, rstd_data, layout, eps);
    return;
  }
  const ConstView x_view = view_of<const float>("x", x);
  const MutableView y_view = view_of<float>("y", y);
  const LayerNormOptions options{optional_view_of<const float>("weight", gamma),
                                 optional_view_of<const float>("bias", beta),
                                 static_cast<float>(eps)};
  const std::optional<NormStats> stats = stats_of(mean, rstd);
  const Shape shape = shape_from(normalized_shape);
  py::gil_scoped_release release;
  addnorm::layer_norm(x_view, shape, y_view, options, stats);
}

void layer_norm_backward(const py::object& dy, const py::object& x, const Dims& normalized_shape,
                         const py::object& gamma, const py::object& beta, const py::object& dx,
                         const py::object& dgamma, const py::object& dbeta, double eps) {
  if (is_float64("x", x)) {
    const float64::Rows layout = rows_of(shape_of(x), normalized_shape);
    require_count("dy", dy, layout.count());
    require_count("dx", dx, layout.count());
    require_count("weight", gamma, layout.dim);
    require_count("dweight", dgamma, layout.dim);
    require_count("dbias", dbeta, layout.dim);
    const double* dy_data = data_of<const double>("dy", dy);
    const double* x_data = data_of<const double>("x", x);
    const double* gamma_data = optional_data_of<const double>("weight", gamma);
    double* dx_data = data_of<double>("dx", dx);
    double* dgamma_data = optional_data_of<double>("dweight", dgamma);
    double* dbeta_data = optional_data_of<double>("dbias", dbeta);
    py::gil_scoped_release release;
    float64::layer_norm_backward(dy_data, x_data, gamma_data, nullptr, dx_data, dgamma_data,
                                 dbeta_data, layout, eps);
    return;
  }
  const ConstView dy_view = view_of<const float>("dy", dy);
  const ConstView x_view = view_of<const float>("x", x);
  const LayerNormGrads grads{view_of<float>("dx", dx), optional_view_of<float>("dweight", dgamma),
                             optional_view_of<float>("dbias", dbeta)};
  const LayerNormOptions options{optional_view_of<const float>("weight", gamma),
                                 optional_view_of<const float>("bias", beta),
                                 static_cast<float>(eps)};
  const Shape shape = shape_from(normalized_shape);
  py::gil_scoped_release release;
  addnorm::layer_norm_backward(dy_view, x_view, shape, grads, options);
}

void rms_norm(const py::object& x, const Dims& normalized_shape, const py::object& gamma,
              bool zero_centered_gamma, const py::object& y, const py::object& rstd, double eps) {
  if (is_float64("x", x)) {
    const float64::Rows layout = rows_of(shape_of(x), normalized_shape);
    require_count("weight", gamma, layout.dim);
    require_count("y", y, layout.count());
    require_count("rstd", rstd, layout.rows);
    const double* x_data = data_of<const double>("x", x);
    const double* gamma_data = optional_data_of<const double>("weight", gamma);
    double* y_data = data_of<double>("y", y);
    double* rstd_data = optional_data_of<double>("rstd", rstd);
    py::gil_scoped_release release;
    float64::rms_norm(x_data, gamma_data, zero_centered_gamma, y_data, rstd_data, layout, eps);
    return;
  }
  const ConstView x_view = view_of<const float>("x", x);
  const MutableView y_view = view_of<float>("y", y);
  const RmsNormOptions options{optional_view_of<const float>("weight", gamma), zero_centered_gamma,
                               static_cast<float>(eps)};
  const OptionalMutable rstd_view = optional_view_of<float>("rstd", rstd);
  const Shape shape = shape_from(normalized_shape);
  py::gil_scoped_release release;
  addnorm::rms_norm(x_view, shape, y_view, options, rstd_view);
}

void rms_norm_backward(const py::object& dy, const py::object& x, const Dims& normalized_shape,
                       const py::object& gamma, bool zero_centered_gamma, const py::object& dx,
                       const py::object& dgamma, double eps) {
  if (is_float64("x", x)) {
    const float64::Rows layout = rows_of(shape_of(x), normalized_shape);
    require_count("dy", dy, layout.count());
    require_count("dx", dx, layout.count());
    require_count("weight", gamma, layout.dim);
    require_count("dweight", dgamma, layout.dim);
    const double* dy_data = data_of<const double>("dy", dy);
    const double* x_data = data_of<const double>("x", x);
    const double* gamma_data = optional_data_of<const double>("weight", gamma);
    double* dx_data = data_of<double>("dx", dx);
    double* dgamma_data = optional_data_of<double>("dweight", dgamma);
    py::gil_scoped_release release;
    float64::rms_norm_backward(dy_data, x_data, gamma_data, zero_centered_gamma, nullptr, dx_data,
                               dgamma_data, layout, eps);
    return;
  }
  const ConstView dy_view = view_of<const float>("dy", dy);
  const ConstView x_view = view_of<const float>("x", x);
  const RmsNormGrads grads{view_of<float>("dx", dx), optional_view_of<float>("dweight", dgamma)};
  const RmsNormOptions options{optional_view_of<const float>("weight", gamma), zero_centered_gamma,
                               static_cast<float>(eps)};
  const Shape shape = shape_from(normalized_shape);
  py::gil_scoped_release release;
  addnorm::rms_norm_backward(dy_view, x_view, shape, grads, options);
}

}  // namespace

void register_norms(py::module_& module) {
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
