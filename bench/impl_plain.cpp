// "plain", the straightforward SIMD loop of each op (plain_kernels.*), as the benchmark runs it:
// one runner per op it has a loop for, each checked first by check_plain() against the float64
// reference at a loose tolerance, so that it cannot win by computing less.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/reference/layer_norm.hpp"
#include "ops/reference/rms_norm.hpp"
#include "plain_kernels.hpp"
#include "runner.hpp"

namespace addnorm::bench {

namespace {

using plain::Call;
using plain::Partials;

float bf16_value(uint16_t bits) {
  const uint32_t wide = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// The plain op against the float64 reference on the first rows (up to 8): every output within
// `tolerance` of the reference, relative to the row's largest reference value. A plain loop that
// computed less than the op would fail here, and the run stops.
void check_plain(const Case& c, Workspace& ws, const std::string& what) {
  const int64_t rows = std::min<int64_t>(c.rows, 8), dim = c.dim;
  const bool bf16 = c.dtype == DType::bf16;
  const bool rms = c.op == Op::rms_norm_fwd || c.op == Op::rms_norm_bwd;
  const bool backward = c.op == Op::layer_norm_bwd || c.op == Op::rms_norm_bwd;
  const auto value = [&](const float* f32, const uint16_t* b16, int64_t i) {
    return bf16 ? double(bf16_value(b16[i])) : double(f32[i]);
  };
  const auto count = static_cast<size_t>(rows * dim);
  std::vector<double> x(count), dy(count), gamma(static_cast<size_t>(dim)),
      beta(static_cast<size_t>(dim));
  for (int64_t i = 0; i < rows * dim; ++i) {
    x[i] = value(ws.x, ws.x_bf16, i);
    if (c.op == Op::add_norm_pre_fwd || c.op == Op::add_norm_post_fwd) {
      x[i] += value(ws.r, ws.r_bf16, i);
    }
    dy[i] = value(ws.dy, ws.dy_bf16, i);
  }
  for (int64_t i = 0; i < dim; ++i) {
    gamma[i] = ws.gamma[i];
    beta[i] = ws.beta[i];
  }
  std::vector<double> want(x.size());
  if (backward && rms) {
    reference::rms_norm_backward<double>(dy.data(), x.data(), gamma.data(), false, nullptr, nullptr,
                                         want.data(), nullptr, rows, dim, kRmsNormEps);
  } else if (backward) {
    reference::layer_norm_backward<double>(dy.data(), x.data(), gamma.data(), nullptr, nullptr,
                                           want.data(), nullptr, nullptr, rows, dim, kLayerNormEps);
  } else if (rms) {
    reference::rms_norm_forward<double>(x.data(), gamma.data(), false, want.data(), nullptr, rows,
                                        dim, kRmsNormEps);
  } else {
    reference::layer_norm_forward<double>(x.data(), gamma.data(), beta.data(), want.data(), nullptr,
                                          nullptr, rows, dim, kLayerNormEps);
  }
  const float* got32 = backward ? ws.dx : ws.y;
  const uint16_t* got16 = backward ? ws.dx_bf16 : ws.y_bf16;
  const double tolerance = bf16 ? 2e-2 : 1e-3;
  for (int64_t row = 0; row < rows; ++row) {
    double largest = 1e-30;
    for (int64_t i = 0; i < dim; ++i) largest = std::max(largest, std::fabs(want[row * dim + i]));
    for (int64_t i = 0; i < dim; ++i) {
      const int64_t at = row * dim + i;
      if (!(std::fabs(value(got32, got16, at) - want[at]) <= tolerance * largest)) {
        throw std::runtime_error("plain " + what + " differs from the float64 reference at row " +
                                 std::to_string(row) + ", element " + std::to_string(i));
      }
    }
  }
}

}  // namespace

void add_plain_runners(const Case& c, Workspace& ws, std::vector<Runner>& out) {
  // Whole registers only (16 float32 lanes on AVX-512): the benchmark's dims are such.
  if (c.dim % 16 != 0) return;
  Workspace* w = &ws;
  auto partials = std::make_shared<Partials>(c.threads, c.dim);
  Call call{false, c.dtype == DType::bf16, c.rows, c.dim, kLayerNormEps};
  std::function<void()> run;
  std::string note;
  const bool bf16 = call.bf16;
  switch (c.op) {
    case Op::rms_norm_fwd:
      call.rms = true;
      call.eps = kRmsNormEps;
      [[fallthrough]];
    case Op::layer_norm_fwd:
      run = [=] {
        if (bf16) {
          plain::forward(call, w->x_bf16, nullptr, w->gamma, w->beta, nullptr, w->y_bf16, w->mean,
                         w->rstd);
        } else {
          plain::forward(call, w->x, nullptr, w->gamma, w->beta, nullptr, w->y, w->mean, w->rstd);
        }
      };
      break;
    case Op::rms_norm_bwd:
      call.rms = true;
      call.eps = kRmsNormEps;
      [[fallthrough]];
    case Op::layer_norm_bwd: {
      // The statistics a forward saved: the plain forward's own, in buffers of its own (the
      // workspace's mean and rstd are addnorm's, which the other backwards read).
      auto saved = std::make_shared<std::vector<float>>(2 * static_cast<size_t>(c.rows));
      float* mean = saved->data();
      float* rstd = mean + c.rows;
      if (bf16) {
        plain::forward(call, w->x_bf16, nullptr, w->gamma, w->beta, nullptr, w->y_bf16, mean, rstd);
      } else {
        plain::forward(call, w->x, nullptr, w->gamma, w->beta, nullptr, w->y, mean, rstd);
      }
      run = [=] {
        (void)saved;  // kept alive with the runner
        if (bf16) {
          plain::backward(call, w->dy_bf16, w->x_bf16, w->gamma, mean, rstd, w->dx_bf16, w->dgamma,
                          w->dbeta, *partials);
        } else {
          plain::backward(call, w->dy, w->x, w->gamma, mean, rstd, w->dx, w->dgamma, w->dbeta,
                          *partials);
        }
      };
      break;
    }
    case Op::add_norm_pre_fwd:
      note = "h = x + r stored, then its norm";
      run = [=] {
        if (bf16) {
          plain::forward(call, w->x_bf16, w->r_bf16, w->gamma, w->beta, w->h_bf16, w->y_bf16,
                         w->mean, w->rstd);
        } else {
          plain::forward(call, w->x, w->r, w->gamma, w->beta, w->h, w->y, w->mean, w->rstd);
        }
      };
      break;
    case Op::add_norm_post_fwd:
      note = "norm of x + s, p = 0 (no mask)";
      run = [=] {
        if (bf16) {
          plain::forward(call, w->x_bf16, w->r_bf16, w->gamma, w->beta, nullptr, w->y_bf16, w->mean,
                         w->rstd);
        } else {
          plain::forward(call, w->x, w->r, w->gamma, w->beta, nullptr, w->y, w->mean, w->rstd);
        }
      };
      break;
    default:
      return;  // the other ops have no plain loop: BatchNorm is judged by its byte model
  }
  run();
  check_plain(c, ws, op_name(c.op));
  out.push_back({"plain", note, run});
}

}  // namespace addnorm::bench
