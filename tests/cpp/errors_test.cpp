// Bad arguments to Shape, Tensor, normalized_shape_from_axis, the residual add and dropout, the
// boundary values that must still be accepted, and the wording of the messages themselves.
// The residual add and dropout run for both element types in one typed test (the float32 ops of
// addnorm/ops.hpp and the float64 ops of addnorm/float64.hpp share their checks). The norms' bad
// arguments are in errors_row_norm_test.cpp, errors_batch_norm_test.cpp and
// errors_add_norm_test.cpp; the exact aliases the header allows in errors_alias_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "addnorm/overloads.hpp"
#include "errors_test_support.hpp"

namespace addnorm {
namespace {

using testing::add_dropout_rejections;
using testing::add_leading_tensor_rejections;
using testing::add_tensor_rejections;
using testing::Arena;
using testing::expect_all_rejected;
using testing::expect_rejected;
using testing::In;
using testing::inside;
using testing::Out;
using testing::partial_alias_message;
using testing::Rejection;

using testing::kX;

// Checks that `make` throws addnorm::Error whose message contains every part.
template <class Make>
void expect_error(Make make, const std::vector<std::string>& message_parts) {
  Arena nothing_to_write;
  expect_rejected(make, nothing_to_write, message_parts);
}

// ---------------------------------------------------------------------------------------------
TEST(ShapeErrors, RankAboveEightIsRejectedEitherWay) {
  EXPECT_EQ(Shape({1, 2, 3, 4, 5, 6, 7, 8}).rank(), 8);
  expect_error(
      [] {
        Shape({1, 2, 3, 4, 5, 6, 7, 8, 9});
      },
      {"shape has rank 9, expected at most 8"});
  const std::vector<int64_t> dims(12, 1);
  expect_error([&] { Shape{std::span<const int64_t>(dims)}; },
               {"shape has rank 12, expected at most 8"});
}

TEST(ShapeErrors, NegativeDimensionIsRejectedWhenCountedNamingTheTensor) {
  const Shape shape{2, -3};
  expect_error([&] { shape.numel("gamma"); },
               {"gamma has shape [2, -3], expected non-negative dimensions"});
  expect_error([&] { Tensor tensor(shape); }, {"has shape [2, -3]", "non-negative"});
  expect_error([&] { Tensor tensor(shape, {}); }, {"has shape [2, -3]", "non-negative"});
}

TEST(ShapeErrors, ElementCountOverflowIsRejectedAtTheBound) {
  // The bound keeps the byte size of a float64 copy within int64.
  constexpr int64_t kMaxElements = std::numeric_limits<int64_t>::max() / 8;
  EXPECT_EQ(Shape{kMaxElements}.numel(), kMaxElements);
  EXPECT_EQ((Shape{kMaxElements / 2, 2}.numel()), kMaxElements / 2 * 2);
  expect_error([] { Shape{kMaxElements + 1}.numel("x"); },
               {"x has shape [" + std::to_string(kMaxElements + 1) + "]", "overflows"});
  expect_error(
      [] {
        Shape({int64_t{1} << 32, int64_t{1} << 32}).numel("y");
      },
      {"y has shape [4294967296, 4294967296]", "overflows"});
  // 2^33 * (2^31 + 1) wraps around to 2^33 in 64 bits: it must not slip through.
  expect_error(
      [] {
        Shape({int64_t{1} << 33, (int64_t{1} << 31) + 1}).numel("dy");
      },
      {"dy has shape [8589934592, 2147483649]", "overflows"});
  // Tensor counts before it allocates: an addnorm::Error, not std::bad_alloc.
  expect_error([] { Tensor tensor(Shape{int64_t{1} << 40, int64_t{1} << 40}); }, {"overflows"});
}

TEST(TensorErrors, WrongValueCountIsRejected) {
  EXPECT_EQ(Tensor(Shape{2, 3}, std::vector<float>(6, 1.0f)).numel(), 6);
  for (size_t count : {0, 5, 7}) {
    expect_error(
        [&] {
          Tensor(Shape{2, 3}, std::vector<float>(count));
        },
        {"values has " + std::to_string(count) + " elements, expected 6 for shape [2, 3]"});
  }
}

TEST(NormalizedShapeFromAxisErrors, AxisOutOfRangeIsRejected) {
  const Shape x{2, 3, 4};
  EXPECT_EQ(normalized_shape_from_axis(x, -1), (Shape{4}));
  EXPECT_EQ(normalized_shape_from_axis(x, -3), (Shape{2, 3, 4}));
  EXPECT_EQ(normalized_shape_from_axis(x, 2), (Shape{4}));
  for (int64_t axis :
       {int64_t{3}, int64_t{-4}, int64_t{100}, std::numeric_limits<int64_t>::min()}) {
    expect_error([&] { normalized_shape_from_axis(x, axis); },
                 {"axis is " + std::to_string(axis) +
                  ", expected a value in [-3, 2] for x of shape [2, 3, 4]"});
  }
  // A scalar has no axis to normalise from.
  expect_error([] { normalized_shape_from_axis(Shape{}, 0); }, {"axis is 0", "x of shape []"});
}

// ---------------------------------------------------------------------------------------------
template <class T>
struct AddCall {
  using Element = T;
  In<T> x;
  In<T> r;
  Out<T> out;
  void operator()() const { overloads::add(x, r, out); }
};

template <class T>
AddCall<T> valid_add(testing::BasicArena<T>& arena) {
  return {arena.input(kX), arena.input(kX), arena.output(kX)};
}

template <class T>
struct DropoutCall {
  using Element = T;
  In<T> x;
  Out<T> y;
  BasicDropoutOptions<T> options;
  void operator()() const { overloads::dropout(x, y, options); }
};

template <class T>
DropoutCall<T> valid_dropout(testing::BasicArena<T>& arena) {
  return {arena.input(kX), arena.output(kX), BasicDropoutOptions<T>{T(0.1), 3, 100}};
}

template <class T>
struct DropoutBackwardCall {
  using Element = T;
  In<T> dy;
  Out<T> dx;
  BasicDropoutOptions<T> options;
  void operator()() const { overloads::dropout_backward(dy, dx, options); }
};

template <class T>
DropoutBackwardCall<T> valid_dropout_backward(testing::BasicArena<T>& arena) {
  return {arena.input(kX), arena.output(kX), BasicDropoutOptions<T>{T(0.5), 3, 0}};
}

template <class T>
class ResidualErrors : public ::testing::Test {};
TYPED_TEST_SUITE(ResidualErrors, testing::ElementTypes, testing::ElementName);

TYPED_TEST(ResidualErrors, AddRejectsEveryBadArgumentWithoutWriting) {
  using T = TypeParam;
  using Call = AddCall<T>;
  using TypedArena = testing::BasicArena<T>;
  std::vector<Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> In<T>& { return c.x; });
  add_tensor_rejections<Call>(rejections, "r", [](Call& c) -> In<T>& { return c.r; }, kX, {3, 7});
  add_tensor_rejections<Call>(rejections, "r", [](Call& c) -> In<T>& { return c.r; }, kX, {8, 3});
  add_tensor_rejections<Call>(rejections, "out", [](Call& c) -> Out<T>& { return c.out; }, kX,
                              {24});
  rejections.push_back({"out partly over x", [](Call& c, TypedArena&) { c.out = inside(c.x, 1); },
                        partial_alias_message("out", "x")});
  rejections.push_back({"out partly over r", [](Call& c, TypedArena&) { c.out = inside(c.r, 8); },
                        partial_alias_message("out", "r")});
  expect_all_rejected(&valid_add<T>, rejections);
}

TYPED_TEST(ResidualErrors, DropoutRejectsEveryBadArgumentWithoutWriting) {
  using T = TypeParam;
  using Call = DropoutCall<T>;
  using TypedArena = testing::BasicArena<T>;
  std::vector<Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> In<T>& { return c.x; });
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> Out<T>& { return c.y; }, kX, {3, 7});
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> Out<T>& { return c.y; }, kX, {24});
  add_dropout_rejections<Call>(rejections,
                               [](Call& c) -> BasicDropoutOptions<T>& { return c.options; });
  rejections.push_back({"offset 2^64 - 1",
                        [](Call& c, TypedArena&) { c.options.offset = UINT64_MAX; },
                        {"offset is 18446744073709551615 for 24 elements"}});
  rejections.push_back({"y partly over x", [](Call& c, TypedArena&) { c.y = inside(c.x, 2); },
                        partial_alias_message("y", "x")});
  expect_all_rejected(&valid_dropout<T>, rejections);
}

