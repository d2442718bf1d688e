// --normalized_shape (PyTorch's comma list) and --axis (ONNX's start axis) for `addnorm run`.
#include <algorithm>
#include <cctype>
#include <limits>
#include <vector>

#include "addnorm/error.hpp"
#include "cli/run_ops.hpp"

namespace addnorm::cli {

Shape parse_normalized_shape(const std::string& text) {
  const auto refuse = [&]() {
    return Error("--normalized_shape is '" + text +
                 "', expected a comma-separated list of positive integers such as 4 or 3,4");
  };
  // Brackets and spaces are allowed so that Python's spellings, [3, 4] and (4,), also work.
  std::string digits_and_commas;
  for (const char c : text) {
    if (c != ' ' && c != '[' && c != ']' && c != '(' && c != ')') digits_and_commas += c;
  }
  if (!digits_and_commas.empty() && digits_and_commas.back() == ',') digits_and_commas.pop_back();
  std::vector<int64_t> dims;
  size_t start = 0;
  while (start <= digits_and_commas.size()) {
    const size_t end = std::min(digits_and_commas.find(',', start), digits_and_commas.size());
    const std::string item = digits_and_commas.substr(start, end - start);
    if (item.empty() || item.size() > 18) throw refuse();
    for (const char c : item) {
      if (!std::isdigit(static_cast<unsigned char>(c))) throw refuse();
    }
    dims.push_back(std::stoll(item));
    if (dims.back() == 0) throw refuse();
    if (dims.size() > static_cast<size_t>(kMaxRank)) {
      throw Error("--normalized_shape has more than " + std::to_string(kMaxRank) +
                  " dimensions, the most a tensor may have");
    }
    start = end + 1;
  }
  return Shape(std::span<const int64_t>(dims));
}

Shape resolve_normalized_shape(const RunSettings& settings, const Shape& x_shape) {
  const bool shape_given = !settings.normalized_shape.empty();
  if (shape_given == settings.axis_given) {
    throw Error(shape_given ? "--normalized_shape and --axis were both given, expected one"
                            : "--normalized_shape or --axis is required, expected one of them");
  }
  if (shape_given) return parse_normalized_shape(settings.normalized_shape);
  return normalized_shape_from_axis(x_shape, settings.axis);
}

Shape row_stats_shape(const Shape& x_shape, const Shape& normalized_shape) {
  return x_shape.leading(std::min(normalized_shape.rank(), x_shape.rank()));
}

}  // namespace addnorm::cli
