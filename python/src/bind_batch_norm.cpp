// batch_norm, forward (with the running statistics updated in place in training) and backward.
#include <pybind11/stl.h>

#include <optional>

#include "addnorm/ops.hpp"
#include "arrays.hpp"
#include "bindings.hpp"

namespace addnorm::python {

namespace {

using py::arg;

// Options shared by the forward and the backward, as the Python layer passes them.
struct BatchNormCall {
  py::object gamma, beta, running_mean, running_var;
  bool training;
  double momentum;
  double eps;
  bool onnx_convention;
};

float64::BatchNormArgs float64_args(const py::object& x, const BatchNormCall& call) {
  const Shape shape = shape_of(x);
  if (shape.rank() != 2 && shape.rank() != 3) {
    throw Error("x has shape " + shape.to_string() +
                ", expected (N, C) or (N, C, L) with channels on axis 1");
  }
  const int64_t channels = shape[1];
  require_count("weight", call.gamma, channels);
  require_count("bias", call.beta, channels);
  require_count("running_mean", call.running_mean, channels);
  require_count("running_var", call.running_var, channels);
  if (!call.training && (call.running_mean.is_none() || call.running_var.is_none())) {
    throw Error("running_mean and running_var are absent, expected both in inference mode");
  }
  return {shape[0],
          channels,
          shape.rank() == 3 ? shape[2] : 1,
          optional_data_of<const double>("weight", call.gamma),
          optional_data_of<const double>("bias", call.beta),
          optional_data_of<double>("running_mean", call.running_mean),
          optional_data_of<double>("running_var", call.running_var),
          call.training,
          call.momentum,
          call.onnx_convention,
          call.eps};
}

BatchNormOptions float32_options(const BatchNormCall& call) {
  return {optional_view_of<const float>("weight", call.gamma),
          optional_view_of<const float>("bias", call.beta),
          call.training,
          static_cast<float>(call.momentum),
          call.onnx_convention ? MomentumConvention::onnx : MomentumConvention::pytorch,
          static_cast<float>(call.eps)};
}

std::optional<RunningStats> running_of(const BatchNormCall& call) {
  if (call.running_mean.is_none() && call.running_var.is_none()) return std::nullopt;
  return RunningStats{view_of<float>("running_mean", call.running_mean),
                      view_of<float>("running_var", call.running_var)};
}

void batch_norm(const py::object& x, const py::object& y, const BatchNormCall& call,
                const py::object& batch_mean, const py::object& batch_rstd) {
  if (is_float64("x", x)) {
    const float64::BatchNormArgs args = float64_args(x, call);
    require_count("y", y, args.batch * args.channels * args.length);
    require_count("mean", batch_mean, args.channels);
    require_count("rstd", batch_rstd, args.channels);
    const double* x_data = data_of<const double>("x", x);
    double* y_data = data_of<double>("y", y);
    double* mean_data = optional_data_of<double>("mean", batch_mean);
    double* rstd_data = optional_data_of<double>("rstd", batch_rstd);
    py::gil_scoped_release release;
    float64::batch_norm(x_data, y_data, mean_data, rstd_data, args);
    return;
  }
  const ConstView x_view = view_of<const float>("x", x);
  const MutableView y_view = view_of<float>("y", y);
  const BatchNormOptions options = float32_options(call);
  const std::optional<RunningStats> running = running_of(call);
  std::optional<NormStats> stats;
  if (!batch_rstd.is_none()) {
    stats = NormStats{view_of<float>("mean", batch_mean), view_of<float>("rstd", batch_rstd)};
  }
  py::gil_scoped_release release;
  addnorm::batch_norm(x_view, y_view, options, running, stats);
}

void batch_norm_backward(const py::object& dy, const py::object& x, const py::object& dx,
                         const py::object& dgamma, const py::object& dbeta,
                         const BatchNormCall& call) {
  if (is_float64("x", x)) {
    const float64::BatchNormArgs args = float64_args(x, call);
    const int64_t count = args.batch * args.channels * args.length;
    require_count("dy", dy, count);
    require_count("dx", dx, count);
    require_count("dweight", dgamma, args.channels);
    require_count("dbias", dbeta, args.channels);
    const double* dy_data = data_of<const double>("dy", dy);
    const double* x_data = data_of<const double>("x", x);
    double* dx_data = data_of<double>("dx", dx);
    double* dgamma_data = optional_data_of<double>("dweight", dgamma);
    double* dbeta_data = optional_data_of<double>("dbias", dbeta);
    py::gil_scoped_release release;
    float64::batch_norm_backward(dy_data, x_data, dx_data, dgamma_data, dbeta_data, args);
    return;
  }
  const ConstView dy_view = view_of<const float>("dy", dy);
  const ConstView x_view = view_of<const float>("x", x);
  const BatchNormGrads grads{view_of<float>("dx", dx), optional_view_of<float>("dweight", dgamma),
                             optional_view_of<float>("dbias", dbeta)};
  const BatchNormOptions options = float32_options(call);
  const std::optional<RunningStats> running = running_of(call);
  py::gil_scoped_release release;
  addnorm::batch_norm_backward(dy_view, x_view, grads, options, running);
}

}  // namespace

void register_batch_norm(py::module_& module) {
  module.def(
      "batch_norm",
      [](const py::object& x, const py::object& y, const py::object& gamma, const py::object& beta,
         const py::object& running_mean, const py::object& running_var, bool training,
         double momentum, double eps, bool onnx_convention, const py::object& batch_mean,
         const py::object& batch_rstd) {
        batch_norm(
            x, y,
            {gamma, beta, running_mean, running_var, training, momentum, eps, onnx_convention},
            batch_mean, batch_rstd);
      },
      arg("x"), arg("y"), arg("weight"), arg("bias"), arg("running_mean"), arg("running_var"),
      arg("training"), arg("momentum"), arg("eps"), arg("onnx_convention"), arg("mean"),
      arg("rstd"));
  module.def(
      "batch_norm_backward",
      [](const py::object& dy, const py::object& x, const py::object& dx, const py::object& dgamma,
         const py::object& dbeta, const py::object& gamma, const py::object& beta,
         const py::object& running_mean, const py::object& running_var, bool training, double eps) {
        // momentum and the convention only shape the running update, which a backward never
        // makes; the library still validates momentum, so a valid one is passed.
        batch_norm_backward(dy, x, dx, dgamma, dbeta,
                            {gamma, beta, running_mean, running_var, training, 0.1, eps, false});
      },
      arg("dy"), arg("x"), arg("dx"), arg("dweight"), arg("dbias"), arg("weight"), arg("bias"),
      arg("running_mean"), arg("running_var"), arg("training"), arg("eps"));
}

}  // namespace addnorm::python
