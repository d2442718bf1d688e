// A normalisation layer over the feature (last) axis: LayerNorm, RMSNorm, or BatchNorm with the
// tokens as the batch (every token of every sequence, padding included, shares the statistics).
// All arithmetic is addnorm's ops; this class only owns the parameters and saved statistics.
#pragma once

#include <cstdint>
#include <string>

#include "addnorm/nn/parameter.hpp"
#include "addnorm/ops.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm::nn {

enum class NormType { layer_norm, rms_norm, batch_norm };

const char* norm_type_name(NormType type);          // "layer_norm", "rms_norm", "batch_norm"
NormType parse_norm_type(const std::string& name);  // throws Error naming the accepted names

class Norm {
 public:
  Norm() = default;
  // gamma = 1, beta = 0 (beta exists for LayerNorm and BatchNorm only).
  Norm(const std::string& name, NormType type, int64_t dim, float eps);

  NormType type() const { return type_; }
  // Whether a layer of `type` has beta: the one switch over NormType for it.
  static bool has_beta(NormType type);
  bool has_beta() const { return has_beta(type_); }
  int64_t dim() const { return dim_; }
  float eps() const { return eps_; }

  // y = Norm(x) over the last axis of x [..., dim]; saves the statistics for backward. BatchNorm
  // in training mode uses the batch statistics and updates the running ones; in inference mode
  // it uses the running statistics.
  void forward(const Tensor& x, Tensor& y, bool training);
  // dx from dy (x is the forward's input); accumulates dgamma, dbeta.
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx, bool training);

  // The norm's description (layer_norm or rms_norm only) with this layer's gamma, beta and
  // eps, for the plain and the fused ops alike.
  NormOptions norm_options() const;
  // The fused ops write dgamma/dbeta into scratch; this adds them to the parameters' grads.
  void accumulate_param_grads(const Tensor& dgamma, const Tensor& dbeta);
  // Scratch the fused backward can write dgamma/dbeta into (shape [dim]).
  Tensor& dgamma_scratch() { return dgamma_scratch_; }
  Tensor& dbeta_scratch() { return dbeta_scratch_; }
  // Row statistics buffers the forward fills (mean and rstd, one per row).
  std::optional<NormStats> stats_for(int64_t rows);
  std::optional<SavedStats> saved_stats() const;

  ParameterList parameters();

  Parameter gamma;      // [dim]
  Parameter beta;       // [dim] for LayerNorm and BatchNorm; empty for RMSNorm
  Tensor running_mean;  // BatchNorm only, [dim]
  Tensor running_var;   // BatchNorm only, [dim]

 private:
  // A batch_norm layer's BatchNorm options (gamma, beta and eps), in training or inference mode.
  BatchNormOptions batch_norm_options(bool training) const;

  NormType type_ = NormType::layer_norm;
  int64_t dim_ = 0;
  float eps_ = 1e-5f;
  Tensor mean_, rstd_;  // per row (per feature for BatchNorm), from the last forward
  Tensor dgamma_scratch_, dbeta_scratch_;
};

}  // namespace addnorm::nn