TYPED_TEST(ResidualErrors, DropoutBackwardRejectsEveryBadArgumentWithoutWriting) {
  using T = TypeParam;
  using Call = DropoutBackwardCall<T>;
  using TypedArena = testing::BasicArena<T>;
  std::vector<Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "dy", [](Call& c) -> In<T>& { return c.dy; });
  add_tensor_rejections<Call>(rejections, "dx", [](Call& c) -> Out<T>& { return c.dx; }, kX,
                              {4, 8});
  add_dropout_rejections<Call>(rejections,
                               [](Call& c) -> BasicDropoutOptions<T>& { return c.options; });
  rejections.push_back({"dx partly over dy", [](Call& c, TypedArena&) { c.dx = inside(c.dy, 5); },
                        partial_alias_message("dx", "dy")});
  expect_all_rejected(&valid_dropout_backward<T>, rejections);
}

// The mask is uint8, outside the float Arena, so its buffer is checked by hand.
TEST(DropoutMaskErrors, RejectsEveryBadArgumentWithoutWriting) {
  struct Case {
    const char* what;
    Shape shape;
    bool null_data;
    DropoutOptions options;
    std::vector<std::string> message_parts;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<Case> cases = {
      {"no data", kX, true, {0.1f, 1, 0}, {"^mask ", "null"}},
      {"negative dimension",
       {-3, 8},
       false,
       {0.1f, 1, 0},
       {"mask has shape [-3, 8], expected non-negative dimensions"}},
      {"overflowing count",
       {int64_t{1} << 40, int64_t{1} << 40},
       false,
       {0.1f, 1, 0},
       {"mask has shape", "overflows"}},
      {"p < 0", kX, false, {-0.5f, 1, 0}, {"p is", "expected a dropout probability in [0, 1)"}},
      {"p = 1", kX, false, {1.0f, 1, 0}, {"p is", "expected a dropout probability in [0, 1)"}},
      {"p NaN", kX, false, {nan, 1, 0}, {"p is", "expected a dropout probability in [0, 1)"}},
      {"offset overflowing",
       kX,
       false,
       {0.1f, 1, UINT64_MAX - 23},
       {"offset is", "expected offset + element count to fit in 64 bits"}},
  };
  constexpr uint8_t kUnwritten = 0xAB;
  for (const Case& bad : cases) {
    SCOPED_TRACE(bad.what);
    std::vector<uint8_t> memory(32, kUnwritten);
    const TensorView<uint8_t> mask{bad.null_data ? nullptr : memory.data(), bad.shape};
    Arena unused;
    expect_rejected([&] { dropout_mask(mask, bad.options); }, unused, bad.message_parts);
    EXPECT_EQ(memory, std::vector<uint8_t>(32, kUnwritten));
  }
}

// ---------------------------------------------------------------------------------------------
// The checks must not be stricter than the header: the edges of every range are accepted.
TEST(BoundaryArguments, EdgesOfEveryRangeAreAccepted) {
  Arena arena;
  const ConstView x = arena.input(kX);
  const MutableView y = arena.output(kX);
  EXPECT_NO_THROW(layer_norm(x, {8}, y, NormOptions{.eps = 0.0f}));
  EXPECT_NO_THROW(rms_norm(x, {8}, y, NormOptions{.zero_centered_gamma = false, .eps = 0.0f}));
  for (float momentum : {0.0f, 1.0f}) {
    BatchNormOptions options;
    options.momentum = momentum;
    EXPECT_NO_THROW(batch_norm(x, y, options)) << "momentum " << momentum;
  }
  // Two values per channel are enough to train on.
  EXPECT_NO_THROW(batch_norm(arena.input({2, 3}), arena.output({2, 3})));
  const float largest_p = std::nextafter(1.0f, 0.0f);
  const uint64_t last_offset = UINT64_MAX - 24;  // offset + 24 elements is exactly 2^64 - 1
  for (const DropoutOptions& options : {DropoutOptions{0.0f, 1, 0}, DropoutOptions{largest_p, 1, 0},
                                        DropoutOptions{0.5f, 1, last_offset}}) {
    EXPECT_NO_THROW(dropout(x, y, options));
    EXPECT_NO_THROW(dropout_backward(x, y, options));
  }
}

// ---------------------------------------------------------------------------------------------
// The header's promise: a message "names the argument and says what was expected".
TEST(ErrorMessages, SayWhatWasExpectedForNullDataAndOverflow) {
  Arena arena;
  AddCall null_x = valid_add(arena);
  null_x.x.data = nullptr;
  expect_rejected(null_x, arena, {"^x ", "expected"});
  expect_error([] { Shape({int64_t{1} << 40, int64_t{1} << 40}).numel("x"); }, {"expected"});
}

TEST(ErrorMessages, SmallBadValuesAreNotPrintedAsInRange) {
  Arena arena;
  const ConstView x = arena.input(kX);
  const MutableView y = arena.output(kX);
  expect_rejected([&] { dropout(x, y, DropoutOptions{-1e-9f, 0, 0}); }, arena, {"p is -1"});
}

}  // namespace
}  // namespace addnorm

