// addnorm_last_error (with its argument and kind) and addnorm_status_name, and the per-thread
// slots behind them.
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
// An argument's name is short (the longest is "zero_centered_gamma"); a longer one is cut.
constexpr std::size_t kArgumentCapacity = 64;
thread_local char last_argument[kArgumentCapacity] = "";
thread_local addnorm_error_kind last_kind = ADDNORM_ERROR_KIND_NONE;

// Copies `text` into `slot`, cut with "..." when it does not fit.
template <std::size_t kCapacity>
void record(char (&slot)[kCapacity], const char* text) noexcept {
  const std::size_t length = std::strlen(text);
  if (length < kCapacity) {
    std::memcpy(slot, text, length + 1);
  } else {
    constexpr char kCut[] = "...";
    const std::size_t kept = kCapacity - sizeof kCut;
    std::memcpy(slot, text, kept);
    std::memcpy(slot + kept, kCut, sizeof kCut);
  }
}

addnorm_error_kind c_kind(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::value:
      return ADDNORM_ERROR_KIND_VALUE;
    case ErrorKind::shape:
      return ADDNORM_ERROR_KIND_SHAPE;
    case ErrorKind::type:
      return ADDNORM_ERROR_KIND_TYPE;
    case ErrorKind::overlap:
      return ADDNORM_ERROR_KIND_OVERLAP;
  }
  return ADDNORM_ERROR_KIND_VALUE;
}

}  // namespace

addnorm_status fail(addnorm_status status, const char* message) noexcept {
  record(last_message, message);
  last_argument[0] = '\0';
  last_kind = ADDNORM_ERROR_KIND_NONE;
  return status;
}

addnorm_status fail_argument(const Error& error) noexcept {
  record(last_message, error.what());
  record(last_argument, error.argument().c_str());
  last_kind = c_kind(error.kind());
  return ADDNORM_ERROR_INVALID_ARGUMENT;
}

addnorm_status succeed() noexcept {
  last_message[0] = '\0';
  last_argument[0] = '\0';
  last_kind = ADDNORM_ERROR_KIND_NONE;
  return ADDNORM_OK;
}

}  // namespace addnorm::capi

extern "C" {

const char* addnorm_last_error(void) {
  return addnorm::capi::last_message;
}

const char* addnorm_last_error_argument(void) {
  return addnorm::capi::last_argument;
}

addnorm_error_kind addnorm_last_error_kind(void) {
  return addnorm::capi::last_kind;
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
