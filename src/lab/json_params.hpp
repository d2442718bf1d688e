// Reading an experiment's parameters from a JSON object (what the web page sends): every key is
// optional and keeps the default when absent; a key of the wrong type or a key the experiment
// does not know is an addnorm::Error naming it. Messages describe a bad value (describe_json_value)
// and never serialise it: the value is the client's and may be huge or deeply nested.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "addnorm/error.hpp"
#include "lab/json_text.hpp"

namespace addnorm::lab {

class JsonParams {
 public:
  JsonParams(const nlohmann::json& object, std::string experiment)
      : object_(object), experiment_(std::move(experiment)) {
    if (!object_.is_object()) {
      throw Error(experiment_ + " parameters must be a JSON object, got " +
                  describe_json_value(object_));
    }
  }

  // Sets `field` from object[key] when the key is present; says whether it was.
  template <class T>
  bool read(const std::string& key, T& field) {
    const auto found = object_.find(key);
    if (found == object_.end()) return false;
    used_.insert(key);
    if (!matches<T>(*found)) {
      throw Error(experiment_ + " parameter " + key + " is " + describe_json_value(*found) +
                  ", expected " + type_name<T>());
    }
    field = found->template get<T>();
    return true;
  }

  // Throws for keys that no read() asked for (a typo would otherwise be silently ignored).
  void finish() const {
    for (const auto& [key, value] : object_.items()) {
      if (!used_.contains(key)) {
        throw Error(experiment_ + " has no parameter named " + describe_json_key(key));
      }
    }
  }

 private:
  template <class T>
  static bool matches_one(const nlohmann::json& value) {
    if constexpr (std::is_same_v<T, bool>) {
      return value.is_boolean();
    } else if constexpr (std::is_unsigned_v<T>) {
      return value.is_number_unsigned() &&
             value.template get<uint64_t>() <= std::numeric_limits<T>::max();
    } else if constexpr (std::is_integral_v<T>) {
      // Out-of-range integers are refused here rather than wrapped by the conversion.
      if (value.is_number_unsigned()) {
        return value.template get<uint64_t>() <=
               static_cast<uint64_t>(std::numeric_limits<T>::max());
      }
      return value.is_number_integer() &&
             value.template get<int64_t>() >= std::numeric_limits<T>::min() &&
             value.template get<int64_t>() <= std::numeric_limits<T>::max();
    } else if constexpr (std::is_floating_point_v<T>) {
      // A number a float field cannot hold is refused rather than turned into infinity.
      return value.is_number() && std::abs(value.template get<double>()) <=
                                      static_cast<double>(std::numeric_limits<T>::max());
    } else {
      return value.is_string();
    }
  }
  template <class T>
  static bool matches(const nlohmann::json& value) {
    if constexpr (requires { typename T::value_type; } && !std::is_same_v<T, std::string>) {
      if (!value.is_array()) return false;
      for (const auto& element : value) {
        if (!matches_one<typename T::value_type>(element)) return false;
      }
      return true;
    } else {
      return matches_one<T>(value);
    }
  }
  template <class T>
  static std::string type_name() {
    if constexpr (requires { typename T::value_type; } && !std::is_same_v<T, std::string>) {
      return "a list of " + plural_type_name<typename T::value_type>();
    } else if constexpr (std::is_same_v<T, bool>) {
      return "true or false";
    } else if constexpr (std::is_unsigned_v<T>) {
      return "a non-negative integer";
    } else if constexpr (std::is_integral_v<T>) {
      return "an integer";
    } else if constexpr (std::is_floating_point_v<T>) {
      return "a number";
    } else {
      return "a string";
    }
  }

  template <class T>
  static std::string plural_type_name() {
    if constexpr (std::is_same_v<T, bool>) {
      return "true or false values";
    } else if constexpr (std::is_unsigned_v<T>) {
      return "non-negative integers";
    } else if constexpr (std::is_integral_v<T>) {
      return "integers";
    } else if constexpr (std::is_floating_point_v<T>) {
      return "numbers";
    } else {
      return "strings";
    }
  }

  const nlohmann::json& object_;
  std::string experiment_;
  std::set<std::string> used_;
};

}  // namespace addnorm::lab
