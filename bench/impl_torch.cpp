// PyTorch 1.13 through libtorch, the way a user writes it: at::layer_norm, RMSNorm composed from
// ops (x * rsqrt(mean(x^2) + eps) * gamma, as LLaMA-style code does), residual add and dropout
// unfused, at::batch_norm, and gradients through autograd. Inputs wrap the workspace (no copy);
// outputs are allocated by PyTorch on every call, which is the point of measuring it "as
// installed" (fresh 64 MiB outputs page-fault) and "tuned" (glibc's allocator kept from
// unmapping or trimming freed outputs, main.cpp: they are reused, no page faults). Backward-only
// cases build the graph once, outside the timed call, and keep it (retain_graph).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/autograd/autograd.h>

#include <memory>

#include "runner.hpp"

namespace addnorm::bench {
namespace {

using torch::autograd::variable_list;

struct TorchState {
  at::Tensor x, r, dy, dh_next, gamma, beta, running_mean, running_var;
  // Graph for backward-only cases: leaves and outputs of one forward.
  variable_list leaves, outputs, grad_outputs;
};

at::Tensor wrap(float* data, int64_t rows, int64_t dim) {
  return at::from_blob(data, {rows, dim}, at::kFloat);
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& gamma) {
  return x * at::rsqrt(x.pow(2).mean({-1}, true) + kRmsNormEps) * gamma;
}

at::Tensor layer_norm(const at::Tensor& x, const TorchState& s, int64_t dim) {
  return at::layer_norm(x, {dim}, s.gamma, s.beta, kLayerNormEps);
}

at::Tensor leaf(const at::Tensor& t) {
  return t.detach().requires_grad_(true);
}

}  // namespace

void set_torch_threads(int threads) {
  at::set_num_threads(threads);
}

std::string torch_version() {
  return TORCH_VERSION;
}

void add_torch_runners(const Case& c, Workspace& ws, const std::string& label,
                       std::vector<Runner>& out) {
  const int64_t rows = c.rows, dim = c.dim;
  const bool bf16 = c.dtype == DType::bf16;
  auto s = std::make_shared<TorchState>();
  if (bf16) {
    s->x = at::from_blob(ws.x_bf16, {rows, dim}, at::kBFloat16);
    s->r = at::from_blob(ws.r_bf16, {rows, dim}, at::kBFloat16);
    s->dy = at::from_blob(ws.dy_bf16, {rows, dim}, at::kBFloat16);
    s->dh_next = at::from_blob(ws.dh_next_bf16, {rows, dim}, at::kBFloat16);
    s->gamma = at::from_blob(ws.gamma, {dim}, at::kFloat).to(at::kBFloat16);
    s->beta = at::from_blob(ws.beta, {dim}, at::kFloat).to(at::kBFloat16);
  } else {
    s->x = wrap(ws.x, rows, dim);
    s->r = wrap(ws.r, rows, dim);
    s->dy = wrap(ws.dy, rows, dim);
    s->dh_next = wrap(ws.dh_next, rows, dim);
    s->gamma = at::from_blob(ws.gamma, {dim}, at::kFloat);
    s->beta = at::from_blob(ws.beta, {dim}, at::kFloat);
    s->running_mean = at::from_blob(ws.running_mean, {dim}, at::kFloat);
    s->running_var = at::from_blob(ws.running_var, {dim}, at::kFloat);
  }
  auto push = [&](const std::string& note, std::function<void()> run) {
    out.push_back({label, note, std::move(run)});
  };
  // Backward through the kept graph: fresh gradients each call, nothing accumulated.
  auto backward = [s] {
    torch::autograd::grad(s->outputs, s->leaves, s->grad_outputs, /*retain_graph=*/true);
  };
  switch (c.op) {
    case Op::layer_norm_fwd:
      push("at::layer_norm", [s, dim] {
        at::NoGradGuard no_grad;
        layer_norm(s->x, *s, dim);
      });
      break;
    case Op::layer_norm_bwd: {
      s->leaves = {leaf(s->x), leaf(s->gamma), leaf(s->beta)};
      s->outputs = {at::layer_norm(s->leaves[0], {dim}, s->leaves[1], s->leaves[2], kLayerNormEps)};
      s->grad_outputs = {s->dy};
      push("autograd of at::layer_norm", backward);
      break;
    }
    case Op::layer_norm_fwdbwd:
      if (bf16) break;
      push("at::layer_norm + autograd", [s, dim] {
        const variable_list leaves = {leaf(s->x), leaf(s->gamma), leaf(s->beta)};
        const at::Tensor y = at::layer_norm(leaves[0], {dim}, leaves[1], leaves[2], kLayerNormEps);
        torch::autograd::grad({y}, leaves, {s->dy});
      });
      break;
    case Op::rms_norm_fwd:
      push("composed: x * rsqrt(mean(x^2) + eps) * gamma", [s] {
        at::NoGradGuard no_grad;
        rms_norm(s->x, s->gamma);
      });
      break;
    case Op::rms_norm_bwd: {
      if (bf16) break;
      s->leaves = {leaf(s->x), leaf(s->gamma)};
      s->outputs = {rms_norm(s->leaves[0], s->leaves[1])};
      s->grad_outputs = {s->dy};
      push("autograd of the composed RMSNorm", backward);
      break;
    }
    case Op::rms_norm_fwdbwd:
      if (bf16) break;
      push("composed RMSNorm + autograd", [s] {
        const variable_list leaves = {leaf(s->x), leaf(s->gamma)};
        torch::autograd::grad({rms_norm(leaves[0], leaves[1])}, leaves, {s->dy});
      });
      break;
    case Op::add_norm_pre_fwd:
      push("x + r, then at::layer_norm (unfused)", [s, dim] {
        at::NoGradGuard no_grad;
        const at::Tensor h = s->x + s->r;
        layer_norm(h, *s, dim);
      });
      break;
    case Op::add_norm_pre_bwd: {
      // h = x + r feeds both the norm and the next residual: gradients arrive as dy and dh_next.
      s->leaves = {leaf(s->x), leaf(s->r), leaf(s->gamma), leaf(s->beta)};
      const at::Tensor h = s->leaves[0] + s->leaves[1];
      s->outputs = {at::layer_norm(h, {dim}, s->leaves[2], s->leaves[3], kLayerNormEps), h};
      s->grad_outputs = {s->dy, s->dh_next};
      push("autograd of x + r -> at::layer_norm", backward);
      break;
    }
    case Op::add_norm_post_fwd:
      push("at::layer_norm(x + at::dropout(s, 0.1))", [s, dim] {
        at::NoGradGuard no_grad;
        layer_norm(s->x + at::dropout(s->r, kDropoutP, true), *s, dim);
      });
      break;
    case Op::add_norm_post_bwd: {
      s->leaves = {leaf(s->x), leaf(s->r), leaf(s->gamma), leaf(s->beta)};
      const at::Tensor h = s->leaves[0] + at::dropout(s->leaves[1], kDropoutP, true);
      s->outputs = {at::layer_norm(h, {dim}, s->leaves[2], s->leaves[3], kLayerNormEps)};
      s->grad_outputs = {s->dy};
      push("autograd of at::layer_norm(x + at::dropout(s))", backward);
      break;
    }
    case Op::batch_norm_train_fwd:
      if (bf16) break;
      push("at::batch_norm, training", [s] {
        at::NoGradGuard no_grad;
        at::batch_norm(s->x, s->gamma, s->beta, s->running_mean, s->running_var, true,
                       kBatchNormMomentum, kLayerNormEps, false);
      });
      break;
    case Op::batch_norm_train_bwd: {
      if (bf16) break;
      // The graph's forward updates copies of the running statistics, not the workspace's.
      s->leaves = {leaf(s->x), leaf(s->gamma), leaf(s->beta)};
      s->outputs = {at::batch_norm(s->leaves[0], s->leaves[1], s->leaves[2],
                                   s->running_mean.clone(), s->running_var.clone(), true,
                                   kBatchNormMomentum, kLayerNormEps, false)};
      s->grad_outputs = {s->dy};
      push("autograd of at::batch_norm, training", backward);
      break;
    }
  }
}

}  // namespace addnorm::bench
