// One definition per experiment parameter. An experiment lists its parameters once, as a field
// table (name, help, the member, the values it accepts), and that table drives:
//   - the range checks of validate() (check_fields),
//   - the JSON the results echo and the server reads (fields_to_json / read_fields),
//   - the command-line options (src/cli/lab_param_options.hpp), their help and defaults.
// A table is a function object that calls its visitor with each Field in turn:
//
//   inline constexpr auto kExampleFields = [](auto&& visit) {
//     visit(Field{"width", "Features per token", ADDNORM_LAB_MEMBER(width), integer_in(2, 32)});
//   };
//
// Checks that relate two fields (warmup_steps <= steps, d_model a multiple of n_heads) or cap the
// work of a run stay in the experiment's validate(), after check_fields.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "lab/checks.hpp"
#include "lab/json_params.hpp"

namespace addnorm::lab {

// The member a field names, as an accessor that works on a const or a mutable Params.
#define ADDNORM_LAB_MEMBER(path) \
  [](auto& p) -> auto& {         \
    return p.path;               \
  }

// The values a field accepts. For a list, `count_low..count_high` values, each in the range.
struct Limits {
  enum class Range { none, integer, real, real_below, positive };
  Range range = Range::none;  // none: any value of the type (enums: any of their names)
  double low = 0.0, high = 0.0;
  size_t count_low = 0, count_high = 0;  // lists only
  bool distinct = false;                 // lists only: each value at most once
  bool float32 = false;                  // computed in float32: no nonzero value that becomes 0
};
inline constexpr Limits any_value() {
  return {};
}
inline constexpr Limits integer_in(int64_t low, int64_t high) {
  return {Limits::Range::integer, static_cast<double>(low), static_cast<double>(high)};
}
inline constexpr Limits real_in(double low, double high) {  // [low, high]
  return {Limits::Range::real, low, high};
}
inline constexpr Limits real_below(double low, double high) {  // [low, high)
  return {Limits::Range::real_below, low, high};
}
inline constexpr Limits positive_up_to(double high) {  // (0, high]
  return {Limits::Range::positive, 0.0, high};
}
// A real the experiment computes with in float32: besides the range, a nonzero value that
// float32 would turn into 0 is refused, as `addnorm run` refuses it in a .npy.
inline constexpr Limits float32_in(double low, double high) {  // [low, high], within float32
  Limits limits = real_in(low, high);
  limits.float32 = true;
  return limits;
}
// A list of count_low..count_high values, each within `each`.
inline constexpr Limits list_of(size_t count_low, size_t count_high, Limits each = {}) {
  each.count_low = count_low;
  each.count_high = count_high;
  return each;
}

// A list of count_low..count_high values, none twice (placements, modes), each within `each`.
inline constexpr Limits distinct_list_of(size_t count_low, size_t count_high, Limits each = {}) {
  Limits limits = list_of(count_low, count_high, each);
  limits.distinct = true;
  return limits;
}

// A list of true/false values (depth-training's warmups) is typed on the command line as the
// words for false and true, or "both".
struct BoolWords {
  const char* false_word = nullptr;
  const char* true_word = nullptr;
};

template <class Access>
struct Field {
  const char* name;  // the JSON key; the command-line option is --name with '-' for '_'
  const char* help;
  Access get;  // ADDNORM_LAB_MEMBER(member)
  Limits limits = {};
  BoolWords words = {};
};
template <class Access>
Field(const char*, const char*, Access, Limits = {}, BoolWords = {}) -> Field<Access>;

// The text of an enum's values: a specialisation per enum type, next to its table.
//   static std::string name(T value);
//   static T parse(const std::string& name);  // addnorm::Error naming the expected values
template <class T>
struct EnumText;
// EnumText from a pair of functions: struct EnumText<E> : EnumTextOf<E, e_name, parse_e> {};
template <class T, std::string (*Name)(T), T (*Parse)(const std::string&)>
struct EnumTextOf {
  static std::string name(T value) { return Name(value); }
  static T parse(const std::string& text) { return Parse(text); }
};

template <class T>
concept EnumField = std::is_enum_v<T>;

// IsVector<T>::element: a list's element type, or T itself for a scalar.
template <class T>
struct IsVector : std::false_type {
  using element = T;
};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {
  using element = T;
};
// A list of enum values (placements, modes): JSON and the command line carry their names.
template <class T>
concept EnumList = IsVector<T>::value && EnumField<typename IsVector<T>::element>;

// A table's fields under a member: nested(ADDNORM_LAB_MEMBER(shape), kModelShapeFields) visits
// the shape's fields as fields of the enclosing Params.
template <class Outer, class Table>
auto nested(Outer outer, Table table) {
  return [outer, table](auto&& visit) {
    table([&](const auto& field) {
      auto inner = field.get;
      visit(Field{field.name, field.help,
                  [outer, inner](auto& p) -> auto& { return inner(outer(p)); }, field.limits,
                  field.words});
});
};
}

// ---- JSON ----

template <class T>
nlohmann::json field_json(const T& value) {
  if constexpr (EnumField<T>) {
    return EnumText<T>::name(value);
  } else if constexpr (EnumList<T>) {
    nlohmann::json names = nlohmann::json::array();
    for (const auto& v : value) names.push_back(EnumText<typename IsVector<T>::element>::name(v));
    return names;
  } else {
    return value;
  }
}

// Every field of the table, by name (what results echo as "params").
template <class Params, class Table>
nlohmann::json fields_to_json(const Params& params, Table table) {
  nlohmann::json object = nlohmann::json::object();
  table([&](const auto& field) { object[field.name] = field_json(field.get(params)); });
  return object;
}

// Sets the fields present in the reader's object; enums arrive as their names.
template <class Params, class Table>
void read_fields(JsonParams& reader, Params& params, Table table) {
  table([&](const auto& field) {
    auto& value = field.get(params);
    using T = std::remove_cvref_t<decltype(value)>;
    if constexpr (EnumField<T>) {
      std::string name;
      if (reader.read(field.name, name)) value = EnumText<T>::parse(name);
    } else if constexpr (EnumList<T>) {
      std::vector<std::string> names;
      if (!reader.read(field.name, names)) return;
      value.clear();
      for (const std::string& name : names) {
        value.push_back(EnumText<typename IsVector<T>::element>::parse(name));
      }
    } else {
      reader.read(field.name, value);
    }
  });
}

// An experiment's parameters from a request's object: its defaults (or its quick setting, when
// it has one and the object says "quick": true), then every field the object has. Unknown keys
// and values of the wrong type are errors naming them (JsonParams).
template <class Params, class Table>
Params read_params(const nlohmann::json& object, const std::string& experiment, Table table,
                   Params (*quick)() = nullptr) {
  JsonParams reader(object, experiment);
  bool use_quick = false;
  if (quick != nullptr) reader.read("quick", use_quick);
  Params params = use_quick ? quick() : Params{};
  read_fields(reader, params, table);
  reader.finish();
  return params;
}

// ---- Checks ----

template <class T>
void check_scalar(const std::string& name, const T& value, const Limits& limits) {
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    switch (limits.range) {
      case Limits::Range::none:
        return;
      case Limits::Range::integer:
        check_integer(name, static_cast<int64_t>(value), static_cast<int64_t>(limits.low),
                      static_cast<int64_t>(limits.high));
        return;
      case Limits::Range::real:
        check_real(name, static_cast<double>(value), limits.low, limits.high);
        if (limits.float32) check_float32_nonzero(name, static_cast<double>(value));
        return;
      case Limits::Range::real_below:
        check_real_below(name, static_cast<double>(value), limits.low, limits.high);
        return;
      case Limits::Range::positive: {
        const double v = static_cast<double>(value);
        if (!(v > 0.0) || v > limits.high || !std::isfinite(v)) {
          throw Error(name + " is " + number_text(v) + ", expected a number in (0, " +
                      number_text(limits.high) + "]");
        }
        return;
      }
    }
  }
}

