// addnorm's reference kernels (src/ops/reference/, float64 accumulation, one thread): the oracle
// the fast kernels are checked against, timed so the report shows what the fast path buys.
// Called directly, without the public API's validation, until the library grows an explicit
// entry for them.
#include <cmath>

#include "ops/reference/batch_norm.hpp"
#include "ops/reference/layer_norm.hpp"
#include "ops/reference/philox.hpp"
#include "ops/reference/rms_norm.hpp"
#include "runner.hpp"

namespace addnorm::bench {
namespace {

// h = x + dropout(s), as the fused post-norm op builds it, then normalised in place.
void post_norm_forward(const float* x, const float* s, const float* gamma, const float* beta,
                       float* y, float* mean, float* rstd, int64_t rows, int64_t dim) {
  const uint32_t threshold = reference::dropout_threshold(kDropoutP);
  const float keep_scale = 1.0f / (1.0f - kDropoutP);
  for (int64_t i = 0; i < rows * dim; ++i) {
    const bool keep = reference::dropout_keeps(kDropoutSeed, static_cast<uint64_t>(i), threshold);
    y[i] = x[i] + (keep ? s[i] * keep_scale : 0.0f);
  }
  reference::layer_norm_forward<float>(y, gamma, beta, y, mean, rstd, rows, dim, kLayerNormEps);
}

void post_norm_backward(const float* dy, const float* x, const float* s, const float* gamma,
                        const float* rstd, float* dx, float* ds, float* dgamma, float* dbeta,
                        int64_t rows, int64_t dim) {
  const uint32_t threshold = reference::dropout_threshold(kDropoutP);
  const float keep_scale = 1.0f / (1.0f - kDropoutP);
  const int64_t count = rows * dim;
  for (int64_t i = 0; i < count; ++i) {
    const bool keep = reference::dropout_keeps(kDropoutSeed, static_cast<uint64_t>(i), threshold);
    ds[i] = x[i] + (keep ? s[i] * keep_scale : 0.0f);
  }
  reference::layer_norm_backward<float>(dy, ds, gamma, rstd, nullptr, dx, dgamma, dbeta, rows, dim,
                                        kLayerNormEps);
  for (int64_t i = 0; i < count; ++i) {
    const bool keep = reference::dropout_keeps(kDropoutSeed, static_cast<uint64_t>(i), threshold);
    ds[i] = keep ? dx[i] * keep_scale : 0.0f;
  }
}

// Training-mode BatchNorm over (N, C) = (rows, dim), PyTorch's running-statistics convention.
void batch_norm_train(const float* x, const float* gamma, const float* beta, float* y,
                      float* running_mean, float* running_var, int64_t rows, int64_t dim) {
  const reference::BatchLayout layout{rows, dim, 1};
  for (int64_t c = 0; c < dim; ++c) {
    const auto moments = reference::channel_moments(x, layout, c);
    const double rstd = 1.0 / std::sqrt(moments.variance + double{kLayerNormEps});
    reference::normalise_channel(x, gamma, beta, y, layout, c, moments.mean, rstd);
    const double unbiased =
        moments.variance * double(rows) / double(std::max<int64_t>(rows - 1, 1));
    const double m = kBatchNormMomentum;
    running_mean[c] = float((1 - m) * running_mean[c] + m * moments.mean);
    running_var[c] = float((1 - m) * running_var[c] + m * unbiased);
  }
}

}  // namespace

void add_reference_runners(const Case& c, Workspace& ws, std::vector<Runner>& out) {
  if (c.dtype != DType::f32) return;
  const int64_t rows = c.rows, dim = c.dim;
  const double eps = kLayerNormEps, rms_eps = kRmsNormEps;
  Workspace* w = &ws;
  const std::string name = "reference";
  switch (c.op) {
    case Op::layer_norm_fwd:
      out.push_back({name, "1 thread", [=] {
                       reference::layer_norm_forward<float>(w->x, w->gamma, w->beta, w->y, w->mean,
                                                            w->rstd, rows, dim, eps);
                     }});
      break;
    case Op::layer_norm_bwd:
      out.push_back({name, "1 thread", [=] {
                       reference::layer_norm_backward<float>(w->dy, w->x, w->gamma, w->rstd,
                                                             nullptr, w->dx, w->dgamma, w->dbeta,
                                                             rows, dim, eps);
                     }});
      break;
    case Op::layer_norm_fwdbwd:
      out.push_back({name, "1 thread", [=] {
                       reference::layer_norm_forward<float>(w->x, w->gamma, w->beta, w->y, w->mean,
                                                            w->rstd, rows, dim, eps);
                       reference::layer_norm_backward<float>(w->dy, w->x, w->gamma, w->rstd,
                                                             nullptr, w->dx, w->dgamma, w->dbeta,
                                                             rows, dim, eps);
                     }});
      break;
    case Op::rms_norm_fwd:
      out.push_back({name, "1 thread", [=] {
                       reference::rms_norm_forward<float>(w->x, w->gamma, false, w->y, w->rstd,
                                                          rows, dim, rms_eps);
                     }});
      break;
    case Op::rms_norm_bwd:
      out.push_back({name, "1 thread", [=] {
                       reference::rms_norm_backward<float>(w->dy, w->x, w->gamma, false, w->rstd,
                                                           nullptr, w->dx, w->dgamma, rows, dim,
                                                           rms_eps);
                     }});
      break;
    case Op::rms_norm_fwdbwd:
      out.push_back({name, "1 thread", [=] {
                       reference::rms_norm_forward<float>(w->x, w->gamma, false, w->y, w->rstd,
                                                          rows, dim, rms_eps);
                       reference::rms_norm_backward<float>(w->dy, w->x, w->gamma, false, w->rstd,
                                                           nullptr, w->dx, w->dgamma, rows, dim,
                                                           rms_eps);
                     }});
      break;
    case Op::add_norm_pre_fwd:
      out.push_back({name, "1 thread", [=] {
                       for (int64_t i = 0; i < rows * dim; ++i) w->h[i] = w->x[i] + w->r[i];
                       reference::layer_norm_forward<float>(w->h, w->gamma, w->beta, w->y, w->mean,
                                                            w->rstd, rows, dim, eps);
                     }});
      break;
    case Op::add_norm_pre_bwd:
      out.push_back({name, "1 thread", [=] {
                       reference::layer_norm_backward<float>(w->dy, w->h, w->gamma, w->rstd,
                                                             w->dh_next, w->dx, w->dgamma, w->dbeta,
                                                             rows, dim, eps);
                     }});
      break;
    case Op::add_norm_post_fwd:
      out.push_back({name, "1 thread", [=] {
                       post_norm_forward(w->x, w->r, w->gamma, w->beta, w->y, w->mean, w->rstd,
                                         rows, dim);
                     }});
      break;
    case Op::add_norm_post_bwd:
      out.push_back({name, "1 thread", [=] {
                       post_norm_backward(w->dy, w->x, w->r, w->gamma, w->rstd, w->dx, w->ds,
                                          w->dgamma, w->dbeta, rows, dim);
                     }});
      break;
    case Op::batch_norm_train_fwd:
      out.push_back({name, "1 thread", [=] {
                       batch_norm_train(w->x, w->gamma, w->beta, w->y, w->running_mean,
                                        w->running_var, rows, dim);
                     }});
      break;
    case Op::batch_norm_train_bwd:
      out.push_back({name, "1 thread", [=] {
                       const reference::BatchLayout layout{rows, dim, 1};
                       for (int64_t channel = 0; channel < dim; ++channel) {
                         reference::batch_norm_backward_channel<float>(w->dy, w->x, w->gamma, w->dx,
                                                                       w->dgamma, w->dbeta, layout,
                                                                       channel, eps);
                       }
                     }});
      break;
  }
}

}  // namespace addnorm::bench
