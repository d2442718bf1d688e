#include "addnorm/version.hpp"

namespace addnorm {

// Compiled into the library, so a program reads the version of the libaddnorm it runs with,
// not of the headers it was compiled against.
Version version() noexcept {
  return {ADDNORM_VERSION_MAJOR, ADDNORM_VERSION_MINOR, ADDNORM_VERSION_PATCH,
          ADDNORM_VERSION_STRING};
}

}  // namespace addnorm
