// addnorm::Error: the one exception type every public entry point throws for bad arguments.
// Its message names the argument and what was expected, so a user can act on it; the argument
// and the kind of mistake are also fields, so that each face (Python, PyTorch, the C ABI, the
// command line, the lab server) maps them to its own exception type and spelling in one place
// instead of re-checking arguments itself.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "addnorm/visibility.hpp"

ADDNORM_PUBLIC_BEGIN
namespace addnorm {

// What is wrong with the argument.
enum class ErrorKind : uint8_t {
  value,    // a value outside what is accepted: a NaN eps, p >= 1, an unknown name, a missing part
  shape,    // a tensor's shape, rank or element count
  type,     // a tensor's storage type (dtype)
  overlap,  // an output sharing memory with an argument where it may not
};
// "value", "shape", "type", "overlap".
constexpr const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::value:
      return "value";
    case ErrorKind::shape:
      return "shape";
    case ErrorKind::type:
      return "type";
    case ErrorKind::overlap:
      return "overlap";
  }
  return "";
}

class Error : public std::invalid_argument {
 public:
  // what() is "<argument> <detail>": detail says what the argument is and what was expected,
  // without naming the argument again, so a face can put its own name in front.
  Error(ErrorKind kind, std::string argument, std::string detail)
      : std::invalid_argument(argument + " " + detail),
        kind_(kind),
        argument_(std::move(argument)),
        detail_(std::move(detail)) {}
  // A message about no single argument (the lab's and nn's checks): kind value, no argument.
  explicit Error(const std::string& message) : std::invalid_argument(message) {}

  ErrorKind kind() const noexcept { return kind_; }
  // The argument as the C++ API names it ("x", "gamma", "eps"), or empty.
  const std::string& argument() const noexcept { return argument_; }
  const std::string& detail() const noexcept { return detail_; }

 private:
  ErrorKind kind_ = ErrorKind::value;
  std::string argument_;
  std::string detail_;
};

// The one table of names that differ between the C++ API and the faces users call: C++ (and the
// C ABI) name the affine parameters as the papers do, gamma and beta; the command line, Python,
// PyTorch and the lab page name them as PyTorch does, weight and bias. Any other name is the
// same in every face.
constexpr std::string_view face_argument_name(std::string_view name) {
  constexpr std::pair<std::string_view, std::string_view> kFaceNames[] = {
      {"gamma", "weight"},
      {"beta", "bias"},
      {"dgamma", "dweight"},
      {"dbeta", "dbias"},
      {"zero_centered_gamma", "zero_centered_weight"},
  };
  for (const auto& [cpp, face] : kFaceNames) {
    if (name == cpp) return face;
  }
  return name;
}

// The message with every argument in it spelled as the faces spell them (face_argument_name):
// "dgamma overlaps gamma" becomes "dweight overlaps weight". Names are whole words, made of
// letters, digits and '_'.
inline std::string face_message(const Error& error) {
  const std::string message = error.what();
  if (error.argument().empty()) return message;
  const auto in_word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    if (!in_word(message[i])) {
      out += message[i++];
      continue;
    }
    size_t end = i;
    while (end < message.size() && in_word(message[end])) ++end;
    out += face_argument_name(std::string_view(message).substr(i, end - i));
    i = end;
  }
  return out;
}

}  // namespace addnorm
ADDNORM_PUBLIC_END
