// The faces' names of the row norms, read back into a NormKind (ops.hpp's norm_traits spells
// them), and every norm op's default eps by name.
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

double default_eps_named(std::string_view norm) {
  if (norm == "group_norm" || norm == "instance_norm") return kGroupNormDefaultEps;
  if (norm == "batch_norm") return kBatchNormDefaultEps;
  // Any other name is a row norm's or a mistake, named as the fused ops' norm argument names it.
  return norm_traits(norm_kind_from(norm)).default_eps;
}

}  // namespace addnorm
