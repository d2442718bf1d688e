// How the public norms reach their kernels by storage type: when every row tensor and parameter
// of a call stores float32, the float32 kernels run on the memory in place; otherwise the call
// goes to the storage-generic path (mixed_precision.cpp), which hands the engine the tensors in
// their own types (and stages through float32 blocks only the exotic combinations it names).
// The arguments are checked before either is called (op_checks.hpp).
#pragma once

#include <initializer_list>
#include <optional>

#include "addnorm/dtype.hpp"
#include "addnorm/ops.hpp"
#include "ops/mixed_precision.hpp"

namespace addnorm::detail {

inline bool stores_float32(std::initializer_list<AnyConstView> rows,
                           std::initializer_list<std::optional<AnyConstView>> parameters = {}) {
  for (const AnyConstView& view : rows) {
    if (view.dtype != DType::float32) return false;
  }
  for (const std::optional<AnyConstView>& view : parameters) {
    if (view && view->dtype != DType::float32) return false;
  }
  return true;
}

// The data of a view known to store float32 (nullptr for an absent optional one).
inline const float* float32_data(const AnyConstView& view) {
  return static_cast<const float*>(view.data);
}
inline float* float32_data(const AnyMutableView& view) { return static_cast<float*>(view.data); }
inline const float* float32_data(const std::optional<AnyConstView>& view) {
  return view ? float32_data(*view) : nullptr;
}

// The storage-generic path's settings for each public option set.
inline MixedNormOptions storage_options(const LayerNormOptions& options) {
  return {NormKind::layer_norm, options.gamma, options.beta, false, options.eps};
}
inline MixedNormOptions storage_options(const RmsNormOptions& options) {
  return {NormKind::rms_norm, options.gamma, std::nullopt, options.zero_centered_gamma,
          options.eps};
}
inline MixedNormOptions storage_options(const AddNormOptions& options) {
  return {options.norm, options.gamma, options.beta, options.zero_centered_gamma, options.eps};
}

}  // namespace addnorm::detail
