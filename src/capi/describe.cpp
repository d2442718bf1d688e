// The C ABI's constants that come from the C++ library: version, element sizes, default eps.
#include "addnorm/addnorm.h"
#include "addnorm/ops.hpp"
#include "addnorm/version.hpp"

extern "C" {

const char* addnorm_version(void) {
  return addnorm::version().string;
}

int32_t addnorm_version_number(void) {
  const addnorm::Version version = addnorm::version();
  return version.major_version * 10000 + version.minor_version * 100 + version.patch_version;
}

size_t addnorm_dtype_size(int32_t dtype) {
  switch (dtype) {
    case ADDNORM_FLOAT32:
    case ADDNORM_BFLOAT16:
    case ADDNORM_FLOAT16:
      return static_cast<size_t>(addnorm::dtype_size(static_cast<addnorm::DType>(dtype)));
    case ADDNORM_FLOAT64:
      return sizeof(double);
    default:
      return 0;
  }
}

double addnorm_default_eps(int32_t norm) {
  switch (norm) {
    case ADDNORM_LAYER_NORM:
      return addnorm::norm_traits(addnorm::NormKind::layer_norm).default_eps;
    case ADDNORM_RMS_NORM:
      return addnorm::norm_traits(addnorm::NormKind::rms_norm).default_eps;
    default:
      return -1.0;
  }
}

}  // extern "C"
