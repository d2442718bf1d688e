// Which row norm, and what each kind is: its own header so that the kernel layer (src/ops/cpu/),
// which needs only this, does not depend on the public ops' argument types.
#pragma once

#include <optional>
#include <string_view>

#include "addnorm/visibility.hpp"

ADDNORM_PUBLIC_BEGIN
namespace addnorm {

// The row norms the engine runs, and what each kind is, decided in one place: norm_traits is the
// one switch over NormKind (a kind it does not name is a compiler warning), and the default eps
// of NormOptions (addnorm/ops.hpp) and of every face come from it.
enum class NormKind { layer_norm, rms_norm };
struct NormTraits {
  const char* name;    // as the faces spell it: "layer_norm", "rms_norm"
  bool centres;        // subtracts the row's mean (and so saves a mean for the backward)
  bool has_shift;      // takes beta
  double default_eps;  // the plain op's default, which the fused ops share
};
constexpr NormTraits norm_traits(NormKind kind) {
  switch (kind) {
    case NormKind::layer_norm:
      return {"layer_norm", true, true, 1e-5};  // PyTorch's and ONNX's default
    case NormKind::rms_norm:
      return {"rms_norm", false, false, 1e-6};  // the seed page's RMSNorm default
  }
  return {"", false, false, 0.0};
}
// The channel norms, GroupNorm (InstanceNorm is its case of one channel a group) and BatchNorm,
// centre as LayerNorm does and take its description (NormOptions) and so its default eps, which
// is PyTorch's and ONNX's for each of them too. The faces name them so.
inline constexpr double kGroupNormDefaultEps = norm_traits(NormKind::layer_norm).default_eps;
inline constexpr double kBatchNormDefaultEps = norm_traits(NormKind::layer_norm).default_eps;
// The default eps of a norm op as the faces name it: "group_norm", "instance_norm" or
// "batch_norm"'s, or a row norm's (norm_traits); any other name is norm_kind_from's Error (the
// fused ops' norm argument, which names the row norms).
double default_eps_named(std::string_view norm);

// The kind a face's name spells, or nullopt.
std::optional<NormKind> norm_kind_named(std::string_view name);
// The same, or an Error naming the argument "norm" and the names accepted.
NormKind norm_kind_from(std::string_view name);

}  // namespace addnorm
ADDNORM_PUBLIC_END
