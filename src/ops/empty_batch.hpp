// What every op does when its input has no elements (an empty batch, which PyTorch accepts):
// nothing is read, and each output takes the definition's value over no elements. Sums over
// none (dgamma, dbeta) are 0; statistics of none (a mean, an rstd) are 0/0 = NaN; running
// statistics keep their values (torch.nn.functional.batch_norm's rule). Outputs shaped like x
// have no elements to write. Statistics exist only where the reduced extent is what is empty:
// rows of no elements (normalized_shape with a 0), or a batch of no samples or positions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

#include "addnorm/norm_kind.hpp"
#include "ops/validate.hpp"

namespace addnorm::detail {

template <class T>
void fill_statistics_of_nothing(T* data, int64_t count) {
  if (data != nullptr) std::fill_n(data, count, std::numeric_limits<T>::quiet_NaN());
}

template <class T>
void fill_sums_of_nothing(T* data, int64_t count) {
  if (data != nullptr) std::fill_n(data, count, T(0));
}

// An op's forward and backward over `elements` elements of x: true, with the outputs written,
// when there are none (then the kernels are not called). `statistics` is the count of each of
// mean and rstd (either may be null), `parameters` that of dgamma and dbeta.
template <class T>
bool empty_forward(int64_t elements, T* mean, T* rstd, int64_t statistics) {
  if (elements != 0) return false;
  fill_statistics_of_nothing(mean, statistics);
  fill_statistics_of_nothing(rstd, statistics);
  return true;
}
template <class T>
bool empty_backward(int64_t elements, T* dgamma, T* dbeta, int64_t parameters) {
  if (elements != 0) return false;
  fill_sums_of_nothing(dgamma, parameters);
  fill_sums_of_nothing(dbeta, parameters);
  return true;
}

// The same for a row norm (mean: a centring kind's only).
template <class Stats>
bool empty_norm_forward(NormKind kind, const std::optional<Stats>& stats, const RowLayout& layout) {
  using T = std::remove_pointer_t<decltype(stats->rstd.data)>;
  T* mean = stats && norm_traits(kind).centres ? stats->mean.data : nullptr;
  return empty_forward(layout.rows * layout.dim, mean, stats ? stats->rstd.data : nullptr,
                       layout.rows);
}
template <class Grad>
bool empty_norm_backward(const std::optional<Grad>& dgamma, const std::optional<Grad>& dbeta,
                         const RowLayout& layout) {
  using T = std::remove_pointer_t<decltype(dgamma->data)>;
  return empty_backward<T>(layout.rows * layout.dim, dgamma ? dgamma->data : nullptr,
                           dbeta ? dbeta->data : nullptr, layout.dim);
}

}  // namespace addnorm::detail
