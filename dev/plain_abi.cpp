// The benchmark's plain loop (bench/plain_kernels.*) behind addnorm's C ABI, built as a shared
// library of its own (dev/in_process.py's plain_library), so that dev/alternate.c can call it in
// turn with addnorm's builds in one process: the share of plain measured calls milliseconds
// apart, not runs minutes apart. Only what the loop computes is answered: a row norm over a
// whole number of registers, forward (plain, pre-norm, post-norm at p = 0) and backward from
// saved statistics. Every other call, and every argument outside that, fails with a message
// from addnorm_last_error; nothing is written then.
#include <omp.h>

#include <string>

#include "addnorm/addnorm.h"
#include "plain_kernels.hpp"

namespace {

using addnorm::bench::plain::Call;
using addnorm::bench::plain::Partials;

thread_local std::string last_error;

addnorm_status refuse(const std::string& why) {
  last_error = "plain: " + why;
  return ADDNORM_ERROR_INVALID_ARGUMENT;
}

// The call's rows and dim from x, a [rows, dim] float32 or bfloat16 tensor normalised over its
// last axis; false (and last_error) where the plain loop does not take it.
bool describe(const addnorm_tensor* x, int32_t normalized_ndim, Call& call) {
  if (!x || x->rank != 2 || normalized_ndim != 1) {
    refuse("expected x of rank 2 normalised over its last axis");
    return false;
  }
  if (x->dtype != ADDNORM_FLOAT32 && x->dtype != ADDNORM_BFLOAT16) {
    refuse("expected float32 or bfloat16 x");
    return false;
  }
  call.bf16 = x->dtype == ADDNORM_BFLOAT16;
  call.rows = x->shape[0];
  call.dim = x->shape[1];
  if (call.dim % 16 != 0) {
    refuse("expected a row length of whole AVX-512 registers (a multiple of 16)");
    return false;
  }
  return true;
}

const float* floats(const addnorm_tensor* t) {
  return t ? static_cast<const float*>(t->data) : nullptr;
}
float* writable(const addnorm_tensor* t) {
  return t ? static_cast<float*>(t->data) : nullptr;
}

addnorm_status norm(const addnorm_tensor* x, const addnorm_tensor* r, int32_t normalized_ndim,
                    bool rms, const addnorm_tensor* gamma, const addnorm_tensor* beta, double eps,
                    const addnorm_tensor* h, const addnorm_tensor* y, const addnorm_tensor* mean,
                    const addnorm_tensor* rstd) {
  Call call;
  if (!describe(x, normalized_ndim, call)) return ADDNORM_ERROR_INVALID_ARGUMENT;
  if (!gamma || !y || !rstd || (!rms && (!beta || !mean))) {
    return refuse("expected gamma, y and rstd (and beta and mean for LayerNorm)");
  }
  call.rms = rms;
  call.eps = static_cast<float>(eps);
  addnorm::bench::plain::forward(call, x->data, r ? r->data : nullptr, floats(gamma), floats(beta),
                                 h ? h->data : nullptr, y->data, writable(mean), writable(rstd));
  return ADDNORM_OK;
}

addnorm_status norm_backward(const addnorm_tensor* dy, const addnorm_tensor* x,
                             int32_t normalized_ndim, bool rms, const addnorm_tensor* gamma,
                             const addnorm_tensor* saved_mean, const addnorm_tensor* saved_rstd,
                             const addnorm_tensor* dx, const addnorm_tensor* dgamma,
                             const addnorm_tensor* dbeta) {
  Call call;
  if (!describe(x, normalized_ndim, call)) return ADDNORM_ERROR_INVALID_ARGUMENT;
  if (!dy || !gamma || !saved_rstd || !dx || !dgamma || (!rms && (!saved_mean || !dbeta))) {
    return refuse("expected dy, gamma, the saved statistics, dx and dgamma (and dbeta)");
  }
  call.rms = rms;
  thread_local Partials partials(1, 0);
  const int threads = omp_get_max_threads();
  if (partials.dim != call.dim ||
      partials.values.size() < static_cast<size_t>(threads) * 2 * call.dim) {
    partials = Partials(threads, call.dim);
  }
  addnorm::bench::plain::backward(call, dy->data, x->data, floats(gamma), floats(saved_mean),
                                  floats(saved_rstd), dx->data, writable(dgamma), writable(dbeta),
                                  partials);
  return ADDNORM_OK;
}

}  // namespace

