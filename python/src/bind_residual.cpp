// The residual side: add, dropout (and its mask), and the fused pre-norm and post-norm Add&Norm.
#include <pybind11/stl.h>

#include <optional>
#include <vector>

#include "addnorm/ops.hpp"
#include "arrays.hpp"
#include "bindings.hpp"

namespace addnorm::python {

namespace {

using py::arg;
using Dims = std::vector<int64_t>;

// The norm inside a fused op, as the Python layer passes it.
struct NormCall {
  bool rms;
  py::object gamma, beta;
  bool zero_centered_gamma;
  double eps;
};

AddNormOptions float32_options(const NormCall& call) {
  return {call.rms ? NormKind::rms_norm : NormKind::layer_norm,
          optional_view_of<const float>("weight", call.gamma),
          optional_view_of<const float>("bias", call.beta), call.zero_centered_gamma,
          static_cast<float>(call.eps)};
}

std::optional<NormStats> float32_stats(const py::object& mean, const py::object& rstd) {
  if (rstd.is_none()) return std::nullopt;
  NormStats stats{};
  if (!mean.is_none()) stats.mean = view_of<float>("mean", mean);
  stats.rstd = view_of<float>("rstd", rstd);
  return stats;
}

// The float64 norm, forward and backward, for the fused ops.
struct Float64Norm {
  const double* gamma;
  const double* beta;
  float64::Rows layout;
  const NormCall& call;

