// addnorm::Error's fields, which the faces map from (python/src/module.cpp: TypeError for a
// wrong dtype; src/capi/status.cpp: the C ABI's argument and kind): each kind of mistake as
// the library reports it, and the one table of names the faces spell differently.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"

namespace addnorm {
namespace {

// The Error `call` throws (a default one with an empty argument if it throws none).
Error error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "no addnorm::Error was thrown";
  return Error("");
}

struct Rows {
  std::vector<float> x = std::vector<float>(12, 1.5f);
  std::vector<float> y = std::vector<float>(12, 0.0f);
  std::vector<uint16_t> y16 = std::vector<uint16_t>(12, 0);
  std::vector<float> gamma = std::vector<float>(4, 1.0f);
  AnyConstView x_view() const { return ConstView{x.data(), Shape{3, 4}}; }
  AnyMutableView y_view() { return MutableView{y.data(), Shape{3, 4}}; }
};

TEST(ErrorKinds, AShapeMismatchNamesTheTensor) {
  Rows rows;
  NormOptions options;
  options.gamma = ConstView{rows.gamma.data(), Shape{2, 2}};
  const Error error =
      error_of([&] { layer_norm(rows.x_view(), Shape{4}, rows.y_view(), options); });
  EXPECT_EQ(error.kind(), ErrorKind::shape);
  EXPECT_EQ(error.argument(), "gamma");
  EXPECT_EQ(std::string(error.what()), "gamma has shape [2, 2], expected [4]");
  EXPECT_EQ(face_message(error), "weight has shape [2, 2], expected [4]");
}

TEST(ErrorKinds, AStorageMismatchIsATypeError) {
  Rows rows;
  // The branch r and y are one group: y stored as bfloat16 beside a float16 r is refused.
  std::vector<float> h(12);
  const std::vector<uint16_t> r16(12, 0);
  const Error error = error_of([&] {
    add_norm_pre(rows.x_view(), AnyConstView{r16.data(), Shape{3, 4}, DType::float16}, Shape{4},
                 MutableView{h.data(), Shape{3, 4}},
                 AnyMutableView{rows.y16.data(), Shape{3, 4}, DType::bfloat16});
  });
  EXPECT_EQ(error.kind(), ErrorKind::type);
  EXPECT_FALSE(error.argument().empty());
  EXPECT_NE(std::string(error.what()).find("is stored as"), std::string::npos) << error.what();
}

TEST(ErrorKinds, ABadScalarIsAValueErrorCheckedBeforeRounding) {
  // 1e39 would round to infinity in float32: refused for what it is, before the conversion.
  const Error eps = error_of([] { (void)eps_as<float>(1e39); });
  EXPECT_EQ(eps.kind(), ErrorKind::value);
  EXPECT_EQ(eps.argument(), "eps");
  EXPECT_NE(std::string(eps.what()).find("beyond float32's range"), std::string::npos)
      << eps.what();
  const Error momentum =
      error_of([] { (void)momentum_as<float>(std::numeric_limits<double>::quiet_NaN()); });
  EXPECT_EQ(momentum.argument(), "momentum");
  EXPECT_EQ(momentum.kind(), ErrorKind::value);
  EXPECT_EQ(std::string(momentum.what()), "momentum is nan, expected a finite value");
  // Any finite value of either sign is taken, as PyTorch and ONNX take them.
  EXPECT_FLOAT_EQ(eps_as<float>(1e-5), 1e-5f);
  EXPECT_EQ(eps_as<float>(-0.25), -0.25f);
  EXPECT_EQ(momentum_as<float>(1.5), 1.5f);
  EXPECT_EQ(momentum_as<double>(-1.2), -1.2);
}

TEST(ErrorKinds, AnOverlapNamesTheOutput) {
  Rows rows;
  // y half a row into x: neither the same memory nor separate.
  const AnyMutableView y = MutableView{rows.x.data() + 2, Shape{2, 4}};
  const AnyConstView x = ConstView{rows.x.data(), Shape{2, 4}};
  const Error error = error_of([&] { layer_norm(x, Shape{4}, y); });
  EXPECT_EQ(error.kind(), ErrorKind::overlap);
  EXPECT_EQ(error.argument(), "y");
  EXPECT_EQ(std::string(error.what()), "y " + error.detail());
}

TEST(ErrorKinds, TheNormNameIsReadByOneRule) {
  EXPECT_EQ(norm_kind_from("rms_norm"), NormKind::rms_norm);
  EXPECT_EQ(norm_kind_from("layer_norm"), NormKind::layer_norm);
  const Error error = error_of([] { (void)norm_kind_from("batch"); });
  EXPECT_EQ(error.argument(), "norm");
  EXPECT_EQ(std::string(error.what()), "norm is 'batch', expected 'layer_norm' or 'rms_norm'");
}

TEST(ErrorKinds, OptionsOneNormOnlyAcceptsAreRefusedWithTheFacesNames) {
  Rows rows;
  std::vector<float> h(12);
  NormOptions options;
  options.norm = NormKind::rms_norm;
  options.beta = ConstView{rows.gamma.data(), Shape{4}};
  const Error beta = error_of([&] {
    add_norm_pre(rows.x_view(), rows.x_view(), Shape{4}, MutableView{h.data(), Shape{3, 4}},
                 rows.y_view(), options);
  });
  EXPECT_EQ(beta.argument(), "beta");
  EXPECT_EQ(face_message(beta), "bias was given for rms_norm, expected none (it has no shift)");
  options = {};
  options.zero_centered_gamma = true;
  const Error centred = error_of([&] {
    add_norm_pre(rows.x_view(), rows.x_view(), Shape{4}, MutableView{h.data(), Shape{3, 4}},
                 rows.y_view(), options);
  });
  EXPECT_EQ(face_message(centred),
            "zero_centered_weight was set for layer_norm, expected it only with rms_norm");
}

TEST(ErrorKinds, FacesRenameOnlyTheAffineNames) {
  EXPECT_EQ(face_argument_name("gamma"), "weight");
  EXPECT_EQ(face_argument_name("dbeta"), "dbias");
  EXPECT_EQ(face_argument_name("x"), "x");
  EXPECT_EQ(face_argument_name("gammas"), "gammas");
  // A message with no argument is passed on as it is.
  EXPECT_EQ(face_message(Error("gamma is odd")), "gamma is odd");
}

}  // namespace
}  // namespace addnorm
