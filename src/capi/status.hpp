// The C ABI's one rule for failures: no exception crosses the boundary. Every entry point runs
// its body through guarded(), which maps each exception to a status and records its message in
// this thread's error slot (addnorm_last_error).
#pragma once

#include <exception>
#include <new>

#include "addnorm/addnorm.h"
#include "addnorm/error.hpp"

namespace addnorm::capi {

// Records `message` as this thread's last error and returns `status`; never throws.
addnorm_status fail(addnorm_status status, const char* message) noexcept;
// The same for a bad argument: also records the argument's name and the kind of mistake.
addnorm_status fail_argument(const Error& error) noexcept;
// Clears this thread's last error and returns ADDNORM_OK.
addnorm_status succeed() noexcept;

template <class Body>
addnorm_status guarded(Body&& body) noexcept {
  try {
    body();
    return succeed();
  } catch (const Error& error) {
    return fail_argument(error);
  } catch (const std::bad_alloc&) {
    return fail(ADDNORM_ERROR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& error) {
    return fail(ADDNORM_ERROR_INTERNAL, error.what());
  } catch (...) {
    return fail(ADDNORM_ERROR_INTERNAL, "an exception of unknown type");
  }
}

}  // namespace addnorm::capi
