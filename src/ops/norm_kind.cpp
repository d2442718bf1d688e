// The faces' names of the row norms, read back into a NormKind (ops.hpp's norm_traits spells
// them).
#include "addnorm/ops.hpp"

namespace addnorm {

std::optional<NormKind> norm_kind_named(std::string_view name) {
  for (const NormKind kind : {NormKind::layer_norm, NormKind::rms_norm}) {
    if (name == norm_traits(kind).name) return kind;
  }
  return std::nullopt;
}

}  // namespace addnorm
