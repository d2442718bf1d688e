// Reading and writing NumPy .npy files: the exchange format of `addnorm run` and the Python tests.
//
// Only what the ops need is supported: little-endian float32 ('<f4') and float64 ('<f8'), C order,
// rank up to kMaxRank, header versions 1.0, 2.0 and 3.0. Everything else is refused with an
// addnorm::Error naming the file and what was expected; no header field is trusted before it is
// checked (sizes are bounded, the shape's byte count must match the file exactly).
#pragma once

#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "addnorm/tensor.hpp"
#include "addnorm/visibility.hpp"

ADDNORM_PUBLIC_BEGIN
namespace addnorm {

enum class NpyDtype { float32, float64 };

// "float32" or "float64".
const char* npy_dtype_name(NpyDtype dtype);

// An owning array as stored in a .npy file: shape, values, and the dtype they were stored in, so
// that a caller can write its results back in the dtype it was given.
class NpyArray {
 public:
  // Both throw Error when the number of values does not match the shape.
  NpyArray(const Shape& shape, std::vector<float> values);
  NpyArray(const Shape& shape, std::vector<double> values);
  // A float32 tensor stored as `dtype` (widened exactly for float64).
  NpyArray(const Tensor& tensor, NpyDtype dtype);

  const Shape& shape() const { return shape_; }
  NpyDtype dtype() const;
  int64_t numel() const;

  // The values in their stored type; each throws Error when the dtype is the other one.
  const std::vector<float>& float32_values() const;
  const std::vector<double>& float64_values() const;

  // The values as a float32 Tensor: exact for float32; float64 is rounded to nearest. A finite
  // float64 value beyond float32's range throws Error naming `what` and the element's index,
  // rather than silently becoming infinity.
  Tensor to_tensor(const std::string& what = "array") const;

 private:
  Shape shape_;
  std::variant<std::vector<float>, std::vector<double>> values_;
};

// Reads a .npy file. Throws Error, naming the file, for anything that cannot be read or is not a
// little-endian float32/float64 C-order array of rank <= kMaxRank with exactly its data.
NpyArray read_npy(const std::filesystem::path& path);

// Writes a version 1.0 .npy file whose header is padded to 64 bytes as NumPy pads it. The data go
// to a temporary file in the same directory that is renamed over `path` only once complete, so a
// failure never leaves a partial file. Throws Error naming the file when it cannot be written.
void write_npy(const std::filesystem::path& path, const NpyArray& array);

// The .npy header (magic, version, length, dict, padding) write_npy puts before the data.
std::string npy_header(const Shape& shape, NpyDtype dtype);

}  // namespace addnorm
ADDNORM_PUBLIC_END
