// addnorm.h read by a C++20 compiler with -Werror -pedantic (tests/c/CMakeLists.txt): the C ABI
// must stay usable from C++, and its descriptor must keep the layout every FFI binding assumes.
#include "addnorm/addnorm.h"

#include <cstddef>

static_assert(sizeof(addnorm_tensor) == 2 * sizeof(void*) + 8);
static_assert(offsetof(addnorm_tensor, shape) == sizeof(void*));
static_assert(offsetof(addnorm_tensor, rank) == 2 * sizeof(void*));
static_assert(offsetof(addnorm_tensor, dtype) == 2 * sizeof(void*) + 4);

int main() {
  // The functions have C linkage: a pointer to one is a plain C function pointer.
  const char* (*last_error)(void) = &addnorm_last_error;
  return last_error() == nullptr ? 1 : 0;
}
