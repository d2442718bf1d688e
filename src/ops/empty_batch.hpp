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

// The same for an op's optional statistics (`with_mean` false: a kind that does not centre
// writes no mean) and for any gradients struct's optional dgamma and dbeta.
template <class Stats>
bool empty_statistics(int64_t elements, const std::optional<Stats>& stats, int64_t count,
                      bool with_mean = true) {
  using T = std::remove_pointer_t<decltype(stats->rstd.data)>;
  T* mean = stats && with_mean ? stats->mean.data : nullptr;
  return empty_forward(elements, mean, stats ? stats->rstd.data : nullptr, count);
}
template <class Grad>
bool empty_parameter_grads(int64_t elements, const std::optional<Grad>& dgamma,
                           const std::optional<Grad>& dbeta, int64_t parameters) {
  using T = std::remove_pointer_t<decltype(dgamma->data)>;
  return empty_backward<T>(elements, dgamma ? dgamma->data : nullptr, dbeta ? dbeta->data : nullptr,
                           parameters);
}
template <class Grads>
bool empty_gradients(int64_t elements, const Grads& grads, int64_t parameters) {
  return empty_parameter_grads(elements, grads.dgamma, grads.dbeta, parameters);
}

// A row norm's: its rows hold no elements.
template <class Stats>
bool empty_norm_forward(NormKind kind, const std::optional<Stats>& stats, const RowLayout& layout) {
  return empty_statistics(layout.rows * layout.dim, stats, layout.rows, norm_traits(kind).centres);
}
template <class Grad>
bool empty_norm_backward(const std::optional<Grad>& dgamma, const std::optional<Grad>& dbeta,
                         const RowLayout& layout) {
  return empty_parameter_grads(layout.rows * layout.dim, dgamma, dbeta, layout.dim);
}

}  // namespace addnorm::detail
