// The command-line options of an `addnorm lab-run` experiment, made from its parameter table
// (src/lab/experiment_fields.hpp): one option per field, --name with '-' for '_', whose help is
// the field's help, the values it accepts and its default. What is typed lands in a separate copy
// of the parameters; apply() copies only the options that were given onto the parameters the
// run starts from (its defaults or its --quick setting), so the rest keep that setting.
#pragma once

#include <CLI/CLI.hpp>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "addnorm/error.hpp"
#include "cli/exact_numbers.hpp"
#include "lab/param_fields.hpp"

namespace addnorm::cli {

inline std::string option_name(const char* field_name) {
  std::string name = std::string("--") + field_name;
  for (char& c : name) c = c == '_' ? '-' : c;
  return name;
}

template <class Params>
class ParamOptions {
 public:
  // Adds every field of `table` to `command`; `defaults` gives the defaults the help shows.
  template <class Table>
  ParamOptions(CLI::App& command, Table table, const Params& defaults) {
    table([&](const auto& field) { add(command, field, defaults); });
  }
  ParamOptions(const ParamOptions&) = delete;
  ParamOptions& operator=(const ParamOptions&) = delete;

  // Sets the fields whose option was given.
  void apply(Params& params) const {
    for (const auto& apply_one : appliers_) apply_one(params);
  }
  // Whether the option of the field `name` was given.
  bool given(const std::string& name) const {
    const auto found = options_.find(name);
    return found != options_.end() && found->second->count() > 0;
  }

 private:
  template <class FieldT>
  void add(CLI::App& command, const FieldT& field, const Params& defaults) {
    using T = std::remove_cvref_t<decltype(field.get(defaults))>;
    const std::string name = option_name(field.name);
    std::string help = field.help;
    const std::string limits = lab::limits_text(field.limits);
    if (!limits.empty()) help += ", " + limits;
    help += " (default " + default_text(field, field.get(defaults)) + ")";
    CLI::Option* option = nullptr;
    const auto get = field.get;
    if constexpr (lab::EnumField<T>) {
      std::string& typed = scalar_words_.emplace_back();
      option = command.add_option(name, typed, help);
      appliers_.push_back([option, get, &typed](Params& params) {
        if (option->count() > 0) get(params) = lab::EnumText<T>::parse(typed);
      });
    } else if constexpr (lab::EnumList<T>) {
      std::vector<std::string>& typed = list_words_.emplace_back();
      option = command.add_option(name, typed, help)->delimiter(',');
      appliers_.push_back([option, get, &typed](Params& params) {
        if (option->count() == 0) return;
        T values;
        for (const std::string& word : typed) {
          values.push_back(lab::EnumText<typename T::value_type>::parse(word));
        }
        get(params) = values;
      });
    } else if constexpr (std::is_same_v<T, std::vector<bool>>) {
      // Typed as the field's words for false and true, or "both".
      std::vector<std::string>& typed = list_words_.emplace_back();
      option = command.add_option(name, typed, help)->delimiter(',');
      const lab::BoolWords words = field.words;
      appliers_.push_back([option, get, &typed, words, name](Params& params) {
        if (option->count() == 0) return;
        std::vector<bool> values;
        for (const std::string& word : typed) {
          if (word == words.false_word || word == "both") values.push_back(false);
          if (word == words.true_word || word == "both") values.push_back(true);
          if (word != words.false_word && word != words.true_word && word != "both") {
            throw Error(name + " has \"" + word + "\", expected " + words.false_word + ", " +
                        words.true_word + " or both");
          }
        }
        get(params) = values;
      });
    } else {
      option = command.add_option(name, get(given_), help);
      if constexpr (lab::IsVector<T>::value) option->delimiter(',');
      using Element = typename lab::IsVector<T>::element;
      if constexpr (std::is_same_v<Element, uint64_t>) option->check(exact_unsigned());
      if constexpr (std::is_floating_point_v<Element>) option->check(finite_double());
      appliers_.push_back([option, get, this](Params& params) {
        if (option->count() > 0) get(params) = get(given_);
      });
    }
    options_[field.name] = option;
  }

  // The default as one would type it: lists joined by commas, enums by name.
  template <class FieldT, class T>
  static std::string default_text(const FieldT& field, const T& value) {
    if constexpr (std::is_same_v<T, std::vector<bool>>) {
      std::string text;
      for (bool v : value) {
        text += (text.empty() ? "" : ",") +
                std::string(v ? field.words.true_word : field.words.false_word);
      }
      return text;
    } else {
      const nlohmann::json json = lab::field_json(value);
      const auto one = [](const nlohmann::json& v) {
        return v.is_string() ? v.get<std::string>() : v.dump();
      };
      if (!json.is_array()) return one(json);
      std::string text;
      for (const nlohmann::json& v : json) text += (text.empty() ? "" : ",") + one(v);
      return text;
    }
  }

  Params given_{};
  std::vector<std::function<void(Params&)>> appliers_;
  std::map<std::string, CLI::Option*> options_;
  std::deque<std::string> scalar_words_;  // deques: the options keep pointers to these
  std::deque<std::vector<std::string>> list_words_;
};

}  // namespace addnorm::cli
