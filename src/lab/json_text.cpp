#include "lab/json_text.hpp"

#include <algorithm>
#include <cctype>

namespace addnorm::lab {
namespace {

constexpr size_t kMaxQuotedCharacters = 40;

std::string plural(size_t count, const char* one, const char* many) {
  return std::to_string(count) + " " + (count == 1 ? one : many);
}

}  // namespace

std::string dump_json_safely(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string describe_json_value(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::array:
      return "a list of " + plural(value.size(), "value", "values");
    case nlohmann::json::value_t::object:
      return "an object with " + plural(value.size(), "key", "keys");
    case nlohmann::json::value_t::string: {
      const std::string& text = value.get_ref<const std::string&>();
      if (text.size() <= kMaxQuotedCharacters) return dump_json_safely(value);
      // Cut on a character boundary: back off over UTF-8 continuation bytes (10xxxxxx).
      size_t cut = kMaxQuotedCharacters;
      while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
      return dump_json_safely(text.substr(0, cut)) + " (cut, " + std::to_string(text.size()) +
             " bytes in all)";
    }
    default:  // numbers, booleans, null: short by nature
      return value.dump();
  }
}

std::string describe_json_key(const std::string& key) {
  const bool identifier =
      !key.empty() && key.size() <= kMaxQuotedCharacters &&
      std::all_of(key.begin(), key.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      });
  return identifier ? key : describe_json_value(key);
}

}  // namespace addnorm::lab
