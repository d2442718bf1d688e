// The ops on float64 data, composed from addnorm's reference kernels (src/ops/reference/*.hpp,
// templates that accumulate float64 in long double). The library's public API is float32 only;
// this is how the Python module gives NumPy and PyTorch users float64 (e.g. for gradcheck).
// Arguments are validated by the caller (the Python layer and bindings); pointers may be null
// where the float32 API takes an absent optional.
#pragma once

#include <cstdint>

namespace addnorm::python::float64 {

struct Rows {
  int64_t rows;
  int64_t dim;
  int64_t count() const { return rows * dim; }
};

struct Dropout {
  double p;  // as the caller gave it: kept values are scaled by 1 / (1 - p) in float64
  uint64_t seed;
  uint64_t offset;
};

void add(const double* x, const double* r, double* out, int64_t count);

void dropout(const double* x, double* y, int64_t count, const Dropout& options);

void layer_norm(const double* x, const double* gamma, const double* beta, double* y, double* mean,
                double* rstd, Rows layout, double eps);
void layer_norm_backward(const double* dy, const double* x, const double* gamma,
                         const double* dh_next, double* dx, double* dgamma, double* dbeta,
                         Rows layout, double eps);

void rms_norm(const double* x, const double* gamma, bool zero_centered_gamma, double* y,
              double* rstd, Rows layout, double eps);
void rms_norm_backward(const double* dy, const double* x, const double* gamma,
                       bool zero_centered_gamma, const double* dh_next, double* dx, double* dgamma,
                       Rows layout, double eps);

struct BatchNormArgs {
  int64_t batch, channels, length;
  const double* gamma;
  const double* beta;
  double* running_mean;  // null in training without running statistics
  double* running_var;
  bool training;
  double momentum;
  bool onnx_convention;
  double eps;
};
void batch_norm(const double* x, double* y, double* batch_mean, double* batch_rstd,
                const BatchNormArgs& args);
void batch_norm_backward(const double* dy, const double* x, double* dx, double* dgamma,
                         double* dbeta, const BatchNormArgs& args);

}  // namespace addnorm::python::float64
