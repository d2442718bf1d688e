#include "server/raw_head.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace addnorm::server {
namespace {

// `name` is `lower_name`, in any case.
bool is_named(std::string_view name, std::string_view lower_name) {
  return name.size() == lower_name.size() &&
         std::equal(name.begin(), name.end(), lower_name.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

bool is_content_length(std::string_view name) {
  return is_named(name, "content-length");
}

bool digits(std::string_view text, size_t at_most) {
  return text.size() <= at_most &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "bytes=A-B" with A and B of 0 to 18 digits.
bool is_plain_range(std::string_view value) {
  constexpr std::string_view kUnit = "bytes=";
  constexpr size_t kDigits = 18;
  if (value.substr(0, kUnit.size()) != kUnit) return false;
  value.remove_prefix(kUnit.size());
  const size_t dash = value.find('-');
  return dash != std::string_view::npos && digits(value.substr(0, dash), kDigits) &&
         digits(value.substr(dash + 1), kDigits);
}

// A field's value as httplib keeps it: blanks around it dropped.
std::string_view trimmed(std::string_view value) {
  const size_t first = value.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const size_t last = value.find_last_not_of(" \t");
  return value.substr(first, last - first + 1);
}

std::optional<uint64_t> byte_count(std::string_view text) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return {};
  return value;
}

}  // namespace

RawHead scan_head(std::string_view received, const HeadLimits& limits) {
  RawHead head;
  const std::string_view window = received.substr(0, std::min(received.size(), limits.max_bytes));
  size_t line_end = window.find('\n');  // the request line's
  if ((line_end == std::string_view::npos ? window.size() : line_end) > limits.max_request_line) {
    head.state = RawHead::State::line_too_long;
    return head;
  }
  bool seen_length = false;
  while (line_end != std::string_view::npos) {
    const size_t start = line_end + 1;
    line_end = window.find('\n', start);
    if (line_end == std::string_view::npos) break;
    const std::string_view line = window.substr(start, line_end - start);  // without its LF
    if (line == "\r") {
      head.state = RawHead::State::complete;
      head.bytes = line_end + 1;
      return head;
    }
    if (++head.fields > limits.max_fields) {
      head.state = RawHead::State::too_many_fields;
      return head;
    }
    const size_t colon = line.find(':');
    // httplib skips lines that do not end in CR LF; the first Content-Length it keeps is ours.
    if (!seen_length && colon != std::string_view::npos && line.back() == '\r' &&
        is_content_length(line.substr(0, colon))) {
      seen_length = true;
      const std::string_view value = line.substr(colon + 1, line.size() - colon - 2);
      head.content_length = byte_count(trimmed(value));
    }
  }
  if (received.size() >= limits.max_bytes) head.state = RawHead::State::too_large;
  return head;
}

std::string with_plain_range_only(std::string_view head) {
  // The Range lines, and whether the one there is (if one) is plain.
  size_t ranges = 0;
  bool plain = true;
  const auto each_field = [&](auto&& visit) {
    size_t start = head.find('\n') + 1;  // past the request line
    for (size_t end; (end = head.find('\n', start)) != std::string_view::npos; start = end + 1) {
      visit(head.substr(start, end + 1 - start));  // with its LF
    }
  };
  const auto range_value = [](std::string_view line) -> std::optional<std::string_view> {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_named(line.substr(0, colon), "range")) return {};
    return trimmed(line.substr(colon + 1, line.find_last_not_of("\r\n") + 1 - (colon + 1)));
  };
  each_field([&](std::string_view line) {
    if (const auto value = range_value(line)) {
      ++ranges;
      plain = plain && is_plain_range(*value);
    }
  });
  if (ranges == 0 || (ranges == 1 && plain)) return std::string(head);
  std::string kept(head.substr(0, head.find('\n') + 1));
  each_field([&](std::string_view line) {
    if (!range_value(line)) kept += line;
  });
  return kept;
}

}  // namespace addnorm::server
