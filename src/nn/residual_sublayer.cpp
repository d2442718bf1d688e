// The Add & Norm box for each placement. Forward and backward side by side:
//   pre_norm     out = x + D(s)            dx = dout,               ds = D'(dout); u = N(x)
//   no_norm      out = x + D(s)            dx = dout,               ds = D'(dout)
//   post_norm    out = N(x + D(s))         dh = N'(dout): dx = dh,  ds = D'(dh)
//   deep_norm    out = N(a x + D(s))       dh = N'(dout): dx = a dh, ds = D'(dh)
//   no_residual  out = N(D(s))             dx = 0,                  ds = D'(N'(dout))
//   rezero       out = x + a D(s)          dx = dout, da = <dout, D(s)>, ds = a D'(dout)
//   admin        out = N(w * x + D(s))     dh = N'(dout): dx = w * dh, dw = sum over rows of
//                                          dh * x, ds = D'(dh)   (w per feature)
//   bare         out = D(s)                dx = 0,                  ds = D'(dout)
// where D is dropout and N the norm. For LayerNorm/RMSNorm the post-norm family uses the fused
// add_norm_post (dropout included); BatchNorm composes dropout, add and batch_norm.
#include "residual_sublayer.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "addnorm/error.hpp"
#include "addnorm/nn/linear.hpp"
#include "addnorm/nn/stats.hpp"
#include "addnorm/ops.hpp"