extern "C" {

const char* addnorm_last_error(void) {
  return last_error.c_str();
}

addnorm_status addnorm_layer_norm(const addnorm_tensor* x, int32_t normalized_ndim,
                                  const addnorm_tensor* gamma, const addnorm_tensor* beta,
                                  double eps, const addnorm_tensor* y, const addnorm_tensor* mean,
                                  const addnorm_tensor* rstd) {
  return norm(x, nullptr, normalized_ndim, false, gamma, beta, eps, nullptr, y, mean, rstd);
}

addnorm_status addnorm_rms_norm(const addnorm_tensor* x, int32_t normalized_ndim,
                                const addnorm_tensor* gamma, int32_t zero_centered_gamma,
                                double eps, const addnorm_tensor* y, const addnorm_tensor* rstd) {
  if (zero_centered_gamma) return refuse("expected no zero-centred gamma");
  return norm(x, nullptr, normalized_ndim, true, gamma, nullptr, eps, nullptr, y, nullptr, rstd);
}

addnorm_status addnorm_add_norm_pre(const addnorm_tensor* x, const addnorm_tensor* r,
                                    int32_t normalized_ndim, int32_t norm_kind,
                                    const addnorm_tensor* gamma, const addnorm_tensor* beta,
                                    int32_t zero_centered_gamma, double eps,
                                    const addnorm_tensor* h, const addnorm_tensor* y,
                                    const addnorm_tensor* mean, const addnorm_tensor* rstd) {
  if (zero_centered_gamma) return refuse("expected no zero-centred gamma");
  if (!r || !h) return refuse("expected r and h");
  return norm(x, r, normalized_ndim, norm_kind == ADDNORM_RMS_NORM, gamma, beta, eps, h, y, mean,
              rstd);
}

addnorm_status addnorm_add_norm_post(const addnorm_tensor* x, const addnorm_tensor* s,
                                     int32_t normalized_ndim, int32_t norm_kind,
                                     const addnorm_tensor* gamma, const addnorm_tensor* beta,
                                     int32_t zero_centered_gamma, double eps, double p,
                                     uint64_t /*seed*/, uint64_t /*offset*/,
                                     const addnorm_tensor* y, const addnorm_tensor* mean,
                                     const addnorm_tensor* rstd) {
  if (p != 0) return refuse("expected p = 0 (the plain loop has no dropout)");
  if (zero_centered_gamma) return refuse("expected no zero-centred gamma");
  if (!s) return refuse("expected s");
  return norm(x, s, normalized_ndim, norm_kind == ADDNORM_RMS_NORM, gamma, beta, eps, nullptr, y,
              mean, rstd);
}

addnorm_status addnorm_layer_norm_backward(const addnorm_tensor* dy, const addnorm_tensor* x,
                                           int32_t normalized_ndim, const addnorm_tensor* gamma,
                                           const addnorm_tensor* /*beta*/, double /*eps*/,
                                           const addnorm_tensor* saved_mean,
                                           const addnorm_tensor* saved_rstd,
                                           const addnorm_tensor* dx, const addnorm_tensor* dgamma,
                                           const addnorm_tensor* dbeta) {
  return norm_backward(dy, x, normalized_ndim, false, gamma, saved_mean, saved_rstd, dx, dgamma,
                       dbeta);
}

addnorm_status addnorm_rms_norm_backward(const addnorm_tensor* dy, const addnorm_tensor* x,
                                         int32_t normalized_ndim, const addnorm_tensor* gamma,
                                         int32_t zero_centered_gamma, double /*eps*/,
                                         const addnorm_tensor* saved_rstd, const addnorm_tensor* dx,
                                         const addnorm_tensor* dgamma) {
  if (zero_centered_gamma) return refuse("expected no zero-centred gamma");
  return norm_backward(dy, x, normalized_ndim, true, gamma, nullptr, saved_rstd, dx, dgamma,
                       nullptr);
}

// BatchNorm is judged by its byte model, not by a plain loop: dev/alternate.c finds these
// symbols, and a call refuses.
addnorm_status addnorm_batch_norm(const addnorm_tensor*, const addnorm_tensor*,
                                  const addnorm_tensor*, int32_t, double, int32_t, double, int32_t,
                                  const addnorm_tensor*, const addnorm_tensor*,
                                  const addnorm_tensor*, const addnorm_tensor*,
                                  const addnorm_tensor*) {
  return refuse("no BatchNorm (judged by its byte model)");
}

addnorm_status addnorm_batch_norm_backward(const addnorm_tensor*, const addnorm_tensor*,
                                           const addnorm_tensor*, const addnorm_tensor*, int32_t,
                                           double, int32_t, const addnorm_tensor*,
                                           const addnorm_tensor*, const addnorm_tensor*,
                                           const addnorm_tensor*, const addnorm_tensor*) {
  return refuse("no BatchNorm (judged by its byte model)");
}

}  // extern "C"
