// .npy files: NpyArray, read_npy and write_npy. The layout is NumPy's format spec: the magic
// "\x93NUMPY", a major and minor version byte, a little-endian header length (2 bytes in 1.0,
// 4 bytes in 2.0 and 3.0), the header dict padded with spaces and ended by '\n', then the raw data.
#include "addnorm/npy.hpp"

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "addnorm/error.hpp"
#include "io/npy_header.hpp"

namespace addnorm {

// The data are copied as raw bytes, which is only right where the machine is little-endian.
static_assert(std::endian::native == std::endian::little,
              "addnorm's .npy I/O assumes a little-endian machine");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// NumPy aligns the start of the data to 64 bytes so that it can be memory-mapped.
constexpr size_t kDataAlignment = 64;
// A header for rank kMaxRank is a few hundred bytes; anything much larger is not one we wrote or
// NumPy would write for an array we accept, and reading it would only cost memory.
constexpr uint32_t kMaxHeaderBytes = 65536;

template <class T>
void check_value_count(const Shape& shape, const std::vector<T>& values) {
  if (static_cast<int64_t>(values.size()) != shape.numel()) {
    throw Error("values has " + std::to_string(values.size()) + " elements, expected " +
                std::to_string(shape.numel()) + " for shape " + shape.to_string());
  }
}

std::string system_error_text() {
  return errno != 0 ? std::strerror(errno) : "unknown error";
}

uint32_t little_endian_length(const unsigned char* bytes, size_t size) {
  uint32_t length = 0;
  for (size_t i = size; i-- > 0;) length = (length << 8) | bytes[i];
  return length;
}

// Reads exactly `size` bytes or throws, naming the file and what was being read.
void read_exactly(std::ifstream& in, void* destination, int64_t size, const std::string& file,
                  const char* what) {
  in.read(static_cast<char*>(destination), static_cast<std::streamsize>(size));
  if (in.gcount() != static_cast<std::streamsize>(size)) {
    throw Error(file + ": could not read the " + what + " (" + system_error_text() + ")");
  }
}

template <class T>
std::vector<T> read_values(std::ifstream& in, int64_t count, const std::string& file) {
  std::vector<T> values(static_cast<size_t>(count));
  read_exactly(in, values.data(), count * static_cast<int64_t>(sizeof(T)), file, "data");
  return values;
}

// A name in the target's directory that no other writer uses: "<name>.tmp-<random hex>".
std::filesystem::path temporary_path_beside(const std::filesystem::path& path) {
  std::random_device entropy;
  std::ostringstream suffix;
  suffix << ".tmp-" << std::hex << entropy() << entropy();
  std::filesystem::path temporary = path;
  temporary += suffix.str();
  return temporary;
}

}  // namespace

const char* npy_dtype_name(NpyDtype dtype) {
  return dtype == NpyDtype::float64 ? "float64" : "float32";
}

NpyArray::NpyArray(const Shape& shape, std::vector<float> values)
    : shape_(shape), values_(std::move(values)) {
  check_value_count(shape_, std::get<std::vector<float>>(values_));
}

NpyArray::NpyArray(const Shape& shape, std::vector<double> values)
    : shape_(shape), values_(std::move(values)) {
  check_value_count(shape_, std::get<std::vector<double>>(values_));
}

NpyArray::NpyArray(const Tensor& tensor, NpyDtype dtype) : shape_(tensor.shape()) {
  if (dtype == NpyDtype::float32) {
    values_ = tensor.values();
  } else {
    values_ = std::vector<double>(tensor.values().begin(), tensor.values().end());
  }
}

NpyDtype NpyArray::dtype() const {
  return std::holds_alternative<std::vector<double>>(values_) ? NpyDtype::float64
                                                              : NpyDtype::float32;
}

int64_t NpyArray::numel() const {
  return shape_.numel();
}

const std::vector<float>& NpyArray::float32_values() const {
  if (dtype() != NpyDtype::float32) throw Error("array is float64, expected float32");
  return std::get<std::vector<float>>(values_);
}

const std::vector<double>& NpyArray::float64_values() const {
  if (dtype() != NpyDtype::float64) throw Error("array is float32, expected float64");
  return std::get<std::vector<double>>(values_);
}

Tensor NpyArray::to_tensor(const std::string& what) const {
  if (dtype() == NpyDtype::float32) return Tensor(shape_, float32_values());
  const std::vector<double>& wide = float64_values();
  std::vector<float> narrow(wide.size());
  constexpr double kFloatMax = std::numeric_limits<float>::max();
  for (size_t i = 0; i < wide.size(); ++i) {
    // Converting a finite double beyond float's range is undefined behaviour in C++, and an
    // infinity the user never wrote would be a silent surprise: refuse it instead.
    if (std::isfinite(wide[i]) && std::fabs(wide[i]) > kFloatMax) {
      std::ostringstream value;
      value << wide[i];
      throw Error(what + ": element " + std::to_string(i) + " is " + value.str() +
                  ", outside float32's range (addnorm computes in float32)");
    }
    narrow[i] = static_cast<float>(wide[i]);
    // Likewise a value too small for float32 that would silently become 0 (a row of them would
    // then normalise with rstd = inf).
    if (wide[i] != 0.0 && narrow[i] == 0.0f) {
      std::ostringstream value;
      value << wide[i];
      throw Error(what + ": element " + std::to_string(i) + " is " + value.str() +
                  ", too small for float32 (it would become 0; the smallest is 1.4e-45)");
    }
  }
  return Tensor(shape_, std::move(narrow));
}

