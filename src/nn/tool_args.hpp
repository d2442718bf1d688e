// The key=value arguments of the programs built on the nn layer (nn_torch_compare_tool,
// nn_train_step_bench), read one way: a key the program does not take, a key given twice, an
// argument without '=', a number that does not parse or is out of range, or a word outside its
// choices is an Error that names it, rather than a silently ignored typo, a default used instead
// or a bare std::stoll exception.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "addnorm/error.hpp"

namespace addnorm::nn {

class ToolArgs {
 public:
  // argv[first ... argc - 1], each key one of `keys`.
  ToolArgs(int argc, char** argv, int first, std::initializer_list<std::string_view> keys) {
    for (int i = first; i < argc; ++i) {
      const std::string argument = argv[i];
      const size_t equals = argument.find('=');
      if (equals == std::string::npos) {
        throw Error("argument \"" + argument + "\" is not key=value");
      }
      const std::string key = argument.substr(0, equals);
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        throw Error("argument \"" + argument + "\": unknown key, expected one of " + listed(keys));
      }
      if (!values_.emplace(key, argument.substr(equals + 1)).second) {
        throw Error("argument \"" + argument + "\": " + key + " is given twice");
      }
    }
  }

  std::string text(const std::string& key, const std::string& fallback) const {
    const auto found = values_.find(key);
    return found == values_.end() ? fallback : found->second;
  }

  // One of `allowed`.
  std::string choice(const std::string& key, const std::string& fallback,
                     std::initializer_list<std::string_view> allowed) const {
    const std::string value = text(key, fallback);
    if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
      throw Error(key + " is \"" + value + "\", expected one of " + listed(allowed));
    }
    return value;
  }

  // An integer of at least `minimum`.
  int64_t integer(const std::string& key, int64_t fallback,
                  int64_t minimum = std::numeric_limits<int64_t>::min()) const {
    const auto found = values_.find(key);
    const int64_t value = found == values_.end() ? fallback : parse(key, found->second);
    if (value < minimum) {
      throw Error(key + " is " + std::to_string(value) + ", expected at least " +
                  std::to_string(minimum));
    }
    return value;
  }

  // A comma-separated list of integers (absent or empty: none).
  std::vector<int64_t> integers(const std::string& key) const {
    std::vector<int64_t> values;
    const std::string list = text(key, "");
    for (size_t begin = 0; begin < list.size();) {
      const size_t comma = std::min(list.find(',', begin), list.size());
      values.push_back(parse(key, list.substr(begin, comma - begin)));
      begin = comma + 1;
    }
    return values;
  }

 private:
  static int64_t parse(const std::string& key, const std::string& value) {
    int64_t parsed = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
    if (error != std::errc() || end != value.data() + value.size() || value.empty()) {
      throw Error(key + " is \"" + value + "\", expected an integer");
    }
    return parsed;
  }

  static std::string listed(std::initializer_list<std::string_view> names) {
    std::string text;
    for (std::string_view name : names) text += (text.empty() ? "" : ", ") + std::string(name);
    return text;
  }

  std::map<std::string, std::string> values_;
};

}  // namespace addnorm::nn
