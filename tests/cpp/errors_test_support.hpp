// Shared pieces of the bad-argument tests (errors_*.cpp): an arena that remembers what every
// buffer held, and a runner that checks a spoiled call throws addnorm::Error with a message naming
// the argument, and that it wrote nothing, anywhere.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "addnorm/ops.hpp"
#include "test_support.hpp"

namespace addnorm::testing {

// The shapes the error tests' row-norm calls use: x of [3, 8] normalised over its last dim,
// 3 rows of 8.
inline const Shape kX{3, 8};
inline const Shape kDim{8};
inline const Shape kRows{3};

// Outputs start as a quiet NaN whose payload no op computes, so any write to them shows.
inline const float kSentinel = std::bit_cast<float>(0x7fc0beefu);
inline const double kSentinel64 = std::bit_cast<double>(0x7ff80000deadbeefull);

// Owns every buffer a test passes to an op, of element type T (float for the float32 ops,
// double for the float64 ones). Each buffer has kSlack spare elements past its end, so that a
// view shifted a few elements into it (for the overlap tests) stays inside it.
template <class T>
class BasicArena {
 public:
  static constexpr int64_t kSlack = 8;

  // Seeded values in [0.5, 2): valid as data, gamma or a running variance alike.
  TensorView<const T> input(const Shape& shape) { return {add(shape, false), shape}; }
  // Filled with the sentinel.
  TensorView<T> output(const Shape& shape) { return {add(shape, true), shape}; }

  template <class View>
  View make(const Shape& shape) {
    if constexpr (std::is_same_v<View, TensorView<const T>> || std::is_same_v<View, AnyConstView>) {
      return input(shape);
    } else {
      return output(shape);
    }
  }

  // Whether every element of every buffer, slack included, still holds what it was created with.
  ::testing::AssertionResult unchanged() const {
    for (size_t b = 0; b < buffers_.size(); ++b) {
      const auto& [now, before] = buffers_[b];
      for (size_t i = 0; i < now.size(); ++i) {
        if (std::memcmp(&now[i], &before[i], sizeof(T)) != 0) {
          return ::testing::AssertionFailure() << "buffer " << b << " element " << i
                                               << " was written: " << before[i] << " -> " << now[i];
        }
      }
    }
    return ::testing::AssertionSuccess();
  }

 private:
  T* add(const Shape& shape, bool sentinel) {
    const size_t count = static_cast<size_t>(shape.numel() + kSlack);
    std::vector<T> values(count);
    if (sentinel) {
      if constexpr (std::is_same_v<T, float>) {
        values.assign(count, kSentinel);
      } else {
        values.assign(count, kSentinel64);
      }
    } else {
      const std::vector<float> random = random_floats(count, next_seed_++, 0.5f, 2.0f);
      values.assign(random.begin(), random.end());
    }
    buffers_.emplace_back(values, values);
    return buffers_.back().first.data();
  }