namespace addnorm {
namespace {

// Enum values cast from integers outside their enums (a caller's bug, or memory read as one) are
// refused by the argument's name, as the C ABI refuses an out-of-range dtype, instead of being
// read as some other type or kind.
TEST(EnumErrors, OutOfRangeValuesAreRefusedByName) {
  std::vector<float> x(8, 1.0f), y(8, 7.0f);
  const Shape shape{2, 4};
  expect_error(
      [&] {
        layer_norm(AnyConstView(x.data(), shape, DType::float32), Shape{4},
                   AnyMutableView(y.data(), shape, static_cast<DType>(200)));
      },
      {"y has dtype 200, expected an addnorm::DType"});
  expect_error(
      [&] {
        layer_norm(AnyConstView(x.data(), shape, static_cast<DType>(7)), Shape{4},
                   MutableView{y.data(), shape});
      },
      {"x has dtype 7, expected an addnorm::DType"});
  NormOptions options;
  options.norm = static_cast<NormKind>(9);
  expect_error(
      [&] {
        norm(ConstView{x.data(), shape}, Shape{4}, {y.data(), shape}, options);
      },
      {"norm is NormKind(9), expected layer_norm or rms_norm"});
  expect_error(
      [&] {
        layer_norm(ConstView{x.data(), shape}, Shape{4}, {y.data(), shape}, options);
      },
      {"norm is NormKind(9)"});
  GroupNormOptions groups;
  groups.norm = static_cast<NormKind>(9);
  expect_error(
      [&] {
        group_norm(ConstView{x.data(), shape}, {y.data(), shape}, groups);
      },
      {"norm is NormKind(9)"});
  BatchNormOptions batch;
  batch.convention = static_cast<MomentumConvention>(5);
  expect_error(
      [&] {
        batch_norm(ConstView{x.data(), shape}, {y.data(), shape}, batch);
      },
      {"convention is 5, expected MomentumConvention::pytorch or onnx"});
  EXPECT_EQ(y, std::vector<float>(8, 7.0f));  // nothing written by any of them
}

}  // namespace
}  // namespace addnorm