NpyArray read_npy(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::error_code status;
  if (std::filesystem::is_directory(path, status)) {
    throw Error(file + ": is a directory, expected a .npy file");
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(file + ": cannot open for reading (" + system_error_text() + ")");
  in.seekg(0, std::ios::end);
  const int64_t file_size = static_cast<int64_t>(in.tellg());
  in.seekg(0, std::ios::beg);
  if (file_size < 0 || !in) throw Error(file + ": cannot determine the file size");

  unsigned char prefix[12] = {};
  if (file_size < 10) {
    throw Error(file + ": is " + std::to_string(file_size) +
                " bytes long, too short to be a .npy file");
  }
  read_exactly(in, prefix, 8, file, "magic string");
  if (std::memcmp(prefix, kMagic, kMagicSize) != 0) {
    throw Error(file + ": not a .npy file, expected it to start with the magic string \\x93NUMPY");
  }
  const int major = prefix[6];
  const int minor = prefix[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    throw Error(file + ": .npy format version " + std::to_string(major) + "." +
                std::to_string(minor) + " is not supported, expected 1.0, 2.0 or 3.0");
  }
  const size_t length_size = major == 1 ? 2 : 4;
  if (file_size < static_cast<int64_t>(8 + length_size)) {
    throw Error(file + ": truncated .npy header");
  }
  read_exactly(in, prefix + 8, static_cast<int64_t>(length_size), file, "header length");
  const uint32_t header_size = little_endian_length(prefix + 8, length_size);
  if (header_size > kMaxHeaderBytes) {
    throw Error(file + ": .npy header length " + std::to_string(header_size) +
                " is too large, expected at most " + std::to_string(kMaxHeaderBytes) + " bytes");
  }
  const int64_t data_offset = static_cast<int64_t>(8 + length_size + header_size);
  if (file_size < data_offset) {
    throw Error(file + ": truncated .npy header: it claims " + std::to_string(header_size) +
                " bytes but the file ends before");
  }
  std::string header_text(header_size, '\0');
  read_exactly(in, header_text.data(), header_size, file, "header");
  const detail::NpyHeader header = detail::parse_npy_header_dict(header_text, file);

  // The header parser has bounded the element count so that the byte size fits in int64.
  const int64_t count = header.shape.numel();
  const int64_t data_size = count * detail::npy_item_size(header.dtype);
  const int64_t available = file_size - data_offset;
  if (available != data_size) {
    throw Error(file + ": has " + std::to_string(available) + " bytes of data, expected " +
                std::to_string(data_size) + " for shape " + header.shape.to_string() + " of " +
                npy_dtype_name(header.dtype) +
                (available < data_size ? " (the file is truncated)" : " (trailing data)"));
  }
  if (header.dtype == NpyDtype::float64) {
    return NpyArray(header.shape, read_values<double>(in, count, file));
  }
  return NpyArray(header.shape, read_values<float>(in, count, file));
}

std::string npy_header(const Shape& shape, NpyDtype dtype) {
  std::string dict = detail::format_npy_header_dict(shape, dtype);
  // As NumPy (1.24) does: spare spaces so that the first dimension could grow to 21 digits in
  // place, then at least one space of padding and a final '\n', so that the data start at a
  // multiple of 64 bytes after the version 1.0 prefix (magic, 2 version bytes, 2 length bytes).
  constexpr size_t kGrowthAxisMaxDigits = 21;
  if (shape.rank() > 0) {
    dict.append(kGrowthAxisMaxDigits - std::to_string(shape[0]).size(), ' ');
  }
  constexpr size_t kPrefixSize = kMagicSize + 2 + 2;
  const size_t unpadded = kPrefixSize + dict.size() + 1;
  dict.append(kDataAlignment - unpadded % kDataAlignment, ' ');
  dict += '\n';
  std::string header(kMagic, kMagicSize);
  header += '\x01';
  header += '\x00';
  // A rank-kMaxRank dict is a few hundred bytes, far below the 16-bit limit of version 1.0.
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>((dict.size() >> 8) & 0xff);
  return header + dict;
}

void write_npy(const std::filesystem::path& path, const NpyArray& array) {
  const std::string file = path.string();
  const std::string header = npy_header(array.shape(), array.dtype());
  const char* data = array.dtype() == NpyDtype::float64
                         ? reinterpret_cast<const char*>(array.float64_values().data())
                         : reinterpret_cast<const char*>(array.float32_values().data());
  const int64_t data_size = array.numel() * detail::npy_item_size(array.dtype());

  const std::filesystem::path temporary = temporary_path_beside(path);
  errno = 0;
  std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(file + ": cannot open for writing (" + system_error_text() + ")");
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(data, static_cast<std::streamsize>(data_size));
  out.close();
  std::error_code ignored;
  if (!out) {
    const std::string reason = system_error_text();
    std::filesystem::remove(temporary, ignored);
    throw Error(file + ": could not write the file (" + reason + ")");
  }
  std::error_code renamed;
  std::filesystem::rename(temporary, path, renamed);
  if (renamed) {
    std::filesystem::remove(temporary, ignored);
    throw Error(file + ": could not write the file (" + renamed.message() + ")");
  }
}

}  // namespace addnorm
