// .npy reading and writing: round trips, the exact header layout, and every kind of file that
// must be refused with a message naming the file and what was expected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "addnorm/npy.hpp"

namespace addnorm {
namespace {

namespace fs = std::filesystem;

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ =
        fs::temp_directory_path() / (std::string("addnorm_npy_test_") + info->name() + "_" +
                                     std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::remove_all(directory_);
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  fs::path file(const std::string& name) const { return directory_ / name; }

  // Writes a .npy file by hand: magic, version, little-endian header length, header, data.
  fs::path write_raw(const std::string& name, int major, int minor, const std::string& header,
                     const std::string& data) const {
    std::string bytes = "\x93NUMPY";
    bytes += static_cast<char>(major);
    bytes += static_cast<char>(minor);
    const size_t length_size = major == 1 ? 2 : 4;
    for (size_t i = 0; i < length_size; ++i) {
      bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
    }
    return write_bytes(name, bytes + header + data);
  }

  fs::path write_bytes(const std::string& name, const std::string& bytes) const {
    const fs::path path = file(name);
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  static std::string read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  // The raw little-endian bytes of `count` float32 values 0, 1, 2, ...
  static std::string float32_data(int count) {
    std::string data(static_cast<size_t>(count) * 4, '\0');
    for (int i = 0; i < count; ++i) {
      const float value = static_cast<float>(i);
      std::memcpy(data.data() + 4 * i, &value, 4);
    }
    return data;
  }

  // Expects read_npy(path) to throw Error whose message contains the file name and `expected`.
  static void expect_refused(const fs::path& path, const std::string& expected) {
    try {
      read_npy(path);
      FAIL() << path << " was accepted, expected an error containing: " << expected;
    } catch (const Error& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(path.string()), std::string::npos) << message;
      EXPECT_NE(message.find(expected), std::string::npos) << message;
    }
  }

  fs::path directory_;
};

TEST_F(NpyTest, Float32RoundTripKeepsShapeValuesAndDtype) {
  const std::vector<float> values = {1.5f,  -2.25f, 3.0e-38f, std::numeric_limits<float>::max(),
                                     -0.0f, 7.0f};
  const Shape shapes[] = {{6}, {2, 3}, {3, 1, 2}, {1, 1, 1, 1, 1, 1, 2, 3}};
  for (const Shape& shape : shapes) {
    write_npy(file("a.npy"), NpyArray(shape, values));
    const NpyArray back = read_npy(file("a.npy"));
    EXPECT_EQ(back.shape(), shape);
    EXPECT_EQ(back.dtype(), NpyDtype::float32);
    ASSERT_EQ(back.float32_values().size(), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(std::memcmp(&back.float32_values()[i], &values[i], 4), 0) << i;
    }
  }
}

TEST_F(NpyTest, Float64RoundTripIsExact) {
  const std::vector<double> values = {0.1, -1e300, 5e-324, 2.0 / 3.0};
  write_npy(file("b.npy"), NpyArray(Shape{2, 2}, values));
  const NpyArray back = read_npy(file("b.npy"));
  EXPECT_EQ(back.dtype(), NpyDtype::float64);
  EXPECT_EQ(back.shape(), (Shape{2, 2}));
  EXPECT_EQ(back.float64_values(), values);
  EXPECT_THROW(back.float32_values(), Error);
}

TEST_F(NpyTest, ScalarAndEmptyArraysRoundTrip) {
  write_npy(file("scalar.npy"), NpyArray(Shape{}, std::vector<float>{4.0f}));
  const NpyArray scalar = read_npy(file("scalar.npy"));
  EXPECT_EQ(scalar.shape().rank(), 0);
  EXPECT_EQ(scalar.float32_values(), std::vector<float>{4.0f});

  write_npy(file("empty.npy"), NpyArray(Shape{0, 5}, std::vector<double>{}));
  const NpyArray empty = read_npy(file("empty.npy"));
  EXPECT_EQ(empty.shape(), (Shape{0, 5}));
  EXPECT_EQ(empty.numel(), 0);
}

TEST_F(NpyTest, HeaderIsNumpysVersion1LayoutPaddedTo64Bytes) {
  const std::string header = npy_header(Shape{2, 3}, NpyDtype::float32);
  ASSERT_EQ(header.size() % 64, 0u);
  EXPECT_EQ(header.size(), 128u);
  EXPECT_EQ(header.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(static_cast<size_t>(static_cast<unsigned char>(header[8])) +
                256 * static_cast<unsigned char>(header[9]),
            header.size() - 10);
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(header.substr(10, dict.size()), dict);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(header.find_first_not_of(' ', 10 + dict.size()), header.size() - 1);

  EXPECT_NE(npy_header(Shape{7}, NpyDtype::float64).find("'<f8'"), std::string::npos);
  EXPECT_NE(npy_header(Shape{7}, NpyDtype::float64).find("'shape': (7,)"), std::string::npos);
  EXPECT_NE(npy_header(Shape{}, NpyDtype::float32).find("'shape': ()"), std::string::npos);
  for (int rank = 0; rank <= kMaxRank; ++rank) {
    const std::vector<int64_t> dims(static_cast<size_t>(rank), 123456789);
    EXPECT_EQ(npy_header(Shape(std::span<const int64_t>(dims)), NpyDtype::float32).size() % 64, 0u);
  }
}

TEST_F(NpyTest, WrittenFileIsHeaderFollowedByRawData) {
  write_npy(file("c.npy"), NpyArray(Shape{3}, std::vector<float>{0.0f, 1.0f, 2.0f}));
  EXPECT_EQ(read_bytes(file("c.npy")), npy_header(Shape{3}, NpyDtype::float32) + float32_data(3));
}

TEST_F(NpyTest, ReadsVersion2And3HeadersAndLenientSpelling) {
  const std::string data = float32_data(6);
  for (int major : {2, 3}) {
    const fs::path path = write_raw("v" + std::to_string(major) + ".npy", major, 0,
                                    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
                                    "    \n",
                                    data);
    const NpyArray array = read_npy(path);
    EXPECT_EQ(array.shape(), (Shape{2, 3}));
    EXPECT_EQ(array.float32_values()[5], 5.0f);
  }
  // Any key order, double quotes, no trailing commas, Python 2's long suffix.
  const fs::path path = write_raw(
      "lenient.npy", 1, 0, "{\"shape\": (2L,3L), \"fortran_order\":False,'descr':'<f4'}\n", data);
  EXPECT_EQ(read_npy(path).shape(), (Shape{2, 3}));
}

TEST_F(NpyTest, Float64ConvertsToFloat32TensorByRounding) {
  // 1e-40 is below float32's normal range: it rounds to a subnormal, not to 0.
  const NpyArray array(Shape{4}, std::vector<double>{0.1, -2.5, 1e-40, 0.0});
  const Tensor tensor = array.to_tensor("x");
  EXPECT_EQ(tensor.shape(), (Shape{4}));
  EXPECT_EQ(tensor[0], 0.1f);
  EXPECT_EQ(tensor[1], -2.5f);
  EXPECT_EQ(tensor[2], static_cast<float>(1e-40));
  EXPECT_NE(tensor[2], 0.0f);
  EXPECT_EQ(tensor[3], 0.0f);

  const NpyArray special(Shape{2}, std::vector<double>{std::nan(""), -INFINITY});
  const Tensor converted = special.to_tensor("x");
  EXPECT_TRUE(std::isnan(converted[0]));
  EXPECT_EQ(converted[1], -INFINITY);
}

TEST_F(NpyTest, Float64TooSmallForFloat32IsRefused) {
  // It would become 0, and a row of such values would then normalise with rstd = inf.
  const NpyArray array(Shape{3}, std::vector<double>{1.0, 0.0, -1e-50});
  try {
    array.to_tensor("x.npy");
    FAIL() << "-1e-50 was converted to float32 0";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("x.npy: element 2 is -1e-50, too small for float32"),
              std::string::npos)
        << error.what();
  }
}

TEST_F(NpyTest, Float64BeyondFloat32RangeIsRefused) {
  const NpyArray array(Shape{2}, std::vector<double>{1.0, -1e39});
  try {
    array.to_tensor("x.npy");
    FAIL() << "1e39 was converted to float32";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("x.npy: element 1"), std::string::npos)
        << error.what();
  }
}

TEST_F(NpyTest, ArrayRefusesAValueCountThatDisagreesWithTheShape) {
  EXPECT_THROW(NpyArray(Shape{2, 3}, std::vector<float>(5)), Error);
  EXPECT_THROW(NpyArray(Shape{2}, std::vector<double>(3)), Error);
}

TEST_F(NpyTest, RefusesBadMagic) {
  write_bytes("magic.npy", std::string("\x93NUMPX\x01\x00\x10\x00", 10) + std::string(16, ' '));
  expect_refused(file("magic.npy"), "magic string");
  write_bytes("text.npy", "hello, this is not numpy data at all");
  expect_refused(file("text.npy"), "not a .npy file");
  write_bytes("short.npy", "\x93NUM");
  expect_refused(file("short.npy"), "too short");
}

TEST_F(NpyTest, RefusesUnknownVersions) {
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n";
  write_raw("v4.npy", 4, 0, header, float32_data(1));
  expect_refused(file("v4.npy"), "version 4.0 is not supported, expected 1.0, 2.0 or 3.0");
  write_raw("v11.npy", 1, 1, header, float32_data(1));
  expect_refused(file("v11.npy"), "version 1.1");
}

TEST_F(NpyTest, RefusesUnsupportedDtypes) {
  for (const std::string descr : {"<i8", "<f2", "|u1", "<c8", "=f4", "f4", "<f4 "}) {
    const fs::path path = write_raw(
        "dtype.npy", 1, 0, "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (2,), }\n",
        std::string(16, '\0'));
    expect_refused(path, "dtype '" + descr + "' is not supported");
    expect_refused(path, "expected float32 ('<f4') or float64 ('<f8')");
  }
  const fs::path structured = write_raw(
      "structured.npy", 1, 0,
      "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }\n", float32_data(2));
  expect_refused(structured, "malformed .npy header");
}

TEST_F(NpyTest, RefusesBigEndian) {
  for (const std::string descr : {">f4", ">f8"}) {
    const fs::path path = write_raw(
        "big.npy", 1, 0, "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (2,), }\n",
        std::string(16, '\0'));
    expect_refused(path, "dtype '" + descr + "' is big-endian");
  }
}

TEST_F(NpyTest, RefusesFortranOrder) {
  const fs::path path =
      write_raw("fortran.npy", 1, 0, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n",
                float32_data(6));
  expect_refused(path, "fortran_order is True, expected a C-order array");
}

TEST_F(NpyTest, RefusesTruncatedData) {
  write_npy(file("full.npy"), NpyArray(Shape{4, 4}, std::vector<float>(16, 1.0f)));
  const std::string bytes = read_bytes(file("full.npy"));
  write_bytes("truncated.npy", bytes.substr(0, bytes.size() - 1));
  expect_refused(file("truncated.npy"), "has 63 bytes of data, expected 64");
  expect_refused(file("truncated.npy"), "truncated");
  write_bytes("header_only.npy",
              bytes.substr(0, npy_header(Shape{4, 4}, NpyDtype::float32).size()));
  expect_refused(file("header_only.npy"), "has 0 bytes of data, expected 64");
  write_bytes("half_header.npy", bytes.substr(0, 40));
  expect_refused(file("half_header.npy"), "truncated .npy header");
}

TEST_F(NpyTest, RefusesTrailingData) {
  write_npy(file("full.npy"), NpyArray(Shape{2}, std::vector<double>{1.0, 2.0}));
  write_bytes("trailing.npy", read_bytes(file("full.npy")) + "x");
  expect_refused(file("trailing.npy"), "has 17 bytes of data, expected 16");
  expect_refused(file("trailing.npy"), "trailing data");
}

TEST_F(NpyTest, RefusesAbsurdShapes) {
  const auto with_shape = [&](const std::string& shape) {
    return write_raw("absurd.npy", 1, 0,
                     "{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", }\n",
                     float32_data(4));
  };
  // 2**31 * 2**31 elements of 8 bytes overflow int64; so does a zero beside two huge dims.
  expect_refused(with_shape("(2147483648, 2147483648)"), "too large");
  expect_refused(with_shape("(0, 4294967296, 4294967296)"), "too large");
  expect_refused(with_shape("(99999999999999999999,)"), "too large");
  // Large but representable: refused because the file does not hold that much data.
  expect_refused(with_shape("(1000000000, 1000)"), "expected 8000000000000");
  expect_refused(with_shape("(1, 1, 1, 1, 1, 1, 1, 1, 2)"), "more than 8 dimensions");
  expect_refused(with_shape("(-2,)"), "non-negative integer");
}

