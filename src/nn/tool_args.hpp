// The key=value arguments of the programs built on the nn layer (nn_torch_compare_tool,
// nn_train_step_bench), read one way: a key the program does not take, a key given twice, an
// argument without '=' or a number that does not parse is an Error that names it, rather than a
// silently ignored typo or a bare std::stoll exception.
#pragma once

#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

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
      bool known = false;
      std::string names;
      for (std::string_view name : keys) {
        known = known || name == key;
        names += (names.empty() ? "" : ", ") + std::string(name);
      }
      if (!known)
        throw Error("argument \"" + argument + "\": unknown key, expected one of " + names);
      if (!values_.emplace(key, argument.substr(equals + 1)).second) {
        throw Error("argument \"" + argument + "\": " + key + " is given twice");
      }
    }
  }

  std::string text(const std::string& key, const std::string& fallback) const {
    const auto found = values_.find(key);
    return found == values_.end() ? fallback : found->second;
  }

  int64_t integer(const std::string& key, int64_t fallback) const {
    const auto found = values_.find(key);
    if (found == values_.end()) return fallback;
    const std::string& value = found->second;
    int64_t parsed = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
    if (error != std::errc() || end != value.data() + value.size()) {
      throw Error(key + " is \"" + value + "\", expected an integer");
    }
    return parsed;
  }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace addnorm::nn
