// A BatchNorm call from its statistics to its outputs: which statistics (the batch's or the
// running ones), the running update, then the kernels of batch_norm_kernels.cpp.
#include <cmath>

#include "ops/cpu/batch_norm_kernels.hpp"
#include "ops/cpu/norm_numerics.hpp"
#include "ops/cpu/scratch.hpp"
#include "ops/reference/batch_norm.hpp"

namespace addnorm::cpu {
namespace {

// Inference mode's constants: the running mean, and 1 / sqrt(running_var + eps) (NaN at or below
// 0: inference_rstd_of).
void running_constants(const float* running_mean, const float* running_var, float eps,
                       int64_t channels, double* mean, double* rstd) {
  for (int64_t c = 0; c < channels; ++c) {
    mean[c] = running_mean[c];
    rstd[c] = inference_rstd_of(double(running_var[c]), double(eps));
  }
}

}  // namespace

void batch_norm_forward(const BatchNormForward& args) {
  const int64_t channels = args.shape.channels;
  Scratch scratch;
  double* mean = scratch.take<double>(channels);
  double* mean_lo = nullptr;  // the running mean, a float, is exact as it is
  double* rstd = scratch.take<double>(channels);
  // The spread that decides whether a channel fits float32 lanes: the batch's variance in
  // training, the running variance (the spread x is assumed to have) in inference.
  double* variance = scratch.take<double>(channels);
  if (args.training) {
    mean_lo = scratch.take<double>(channels);
    batch_statistics(args.x, args.storage, args.shape, mean, mean_lo, variance);
    for (int64_t c = 0; c < channels; ++c) {
      rstd[c] = rstd_of(variance[c], double(args.eps));
      if (args.running_mean) {
        reference::update_running(args.running_mean[c], args.running_var[c], mean[c], variance[c],
                                  args.shape.batch * args.shape.length, double(args.momentum),
                                  args.convention);
      }
      if (args.saved_mean) {
        args.saved_mean[c] = static_cast<float>(mean[c]);
        args.saved_rstd[c] = static_cast<float>(rstd[c]);
      }
    }
  } else {
    running_constants(args.running_mean, args.running_var, args.eps, channels, mean, rstd);
    for (int64_t c = 0; c < channels; ++c) variance[c] = args.running_var[c];
  }
  batch_normalise(args.x, args.storage, mean, mean_lo, rstd, variance, args.gamma, args.beta,
                  args.y, args.shape);
}

void batch_norm_backward(const BatchNormBackward& args) {
  if (args.training) {
    batch_norm_backward_training(args.dy, args.x, args.dx, args.storage, args.gamma, args.dgamma,
                                 args.dbeta, args.shape, args.eps);
    return;
  }
  Scratch scratch;
  const auto [mean, rstd] = scratch.take_each<double, 2>(args.shape.channels);
  running_constants(args.running_mean, args.running_var, args.eps, args.shape.channels, mean, rstd);
  batch_norm_backward_inference(args.dy, args.x, args.dx, args.storage, args.gamma, mean, rstd,
                                args.dgamma, args.dbeta, args.shape);
}

}  // namespace addnorm::cpu
