#include "float64_ops.hpp"

#include <cmath>

#include "ops/reference/batch_norm.hpp"
#include "ops/reference/layer_norm.hpp"
#include "ops/reference/philox.hpp"
#include "ops/reference/rms_norm.hpp"

namespace addnorm::python::float64 {

void add(const double* x, const double* r, double* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = x[i] + r[i];
}

// Element i keeps iff the stream's bits at offset + i reach the threshold of p rounded to
// float, exactly as the float32 op (whose p is a float) decides, so both dtypes drop the same
// elements; kept values are scaled by 1 / (1 - p) with p in full float64, one rounding.
void dropout(const double* x, double* y, int64_t count, const Dropout& options) {
  if (options.p == 0.0) {
    for (int64_t i = 0; i < count; ++i) y[i] = x[i];
    return;
  }
  const uint32_t threshold = reference::dropout_threshold(static_cast<float>(options.p));
  const double keep = 1.0 - options.p;
  for (int64_t i = 0; i < count; ++i) {
    const bool kept = reference::dropout_keeps(
        options.seed, options.offset + static_cast<uint64_t>(i), threshold);
    y[i] = kept ? x[i] / keep : 0.0;
  }
}

void layer_norm(const double* x, const double* gamma, const double* beta, double* y, double* mean,
                double* rstd, Rows layout, double eps) {
  reference::layer_norm_forward<double>(x, gamma, beta, y, mean, rstd, layout.rows, layout.dim,
                                        eps);
}

void layer_norm_backward(const double* dy, const double* x, const double* gamma,
                         const double* dh_next, double* dx, double* dgamma, double* dbeta,
                         Rows layout, double eps) {
  reference::layer_norm_backward<double>(dy, x, gamma, nullptr, dh_next, dx, dgamma, dbeta,
                                         layout.rows, layout.dim, eps);
}

void rms_norm(const double* x, const double* gamma, bool zero_centered_gamma, double* y,
              double* rstd, Rows layout, double eps) {
  reference::rms_norm_forward<double>(x, gamma, zero_centered_gamma, y, rstd, layout.rows,
                                      layout.dim, eps);
}

void rms_norm_backward(const double* dy, const double* x, const double* gamma,
                       bool zero_centered_gamma, const double* dh_next, double* dx, double* dgamma,
                       Rows layout, double eps) {
  reference::rms_norm_backward<double>(dy, x, gamma, zero_centered_gamma, nullptr, dh_next, dx,
                                       dgamma, layout.rows, layout.dim, eps);
}

namespace {

using Wide = reference::Acc<double>;

// The running-statistics update, in the same two conventions as the float32 op.
void update_running(const BatchNormArgs& args, int64_t c, Wide batch_mean, Wide batch_var,
                    int64_t count) {
  const Wide momentum = args.momentum;
  if (!args.onnx_convention) {
    const Wide unbiased = batch_var * Wide(count) / Wide(count - 1);
    args.running_mean[c] = double((1 - momentum) * args.running_mean[c] + momentum * batch_mean);
    args.running_var[c] = double((1 - momentum) * args.running_var[c] + momentum * unbiased);
  } else {
    args.running_mean[c] = double(momentum * args.running_mean[c] + (1 - momentum) * batch_mean);
    args.running_var[c] = double(momentum * args.running_var[c] + (1 - momentum) * batch_var);
  }
}

}  // namespace

void batch_norm(const double* x, double* y, double* batch_mean, double* batch_rstd,
                const BatchNormArgs& args) {
  const reference::BatchLayout layout{args.batch, args.channels, args.length};
  for (int64_t c = 0; c < layout.channels; ++c) {
    Wide mean = 0, rstd = 0;
    if (args.training) {
      const auto moments = reference::channel_moments(x, layout, c);
      mean = moments.mean;
      rstd = Wide(1) / std::sqrt(moments.variance + Wide(args.eps));
      if (args.running_mean) {
        update_running(args, c, moments.mean, moments.variance, layout.per_channel());
      }
      if (batch_mean) batch_mean[c] = double(mean);
      if (batch_rstd) batch_rstd[c] = double(rstd);
    } else {
      mean = args.running_mean[c];
      rstd = Wide(1) / std::sqrt(Wide(args.running_var[c]) + Wide(args.eps));
    }
    reference::normalise_channel<double>(x, args.gamma, args.beta, y, layout, c, mean, rstd);
  }
}

void batch_norm_backward(const double* dy, const double* x, double* dx, double* dgamma,
                         double* dbeta, const BatchNormArgs& args) {
  const reference::BatchLayout layout{args.batch, args.channels, args.length};
  for (int64_t c = 0; c < layout.channels; ++c) {
    if (args.training) {
      reference::batch_norm_backward_channel<double>(dy, x, args.gamma, dx, dgamma, dbeta, layout,
                                                     c, args.eps);
    } else {
      const Wide rstd = Wide(1) / std::sqrt(Wide(args.running_var[c]) + Wide(args.eps));
      reference::batch_norm_eval_backward_channel<double>(dy, x, args.gamma, dx, dgamma, dbeta,
                                                          layout, c, args.running_mean[c], rstd);
    }
  }
}

}  // namespace addnorm::python::float64
