// Quoting untrusted JSON in messages, safely: a bounded description of a value instead of its
// serialisation. Serialising a request's value to quote it would recurse as deep as the value
// nests (a 60000-deep array overflowed the stack in nlohmann's dump) and could echo invalid UTF-8
// or a 256 KB string back to the user.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace addnorm::lab {

// "3", "-2.5", "true", "null", "\"abc\"" (strings cut at 40 characters, invalid UTF-8 replaced),
// "a list of 4 values" or "an object with 2 keys": never longer than about 60 characters, and
// never looks inside a list or an object.
std::string describe_json_value(const nlohmann::json& value);

// A key as it appears in a message: bare when it is a short identifier ("widht"), else described
// like a value (quoted, cut, invalid UTF-8 replaced).
std::string describe_json_key(const std::string& key);

// JSON text with invalid UTF-8 replaced by U+FFFD instead of throwing: for answers that quote
// what a client sent.
std::string dump_json_safely(const nlohmann::json& value);

}  // namespace addnorm::lab
