// The textbook implementation a user might write by hand: float accumulation, two passes for
// the statistics (mean, then squared deviations) and one to write, rows split over OpenMP
// threads, unfused (add, then normalise). dgamma/dbeta are summed in per-thread partials that
// are allocated here, outside the timed call.
#include <omp.h>

#include <cmath>
#include <memory>

#include "runner.hpp"

namespace addnorm::bench {
namespace {

void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y,
                        float* mean_out, float* rstd_out, int64_t rows, int64_t dim) {
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    const float* xr = x + row * dim;
    float* yr = y + row * dim;
    float sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i];
    const float mean = sum / float(dim);
    float squares = 0;
    for (int64_t i = 0; i < dim; ++i) squares += (xr[i] - mean) * (xr[i] - mean);
    const float rstd = 1.0f / std::sqrt(squares / float(dim) + kLayerNormEps);
    for (int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] - mean) * rstd * gamma[i] + beta[i];
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

// Per-thread rows of width dim, summed in thread order after the parallel loop.
struct Partials {
  Partials(int threads, int64_t width)
      : dim(width), values(static_cast<size_t>(threads) * 2 * static_cast<size_t>(width)) {}
  int64_t dim;
  std::vector<float> values;
  float* first(int thread) { return values.data() + static_cast<size_t>(thread) * 2 * dim; }
  float* second(int thread) { return first(thread) + dim; }
  void reduce(int threads, float* a, float* b) {
    for (int64_t i = 0; i < dim; ++i) {
      float sa = 0, sb = 0;
      for (int t = 0; t < threads; ++t) {
        sa += first(t)[i];
        sb += second(t)[i];
      }
      a[i] = sa;
      if (b) b[i] = sb;
    }
  }
};

void layer_norm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                         const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                         int64_t dim, Partials& partials) {
  int threads = 1;
#pragma omp parallel
  {
    const int thread = omp_get_thread_num();
#pragma omp single
    threads = omp_get_num_threads();
    float* dgamma_part = partials.first(thread);
    float* dbeta_part = partials.second(thread);
    for (int64_t i = 0; i < dim; ++i) dgamma_part[i] = dbeta_part[i] = 0;
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      const float* xr = x + row * dim;
      const float* dyr = dy + row * dim;
      float* dxr = dx + row * dim;
      float sum_g = 0, sum_g_xhat = 0;
      for (int64_t i = 0; i < dim; ++i) {
        const float x_hat = (xr[i] - mean[row]) * rstd[row];
        sum_g += dyr[i] * gamma[i];
        sum_g_xhat += dyr[i] * gamma[i] * x_hat;
        dgamma_part[i] += dyr[i] * x_hat;
        dbeta_part[i] += dyr[i];
      }
      const float mean_g = sum_g / float(dim), mean_g_xhat = sum_g_xhat / float(dim);
      for (int64_t i = 0; i < dim; ++i) {
        const float x_hat = (xr[i] - mean[row]) * rstd[row];
        dxr[i] = rstd[row] * (dyr[i] * gamma[i] - mean_g - x_hat * mean_g_xhat);
      }
    }
  }
  partials.reduce(threads, dgamma, dbeta);
}

void rms_norm_forward(const float* x, const float* gamma, float* y, float* rstd_out, int64_t rows,
                      int64_t dim) {
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    const float* xr = x + row * dim;
    float* yr = y + row * dim;
    float squares = 0;
    for (int64_t i = 0; i < dim; ++i) squares += xr[i] * xr[i];
    const float rstd = 1.0f / std::sqrt(squares / float(dim) + kRmsNormEps);
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * rstd * gamma[i];
    rstd_out[row] = rstd;
  }
}

void rms_norm_backward(const float* dy, const float* x, const float* gamma, const float* rstd,
                       float* dx, float* dgamma, int64_t rows, int64_t dim, Partials& partials) {
  int threads = 1;
#pragma omp parallel
  {
    const int thread = omp_get_thread_num();
#pragma omp single
    threads = omp_get_num_threads();
    float* dgamma_part = partials.first(thread);
    for (int64_t i = 0; i < dim; ++i) dgamma_part[i] = partials.second(thread)[i] = 0;
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      const float* xr = x + row * dim;
      const float* dyr = dy + row * dim;
      float sum_g_xhat = 0;
      for (int64_t i = 0; i < dim; ++i) {
        const float x_hat = xr[i] * rstd[row];
        sum_g_xhat += dyr[i] * gamma[i] * x_hat;
        dgamma_part[i] += dyr[i] * x_hat;
      }
      const float mean_g_xhat = sum_g_xhat / float(dim);
      for (int64_t i = 0; i < dim; ++i) {
        dx[row * dim + i] = rstd[row] * (dyr[i] * gamma[i] - xr[i] * rstd[row] * mean_g_xhat);
      }
    }
  }
  partials.reduce(threads, dgamma, nullptr);
}

void add(const float* a, const float* b, float* sum, int64_t count) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) sum[i] = a[i] + b[i];
}

