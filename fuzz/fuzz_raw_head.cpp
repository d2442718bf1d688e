// Fuzzes the first code that reads a client's bytes: the server's own scan of a request head
// (request line, header fields, the blank line) against its limits, and the Range filter that
// rewrites a complete head before httplib parses it. Besides the sanitizers, it checks the
// promises the server relies on: a complete head lies within the input and the byte limit, its
// field count within the field limit, and the filtered head is no longer than the head, is
// itself one complete head (which httplib then reads to its end and no further), and filtering
// it again changes nothing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/raw_head.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using addnorm::server::HeadLimits;
  using addnorm::server::RawHead;
  const std::string_view received(reinterpret_cast<const char*>(data), size);
  // Small limits as well as the server's, so that every refusal is reached by short inputs.
  for (const HeadLimits& limits : {HeadLimits{}, HeadLimits{256, 4, 64}}) {
    const RawHead head = addnorm::server::scan_head(received, limits);
    if (head.state != RawHead::State::complete) continue;
    if (head.bytes > size || head.bytes > limits.max_bytes || head.fields > limits.max_fields) {
      std::abort();
    }
    const std::string_view complete = received.substr(0, head.bytes);
    const std::string filtered = addnorm::server::with_plain_range_only(complete);
    const RawHead rescanned = addnorm::server::scan_head(filtered, limits);
    if (filtered.size() > complete.size() || rescanned.state != RawHead::State::complete ||
        rescanned.bytes != filtered.size() ||
        addnorm::server::with_plain_range_only(filtered) != filtered) {
      std::abort();
    }
  }
  return 0;
}
