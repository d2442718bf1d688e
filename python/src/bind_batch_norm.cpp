// batch_norm, forward (with the running statistics updated in place in training) and backward,
// on float32 or float64 arrays.
#include <pybind11/stl.h>

#include <optional>

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

template <class T>
BasicBatchNormOptions<T> options_of(const BatchNormCall& call) {
  BasicBatchNormOptions<T> options{
      norm_options_of<T>(NormKind::layer_norm, call.gamma, call.beta, false, call.eps)};
  options.training = call.training;
  options.momentum = momentum_as<T>(call.momentum);
  options.convention =
      call.onnx_convention ? MomentumConvention::onnx : MomentumConvention::pytorch;
  return options;
}

// Both running statistics, or neither (the library says which mode needs them); one without
// the other is a TypeError naming the missing one (None is not an array).
template <class T>
std::optional<BasicRunningStats<T>> running_of(const BatchNormCall& call) {
  if (call.running_mean.is_none() && call.running_var.is_none()) return std::nullopt;
  return BasicRunningStats<T>{view_of<T>("running_mean", call.running_mean),
                              view_of<T>("running_var", call.running_var)};
}

void batch_norm(const py::object& x, const py::object& y, const BatchNormCall& call,
                const py::object& batch_mean, const py::object& batch_rstd) {
  with_element_type("x", x, [&](auto zero) {
    using T = decltype(zero);
    const TensorView<const T> x_view = view_of<const T>("x", x);
    const TensorView<T> y_view = view_of<T>("y", y);
    const BasicBatchNormOptions<T> options = options_of<T>(call);
    const std::optional<BasicRunningStats<T>> running = running_of<T>(call);
    std::optional<BasicNormStats<T>> stats;
    if (!batch_rstd.is_none()) {
      stats = BasicNormStats<T>{view_of<T>("mean", batch_mean), view_of<T>("rstd", batch_rstd)};
    }
    py::gil_scoped_release release;
    library::batch_norm(x_view, y_view, options, running, stats);
  });
}

void batch_norm_backward(const py::object& dy, const py::object& x, const py::object& dx,
                         const py::object& dgamma, const py::object& dbeta,
                         const BatchNormCall& call) {
  with_element_type("x", x, [&](auto zero) {
    using T = decltype(zero);
    const TensorView<const T> dy_view = view_of<const T>("dy", dy);
    const TensorView<const T> x_view = view_of<const T>("x", x);
    const BasicBatchNormGrads<T> grads{view_of<T>("dx", dx), optional_view_of<T>("dweight", dgamma),
                                       optional_view_of<T>("dbias", dbeta)};
    const BasicBatchNormOptions<T> options = options_of<T>(call);
    const std::optional<BasicRunningStats<T>> running = running_of<T>(call);
    py::gil_scoped_release release;
    library::batch_norm_backward(dy_view, x_view, grads, options, running);
  });
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