TEST_F(NpyTest, RefusesMalformedHeaders) {
  const std::string tail = "\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "unexpected end of header"},
      {"descr: '<f4'", "expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False}", "'shape' is missing"},
      {"{'shape': (2,), 'fortran_order': False}", "'descr' is missing"},
      {"{'descr': '<f4', 'shape': (2,)}", "'fortran_order' is missing"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
       "'descr' appears twice"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
       "unexpected key 'extra'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", "unexpected end of header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", "after the closing '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2)}", "trailing comma"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", "expected '('"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", "True or False"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1 2,)}", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,)}", "expected ',' or ')'"},
      {"{'descr: '<f4', 'fortran_order': False, 'shape': (2,)}", "expected ':'"},
      {"{descr: '<f4', 'fortran_order': False, 'shape': (2,)}", "expected a quoted string"},
      {"{'de\\x73cr': '<f4', 'fortran_order': False, 'shape': (2,)}", "unsupported character"},
  };
  for (const auto& [header, expected] : cases) {
    SCOPED_TRACE(header);
    expect_refused(write_raw("malformed.npy", 1, 0, header + tail, float32_data(2)), expected);
  }
}

TEST_F(NpyTest, RefusesHugeHeaderLength) {
  // A version 2.0 header claiming 4 GiB: refused before anything is allocated for it.
  write_bytes("huge.npy", std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff", 12) + "{}");
  expect_refused(file("huge.npy"), "header length 4294967295 is too large");
  // A plausible length that runs past the end of the file.
  write_bytes("long.npy", std::string("\x93NUMPY\x01\x00\x00\x01", 10) + "{}");
  expect_refused(file("long.npy"), "truncated .npy header");
}

TEST_F(NpyTest, RefusesMissingFilesAndDirectories) {
  expect_refused(file("missing.npy"), "cannot open for reading");
  fs::create_directories(file("dir.npy"));
  expect_refused(file("dir.npy"), "is a directory");
}

TEST_F(NpyTest, WriteReplacesAtomicallyAndLeavesNoTemporaryFiles) {
  write_npy(file("y.npy"), NpyArray(Shape{2}, std::vector<float>{1.0f, 2.0f}));
  write_npy(file("y.npy"), NpyArray(Shape{3}, std::vector<double>{3.0, 4.0, 5.0}));
  EXPECT_EQ(read_npy(file("y.npy")).float64_values(), (std::vector<double>{3.0, 4.0, 5.0}));
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(directory_)) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST_F(NpyTest, WriteFailureNamesTheFileAndLeavesNothing) {
  const fs::path path = file("no_such_dir") / "y.npy";
  try {
    write_npy(path, NpyArray(Shape{1}, std::vector<float>{1.0f}));
    FAIL() << "writing into a missing directory succeeded";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(path.string()), std::string::npos) << error.what();
  }
  // A directory in the way of the target: the temporary file is written, the rename fails.
  fs::create_directories(file("blocked.npy"));
  EXPECT_THROW(write_npy(file("blocked.npy"), NpyArray(Shape{1}, std::vector<float>{1.0f})), Error);
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(directory_)) ++entries;
  EXPECT_EQ(entries, 1);  // only the blocking directory
}

}  // namespace
}  // namespace addnorm
