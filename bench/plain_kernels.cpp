// The kernels of "plain", the straightforward SIMD loop of each op, the physical reference the
// speed targets are ratios to (docs/performance.md): the benchmark's implementation `plain`
// (impl_plain.cpp) and dev/plain_abi.cpp (the same loop behind the C ABI, which ab.py
// --in-process times in the same process as addnorm). Per row, two passes: the statistics in
// float32 lanes (the sum and the sum of squares together), then the output, streamed when the
// tensor is larger than the cache (addnorm's own rule, kernels.hpp); rows split over OpenMP
// threads; the backward's dgamma/dbeta in per-thread float32 partials. bfloat16 is the same loop
// with the conversions (a shift to widen, round-to-nearest-even by integer operations to narrow).
// Nothing here is more accurate than it must be: that is the point of the comparison.
// impl_plain.cpp's check_plain() holds each op against the float64 reference at a loose tolerance,
// so it cannot win by computing less.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "plain_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"

#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace addnorm::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using DU16 = hn::Rebind<uint16_t, DF>;

// Loading and storing a row in float32 or as bfloat16 bits.
struct F32 {
  using T = float;
  static hn::Vec<DF> load(const float* p) { return hn::LoadU(DF(), p); }
  static void store(hn::Vec<DF> v, float* p, bool stream) {
    if (stream) {
      hn::Stream(v, DF(), p);
    } else {
      hn::StoreU(v, DF(), p);
    }
  }
};
struct BF16 {
  using T = uint16_t;
  static hn::Vec<DF> load(const uint16_t* p) {
    return hn::BitCast(DF(), hn::ShiftLeft<16>(hn::PromoteTo(DU(), hn::LoadU(DU16(), p))));
  }
  static void store(hn::Vec<DF> v, uint16_t* p, bool) {
    const DU du;
    const auto bits = hn::BitCast(du, v);
    const auto odd = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1));
    const auto rounded = hn::Add(bits, hn::Add(hn::Set(du, 0x7FFF), odd));
    // The top halves, at most 0xFFFF: a saturating demotion from int32 keeps them as they are.
    const hn::RebindToSigned<DF> di;
    hn::StoreU(hn::DemoteTo(DU16(), hn::BitCast(di, hn::ShiftRight<16>(rounded))), DU16(), p);
  }
};

