// The residual side: add, dropout (and its mask), and the fused pre-norm and post-norm Add&Norm,
// on float32 or float64 arrays.
#include <pybind11/stl.h>

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bindings.hpp"

namespace addnorm::python {

namespace {

using py::arg;
using Dims = std::vector<int64_t>;

// The norm inside a fused op, as the Python layer passes it.
struct NormCall {
  std::string norm;  // its name in the faces, read by the library (norm_kind_from)
  py::object gamma, beta;
  bool zero_centered_gamma;
  double eps;
};

// The dropout of the post-norm op (and of dropout itself), as the Python layer passes it.
struct DropoutCall {
  double p;
  uint64_t seed;
  uint64_t offset;
};

template <class T>
BasicNormOptions<T> options_of(const NormCall& call) {
  return norm_options_of<T>(norm_kind_from(call.norm), call.gamma, call.beta,
                            call.zero_centered_gamma, call.eps);
}

template <class T>
BasicDropoutOptions<T> dropout_of(const DropoutCall& call) {
  return {dropout_p_as<T>(call.p), call.seed, call.offset};
}

void add(const py::object& x, const py::object& r, const py::object& out) {
  with_element_type("x", x, [&](auto zero) {
    using T = decltype(zero);
    const TensorView<const T> x_view = view_of<const T>("x", x);
    const TensorView<const T> r_view = view_of<const T>("r", r);
    const TensorView<T> out_view = view_of<T>("out", out);
    py::gil_scoped_release release;
    library::add(x_view, r_view, out_view);
  });
}

void dropout(const py::object& x, const py::object& y, const DropoutCall& call) {
  with_element_type("x", x, [&](auto zero) {
    using T = decltype(zero);
    const TensorView<const T> x_view = view_of<const T>("x", x);
    const TensorView<T> y_view = view_of<T>("y", y);
    py::gil_scoped_release release;
    library::dropout(x_view, y_view, dropout_of<T>(call));
  });
}

void dropout_mask(const py::object& mask, const DropoutCall& call) {
  const TensorView<uint8_t> mask_view = view_of<uint8_t>("mask", mask);
  py::gil_scoped_release release;
  addnorm::dropout_mask(mask_view, dropout_of<float>(call));
}

void add_norm_pre(const py::object& x, const py::object& r, const Dims& normalized_shape,
                  const py::object& h, const py::object& y, const NormCall& norm,
                  const py::object& mean, const py::object& rstd) {
  with_element_type("x", x, [&](auto zero) {
    using T = decltype(zero);
    const TensorView<const T> x_view = view_of<const T>("x", x);
    const TensorView<const T> r_view = view_of<const T>("r", r);
    const TensorView<T> h_view = view_of<T>("h", h);
    const TensorView<T> y_view = view_of<T>("y", y);
    const BasicNormOptions<T> options = options_of<T>(norm);
    const std::optional<BasicNormStats<T>> stats = stats_of<T>(mean, rstd);
    const Shape shape = shape_from(normalized_shape);
    py::gil_scoped_release release;
    library::add_norm_pre(x_view, r_view, shape, h_view, y_view, options, stats);
  });
}

void add_norm_pre_backward(const py::object& dy, const py::object& dh_next, const py::object& h,
                           const Dims& normalized_shape, const py::object& dh,
                           const py::object& dgamma, const py::object& dbeta,
                           const NormCall& norm) {
  with_element_type("h", h, [&](auto zero) {
    using T = decltype(zero);
    const TensorView<const T> dy_view = view_of<const T>("dy", dy);
    const std::optional<TensorView<const T>> dh_next_view =
        optional_view_of<const T>("dh_next", dh_next);
    const TensorView<const T> h_view = view_of<const T>("h", h);
    const BasicAddNormPreGrads<T> grads{view_of<T>("dh", dh),
                                        optional_view_of<T>("dweight", dgamma),
                                        optional_view_of<T>("dbias", dbeta)};
    const BasicNormOptions<T> options = options_of<T>(norm);
    const Shape shape = shape_from(normalized_shape);
    py::gil_scoped_release release;
    library::add_norm_pre_backward(dy_view, dh_next_view, h_view, shape, grads, options);
  });
}

void add_norm_post(const py::object& x, const py::object& s, const Dims& normalized_shape,
                   const py::object& y, const NormCall& norm, const DropoutCall& drop,
                   const py::object& mean, const py::object& rstd) {
  with_element_type("x", x, [&](auto zero) {
    using T = decltype(zero);
    const TensorView<const T> x_view = view_of<const T>("x", x);
    const TensorView<const T> s_view = view_of<const T>("s", s);
    const TensorView<T> y_view = view_of<T>("y", y);
    const BasicNormOptions<T> options = options_of<T>(norm);
    const std::optional<BasicNormStats<T>> stats = stats_of<T>(mean, rstd);
    const Shape shape = shape_from(normalized_shape);
    py::gil_scoped_release release;
    library::add_norm_post(x_view, s_view, shape, y_view, options, dropout_of<T>(drop), stats);
  });
}

void add_norm_post_backward(const py::object& dy, const py::object& x, const py::object& s,
                            const Dims& normalized_shape, const py::object& dx,
                            const py::object& ds, const py::object& dgamma, const py::object& dbeta,
                            const NormCall& norm, const DropoutCall& drop) {
  with_element_type("x", x, [&](auto zero) {
    using T = decltype(zero);
    const TensorView<const T> dy_view = view_of<const T>("dy", dy);
    const TensorView<const T> x_view = view_of<const T>("x", x);
    const TensorView<const T> s_view = view_of<const T>("s", s);
    const BasicAddNormPostGrads<T> grads{view_of<T>("dx", dx), view_of<T>("ds", ds),
                                         optional_view_of<T>("dweight", dgamma),
                                         optional_view_of<T>("dbias", dbeta)};
    const BasicNormOptions<T> options = options_of<T>(norm);
    const Shape shape = shape_from(normalized_shape);
    py::gil_scoped_release release;
    library::add_norm_post_backward(dy_view, x_view, s_view, shape, grads, options,
                                    dropout_of<T>(drop));
  });
}

}  // namespace

void register_residual(py::module_& module) {
  module.def("add", &add, arg("x"), arg("r"), arg("out"));
  module.def(
      "dropout",
      [](const py::object& x, const py::object& y, double p, uint64_t seed, uint64_t offset) {
        dropout(x, y, {p, seed, offset});
      },
      arg("x"), arg("y"), arg("p"), arg("seed"), arg("offset"));
  module.def(
      "dropout_mask",
      [](const py::object& mask, double p, uint64_t seed, uint64_t offset) {
        dropout_mask(mask, {p, seed, offset});
      },
      arg("mask"), arg("p"), arg("seed"), arg("offset"));
  // The library's limits on a shape (Shape::numel: non-negative dimensions, an element count
  // that fits), for an array the module is about to allocate from a shape it was given.
  module.def(
      "element_count",
      [](const Dims& shape, const std::string& name) {
        return addnorm::Shape(std::span<const int64_t>(shape)).numel(name.c_str());
      },
      arg("shape"), arg("name"));
  module.def(
      "add_norm_pre",
      [](const py::object& x, const py::object& r, const Dims& normalized_shape,
         const py::object& h, const py::object& y, const std::string& norm, const py::object& gamma,
         const py::object& beta, bool zero_centered_gamma, double eps, const py::object& mean,
         const py::object& rstd) {
        add_norm_pre(x, r, normalized_shape, h, y, {norm, gamma, beta, zero_centered_gamma, eps},
                     mean, rstd);
      },
      arg("x"), arg("r"), arg("normalized_shape"), arg("h"), arg("y"), arg("norm"), arg("weight"),
      arg("bias"), arg("zero_centered_weight"), arg("eps"), arg("mean"), arg("rstd"));
  module.def(
      "add_norm_pre_backward",
      [](const py::object& dy, const py::object& dh_next, const py::object& h,
         const Dims& normalized_shape, const py::object& dh, const py::object& dgamma,
         const py::object& dbeta, const std::string& norm, const py::object& gamma,
         const py::object& beta, bool zero_centered_gamma, double eps) {
        add_norm_pre_backward(dy, dh_next, h, normalized_shape, dh, dgamma, dbeta,
                              {norm, gamma, beta, zero_centered_gamma, eps});
      },
      arg("dy"), arg("dh_next"), arg("h"), arg("normalized_shape"), arg("dh"), arg("dweight"),
      arg("dbias"), arg("norm"), arg("weight"), arg("bias"), arg("zero_centered_weight"),
      arg("eps"));
  module.def(
      "add_norm_post",
      [](const py::object& x, const py::object& s, const Dims& normalized_shape,
         const py::object& y, const std::string& norm, const py::object& gamma,
         const py::object& beta, bool zero_centered_gamma, double eps, double p, uint64_t seed,
         uint64_t offset, const py::object& mean, const py::object& rstd) {
        add_norm_post(x, s, normalized_shape, y, {norm, gamma, beta, zero_centered_gamma, eps},
                      {p, seed, offset}, mean, rstd);
      },
      arg("x"), arg("s"), arg("normalized_shape"), arg("y"), arg("norm"), arg("weight"),
      arg("bias"), arg("zero_centered_weight"), arg("eps"), arg("p"), arg("seed"), arg("offset"),
      arg("mean"), arg("rstd"));
  module.def(
      "add_norm_post_backward",
      [](const py::object& dy, const py::object& x, const py::object& s,
         const Dims& normalized_shape, const py::object& dx, const py::object& ds,
         const py::object& dgamma, const py::object& dbeta, const std::string& norm,
         const py::object& gamma, const py::object& beta, bool zero_centered_gamma, double eps,
         double p, uint64_t seed, uint64_t offset) {
        add_norm_post_backward(dy, x, s, normalized_shape, dx, ds, dgamma, dbeta,
                               {norm, gamma, beta, zero_centered_gamma, eps}, {p, seed, offset});
      },
      arg("dy"), arg("x"), arg("s"), arg("normalized_shape"), arg("dx"), arg("ds"), arg("dweight"),
      arg("dbias"), arg("norm"), arg("weight"), arg("bias"), arg("zero_centered_weight"),
      arg("eps"), arg("p"), arg("seed"), arg("offset"));
}

}  // namespace addnorm::python