// The range and count checks of every field, in table order.
template <class Params, class Table>
void check_fields(const Params& params, Table table) {
  table([&](const auto& field) {
    const auto& value = field.get(params);
    using T = std::remove_cvref_t<decltype(value)>;
    if constexpr (IsVector<T>::value) {
      if (field.limits.count_high > 0) {
        check_count(field.name, value.size(), field.limits.count_low, field.limits.count_high);
      }
      for (size_t i = 0; field.limits.distinct && i < value.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
          if (value[i] == value[j]) {
            const nlohmann::json repeated = field_json(value[i]);
            throw Error(std::string(field.name) + " lists " +
                        (repeated.is_string() ? repeated.get<std::string>() : repeated.dump()) +
                        " twice, expected each value at most once");
          }
        }
      }
      for (size_t i = 0; i < value.size(); ++i) {
        check_scalar(std::string(field.name) + "[" + std::to_string(i) + "]",
                     static_cast<typename IsVector<T>::element>(value[i]), field.limits);
      }
    } else {
      check_scalar(field.name, value, field.limits);
    }
  });
}

// "1..96", "[0, 10]", "(0, 1]", "1 to 8 values, each 1..96": for help texts.
inline std::string limits_text(const Limits& limits) {
  std::string range;
  switch (limits.range) {
    case Limits::Range::none:
      break;
    case Limits::Range::integer:
      range = number_text(limits.low) + ".." + number_text(limits.high);
      break;
    case Limits::Range::real:
      range = "[" + number_text(limits.low) + ", " + number_text(limits.high) + "]";
      break;
    case Limits::Range::real_below:
      range = "[" + number_text(limits.low) + ", " + number_text(limits.high) + ")";
      break;
    case Limits::Range::positive:
      range = "(0, " + number_text(limits.high) + "]";
      break;
  }
  if (limits.count_high == 0) return range;
  std::string count = number_text(static_cast<double>(limits.count_low)) +
                      (limits.count_low == limits.count_high
                           ? ""
                           : " to " + number_text(static_cast<double>(limits.count_high))) +
                      " values";
  return range.empty() ? count : count + ", each " + range;
}

}  // namespace addnorm::lab
