// The faces' names of the row norms, read back into a NormKind (ops.hpp's norm_traits spells
// them).
#include <string>

#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"

namespace addnorm {

namespace {
constexpr NormKind kNormKinds[] = {NormKind::layer_norm, NormKind::rms_norm};
}  // namespace

std::optional<NormKind> norm_kind_named(std::string_view name) {
  for (const NormKind kind : kNormKinds) {
    if (name == norm_traits(kind).name) return kind;
  }
  return std::nullopt;
}

NormKind norm_kind_from(std::string_view name) {
  if (const std::optional<NormKind> kind = norm_kind_named(name)) return *kind;
  std::string names;
  const size_t count = std::size(kNormKinds);
  for (size_t k = 0; k < count; ++k) {
    if (k > 0) names += k + 1 == count ? " or " : ", ";
    names += "'" + std::string(norm_traits(kNormKinds[k]).name) + "'";
  }
  throw Error(ErrorKind::value, "norm", "is '" + std::string(name) + "', expected " + names);
}

}  // namespace addnorm