namespace addnorm::nn {

namespace {

bool placement_has_norm(Placement placement) {
  switch (placement) {
    case Placement::pre_norm:
    case Placement::post_norm:
    case Placement::deep_norm:
    case Placement::no_residual:
    case Placement::admin:
      return true;
    case Placement::no_norm:
    case Placement::rezero:
    case Placement::bare:
      return false;
  }
  return false;
}

// The post-norm family: out = N(residual + D(s)), residual = x scaled (or not).
bool post_norm_family(Placement placement) {
  return placement == Placement::post_norm || placement == Placement::deep_norm ||
         placement == Placement::admin;
}

void scale_into(const Tensor& x, float factor, Tensor& out) {
  ensure_shape(out, x.shape());
  const float* in = x.data();
  float* result = out.data();
  for (int64_t i = 0; i < x.numel(); ++i) result[i] = factor * in[i];
}

// out[r, k] = x[r, k] * scale[k]: Admin's per-feature shortcut scale.
void scale_features_into(const Tensor& x, const Tensor& scale, Tensor& out) {
  ensure_shape(out, x.shape());
  const int64_t dim = scale.numel();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = scale[i % dim] * x[i];
}

double variance_of(const Tensor& x) {
  const double std = activation_stats(x.view()).std;
  return std * std;
}

void copy_into(const Tensor& x, Tensor& out) {
  ensure_shape(out, x.shape());
  std::copy(x.values().begin(), x.values().end(), out.values().begin());
}

}  // namespace

ResidualSublayer::ResidualSublayer(const std::string& name, const BlockConfig& config, double alpha,
                                   uint64_t dropout_seed)
    : placement_(config.placement),
      has_norm_(placement_has_norm(config.placement)),
      fused_(post_norm_family(config.placement) && config.norm != NormType::batch_norm),
      deep_alpha_(static_cast<float>(alpha)),
      dropout_(config.dropout, dropout_seed) {
  if (has_norm_) norm_ = Norm(name + ".norm", config.norm, config.d_model, config.eps);
  if (placement_ == Placement::rezero) rezero_alpha_ = Parameter(name + ".alpha", Shape{1});
  if (placement_ == Placement::admin) {
    admin_omega_ = Parameter(name + ".omega", Shape{config.d_model});
    std::fill(admin_omega_.value.values().begin(), admin_omega_.value.values().end(), 1.0f);
  }
}

const Tensor& ResidualSublayer::input(const Tensor& x, bool training) {
  if (placement_ != Placement::pre_norm) return x;
  norm_.forward(x, normed_, training);
  return normed_;
}

void ResidualSublayer::output(const Tensor& x, const Tensor& s, Tensor& out, bool training) {
  ensure_shape(out, x.shape());
  const Shape feature{x.shape()[x.shape().rank() - 1]};
  const int64_t rows = x.numel() / feature[0];
  switch (placement_) {
    case Placement::pre_norm:
    case Placement::no_norm:
      dropout_.forward(s, dropped_, training);
      add(x.view(), dropped_.view(), out.view());
      return;
    case Placement::rezero: {
      dropout_.forward(s, dropped_, training);
      scale_into(dropped_, rezero_alpha_.value[0], scaled_);
      add(x.view(), scaled_.view(), out.view());
      return;
    }
    case Placement::no_residual:
      dropout_.forward(s, dropped_, training);
      norm_.forward(dropped_, out, training);
      return;
    case Placement::bare:
      dropout_.forward(s, out, training);
      return;
    case Placement::post_norm:
    case Placement::deep_norm:
    case Placement::admin: {
      const Tensor* residual = &x;
      if (placement_ == Placement::deep_norm) {
        scale_into(x, deep_alpha_, scaled_);
        residual = &scaled_;
      }
      if (placement_ == Placement::admin) {
        if (admin_ratio_ != nullptr) {
          const auto omega = static_cast<float>(*admin_ratio_);
          std::fill(admin_omega_.value.values().begin(), admin_omega_.value.values().end(), omega);
        }
        scale_features_into(x, admin_omega_.value, scaled_);
        residual = &scaled_;
        if (admin_ratio_ != nullptr)
          *admin_ratio_ = std::sqrt(variance_of(scaled_) + variance_of(s));
      }
      if (fused_) {
        const DropoutOptions options = dropout_.next_options(s.numel(), training);
        add_norm_post(residual->view(), s.view(), feature, out.view(), norm_.norm_options(),
                      options, norm_.stats_for(rows));
      } else {
        dropout_.forward(s, dropped_, training);
        ensure_shape(pre_norm_sum_, x.shape());
        add(residual->view(), dropped_.view(), pre_norm_sum_.view());
        norm_.forward(pre_norm_sum_, out, training);
      }
      return;
    }
  }
}

void ResidualSublayer::output_backward(const Tensor& x, const Tensor& s, const Tensor& dout,
                                       Tensor& dx, Tensor& ds, bool training) {
  ensure_shape(dx, x.shape());
  ensure_shape(ds, s.shape());
  const Shape feature{x.shape()[x.shape().rank() - 1]};
  switch (placement_) {
    case Placement::pre_norm:
    case Placement::no_norm:
      copy_into(dout, dx);
      dropout_.backward(dout, ds);
      return;
    case Placement::rezero: {
      // da = sum(dout * D(s)) in float64, index order; ds = a * D'(dout).
      double dalpha = 0;
      for (int64_t i = 0; i < dout.numel(); ++i) {
        dalpha += static_cast<double>(dout[i]) * static_cast<double>(dropped_[i]);
      }
      rezero_alpha_.grad[0] += static_cast<float>(dalpha);
      copy_into(dout, dx);
      scale_into(dout, rezero_alpha_.value[0], scaled_);
      dropout_.backward(scaled_, ds);
      return;
    }
    case Placement::no_residual:
      norm_.backward(dropped_, dout, dsum_, training);
      dropout_.backward(dsum_, ds);
      std::fill(dx.values().begin(), dx.values().end(), 0.0f);
      return;
    case Placement::bare:
      dropout_.backward(dout, ds);
      std::fill(dx.values().begin(), dx.values().end(), 0.0f);
      return;
    case Placement::post_norm:
    case Placement::deep_norm:
    case Placement::admin: {
      const Tensor& residual = placement_ == Placement::post_norm ? x : scaled_;
      if (fused_) {
        add_norm_post_backward(
            dout.view(), residual.view(), s.view(), feature,
            {dx.view(), ds.view(), norm_.dgamma_scratch().view(),
             norm_.has_beta() ? OptionalMutable(norm_.dbeta_scratch().view()) : OptionalMutable()},
            norm_.norm_options(), dropout_.last_options(), norm_.saved_stats());
        norm_.accumulate_param_grads(norm_.dgamma_scratch(), norm_.dbeta_scratch());
      } else {
        norm_.backward(pre_norm_sum_, dout, dx, training);
        dropout_.backward(dx, ds);
      }
      if (placement_ == Placement::deep_norm) {
        for (float& value : dx.values()) value *= deep_alpha_;
      }
      if (placement_ == Placement::admin) {
        // dx holds dh, the gradient of the norm's input: dw[k] = sum over rows of dh * x (float64,
        // row order), then dx = w * dh.
        const int64_t dim = admin_omega_.value.numel();
        std::vector<double> domega(static_cast<size_t>(dim), 0.0);
        for (int64_t i = 0; i < dx.numel(); ++i) {
          domega[static_cast<size_t>(i % dim)] += static_cast<double>(dx[i]) * x[i];
        }
        for (int64_t k = 0; k < dim; ++k) {
          admin_omega_.grad[k] += static_cast<float>(domega[static_cast<size_t>(k)]);
        }
        scale_features_into(dx, admin_omega_.value, dx);
      }
      return;
    }
  }
}

void ResidualSublayer::input_backward(const Tensor& x, const Tensor& du, Tensor& dx,
                                      bool training) {
  if (placement_ == Placement::pre_norm) {
    norm_.backward(x, du, dnormed_, training);
    add(dx.view(), dnormed_.view(), dx.view());
  } else {
    add(dx.view(), du.view(), dx.view());
  }
}

ParameterList ResidualSublayer::parameters() {
  ParameterList list;
  if (has_norm_) list = norm_.parameters();
  if (placement_ == Placement::rezero) list.push_back(&rezero_alpha_);
  if (placement_ == Placement::admin) list.push_back(&admin_omega_);
  return list;
}

}  // namespace addnorm::nn