  std::deque<std::pair<std::vector<T>, std::vector<T>>> buffers_;  // (now, at creation)
  uint32_t next_seed_ = 1;
};
using Arena = BasicArena<float>;

// The element type of a call's tensors: a call struct may say `using Element = double;`, and is
// a float32 call otherwise. Its arena and scalar options have that type.
template <class Call, class = void>
struct ElementOfCall {
  using type = float;
};
template <class Call>
struct ElementOfCall<Call, std::void_t<typename Call::Element>> {
  using type = typename Call::Element;
};
template <class Call>
using ElementOf = typename ElementOfCall<Call>::type;
template <class Call>
using ArenaOf = BasicArena<ElementOf<Call>>;

// The typed error tests' element types, named as the suites' parameters: float32 (the ops of
// addnorm/ops.hpp) and float64 (addnorm/float64.hpp), which share their checks.
using ElementTypes = ::testing::Types<float, double>;
struct ElementName {
  template <class T>
  static std::string GetName(int) {
    return std::is_same_v<T, float> ? "float32" : "float64";
  }
};
// A typed call's input and output tensors.
template <class T>
using In = TensorView<const T>;
template <class T>
using Out = TensorView<T>;

// A view of `shape` starting `shift` elements into `view`'s memory, for the overlap tests. The
// memory belongs to an Arena, so writing through it is defined (and would be caught).
template <class T>
TensorView<std::remove_const_t<T>> inside(const TensorView<T>& view, int64_t shift,
                                          const Shape& shape) {
  return {const_cast<std::remove_const_t<T>*>(view.data) + shift, shape};
}
template <class T>
TensorView<std::remove_const_t<T>> inside(const TensorView<T>& view, int64_t shift) {
  return inside(view, shift, view.shape);
}

// The same inside a view of any storage type (the norms' tensors). It converts to whichever
// view the call's field has, typed float32 or any storage.
struct ShiftedView {
  void* data;
  Shape shape;
  DType dtype;
  operator AnyMutableView() const { return {data, shape, dtype}; }
  operator AnyConstView() const { return {data, shape, dtype}; }
  operator MutableView() const { return {static_cast<float*>(data), shape}; }
  operator ConstView() const { return {static_cast<const float*>(data), shape}; }
};
inline ShiftedView inside(const AnyConstView& view, int64_t shift, const Shape& shape) {
  auto* bytes = static_cast<uint8_t*>(const_cast<void*>(view.data));
  return {bytes + shift * dtype_size(view.dtype), shape, view.dtype};
}
inline ShiftedView inside(const AnyConstView& view, int64_t shift) {
  return inside(view, shift, view.shape);
}

// One bad argument: how to spoil a valid call, and what the error message must then contain
// (a part starting with '^' is what the message must start with).
template <class Call>
struct Rejection {
  std::string what;
  std::function<void(Call&, ArenaOf<Call>&)> spoil;
  std::vector<std::string> message_parts;
};

// Checks that call() throws addnorm::Error whose message contains every part ("^part": starts
// with it), and that no buffer in the arena was written.
template <class Call>
void expect_rejected(const Call& call, const ArenaOf<Call>& arena,
                     const std::vector<std::string>& message_parts) {
  try {
    call();
    ADD_FAILURE() << "accepted: no addnorm::Error was thrown";
  } catch (const Error& error) {
    const std::string message = error.what();
    for (const std::string& part : message_parts) {
      if (part.starts_with('^')) {
        EXPECT_TRUE(message.starts_with(part.substr(1)))
            << "message \"" << message << "\" does not start with \"" << part.substr(1) << "\"";
        // The argument the message starts with is the one the error carries, for the faces.
        EXPECT_FALSE(error.argument().empty()) << "message \"" << message << "\"";
        EXPECT_TRUE((part.substr(1) + " ").starts_with(error.argument() + " "))
            << "argument \"" << error.argument() << "\" of \"" << message << "\"";
        EXPECT_EQ(error.argument() + " " + error.detail(), message);
      } else {
        EXPECT_NE(message.find(part), std::string::npos)
            << "message \"" << message << "\" lacks \"" << part << "\"";
      }
    }
  } catch (const std::exception& other) {
    ADD_FAILURE() << "threw something other than addnorm::Error: " << other.what();
  }
  EXPECT_TRUE(arena.unchanged());
}

// Checks first that make_valid's call is accepted (so each rejection is due to its one spoiled
// argument), then every rejection against a fresh arena.
template <class Call>
void expect_all_rejected(Call (*make_valid)(ArenaOf<Call>&),
                         const std::vector<Rejection<Call>>& rejections) {
  {
    ArenaOf<Call> arena;
    const Call valid = make_valid(arena);
    ASSERT_NO_THROW(valid()) << "the unspoiled call must be valid";
  }
  for (const Rejection<Call>& rejection : rejections) {
    SCOPED_TRACE(rejection.what);
    ArenaOf<Call> arena;
    Call call = make_valid(arena);
    rejection.spoil(call, arena);
    expect_rejected(call, arena, rejection.message_parts);
  }
}

// The two rejections every tensor argument after the first shares: no data, and a wrong shape.
// `access` returns the argument's view inside a Call.
template <class Call, class Access>
void add_tensor_rejections(std::vector<Rejection<Call>>& rejections, const std::string& name,
                           Access access, const Shape& expected, const Shape& wrong) {
  using View = std::remove_reference_t<decltype(access(std::declval<Call&>()))>;
  rejections.push_back({name + " without data",
                        [access](Call& call, ArenaOf<Call>&) { access(call).data = nullptr; },
                        {"^" + name + " ", "null"}});
  rejections.push_back(
      {name + " shaped " + wrong.to_string(),
       [access, wrong](Call& call, ArenaOf<Call>& arena) {
         access(call) = arena.template make<View>(wrong);
       },
       {name + " has shape " + wrong.to_string() + ", expected " + expected.to_string()}});
}

// Rejections of the first tensor argument, whose shape the others are checked against: no
// data, a negative dimension, and an element count that overflows. (A zero dimension is an
// empty batch, accepted: tests/cpp/empty_batch_test.cpp.)
template <class Call, class Access>
void add_leading_tensor_rejections(std::vector<Rejection<Call>>& rejections,
                                   const std::string& name, Access access) {
  rejections.push_back({name + " without data",
                        [access](Call& call, ArenaOf<Call>&) { access(call).data = nullptr; },
                        {"^" + name + " ", "null"}});
  const auto reshaped = [access](Shape shape) {
    return [access, shape](Call& call, ArenaOf<Call>&) { access(call).shape = shape; };
  };
  // Only the shape changes: validation must throw before anything reads these dimensions.
  rejections.push_back({name + " with a negative dimension",
                        reshaped({-3, 8}),
                        {name + " has shape [-3, 8], expected non-negative dimensions"}});
  rejections.push_back({name + " with an element count that overflows",
                        reshaped({int64_t{1} << 40, int64_t{1} << 40, 8}),
                        {name + " has shape [1099511627776, 1099511627776, 8]", "overflows"}});
}

// Rejections of eps: negative, NaN, +Inf and -Inf.
template <class Call>
void add_eps_rejections(std::vector<Rejection<Call>>& rejections,
                        std::function<ElementOf<Call>&(Call&)> eps) {
  using T = ElementOf<Call>;
  for (T bad : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                -std::numeric_limits<T>::infinity()}) {
    rejections.push_back({"eps = " + std::to_string(bad),
                          [eps, bad](Call& call, ArenaOf<Call>&) { eps(call) = bad; },
                          {"eps is", "expected a finite value"}});
  }
}

