#include "ops/storage.hpp"

#include "ops/cpu/convert.hpp"
#include "ops/empty_batch.hpp"

namespace addnorm::detail {

NormSettings norm_settings(const NormOptions& options, NormKind kind) {
  return {kind, options.gamma, options.beta, options.zero_centered_gamma, eps_of(options, kind)};
}

const float* parameter_as_float32(const std::optional<AnyConstView>& view, cpu::Scratch& scratch) {
  if (!view) return nullptr;
  if (view->dtype == DType::float32) return static_cast<const float*>(view->data);
  const int64_t count = view->shape.numel();
  float* wide = scratch.take<float>(count);
  cpu::to_float32(view->data, view->dtype, wide, count);
  return wide;
}

namespace {

// The settings both directions share: the norm, its shape and eps (gamma comes separately).
template <class Args>
void set_norm(Args& args, const NormSettings& settings, const RowLayout& layout) {
  args.zero_centered_gamma = settings.zero_centered_gamma;
  args.norm = settings.norm;
  args.rows = layout.rows;
  args.dim = layout.dim;
  args.eps = settings.eps;
}

}  // namespace

cpu::NormForward forward_args(const AnyConstView& x, const AnyMutableView& y,
                              const NormSettings& settings, const std::optional<NormStats>& stats,
                              const RowLayout& layout, cpu::Scratch& scratch) {
  cpu::NormForward args;
  args.x = x.data;
  args.y = y.data;
  args.storage = x.dtype;
  args.branch_storage = y.dtype;
  args.gamma = parameter_as_float32(settings.gamma, scratch);
  args.beta = parameter_as_float32(settings.beta, scratch);
  set_norm(args, settings, layout);
  args.mean = stats && norm_traits(settings.norm).centres ? stats->mean.data : nullptr;
  args.rstd = stats ? stats->rstd.data : nullptr;
  return args;
}

cpu::NormBackward backward_args(const AnyConstView& dy, const AnyConstView& x,
                                const AnyMutableView& dx, const NormSettings& settings,
                                const RowLayout& layout, cpu::Scratch& scratch) {
  cpu::NormBackward args;
  args.dy = dy.data;
  args.x = x.data;
  args.dx = dx.data;
  args.storage = x.dtype;
  args.dy_storage = dy.dtype;
  args.gamma = parameter_as_float32(settings.gamma, scratch);
  set_norm(args, settings, layout);
  return args;
}

void run_norm_forward(const AnyConstView& x, const std::optional<AnyConstView>& r,
                      const std::optional<AnyMutableView>& h, const AnyMutableView& y,
                      const NormSettings& settings, const std::optional<NormStats>& stats,
                      const RowLayout& layout) {
  if (empty_norm_forward(settings.norm, stats, layout)) return;
  cpu::Scratch scratch;
  cpu::NormForward args = forward_args(x, y, settings, stats, layout, scratch);
  args.residual = r ? r->data : nullptr;
  args.h = h ? h->data : nullptr;
  cpu::norm_forward(args);
}

void run_norm_backward(const AnyConstView& dy, const AnyConstView& x,
                       const std::optional<AnyConstView>& dh_next, const AnyMutableView& dx,
                       const OptionalMutable& dgamma, const OptionalMutable& dbeta,
                       const NormSettings& settings, const OptionalConst& saved_rstd,
                       const RowLayout& layout) {
  if (empty_norm_backward(dgamma, dbeta, layout)) return;
  cpu::Scratch scratch;
  cpu::NormBackward args = backward_args(dy, x, dx, settings, layout, scratch);
  args.dh_next = dh_next ? dh_next->data : nullptr;
  args.saved_rstd = saved_rstd ? saved_rstd->data : nullptr;
  args.dgamma = dgamma ? dgamma->data : nullptr;
  args.dbeta = dbeta ? dbeta->data : nullptr;
  cpu::norm_backward(args);
}

}  // namespace addnorm::detail
