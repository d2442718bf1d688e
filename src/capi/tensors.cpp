#include "capi/tensors.hpp"

#include <span>
#include <string>

#include "addnorm/error.hpp"

namespace addnorm::capi {

static_assert(ADDNORM_MAX_RANK == kMaxRank, "addnorm.h's ADDNORM_MAX_RANK is the C++ kMaxRank");
static_assert(ADDNORM_FLOAT32 == static_cast<int>(DType::float32) &&
                  ADDNORM_BFLOAT16 == static_cast<int>(DType::bfloat16) &&
                  ADDNORM_FLOAT16 == static_cast<int>(DType::float16),
              "the 32- and 16-bit addnorm_dtype values cast to DType");

namespace {

bool is_dtype(int32_t dtype) {
  return dtype >= ADDNORM_FLOAT32 && dtype <= ADDNORM_FLOAT64;
}

std::string dtype_text(int32_t dtype) {
  switch (dtype) {
    case ADDNORM_FLOAT32:
      return "float32";
    case ADDNORM_BFLOAT16:
      return "bfloat16";
    case ADDNORM_FLOAT16:
      return "float16";
    case ADDNORM_FLOAT64:
      return "float64";
    default:
      return std::to_string(dtype);
  }
}

[[noreturn]] void refuse_dtype(const char* name, int32_t dtype, const std::string& expected) {
  if (!is_dtype(dtype)) {
    throw Error(
        ErrorKind::type, name,
        std::string("has dtype ") + dtype_text(dtype) + ", expected an addnorm_dtype (0 to 3)");
  }
  throw Error(ErrorKind::type, name,
              std::string("has dtype ") + dtype_text(dtype) + ", expected " + expected);
}

}  // namespace

const addnorm_tensor& required(const char* name, const addnorm_tensor* tensor) {
  if (tensor == nullptr)
    throw Error(ErrorKind::value, name, std::string("is NULL, expected a tensor"));
  return *tensor;
}

Shape shape_of(const char* name, const addnorm_tensor& tensor) {
  if (tensor.rank < 0 || tensor.rank > ADDNORM_MAX_RANK) {
    throw Error(ErrorKind::shape, name,
                std::string("has rank ") + std::to_string(tensor.rank) + ", expected 0 to " +
                    std::to_string(ADDNORM_MAX_RANK));
  }
  if (tensor.shape == nullptr && tensor.rank > 0) {
    throw Error(ErrorKind::shape, name,
                std::string("has a NULL shape with rank ") + std::to_string(tensor.rank) +
                    ", expected " + std::to_string(tensor.rank) + " dimensions");
  }
  if (!is_dtype(tensor.dtype)) refuse_dtype(name, tensor.dtype, "");
  return Shape(std::span<const int64_t>(tensor.shape, static_cast<size_t>(tensor.rank)));
}

void expect_dtype(const char* name, const addnorm_tensor& tensor, addnorm_dtype dtype,
                  const char* why) {
  if (tensor.dtype != dtype) refuse_dtype(name, tensor.dtype, dtype_text(dtype) + " " + why);
}

void expect_float32_call(const char* name, const addnorm_tensor& tensor) {
  if (tensor.dtype == ADDNORM_FLOAT64 || !is_dtype(tensor.dtype)) {
    refuse_dtype(name, tensor.dtype,
                 "float32, bfloat16 or float16 (every tensor of a call is float64, or none is)");
  }
}

void expect_float64_call(const char* name, const addnorm_tensor& tensor) {
  if (tensor.dtype != ADDNORM_FLOAT64) {
    refuse_dtype(name, tensor.dtype, "float64 (every tensor of a call is float64, or none is)");
  }
}

void expect_pair(const char* first_name, const addnorm_tensor* first, const char* second_name,
                 const addnorm_tensor* second) {
  if ((first == nullptr) == (second == nullptr)) return;
  const bool first_given = first != nullptr;
  throw Error(ErrorKind::value, first_given ? first_name : second_name,
              std::string("was given but ") + (first_given ? second_name : first_name) +
                  " is NULL, expected both or neither");
}

void expect_absent(const char* name, const addnorm_tensor* tensor, const char* why) {
  if (tensor != nullptr)
    throw Error(ErrorKind::value, name, std::string("was given, expected NULL ") + why);
}

Shape trailing_dims(const char* x_name, const Shape& x_shape, int32_t normalized_ndim) {
  if (normalized_ndim < 1 || normalized_ndim > x_shape.rank()) {
    throw Error(ErrorKind::shape, "normalized_ndim",
                "is " + std::to_string(normalized_ndim) + ", expected 1 to the rank of " + x_name +
                    " " + x_shape.to_string());
  }
  return x_shape.trailing(normalized_ndim);
}

NormKind norm_kind(int32_t norm) {
  switch (norm) {
    case ADDNORM_LAYER_NORM:
      return NormKind::layer_norm;
    case ADDNORM_RMS_NORM:
      return NormKind::rms_norm;
    default:
      throw Error(ErrorKind::value, "norm",
                  "is " + std::to_string(norm) +
                      ", expected ADDNORM_LAYER_NORM (0) or ADDNORM_RMS_NORM (1)");
  }
}

MomentumConvention momentum_convention(int32_t convention) {
  switch (convention) {
    case ADDNORM_MOMENTUM_PYTORCH:
      return MomentumConvention::pytorch;
    case ADDNORM_MOMENTUM_ONNX:
      return MomentumConvention::onnx;
    default:
      throw Error(ErrorKind::value, "convention",
                  "is " + std::to_string(convention) +
                      ", expected ADDNORM_MOMENTUM_PYTORCH (0) or ADDNORM_MOMENTUM_ONNX (1)");
  }
}

}  // namespace addnorm::capi