  Float64Norm(const NormCall& norm, float64::Rows rows)
      : gamma(optional_data_of<const double>("weight", norm.gamma)),
        beta(optional_data_of<const double>("bias", norm.beta)),
        layout(rows),
        call(norm) {
    require_count("weight", norm.gamma, rows.dim);
    require_count("bias", norm.beta, rows.dim);
  }
  void forward(const double* h, double* y, double* mean, double* rstd) const {
    if (call.rms) {
      float64::rms_norm(h, gamma, call.zero_centered_gamma, y, rstd, layout, call.eps);
    } else {
      float64::layer_norm(h, gamma, beta, y, mean, rstd, layout, call.eps);
    }
  }
  void backward(const double* dy, const double* h, const double* dh_next, double* dh,
                double* dgamma, double* dbeta) const {
    if (call.rms) {
      float64::rms_norm_backward(dy, h, gamma, call.zero_centered_gamma, dh_next, dh, dgamma,
                                 layout, call.eps);
    } else {
      float64::layer_norm_backward(dy, h, gamma, dh_next, dh, dgamma, dbeta, layout, call.eps);
    }
  }
};

void add(const py::object& x, const py::object& r, const py::object& out) {
  if (is_float64("x", x)) {
    const int64_t count = shape_of(x).numel("x");
    require_count("r", r, count);
    require_count("out", out, count);
    const double* x_data = data_of<const double>("x", x);
    const double* r_data = data_of<const double>("r", r);
    double* out_data = data_of<double>("out", out);
    py::gil_scoped_release release;
    float64::add(x_data, r_data, out_data, count);
    return;
  }
  const ConstView x_view = view_of<const float>("x", x);
  const ConstView r_view = view_of<const float>("r", r);
  const MutableView out_view = view_of<float>("out", out);
  py::gil_scoped_release release;
  addnorm::add(x_view, r_view, out_view);
}

void dropout(const py::object& x, const py::object& y, double p, uint64_t seed, uint64_t offset) {
  if (is_float64("x", x)) {
    const int64_t count = shape_of(x).numel("x");
    require_count("y", y, count);
    const double* x_data = data_of<const double>("x", x);
    double* y_data = data_of<double>("y", y);
    py::gil_scoped_release release;
    float64::dropout(x_data, y_data, count, {p, seed, offset});
    return;
  }
  const ConstView x_view = view_of<const float>("x", x);
  const MutableView y_view = view_of<float>("y", y);
  py::gil_scoped_release release;
  addnorm::dropout(x_view, y_view, {static_cast<float>(p), seed, offset});
}

void dropout_mask(const py::object& mask, double p, uint64_t seed, uint64_t offset) {
  const TensorView<uint8_t> mask_view = view_of<uint8_t>("mask", mask);
  py::gil_scoped_release release;
  addnorm::dropout_mask(mask_view, {static_cast<float>(p), seed, offset});
}

void add_norm_pre(const py::object& x, const py::object& r, const Dims& normalized_shape,
                  const py::object& h, const py::object& y, const NormCall& norm,
                  const py::object& mean, const py::object& rstd) {
  if (is_float64("x", x)) {
    const float64::Rows layout = rows_of(shape_of(x), normalized_shape);
    for (const auto& [name, array] : {std::pair{"r", &r}, {"h", &h}, {"y", &y}}) {
      require_count(name, *array, layout.count());
    }
    require_count("mean", mean, layout.rows);
    require_count("rstd", rstd, layout.rows);
    const Float64Norm f64(norm, layout);
    const double* x_data = data_of<const double>("x", x);
    const double* r_data = data_of<const double>("r", r);
    double* h_data = data_of<double>("h", h);
    double* y_data = data_of<double>("y", y);
    double* mean_data = optional_data_of<double>("mean", mean);
    double* rstd_data = optional_data_of<double>("rstd", rstd);
    py::gil_scoped_release release;
    float64::add(x_data, r_data, h_data, layout.count());
    f64.forward(h_data, y_data, mean_data, rstd_data);
    return;
  }
  const ConstView x_view = view_of<const float>("x", x);
  const ConstView r_view = view_of<const float>("r", r);
  const MutableView h_view = view_of<float>("h", h);
  const MutableView y_view = view_of<float>("y", y);
  const AddNormOptions options = float32_options(norm);
  const std::optional<NormStats> stats = float32_stats(mean, rstd);
  const Shape shape = shape_from(normalized_shape);
  py::gil_scoped_release release;
  addnorm::add_norm_pre(x_view, r_view, shape, h_view, y_view, options, stats);
}

void add_norm_pre_backward(const py::object& dy, const py::object& dh_next, const py::object& h,
                           const Dims& normalized_shape, const py::object& dh,
                           const py::object& dgamma, const py::object& dbeta,
                           const NormCall& norm) {
  if (is_float64("h", h)) {
    const float64::Rows layout = rows_of(shape_of(h), normalized_shape, "h");
    for (const auto& [name, array] : {std::pair{"dy", &dy}, {"dh_next", &dh_next}, {"dh", &dh}}) {
      require_count(name, *array, layout.count());
    }
    require_count("dweight", dgamma, layout.dim);
    require_count("dbias", dbeta, layout.dim);
    const Float64Norm f64(norm, layout);
    const double* dy_data = data_of<const double>("dy", dy);
    const double* dh_next_data = optional_data_of<const double>("dh_next", dh_next);
    const double* h_data = data_of<const double>("h", h);
    double* dh_data = data_of<double>("dh", dh);
    double* dgamma_data = optional_data_of<double>("dweight", dgamma);
    double* dbeta_data = optional_data_of<double>("dbias", dbeta);
    py::gil_scoped_release release;
    f64.backward(dy_data, h_data, dh_next_data, dh_data, dgamma_data, dbeta_data);
    return;
  }
  const ConstView dy_view = view_of<const float>("dy", dy);
  const OptionalConst dh_next_view = optional_view_of<const float>("dh_next", dh_next);
  const ConstView h_view = view_of<const float>("h", h);
  const AddNormPreGrads grads{view_of<float>("dh", dh), optional_view_of<float>("dweight", dgamma),
                              optional_view_of<float>("dbias", dbeta)};
  const AddNormOptions options = float32_options(norm);
  const Shape shape = shape_from(normalized_shape);
  py::gil_scoped_release release;
  addnorm::add_norm_pre_backward(dy_view, dh_next_view, h_view, shape, grads, options);
}

void add_norm_post(const py::object& x, const py::object& s, const Dims& normalized_shape,
                   const py::object& y, const NormCall& norm, double dropout_p,
                   const DropoutOptions& dropout_options, const py::object& mean,
                   const py::object& rstd) {
  if (is_float64("x", x)) {
    const float64::Rows layout = rows_of(shape_of(x), normalized_shape);
    require_count("s", s, layout.count());
    require_count("y", y, layout.count());
    require_count("mean", mean, layout.rows);
    require_count("rstd", rstd, layout.rows);
    const Float64Norm f64(norm, layout);
    const double* x_data = data_of<const double>("x", x);
    const double* s_data = data_of<const double>("s", s);
    double* y_data = data_of<double>("y", y);
    double* mean_data = optional_data_of<double>("mean", mean);
    double* rstd_data = optional_data_of<double>("rstd", rstd);
    const float64::Dropout drop{dropout_p, dropout_options.seed, dropout_options.offset};
    py::gil_scoped_release release;
    // h = x + Dropout(s) is built in y's memory, then normalised in place.
    float64::dropout(s_data, y_data, layout.count(), drop);
    float64::add(x_data, y_data, y_data, layout.count());
    f64.forward(y_data, y_data, mean_data, rstd_data);
    return;
  }
  const ConstView x_view = view_of<const float>("x", x);
  const ConstView s_view = view_of<const float>("s", s);
  const MutableView y_view = view_of<float>("y", y);
  const AddNormOptions options = float32_options(norm);
  const std::optional<NormStats> stats = float32_stats(mean, rstd);
  const Shape shape = shape_from(normalized_shape);
  py::gil_scoped_release release;
  addnorm::add_norm_post(x_view, s_view, shape, y_view, options, dropout_options, stats);
}

void add_norm_post_backward(const py::object& dy, const py::object& x, const py::object& s,
                            const Dims& normalized_shape, const py::object& dx,
                            const py::object& ds, const py::object& dgamma, const py::object& dbeta,
                            const NormCall& norm, double dropout_p,
                            const DropoutOptions& dropout_options) {
  if (is_float64("x", x)) {
    const float64::Rows layout = rows_of(shape_of(x), normalized_shape);
    for (const auto& [name, array] : {std::pair{"dy", &dy}, {"s", &s}, {"dx", &dx}, {"ds", &ds}}) {
      require_count(name, *array, layout.count());
    }
    require_count("dweight", dgamma, layout.dim);
    require_count("dbias", dbeta, layout.dim);
    const Float64Norm f64(norm, layout);
    const double* dy_data = data_of<const double>("dy", dy);
    const double* x_data = data_of<const double>("x", x);
    const double* s_data = data_of<const double>("s", s);
    double* dx_data = data_of<double>("dx", dx);
    double* ds_data = data_of<double>("ds", ds);
    double* dgamma_data = optional_data_of<double>("dweight", dgamma);
    double* dbeta_data = optional_data_of<double>("dbias", dbeta);
    const float64::Dropout drop{dropout_p, dropout_options.seed, dropout_options.offset};
    py::gil_scoped_release release;
    // The forward's h is rebuilt in ds's memory (the mask is regenerated), the norm's backward
    // gives dx = dh, and ds = Dropout'(dx) uses the same mask.
    float64::dropout(s_data, ds_data, layout.count(), drop);
    float64::add(x_data, ds_data, ds_data, layout.count());
    f64.backward(dy_data, ds_data, nullptr, dx_data, dgamma_data, dbeta_data);
    float64::dropout(dx_data, ds_data, layout.count(), drop);
    return;
  }
  const ConstView dy_view = view_of<const float>("dy", dy);
  const ConstView x_view = view_of<const float>("x", x);
  const ConstView s_view = view_of<const float>("s", s);
  const AddNormPostGrads grads{view_of<float>("dx", dx), view_of<float>("ds", ds),
                               optional_view_of<float>("dweight", dgamma),
                               optional_view_of<float>("dbias", dbeta)};
  const AddNormOptions options = float32_options(norm);
  const Shape shape = shape_from(normalized_shape);
  py::gil_scoped_release release;
  addnorm::add_norm_post_backward(dy_view, x_view, s_view, shape, grads, options, dropout_options);
}

}  // namespace

void register_residual(py::module_& module) {
  module.def("add", &add, arg("x"), arg("r"), arg("out"));
  module.def("dropout", &dropout, arg("x"), arg("y"), arg("p"), arg("seed"), arg("offset"));
  module.def("dropout_mask", &dropout_mask, arg("mask"), arg("p"), arg("seed"), arg("offset"));
  module.def(
      "add_norm_pre",
      [](const py::object& x, const py::object& r, const Dims& normalized_shape,
         const py::object& h, const py::object& y, bool rms, const py::object& gamma,
         const py::object& beta, bool zero_centered_gamma, double eps, const py::object& mean,
         const py::object& rstd) {
        add_norm_pre(x, r, normalized_shape, h, y, {rms, gamma, beta, zero_centered_gamma, eps},
                     mean, rstd);
      },
      arg("x"), arg("r"), arg("normalized_shape"), arg("h"), arg("y"), arg("rms"), arg("weight"),
      arg("bias"), arg("zero_centered_weight"), arg("eps"), arg("mean"), arg("rstd"));
  module.def(
      "add_norm_pre_backward",
      [](const py::object& dy, const py::object& dh_next, const py::object& h,
         const Dims& normalized_shape, const py::object& dh, const py::object& dgamma,
         const py::object& dbeta, bool rms, const py::object& gamma, const py::object& beta,
         bool zero_centered_gamma, double eps) {
        add_norm_pre_backward(dy, dh_next, h, normalized_shape, dh, dgamma, dbeta,
                              {rms, gamma, beta, zero_centered_gamma, eps});
      },
      arg("dy"), arg("dh_next"), arg("h"), arg("normalized_shape"), arg("dh"), arg("dweight"),
      arg("dbias"), arg("rms"), arg("weight"), arg("bias"), arg("zero_centered_weight"),
      arg("eps"));
  module.def(
      "add_norm_post",
      [](const py::object& x, const py::object& s, const Dims& normalized_shape,
         const py::object& y, bool rms, const py::object& gamma, const py::object& beta,
         bool zero_centered_gamma, double eps, double p, uint64_t seed, uint64_t offset,
         const py::object& mean, const py::object& rstd) {
        add_norm_post(x, s, normalized_shape, y, {rms, gamma, beta, zero_centered_gamma, eps}, p,
                      {static_cast<float>(p), seed, offset}, mean, rstd);
      },
      arg("x"), arg("s"), arg("normalized_shape"), arg("y"), arg("rms"), arg("weight"), arg("bias"),
      arg("zero_centered_weight"), arg("eps"), arg("p"), arg("seed"), arg("offset"), arg("mean"),
      arg("rstd"));
  module.def(
      "add_norm_post_backward",
      [](const py::object& dy, const py::object& x, const py::object& s,
         const Dims& normalized_shape, const py::object& dx, const py::object& ds,
         const py::object& dgamma, const py::object& dbeta, bool rms, const py::object& gamma,
         const py::object& beta, bool zero_centered_gamma, double eps, double p, uint64_t seed,
         uint64_t offset) {
        add_norm_post_backward(dy, x, s, normalized_shape, dx, ds, dgamma, dbeta,
                               {rms, gamma, beta, zero_centered_gamma, eps}, p,
                               {static_cast<float>(p), seed, offset});
      },
      arg("dy"), arg("x"), arg("s"), arg("normalized_shape"), arg("dx"), arg("ds"), arg("dweight"),
      arg("dbias"), arg("rms"), arg("weight"), arg("bias"), arg("zero_centered_weight"), arg("eps"),
      arg("p"), arg("seed"), arg("offset"));
}

}  // namespace addnorm::python
