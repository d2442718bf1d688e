// The .npy header dict: a small recursive-descent parser for the one Python literal NumPy writes.
// It is deliberately not a general Python parser: anything but the three known keys with the
// value kinds NumPy writes is malformed, so a hostile header cannot smuggle in a shape or dtype.
#include "io/npy_header.hpp"

#include <cctype>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <vector>

#include "addnorm/error.hpp"

namespace addnorm::detail {

namespace {

// Header text as it can safely appear in a one-line message: printable ASCII only, shortened.
std::string printable(std::string_view text) {
  constexpr size_t kMaxShown = 120;
  std::string shown;
  for (size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    shown += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (text.size() > kMaxShown) shown += "...";
  return shown;
}

class DictParser {
 public:
  DictParser(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  NpyHeader parse() {
    skip_space();
    expect('{');
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<int64_t>> dims;
    skip_space();
    while (peek() != '}') {
      const std::string key = parse_string();
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (descr) fail("key 'descr' appears twice");
        descr = parse_string();
      } else if (key == "fortran_order") {
        if (fortran_order) fail("key 'fortran_order' appears twice");
        fortran_order = parse_bool();
      } else if (key == "shape") {
        if (dims) fail("key 'shape' appears twice");
        dims = parse_shape_tuple();
      } else {
        fail("unexpected key '" + key + "', expected only 'descr', 'fortran_order' and 'shape'");
      }
      skip_space();
      if (peek() == ',') {
        ++position_;
        skip_space();
      } else if (peek() != '}') {
        fail("expected ',' or '}'");
      }
    }
    ++position_;  // the closing brace
    skip_space();
    if (position_ != text_.size()) fail("unexpected text after the closing '}'");
    if (!descr) fail("key 'descr' is missing");
    if (!fortran_order) fail("key 'fortran_order' is missing");
    if (!dims) fail("key 'shape' is missing");

    NpyHeader header;
    header.dtype = dtype_from_descr(*descr);
    if (*fortran_order) {
      throw Error(file_ +
                  ": fortran_order is True, expected a C-order array (fortran_order False)");
    }
    header.shape = checked_shape(*dims, header.dtype);
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    // The padding NumPy puts after the dict would only push the useful part off the line.
    const std::string_view unpadded = text_.substr(0, text_.find_last_not_of(" \n") + 1);
    throw Error(file_ + ": malformed .npy header: " + what + " at character " +
                std::to_string(position_) + " of \"" + printable(unpadded) + "\"");
  }

  char peek() const {
    if (position_ >= text_.size()) fail("unexpected end of header");
    return text_[position_];
  }

  void expect(char wanted) {
    if (peek() != wanted) fail(std::string("expected '") + wanted + "'");
    ++position_;
  }

  void skip_space() {
    while (position_ < text_.size() && (text_[position_] == ' ' || text_[position_] == '\t' ||
                                        text_[position_] == '\n' || text_[position_] == '\r')) {
      ++position_;
    }
  }

  // A quoted string without escapes: NumPy's keys and descr never contain any.
  std::string parse_string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    ++position_;
    std::string value;
    while (peek() != quote) {
      const char c = text_[position_];
      if (c == '\\' || c == '\n') fail("unsupported character in string");
      value += c;
      ++position_;
    }
    ++position_;
    return value;
  }

  bool parse_bool() {
    if (text_.substr(position_, 4) == "True") {
      position_ += 4;
      return true;
    }
    if (text_.substr(position_, 5) == "False") {
      position_ += 5;
      return false;
    }
    fail("expected True or False for 'fortran_order'");
  }

  // (), (3,) or (2, 3) with an optional trailing comma; Python 2's NumPy wrote longs as 3L.
  std::vector<int64_t> parse_shape_tuple() {
    expect('(');
    std::vector<int64_t> dims;
    bool ends_with_comma = false;
    skip_space();
    while (peek() != ')') {
      if (dims.size() == static_cast<size_t>(kMaxRank)) {
        fail("shape has more than " + std::to_string(kMaxRank) +
             " dimensions, the most addnorm supports");
      }
      dims.push_back(parse_dimension());
      skip_space();
      ends_with_comma = peek() == ',';
      if (ends_with_comma) {
        ++position_;
        skip_space();
      } else if (peek() != ')') {
        fail("expected ',' or ')' in 'shape'");
      }
    }
    // Python reads (3) as the integer 3, not a tuple: a 1-d shape needs its comma.
    if (dims.size() == 1 && !ends_with_comma) {
      fail("a one-dimensional shape needs a trailing comma, as in (3,)");
    }
    ++position_;
    return dims;
  }

  int64_t parse_dimension() {
    if (!std::isdigit(static_cast<unsigned char>(peek()))) {
      fail("expected a non-negative integer dimension in 'shape'");
    }
    int64_t value = 0;
    while (position_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[position_]))) {
      const int digit = text_[position_] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
        fail("dimension in 'shape' is too large");
      }
      value = value * 10 + digit;
      ++position_;
    }
    if (position_ < text_.size() && text_[position_] == 'L') ++position_;
    return value;
  }

  NpyDtype dtype_from_descr(const std::string& descr) const {
    if (descr == "<f4") return NpyDtype::float32;
    if (descr == "<f8") return NpyDtype::float64;
    const std::string expected = "expected float32 ('<f4') or float64 ('<f8')";
    if (descr == ">f4" || descr == ">f8") {
      throw Error(file_ + ": dtype '" + descr + "' is big-endian, " + expected +
                  " in little-endian byte order");
    }
    throw Error(file_ + ": dtype '" + printable(descr) + "' is not supported, " + expected);
  }

  // The dims as a Shape, refusing element counts whose byte size would overflow int64. Zero-sized
  // dims do not excuse the rest: (0, 2**62, 2**62) is as absurd as it looks.
  Shape checked_shape(const std::vector<int64_t>& dims, NpyDtype dtype) const {
    const int64_t max_elements = std::numeric_limits<int64_t>::max() / npy_item_size(dtype);
    int64_t count = 1;
    for (const int64_t dim : dims) {
      if (dim != 0 && count > max_elements / dim) {
        std::ostringstream shown;
        for (size_t i = 0; i < dims.size(); ++i) shown << (i ? ", " : "") << dims[i];
        throw Error(file_ + ": shape (" + shown.str() +
                    ") is too large, its byte size overflows a 64-bit integer");
      }
      if (dim != 0) count *= dim;
    }
    return Shape(std::span<const int64_t>(dims));
  }

  std::string_view text_;
  const std::string& file_;
  size_t position_ = 0;
};

}  // namespace

int64_t npy_item_size(NpyDtype dtype) {
  return dtype == NpyDtype::float64 ? 8 : 4;
}

NpyHeader parse_npy_header_dict(std::string_view text, const std::string& file) {
  return DictParser(text, file).parse();
}

std::string format_npy_header_dict(const Shape& shape, NpyDtype dtype) {
  std::string dims;
  for (int axis = 0; axis < shape.rank(); ++axis) {
    dims += (axis ? ", " : "") + std::to_string(shape[axis]);
  }
  if (shape.rank() == 1) dims += ",";  // Python's one-element tuple
  return std::string("{'descr': '") + (dtype == NpyDtype::float64 ? "<f8" : "<f4") +
         "', 'fortran_order': False, 'shape': (" + dims + "), }";
}

}  // namespace addnorm::detail
