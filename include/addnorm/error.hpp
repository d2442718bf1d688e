// addnorm::Error: the one exception type every public entry point throws for bad arguments.
// Its message names the argument and what was expected, so a user can act on it.
#pragma once

#include <stdexcept>
#include <string>

#include "addnorm/visibility.hpp"

ADDNORM_PUBLIC_BEGIN
namespace addnorm {

class Error : public std::invalid_argument {
 public:
  explicit Error(const std::string& message) : std::invalid_argument(message) {}
};

}  // namespace addnorm
ADDNORM_PUBLIC_END