// Rejections of a dropout probability (p < 0, p = 1, p > 1, NaN) and of an offset whose stream
// would run past 2^64.
template <class Call>
void add_dropout_rejections(std::vector<Rejection<Call>>& rejections,
                            std::function<BasicDropoutOptions<ElementOf<Call>>&(Call&)> dropout) {
  using T = ElementOf<Call>;
  for (T bad : {T(-0.1), T(1), T(1.5), std::numeric_limits<T>::quiet_NaN()}) {
    rejections.push_back({"dropout p = " + std::to_string(bad),
                          [dropout, bad](Call& call, ArenaOf<Call>&) { dropout(call).p = bad; },
                          {"p is", "expected a dropout probability in [0, 1)"}});
  }
  rejections.push_back(
      {"dropout offset overflowing",
       [dropout](Call& call, ArenaOf<Call>&) { dropout(call).offset = UINT64_MAX - 5; },
       {"offset is 18446744073709551610", "expected offset + element count to fit in 64 bits"}});
}

// Rejections of normalized_shape for a row-wise op whose leading tensor (named `leading`) has
// shape [3, 8] and is normalised over [8].
template <class Call>
void add_normalized_shape_rejections(std::vector<Rejection<Call>>& rejections,
                                     const std::string& leading) {
  const auto normalized = [](Shape shape) {
    return [shape](Call& call, ArenaOf<Call>&) { call.normalized_shape = shape; };
  };
  rejections.push_back({"normalized_shape empty",
                        normalized({}),
                        {"normalized_shape is empty, expected at least one dimension"}});
  for (const Shape& wrong : {Shape{7}, Shape{3, 7}, Shape{0}, Shape{2, 3, 8}}) {
    rejections.push_back({"normalized_shape " + wrong.to_string(),
                          normalized(wrong),
                          {"normalized_shape " + wrong.to_string() +
                           " does not match the trailing dims of " + leading + " [3, 8]"}});
  }
  rejections.push_back({"normalized_shape negative",
                        normalized({-8}),
                        {"normalized_shape has shape [-8], expected non-negative dimensions"}});
}

// Rejections of a per-row statistic (3 rows): wrong element counts, and no data.
template <class Call, class Access>
void add_per_row_rejections(std::vector<Rejection<Call>>& rejections, const std::string& name,
                            Access access) {
  using View = std::remove_reference_t<decltype(access(std::declval<Call&>()))>;
  for (const Shape& wrong : {Shape{2}, Shape{4}, Shape{3, 8}}) {
    rejections.push_back({name + " shaped " + wrong.to_string(),
                          [access, wrong](Call& call, ArenaOf<Call>& arena) {
                            access(call) = arena.template make<View>(wrong);
                          },
                          {name + " has " + std::to_string(wrong.numel()) + " elements (shape " +
                               wrong.to_string() + ")",
                           "expected 3 (one per row)"}});
  }
  rejections.push_back({name + " without data",
                        [access](Call& call, ArenaOf<Call>&) { access(call).data = nullptr; },
                        {"^" + name + " ", "null"}});
}

// The message of an overlap between two arguments that must be separate.
inline std::vector<std::string> overlap_message(const std::string& output,
                                                const std::string& other) {
  return {output + " overlaps " + other + ", expected separate memory"};
}
// The message of a partial overlap between two arguments that may coincide exactly.
inline std::vector<std::string> partial_alias_message(const std::string& output,
                                                      const std::string& other) {
  return {output + " overlaps " + other + ", expected exactly the same memory or separate memory"};
}

}  // namespace addnorm::testing
