// Parameters from JSON: hostile values are refused with short messages that never serialise
// the value (a deep one overflowed the stack when it was quoted with dump()).
#include "lab/json_params.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "lab/json_text.hpp"

namespace addnorm::lab {
namespace {

// A list nested `depth` levels deep, built without recursion.
nlohmann::json nested_list(int depth) {
  nlohmann::json value = nlohmann::json::array();
  for (int level = 1; level < depth; ++level) value = nlohmann::json::array({std::move(value)});
  return value;
}

std::string error_of(const nlohmann::json& object) {
  try {
    JsonParams params(object, "gradient-flow");
    std::vector<int> depths;
    float eps = 0.0f;
    params.read("depths", depths);
    params.read("eps", eps);
    params.finish();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

TEST(JsonParams, DeepValuesAreDescribedNotDumped) {
  const std::string message = error_of({{"depths", nested_list(100000)}});
  EXPECT_EQ(message,
            "gradient-flow parameter depths is a list of 1 value, expected a list of integers");
  EXPECT_EQ(error_of(nested_list(100000)),
            "gradient-flow parameters must be a JSON object, got a list of 1 value");
}

TEST(JsonParams, LongAndInvalidStringsAreCutAndReplaced) {
  const std::string message = error_of({{"depths", std::string(100000, 'x')}});
  EXPECT_LT(message.size(), 200u);
  EXPECT_NE(message.find("(cut, 100000 bytes in all)"), std::string::npos);
  const std::string invalid = error_of({{"depths", std::string("\xff\xfe"
                                                               "abc")}});
  EXPECT_NE(invalid.find("\"\xef\xbf\xbd\xef\xbf\xbd"
                         "abc\""),
            std::string::npos)
      << invalid;
  // A cut never splits a multi-byte character: 39 ASCII bytes then a 2-byte "é".
  const std::string accented = std::string(39, 'a') + "\xc3\xa9" + std::string(10, 'b');
  EXPECT_EQ(describe_json_value(accented),
            "\"" + std::string(39, 'a') + "\" (cut, 51 bytes in all)");
}

TEST(JsonParams, UnknownKeysAreNamedShortly) {
  EXPECT_EQ(error_of({{"widht", 8}}), "gradient-flow has no parameter named widht");
  const std::string message = error_of({{std::string(5000, 'k') + " x", 8}});
  EXPECT_LT(message.size(), 200u);
}

TEST(JsonParams, NumbersAFloatCannotHoldAreRefused) {
  EXPECT_EQ(error_of({{"eps", 1e300}}), "gradient-flow parameter eps is 1e+300, expected a number");
  EXPECT_EQ(error_of({{"eps", 1e-3}}), "");
}

}  // namespace
}  // namespace addnorm::lab
