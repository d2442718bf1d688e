// addnorm through its public API (include/addnorm/ops.hpp): whatever kernels the library
// dispatches to, this is what a user gets, validation included.
#include <omp.h>

#include <sstream>

#include "addnorm/ops.hpp"
#include "addnorm/simd.hpp"
#include "runner.hpp"

namespace addnorm::bench {

std::string addnorm_simd_target() {
  return simd_target();
}

namespace {

// The 16-bit calls' options: float32 gamma (and beta for LayerNorm), the run's eps.
NormOptions bf16_options(NormKind norm, const Case& c, const Workspace& ws) {
  NormOptions options;
  options.norm = norm;
  options.gamma = ConstView{ws.gamma, {c.dim}};
  if (norm_traits(norm).has_shift) options.beta = ConstView{ws.beta, {c.dim}};
  options.eps = norm == NormKind::layer_norm ? kLayerNormEps : kRmsNormEps;
  return options;
}
// BatchNorm in training mode over channels of (gamma, beta), with the run's momentum and eps.
BatchNormOptions training_batch_norm(AnyConstView gamma, AnyConstView beta) {
  BatchNormOptions options{{.gamma = gamma, .beta = beta, .eps = kLayerNormEps}};
  options.momentum = kBatchNormMomentum;
  return options;
}
// The post-norm runners' note: "p = 0.1", or "p = 0 (no mask)".
std::string dropout_note(float p) {
  if (p == 0.0f) return "p = 0 (no mask)";
  std::ostringstream text;
  text << "p = " << p;
  return text.str();
}

// bfloat16 data (x, r, dy, dh_next, y, h, dx, ds) with float32 gamma, beta and statistics,
// through the public ops on bf16 views (include/addnorm/ops.hpp): LayerNorm and RMSNorm forward
// and backward, and the fused pre-norm and post-norm (dropout dropout_p, r as s) Add&Norm
// forward and backward; BatchNorm's training forward and backward over (N, C) = (rows, D).
void add_bf16_runners(const Case& c, Workspace& ws, float dropout_p, std::vector<Runner>& out) {
  constexpr auto bf16 = addnorm::DType::bfloat16;
  const Shape shape{c.rows, c.dim}, normalized{c.dim}, row_shape{c.rows};
  const AnyConstView x(ws.x_bf16, shape, bf16), r(ws.r_bf16, shape, bf16);
  const AnyConstView dy(ws.dy_bf16, shape, bf16), dh_next(ws.dh_next_bf16, shape, bf16);
  const AnyConstView h_in(ws.h_bf16, shape, bf16);
  const AnyMutableView y(ws.y_bf16, shape, bf16), h(ws.h_bf16, shape, bf16);
  const AnyMutableView dx(ws.dx_bf16, shape, bf16), ds(ws.ds_bf16, shape, bf16);
  const MutableView dgamma{ws.dgamma, {c.dim}}, dbeta{ws.dbeta, {c.dim}};
  const NormStats stats{{ws.mean, row_shape}, {ws.rstd, row_shape}};
  const ConstView rstd{ws.rstd, row_shape};
  const MutableView rstd_out{ws.rstd, row_shape};
  const SavedStats saved{{ws.mean, row_shape}, rstd};
  // One description each, for the plain and the fused ops alike.
  const NormOptions ln = bf16_options(NormKind::layer_norm, c, ws), pre = ln;
  const NormOptions rms = bf16_options(NormKind::rms_norm, c, ws);
  const DropoutOptions dropout{dropout_p, kDropoutSeed, 0};
  const std::string name = "addnorm";
  const std::string note = "bf16 data, f32 statistics";
  const std::string post_note = "fused, " + dropout_note(dropout_p) + ", " + note;
  switch (c.op) {
    case Op::layer_norm_fwd:
      out.push_back({name, note, [=] { layer_norm(x, normalized, y, ln, stats); }});
      break;
    case Op::layer_norm_bwd:
      out.push_back({name, note, [=] {
                       layer_norm_backward(dy, x, normalized, {dx, dgamma, dbeta}, ln, saved);
                     }});
      break;
    case Op::layer_norm_fwdbwd:
      out.push_back({name, note, [=] {
                       layer_norm(x, normalized, y, ln, stats);
                       layer_norm_backward(dy, x, normalized, {dx, dgamma, dbeta}, ln, saved);
                     }});
      break;
    case Op::rms_norm_fwd:
      out.push_back({name, note, [=] { rms_norm(x, normalized, y, rms, rstd_out); }});
      break;
    case Op::rms_norm_bwd:
      out.push_back({name, note, [=] {
                       rms_norm_backward(dy, x, normalized, {dx, dgamma}, rms, rstd);
                     }});
      break;
    case Op::rms_norm_fwdbwd:
      out.push_back({name, note, [=] {
                       rms_norm(x, normalized, y, rms, rstd_out);
                       rms_norm_backward(dy, x, normalized, {dx, dgamma}, rms, rstd);
                     }});
      break;
    case Op::add_norm_pre_fwd:
      out.push_back(
          {name, "fused, " + note, [=] { add_norm_pre(x, r, normalized, h, y, pre, stats); }});
      break;
    case Op::add_norm_pre_bwd:
      // dh = LN'(dy) at h + dh_next: the residual stream's gradient, as the float32 op.
      out.push_back(
          {name, "fused, " + note, [=] {
             add_norm_pre_backward(dy, dh_next, h_in, normalized, {dx, dgamma, dbeta}, pre, saved);
           }});
      break;
    case Op::add_norm_post_fwd:
      out.push_back(
          {name, post_note, [=] { add_norm_post(x, r, normalized, y, pre, dropout, stats); }});
      break;
    case Op::add_norm_post_bwd:
      out.push_back({name, post_note, [=] {
                       add_norm_post_backward(dy, x, r, normalized, {dx, ds, dgamma, dbeta}, pre,
                                              dropout, saved);
                     }});
      break;
    case Op::batch_norm_train_fwd: {
      const Shape columns{c.dim};
      const BatchNormOptions bn =
          training_batch_norm(ConstView{ws.gamma, columns}, ConstView{ws.beta, columns});
      const RunningStats running{{ws.running_mean, columns}, {ws.running_var, columns}};
      const NormStats batch{{ws.column_stat_a, columns}, {ws.column_stat_b, columns}};
      out.push_back({name, note, [=] { batch_norm(x, y, bn, running, batch); }});
      break;
    }
    case Op::batch_norm_train_bwd: {
      const Shape columns{c.dim};
      const BatchNormOptions bn =
          training_batch_norm(ConstView{ws.gamma, columns}, ConstView{ws.beta, columns});
      out.push_back({name, note, [=] { batch_norm_backward(dy, x, {dx, dgamma, dbeta}, bn); }});
      break;
    }
    default:
      break;
  }
}

// The bf16 forward that leaves what a bf16 backward case reads (statistics; h for pre-norm).
void prepare_bf16_saved_stats(const Case& c, Workspace& ws) {
  constexpr auto bf16 = addnorm::DType::bfloat16;
  const Shape shape{c.rows, c.dim}, normalized{c.dim};
  const AnyConstView x(ws.x_bf16, shape, bf16), r(ws.r_bf16, shape, bf16);
  const AnyMutableView y(ws.y_bf16, shape, bf16), h(ws.h_bf16, shape, bf16);
  const NormStats stats{{ws.mean, {c.rows}}, {ws.rstd, {c.rows}}};
  switch (c.op) {
    case Op::layer_norm_bwd:
      layer_norm(x, normalized, y, bf16_options(NormKind::layer_norm, c, ws), stats);
      break;
    case Op::rms_norm_bwd:
      rms_norm(x, normalized, y, bf16_options(NormKind::rms_norm, c, ws), stats.rstd);
      break;
    case Op::add_norm_pre_bwd:
      add_norm_pre(x, r, normalized, h, y, bf16_options(NormKind::layer_norm, c, ws), stats);
      break;
    case Op::add_norm_post_bwd:
      add_norm_post(x, r, normalized, y, bf16_options(NormKind::layer_norm, c, ws),
                    {kDropoutP, kDropoutSeed, 0}, stats);
      break;
    default:
      break;
  }
}

// addnorm's runners, its post-norm ops with dropout probability dropout_p.
void addnorm_runners(const Case& c, Workspace& ws, float dropout_p, std::vector<Runner>& out) {
  if (c.dtype != DType::f32) {
    add_bf16_runners(c, ws, dropout_p, out);
    return;
  }
  const Shape shape{c.rows, c.dim};
  const Shape row_shape{c.rows};
  const Shape normalized{c.dim};
  const Shape columns{c.dim};
  const ConstView x{ws.x, shape}, r{ws.r, shape}, dy{ws.dy, shape}, dh_next{ws.dh_next, shape};
  const MutableView y{ws.y, shape}, h{ws.h, shape}, dx{ws.dx, shape}, ds{ws.ds, shape};
  const ConstView gamma{ws.gamma, columns}, beta{ws.beta, columns};
  const MutableView dgamma{ws.dgamma, columns}, dbeta{ws.dbeta, columns};
  const MutableView mean{ws.mean, row_shape}, rstd{ws.rstd, row_shape};
  const NormStats stats{mean, rstd};
  const SavedStats saved{mean, rstd};
  // One description each, for the plain and the fused ops alike.
  const NormOptions ln{
      .norm = NormKind::layer_norm, .gamma = gamma, .beta = beta, .eps = kLayerNormEps};
  const NormOptions rms{.norm = NormKind::rms_norm, .gamma = gamma, .eps = kRmsNormEps};
  const NormOptions pre = ln;
  const DropoutOptions dropout{dropout_p, kDropoutSeed, 0};
  const std::string name = "addnorm";
  const std::string post_note = "fused, " + dropout_note(dropout_p);
  switch (c.op) {
    case Op::layer_norm_fwd:
      out.push_back({name, "", [=] { layer_norm(x, normalized, y, ln, stats); }});
      break;
    case Op::layer_norm_bwd:
      out.push_back({name, "", [=] {
                       layer_norm_backward(dy, x, normalized, {dx, dgamma, dbeta}, ln, saved);
                     }});
      break;
    case Op::layer_norm_fwdbwd:
      out.push_back({name, "", [=] {
                       layer_norm(x, normalized, y, ln, stats);
                       layer_norm_backward(dy, x, normalized, {dx, dgamma, dbeta}, ln, saved);
                     }});
      break;
    case Op::rms_norm_fwd:
      out.push_back({name, "", [=] { rms_norm(x, normalized, y, rms, rstd); }});
      break;
    case Op::rms_norm_bwd:
      out.push_back({name, "", [=] {
                       rms_norm_backward(dy, x, normalized, {dx, dgamma}, rms, ConstView(rstd));
                     }});
      break;
    case Op::rms_norm_fwdbwd:
      out.push_back({name, "", [=] {
                       rms_norm(x, normalized, y, rms, rstd);
                       rms_norm_backward(dy, x, normalized, {dx, dgamma}, rms, ConstView(rstd));
                     }});
      break;
    case Op::add_norm_pre_fwd:
      out.push_back({name, "fused", [=] { add_norm_pre(x, r, normalized, h, y, pre, stats); }});
      break;
    case Op::add_norm_pre_bwd:
      out.push_back({name, "fused", [=] {
                       add_norm_pre_backward(dy, dh_next, ConstView(h), normalized,
                                             {dx, dgamma, dbeta}, pre, saved);
                     }});
      break;
    case Op::add_norm_post_fwd:
      out.push_back(
          {name, post_note, [=] { add_norm_post(x, r, normalized, y, pre, dropout, stats); }});
      break;
    case Op::add_norm_post_bwd:
      out.push_back({name, post_note, [=] {
                       add_norm_post_backward(dy, x, r, normalized, {dx, ds, dgamma, dbeta}, pre,
                                              dropout, saved);
                     }});
      break;
    case Op::batch_norm_train_fwd: {
      const BatchNormOptions bn = training_batch_norm(gamma, beta);
      const RunningStats running{{ws.running_mean, columns}, {ws.running_var, columns}};
      const NormStats batch{{ws.column_stat_a, columns}, {ws.column_stat_b, columns}};
      out.push_back({name, "", [=] { batch_norm(x, y, bn, running, batch); }});
      break;
    }
    case Op::batch_norm_train_bwd: {
      const BatchNormOptions bn = training_batch_norm(gamma, beta);
      out.push_back({name, "", [=] { batch_norm_backward(dy, x, {dx, dgamma, dbeta}, bn); }});
      break;
    }
  }
}

}  // namespace

void add_addnorm_runners(const Case& c, Workspace& ws, std::vector<Runner>& out) {
  addnorm_runners(c, ws, kDropoutP, out);
}

// The backward reads the statistics prepare_saved_stats wrote with p = 0.1: other values, the
// same work.
void add_addnorm_no_dropout_runners(const Case& c, Workspace& ws, std::vector<Runner>& out) {
  if (c.op != Op::add_norm_post_fwd && c.op != Op::add_norm_post_bwd) return;
  std::vector<Runner> runners;
  addnorm_runners(c, ws, 0.0f, runners);
  for (Runner& runner : runners) {
    runner.impl = "addnorm-p0";
    out.push_back(std::move(runner));
  }
}

// Saved statistics for the backward cases, written by addnorm's own forward so every
// implementation that takes saved statistics reads the same ones.
void prepare_saved_stats(const Case& c, Workspace& ws) {
  if (c.dtype != DType::f32) {
    prepare_bf16_saved_stats(c, ws);
    return;
  }
  const Shape shape{c.rows, c.dim};
  const Shape normalized{c.dim};
  const ConstView gamma{ws.gamma, {c.dim}}, beta{ws.beta, {c.dim}};
  const NormStats stats{{ws.mean, {c.rows}}, {ws.rstd, {c.rows}}};
  const NormOptions pre{
      .norm = NormKind::layer_norm, .gamma = gamma, .beta = beta, .eps = kLayerNormEps};
  switch (c.op) {
    case Op::layer_norm_bwd:
      layer_norm({ws.x, shape}, normalized, {ws.y, shape},
                 {.gamma = gamma, .beta = beta, .eps = kLayerNormEps}, stats);
      break;
    case Op::rms_norm_bwd:
      rms_norm({ws.x, shape}, normalized, {ws.y, shape},
               {.gamma = gamma, .zero_centered_gamma = false, .eps = kRmsNormEps}, stats.rstd);
      break;
    case Op::add_norm_pre_bwd:
      add_norm_pre({ws.x, shape}, {ws.r, shape}, normalized, {ws.h, shape}, {ws.y, shape}, pre,
                   stats);
      break;
    case Op::add_norm_post_bwd:
      add_norm_post({ws.x, shape}, {ws.r, shape}, normalized, {ws.y, shape}, pre,
                    {kDropoutP, kDropoutSeed, 0}, stats);
      break;
    case Op::batch_norm_train_bwd:
      // Batch mean and rstd for oneDNN's backward, which takes them; addnorm's recomputes them
      // from x, and PyTorch's graph keeps its own forward's.
      batch_norm({ws.x, shape}, {ws.y, shape},
                 training_batch_norm(ConstView{gamma}, ConstView{beta}), std::nullopt,
                 NormStats{{ws.column_stat_a, {c.dim}}, {ws.column_stat_b, {c.dim}}});
      break;
    default:
      break;
  }
}

}  // namespace addnorm::bench
