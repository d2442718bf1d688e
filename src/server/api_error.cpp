// Finding the parameter an error message names, and the error body the API returns.
#include "server/api_error.hpp"

#include <algorithm>
#include <cctype>
#include <exception>
#include <new>

#include "addnorm/error.hpp"

namespace addnorm::server {
namespace {

bool is_key(const std::vector<std::string>& keys, const std::string& word) {
  return std::find(keys.begin(), keys.end(), word) != keys.end();
}

// The word that follows `marker` in `message`, up to a space or a comma.
std::string word_after(const std::string& message, const std::string& marker) {
  const size_t at = message.find(marker);
  if (at == std::string::npos) return {};
  const size_t start = at + marker.size();
  const size_t end = message.find_first_of(" ,", start);
  return message.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

nlohmann::json error_body(const std::string& message, const std::string& parameter) {
  return {{"error", message},
          {"parameter", parameter.empty() ? nlohmann::json(nullptr) : nlohmann::json(parameter)}};
}

ErrorAnswer answer_for_current_exception(const std::vector<std::string>& keys) {
  try {
    throw;
  } catch (const ApiError& e) {
    return {e.status(), error_body(e.what(), e.parameter())};
  } catch (const Error& e) {
    // A parameter is named only when it is one of the request's keys: an op's argument (x,
    // gamma) the lab passed on is not something the page can point at.
    const std::string message = face_message(e);
    return {400, error_body(message, parameter_named_in(message, keys))};
  } catch (const std::bad_alloc&) {
    return {503, error_body("out of memory for this request; try smaller parameters", {})};
  } catch (const std::exception& e) {
    return {500, error_body(std::string("internal error: ") + e.what(), {})};
  } catch (...) {
    return {500, error_body("internal error", {})};
  }
}

std::string parameter_named_in(const std::string& message, const std::vector<std::string>& keys) {
  if (message.find(" parameters must be a JSON object") != std::string::npos) return "body";
  for (const char* marker : {" has no parameter named ", " parameter "}) {
    const std::string word = word_after(message, marker);
    if (!word.empty()) return word;
  }
  // The subject of the sentence: everything before the first verb.
  size_t subject_end = message.size();
  for (const char* verb : {" is ", " has ", " lists "}) {
    subject_end = std::min(subject_end, message.find(verb));
  }
  if (subject_end == message.size()) return {};
  const std::string subject = message.substr(0, subject_end);
  for (size_t i = 0; i < subject.size();) {
    if (!std::isalpha(static_cast<unsigned char>(subject[i])) && subject[i] != '_') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < subject.size() &&
           (std::isalnum(static_cast<unsigned char>(subject[j])) || subject[j] == '_')) {
      ++j;
    }
    const std::string word = subject.substr(i, j - i);
    if (is_key(keys, word)) return word;
    if (is_key(keys, word + "s")) return word + "s";
    i = j;
  }
  return {};
}

}  // namespace addnorm::server