// Rows [begin, end) of one op. dim is a multiple of the lane count (the benchmark's dims are);
// a row streams only when its start is aligned.
template <class S>
void layer_norm_rows(const typename S::T* x, const typename S::T* r, const float* gamma,
                     const float* beta, typename S::T* h, typename S::T* y, float* mean_out,
                     float* rstd_out, int64_t begin, int64_t end, int64_t dim, float eps, bool rms,
                     bool stream) {
  const DF df;
  const auto n = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t row = begin; row < end; ++row) {
    const int64_t at = row * dim;
    const bool aligned = stream && (reinterpret_cast<uintptr_t>(y + at) % 64 == 0);
    const bool h_aligned = stream && h && (reinterpret_cast<uintptr_t>(h + at) % 64 == 0);
    auto sum = hn::Zero(df), squares = hn::Zero(df);
    for (int64_t i = 0; i < dim; i += n) {
      auto v = S::load(x + at + i);
      if (r) {
        v = hn::Add(v, S::load(r + at + i));
        if (h) S::store(v, h + at + i, h_aligned);
      }
      sum = hn::Add(sum, v);
      squares = hn::MulAdd(v, v, squares);
    }
    const float mean = rms ? 0.0f : hn::GetLane(hn::SumOfLanes(df, sum)) / float(dim);
    const float mean_square = hn::GetLane(hn::SumOfLanes(df, squares)) / float(dim);
    const float rstd = 1.0f / std::sqrt(mean_square - mean * mean + eps);
    const auto mean_v = hn::Set(df, mean), rstd_v = hn::Set(df, rstd);
    for (int64_t i = 0; i < dim; i += n) {
      auto v = S::load(x + at + i);
      if (r) v = hn::Add(v, S::load(r + at + i));
      auto out = hn::Mul(hn::Mul(hn::Sub(v, mean_v), rstd_v), hn::LoadU(df, gamma + i));
      if (beta) out = hn::Add(out, hn::LoadU(df, beta + i));
      S::store(out, y + at + i, aligned);
    }
    if (mean_out) mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

template <class S>
void layer_norm_backward_rows(const typename S::T* dy, const typename S::T* x, const float* gamma,
                              const float* mean, const float* rstd, typename S::T* dx,
                              float* dgamma, float* dbeta, int64_t begin, int64_t end, int64_t dim,
                              bool rms, bool stream) {
  const DF df;
  const auto n = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t row = begin; row < end; ++row) {
    const int64_t at = row * dim;
    const bool aligned = stream && (reinterpret_cast<uintptr_t>(dx + at) % 64 == 0);
    const auto mean_v = hn::Set(df, rms ? 0.0f : mean[row]);
    const auto rstd_v = hn::Set(df, rstd[row]);
    auto sum_g = hn::Zero(df), sum_g_x_hat = hn::Zero(df);
    for (int64_t i = 0; i < dim; i += n) {
      const auto d = S::load(dy + at + i);
      const auto x_hat = hn::Mul(hn::Sub(S::load(x + at + i), mean_v), rstd_v);
      const auto g = hn::Mul(d, hn::LoadU(df, gamma + i));
      sum_g = hn::Add(sum_g, g);
      sum_g_x_hat = hn::MulAdd(g, x_hat, sum_g_x_hat);
      hn::StoreU(hn::MulAdd(d, x_hat, hn::LoadU(df, dgamma + i)), df, dgamma + i);
      if (dbeta) hn::StoreU(hn::Add(d, hn::LoadU(df, dbeta + i)), df, dbeta + i);
    }
    const auto count = static_cast<float>(dim);
    const auto mean_g = hn::Set(df, rms ? 0.0f : hn::GetLane(hn::SumOfLanes(df, sum_g)) / count);
    const auto mean_g_x_hat = hn::Set(df, hn::GetLane(hn::SumOfLanes(df, sum_g_x_hat)) / count);
    for (int64_t i = 0; i < dim; i += n) {
      const auto x_hat = hn::Mul(hn::Sub(S::load(x + at + i), mean_v), rstd_v);
      const auto g = hn::Mul(S::load(dy + at + i), hn::LoadU(df, gamma + i));
      const auto centred = hn::NegMulAdd(x_hat, mean_g_x_hat, hn::Sub(g, mean_g));
      S::store(hn::Mul(centred, rstd_v), dx + at + i, aligned);
    }
  }
}

