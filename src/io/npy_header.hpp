// The .npy header's dict, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }:
// a strict parser for the Python literal NumPy writes, and the formatter write_npy uses.
#pragma once

#include <string>
#include <string_view>

#include "addnorm/npy.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm::detail {

struct NpyHeader {
  NpyDtype dtype = NpyDtype::float32;
  Shape shape;
};

// Parses the dict text (everything after the length field, padding included). Accepts exactly the
// keys descr, fortran_order and shape, in any order, each once; descr '<f4' or '<f8',
// fortran_order False, shape a tuple of at most kMaxRank non-negative integers whose element
// count times the item size fits in int64. Throws Error prefixed with `file` otherwise.
NpyHeader parse_npy_header_dict(std::string_view text, const std::string& file);

// The dict as NumPy writes it, before padding: {'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), }.
std::string format_npy_header_dict(const Shape& shape, NpyDtype dtype);

// Bytes per element.
int64_t npy_item_size(NpyDtype dtype);

}  // namespace addnorm::detail
