// addnorm_last_error and addnorm_status_name, and the per-thread slot behind them.
#include "capi/status.hpp"

#include <cstddef>
#include <cstring>

namespace addnorm::capi {

namespace {

// A fixed buffer rather than a std::string: recording an error must not itself fail for lack
// of memory (an out-of-memory error is recorded too), and a trivially destructible
// thread_local costs no guard or destructor registration per thread.
constexpr std::size_t kMessageCapacity = 1024;
thread_local char last_message[kMessageCapacity] = "";

}  // namespace

addnorm_status fail(addnorm_status status, const char* message) noexcept {
  const std::size_t length = std::strlen(message);
  if (length < kMessageCapacity) {
    std::memcpy(last_message, message, length + 1);
  } else {
    constexpr char kCut[] = "...";
    const std::size_t kept = kMessageCapacity - sizeof kCut;
    std::memcpy(last_message, message, kept);
    std::memcpy(last_message + kept, kCut, sizeof kCut);
  }
  return status;
}

addnorm_status succeed() noexcept {
  last_message[0] = '\0';
  return ADDNORM_OK;
}

}  // namespace addnorm::capi

extern "C" {

const char* addnorm_last_error(void) {
  return addnorm::capi::last_message;
}

const char* addnorm_status_name(int status) {
  switch (status) {
    case ADDNORM_OK:
      return "ADDNORM_OK";
    case ADDNORM_ERROR_INVALID_ARGUMENT:
      return "ADDNORM_ERROR_INVALID_ARGUMENT";
    case ADDNORM_ERROR_OUT_OF_MEMORY:
      return "ADDNORM_ERROR_OUT_OF_MEMORY";
    case ADDNORM_ERROR_INTERNAL:
      return "ADDNORM_ERROR_INTERNAL";
    default:
      return "ADDNORM_STATUS_UNKNOWN";
  }
}

}  // extern "C"
