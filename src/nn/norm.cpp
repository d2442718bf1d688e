// The Norm layer: parameters and saved statistics around addnorm's layer_norm, rms_norm and
// batch_norm (tokens as the batch: x [..., d] is viewed as [rows, d] with d the channel axis).
#include "addnorm/nn/norm.hpp"

#include <algorithm>
#include <string>

#include "addnorm/error.hpp"
#include "addnorm/nn/linear.hpp"

namespace addnorm::nn {

const char* norm_type_name(NormType type) {
  switch (type) {
    case NormType::layer_norm:
      return "layer_norm";
    case NormType::rms_norm:
      return "rms_norm";
    case NormType::batch_norm:
      return "batch_norm";
  }
  return "?";
}

NormType parse_norm_type(const std::string& name) {
  if (name == "layer_norm" || name == "layernorm" || name == "ln") return NormType::layer_norm;
  if (name == "rms_norm" || name == "rmsnorm" || name == "rms") return NormType::rms_norm;
  if (name == "batch_norm" || name == "batchnorm" || name == "bn") return NormType::batch_norm;
  throw Error("norm is \"" + name + "\", expected one of layer_norm, rms_norm, batch_norm");
}

bool Norm::has_beta(NormType type) {
  switch (type) {
    case NormType::layer_norm:
      return norm_traits(NormKind::layer_norm).has_shift;
    case NormType::rms_norm:
      return norm_traits(NormKind::rms_norm).has_shift;
    case NormType::batch_norm:
      return true;
  }
  return true;
}

Norm::Norm(const std::string& name, NormType type, int64_t dim, float eps)
    : gamma(name + ".gamma", Shape{dim}),
      beta(has_beta(type) ? Parameter(name + ".beta", Shape{dim}) : Parameter()),
      type_(type),
      dim_(dim),
      eps_(eps),
      dgamma_scratch_(Shape{dim}),
      dbeta_scratch_(Shape{dim}) {
  std::fill(gamma.value.values().begin(), gamma.value.values().end(), 1.0f);
  if (type == NormType::batch_norm) {
    running_mean = Tensor(Shape{dim});
    running_var = Tensor(Shape{dim}, std::vector<float>(static_cast<size_t>(dim), 1.0f));
  }
}

namespace {

Shape as_rows(const Tensor& x, int64_t dim) {
  return Shape{x.numel() / dim, dim};
}

void add_into(Tensor& target, const Tensor& source) {
  float* out = target.data();
  const float* in = source.data();
  for (int64_t i = 0; i < target.numel(); ++i) out[i] += in[i];
}

}  // namespace

NormOptions Norm::norm_options() const {
  NormOptions options;
  switch (type_) {
    case NormType::layer_norm:
      options.norm = NormKind::layer_norm;
      break;
    case NormType::rms_norm:
      options.norm = NormKind::rms_norm;
      break;
    case NormType::batch_norm:
      throw Error("a batch_norm layer has no row-norm description (it normalises over the batch)");
  }
  options.gamma = gamma.value.view();
  if (has_beta()) options.beta = beta.value.view();
  options.eps = eps_;
  return options;
}

BatchNormOptions Norm::batch_norm_options(bool training) const {
  if (type_ != NormType::batch_norm) {
    throw Error(std::string("a ") + norm_type_name(type_) +
                " layer has no BatchNorm options (it normalises each row)");
  }
  BatchNormOptions options;
  options.gamma = gamma.value.view();
  options.beta = beta.value.view();
  options.training = training;
  options.eps = eps_;
  return options;
}

std::optional<NormStats> Norm::stats_for(int64_t rows) {
  ensure_shape(mean_, Shape{rows});
  ensure_shape(rstd_, Shape{rows});
  return NormStats{mean_.view(), rstd_.view()};
}

std::optional<SavedStats> Norm::saved_stats() const {
  return SavedStats{mean_.view(), rstd_.view()};
}

void Norm::accumulate_param_grads(const Tensor& dgamma, const Tensor& dbeta) {
  add_into(gamma.grad, dgamma);
  if (has_beta()) add_into(beta.grad, dbeta);
}

void Norm::forward(const Tensor& x, Tensor& y, bool training) {
  if (x.shape().rank() < 1 || x.shape()[x.shape().rank() - 1] != dim_) {
    throw Error(gamma.name + ": x has shape " + x.shape().to_string() + ", expected last dim " +
                std::to_string(dim_));
  }
  ensure_shape(y, x.shape());
  const int64_t rows = x.numel() / dim_;
  const Shape feature{dim_};
  switch (type_) {
    case NormType::layer_norm:
    case NormType::rms_norm: {
      norm(x.view(), feature, y.view(), norm_options(), stats_for(rows));
      break;
    }
    case NormType::batch_norm: {
      const BatchNormOptions options = batch_norm_options(training);
      const Shape rows_shape = as_rows(x, dim_);
      batch_norm(ConstView{x.data(), rows_shape}, MutableView{y.data(), rows_shape}, options,
                 RunningStats{running_mean.view(), running_var.view()});
      break;
    }
  }
}

void Norm::backward(const Tensor& x, const Tensor& dy, Tensor& dx, bool training) {
  ensure_shape(dx, x.shape());
  const Shape feature{dim_};
  switch (type_) {
    case NormType::layer_norm:
    case NormType::rms_norm: {
      const OptionalMutable dbeta =
          has_beta() ? OptionalMutable(dbeta_scratch_.view()) : std::nullopt;
      norm_backward(dy.view(), x.view(), feature, {dx.view(), dgamma_scratch_.view(), dbeta},
                    norm_options(), saved_stats());
      break;
    }
    case NormType::batch_norm: {
      const BatchNormOptions options = batch_norm_options(training);
      const Shape rows_shape = as_rows(x, dim_);
      batch_norm_backward(
          ConstView{dy.data(), rows_shape}, ConstView{x.data(), rows_shape},
          {MutableView{dx.data(), rows_shape}, dgamma_scratch_.view(), dbeta_scratch_.view()},
          options, RunningStats{running_mean.view(), running_var.view()});
      break;
    }
  }
  accumulate_param_grads(dgamma_scratch_, dbeta_scratch_);
}

ParameterList Norm::parameters() {
  ParameterList list{&gamma};
  if (has_beta()) list.push_back(&beta);
  return list;
}

}  // namespace addnorm::nn