// Column statistics over row chunks: per-thread partial sums, then the mean; then per-thread
// squared deviations, then the biased variance; then the normalising pass.
void batch_norm_train(const float* x, const float* gamma, const float* beta, float* y,
                      float* running_mean, float* running_var, float* mean, float* rstd,
                      int64_t rows, int64_t dim, Partials& partials) {
  int threads = 1;
#pragma omp parallel
  {
    const int thread = omp_get_thread_num();
#pragma omp single
    threads = omp_get_num_threads();
    float* sums = partials.first(thread);
    float* squares = partials.second(thread);
    for (int64_t i = 0; i < dim; ++i) sums[i] = squares[i] = 0;
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t i = 0; i < dim; ++i) sums[i] += x[row * dim + i];
    }
#pragma omp single
    {
      partials.reduce(threads, mean, nullptr);
      for (int64_t i = 0; i < dim; ++i) mean[i] /= float(rows);
    }
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t i = 0; i < dim; ++i) {
        const float centred = x[row * dim + i] - mean[i];
        squares[i] += centred * centred;
      }
    }
#pragma omp single
    {
      for (int64_t i = 0; i < dim; ++i) {
        float total = 0;
        for (int t = 0; t < threads; ++t) total += partials.second(t)[i];
        const float variance = total / float(rows);
        rstd[i] = 1.0f / std::sqrt(variance + kLayerNormEps);
        const float unbiased = variance * float(rows) / float(std::max<int64_t>(rows - 1, 1));
        running_mean[i] = (1 - kBatchNormMomentum) * running_mean[i] + kBatchNormMomentum * mean[i];
        running_var[i] = (1 - kBatchNormMomentum) * running_var[i] + kBatchNormMomentum * unbiased;
      }
    }
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t i = 0; i < dim; ++i) {
        y[row * dim + i] = (x[row * dim + i] - mean[i]) * rstd[i] * gamma[i] + beta[i];
      }
    }
  }
}

}  // namespace

void add_textbook_runners(const Case& c, Workspace& ws, std::vector<Runner>& out) {
  if (c.dtype != DType::f32) return;
  const int64_t rows = c.rows, dim = c.dim;
  Workspace* w = &ws;
  auto partials = std::make_shared<Partials>(c.threads, dim);
  const std::string name = "textbook";
  switch (c.op) {
    case Op::layer_norm_fwd:
      out.push_back({name, "", [=] {
                       layer_norm_forward(w->x, w->gamma, w->beta, w->y, w->mean, w->rstd, rows,
                                          dim);
                     }});
      break;
    case Op::layer_norm_bwd:
      out.push_back({name, "", [=] {
                       layer_norm_backward(w->dy, w->x, w->gamma, w->mean, w->rstd, w->dx,
                                           w->dgamma, w->dbeta, rows, dim, *partials);
                     }});
      break;
    case Op::layer_norm_fwdbwd:
      out.push_back({name, "", [=] {
                       layer_norm_forward(w->x, w->gamma, w->beta, w->y, w->mean, w->rstd, rows,
                                          dim);
                       layer_norm_backward(w->dy, w->x, w->gamma, w->mean, w->rstd, w->dx,
                                           w->dgamma, w->dbeta, rows, dim, *partials);
                     }});
      break;
    case Op::rms_norm_fwd:
      out.push_back(
          {name, "", [=] { rms_norm_forward(w->x, w->gamma, w->y, w->rstd, rows, dim); }});
      break;
    case Op::rms_norm_bwd:
      out.push_back({name, "", [=] {
                       rms_norm_backward(w->dy, w->x, w->gamma, w->rstd, w->dx, w->dgamma, rows,
                                         dim, *partials);
                     }});
      break;
    case Op::rms_norm_fwdbwd:
      out.push_back({name, "", [=] {
                       rms_norm_forward(w->x, w->gamma, w->y, w->rstd, rows, dim);
                       rms_norm_backward(w->dy, w->x, w->gamma, w->rstd, w->dx, w->dgamma, rows,
                                         dim, *partials);
                     }});
      break;
    case Op::add_norm_pre_fwd:
      out.push_back({name, "add, then layer norm", [=] {
                       add(w->x, w->r, w->h, rows * dim);
                       layer_norm_forward(w->h, w->gamma, w->beta, w->y, w->mean, w->rstd, rows,
                                          dim);
                     }});
      break;
    case Op::add_norm_pre_bwd:
      out.push_back({name, "layer norm backward, then add dh_next", [=] {
                       layer_norm_backward(w->dy, w->h, w->gamma, w->mean, w->rstd, w->dx,
                                           w->dgamma, w->dbeta, rows, dim, *partials);
                       add(w->dx, w->dh_next, w->dx, rows * dim);
                     }});
      break;
    case Op::batch_norm_train_fwd:
      out.push_back({name, "", [=] {
                       batch_norm_train(w->x, w->gamma, w->beta, w->y, w->running_mean,
                                        w->running_var, w->column_stat_a, w->column_stat_b, rows,
                                        dim, *partials);
                     }});
      break;
    case Op::add_norm_post_fwd:
    case Op::add_norm_post_bwd:
      break;  // no textbook counter-based dropout; PyTorch and addnorm cover post-norm
    case Op::batch_norm_train_bwd:
      break;  // the reference, oneDNN and PyTorch cover BatchNorm's backward
  }
}

}  // namespace addnorm::bench
