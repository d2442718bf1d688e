// The float64 ops' row norms (addnorm/float64.hpp), for the plain and the fused ops alike: the
// one switch from the kind a call runs to its reference kernel, after op_checks.hpp's checks.
#pragma once

#include <optional>

#include "addnorm/float64.hpp"
#include "ops/empty_batch.hpp"
#include "ops/reference/layer_norm.hpp"
#include "ops/reference/rms_norm.hpp"
#include "ops/validate.hpp"

namespace addnorm::float64::detail_rows {

template <class View>
auto data_or_null(const std::optional<View>& view) {
  return view ? view->data : nullptr;
}

// y = Norm(h) over the rows of `layout`, with the statistics asked for (mean: a centring
// norm's only).
inline void norm_forward(const double* h, double* y, const NormOptions& options, NormKind kind,
                         const std::optional<NormStats>& stats,
                         const addnorm::detail::RowLayout& layout) {
  if (addnorm::detail::empty_norm_forward(kind, stats, layout)) return;
  double* rstd = stats ? stats->rstd.data : nullptr;
  const double eps = eps_of(options, kind);
  switch (kind) {
    case NormKind::layer_norm:
      return reference::layer_norm_forward<double>(
          h, data_or_null(options.gamma), data_or_null(options.beta), y,
          stats ? stats->mean.data : nullptr, rstd, layout.rows, layout.dim, eps);
    case NormKind::rms_norm:
      return reference::rms_norm_forward<double>(h, data_or_null(options.gamma),
                                                 options.zero_centered_gamma, y, rstd, layout.rows,
                                                 layout.dim, eps);
  }
}

// dh = dh_next + Norm'(dy) at h (dh_next may be null); dh may be dy, h or dh_next.
inline void norm_backward(const double* dy, const double* h, const double* dh_next, double* dh,
                          double* dgamma, double* dbeta, const NormOptions& options, NormKind kind,
                          const double* saved_rstd, const addnorm::detail::RowLayout& layout) {
  if (addnorm::detail::empty_backward(layout.rows * layout.dim, dgamma, dbeta, layout.dim)) return;
  const double eps = eps_of(options, kind);
  switch (kind) {
    case NormKind::layer_norm:
      return reference::layer_norm_backward<double>(dy, h, data_or_null(options.gamma), saved_rstd,
                                                    dh_next, dh, dgamma, dbeta, layout.rows,
                                                    layout.dim, eps);
    case NormKind::rms_norm:
      return reference::rms_norm_backward<double>(dy, h, data_or_null(options.gamma),
                                                  options.zero_centered_gamma, saved_rstd, dh_next,
                                                  dh, dgamma, layout.rows, layout.dim, eps);
  }
}

}  // namespace addnorm::float64::detail_rows