void forward_f32(const float* x, const float* r, const float* gamma, const float* beta, float* h,
                 float* y, float* mean, float* rstd, int64_t begin, int64_t end, int64_t dim,
                 float eps, bool rms, bool stream) {
  layer_norm_rows<F32>(x, r, gamma, beta, h, y, mean, rstd, begin, end, dim, eps, rms, stream);
}
void forward_bf16(const uint16_t* x, const uint16_t* r, const float* gamma, const float* beta,
                  uint16_t* h, uint16_t* y, float* mean, float* rstd, int64_t begin, int64_t end,
                  int64_t dim, float eps, bool rms, bool stream) {
  layer_norm_rows<BF16>(x, r, gamma, beta, h, y, mean, rstd, begin, end, dim, eps, rms, stream);
}
void backward_f32(const float* dy, const float* x, const float* gamma, const float* mean,
                  const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t begin,
                  int64_t end, int64_t dim, bool rms, bool stream) {
  layer_norm_backward_rows<F32>(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, begin, end, dim, rms,
                                stream);
}
void backward_bf16(const uint16_t* dy, const uint16_t* x, const float* gamma, const float* mean,
                   const float* rstd, uint16_t* dx, float* dgamma, float* dbeta, int64_t begin,
                   int64_t end, int64_t dim, bool rms, bool stream) {
  layer_norm_backward_rows<BF16>(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, begin, end, dim, rms,
                                 stream);
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <omp.h>

#include <algorithm>

#include "plain_kernels.hpp"

namespace addnorm::bench {

HWY_EXPORT(forward_f32);
HWY_EXPORT(forward_bf16);
HWY_EXPORT(backward_f32);
HWY_EXPORT(backward_bf16);

namespace plain {
namespace {

// addnorm's rule (src/ops/cpu/kernels.hpp): outputs of 8 MiB and more are streamed.
bool streams(int64_t elements, int64_t bytes_per_element) {
  return elements * bytes_per_element >= (int64_t{8} << 20);
}

}  // namespace

Partials::Partials(int threads, int64_t width)
    : dim(width), values(size_t(threads) * 2 * size_t(width)) {}

void forward(const Call& call, const void* x, const void* r, const float* gamma, const float* beta,
             void* h, void* y, float* mean, float* rstd) {
  const bool stream = streams(call.rows * call.dim, call.bf16 ? 2 : 4);
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    const int64_t begin = call.rows * thread / threads, end = call.rows * (thread + 1) / threads;
    const float* b = call.rms ? nullptr : beta;
    float* m = call.rms ? nullptr : mean;
    if (call.bf16) {
      HWY_DYNAMIC_DISPATCH(forward_bf16)
      (static_cast<const uint16_t*>(x), static_cast<const uint16_t*>(r), gamma, b,
       static_cast<uint16_t*>(h), static_cast<uint16_t*>(y), m, rstd, begin, end, call.dim,
       call.eps, call.rms, stream);
    } else {
      HWY_DYNAMIC_DISPATCH(forward_f32)
      (static_cast<const float*>(x), static_cast<const float*>(r), gamma, b, static_cast<float*>(h),
       static_cast<float*>(y), m, rstd, begin, end, call.dim, call.eps, call.rms, stream);
    }
  }
}

void backward(const Call& call, const void* dy, const void* x, const float* gamma,
              const float* mean, const float* rstd, void* dx, float* dgamma, float* dbeta,
              Partials& partials) {
  const bool stream = streams(call.rows * call.dim, call.bf16 ? 2 : 4);
  int threads_used = 1;
#pragma omp parallel
  {
    const int threads = omp_get_num_threads(), thread = omp_get_thread_num();
#pragma omp single
    threads_used = threads;
    float* dg = partials.part(thread, 0);
    float* db = call.rms ? nullptr : partials.part(thread, 1);
    std::fill(dg, dg + call.dim, 0.0f);
    if (db) std::fill(db, db + call.dim, 0.0f);
    const int64_t begin = call.rows * thread / threads, end = call.rows * (thread + 1) / threads;
    if (call.bf16) {
      HWY_DYNAMIC_DISPATCH(backward_bf16)
      (static_cast<const uint16_t*>(dy), static_cast<const uint16_t*>(x), gamma, mean, rstd,
       static_cast<uint16_t*>(dx), dg, db, begin, end, call.dim, call.rms, stream);
    } else {
      HWY_DYNAMIC_DISPATCH(backward_f32)
      (static_cast<const float*>(dy), static_cast<const float*>(x), gamma, mean, rstd,
       static_cast<float*>(dx), dg, db, begin, end, call.dim, call.rms, stream);
    }
  }
  for (int64_t i = 0; i < call.dim; ++i) {
    float a = 0, b = 0;
    for (int t = 0; t < threads_used; ++t) {
      a += partials.part(t, 0)[i];
      if (!call.rms) b += partials.part(t, 1)[i];
    }
    dgamma[i] = a;
    if (!call.rms) dbeta[i] = b;
  }
}

}  // namespace plain
}  // namespace addnorm::bench
#endif  // HWY_ONCE
