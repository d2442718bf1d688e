// Per-target SIMD kernels for BatchNorm over x viewed as [batch, channels, length], and their
// run-time dispatch. Highway compiles the HWY_NAMESPACE part once per x86-64 target; the HWY_ONCE
// part picks the best target for this CPU, spreads samples over OpenMP threads and does the
// per-channel arithmetic (a few operations per channel, not per element).
//
// Vectors run across channels when length = 1 (x is [N, C]: neighbouring floats are neighbouring
// channels, and the per-channel sums and constants are loaded as vectors) and along the length
// otherwise (one channel's run of `length` floats, with its constants broadcast). With length 1
// each pass walks several distant parts of x at once, a vector of each in turn (kBatchNormStreams);
// with length > 1 memory is walked in order, one sample [channels, length] after another.
//
// Numerics (docs/numerics.md): per-channel sums accumulate in float64 lanes as d = x - shift with
// the channel's first value as shift; each fixed chunk of the batch sums its samples in order and
// the chunks are added in chunk order, so results are bitwise identical for any thread count.
// The normalise pass runs in float32 lanes with mean and rstd split into hi + lo float32 parts,
// as norm_forward-inl.h's normalise_row does; backwards compute dx in float64 lanes, rounded once
// to float32. x, y, dy and dx share one storage type (row_storage-inl.h's policies): a 16-bit
// value is widened exactly on load, and an output rounded from that float32 result on store.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/batch_norm_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "ops/cpu/batch_norm_kernels.hpp"
#include "ops/cpu/lane_ops-inl.h"
#include "ops/cpu/row_storage-inl.h"
#include "ops/cpu/shifted_sums-inl.h"
#include "ops/cpu/tuning.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <type_traits>

#include "hwy/cache_control.h"

// Per-channel tables handed from the dispatching code to every target's kernels. Defined once:
// foreach_target.h includes this file again for each target.
#ifndef ADDNORM_BATCH_NORM_KERNELS_TABLES
#define ADDNORM_BATCH_NORM_KERNELS_TABLES
namespace addnorm::cpu {

// How far the float32 tables of NormaliseTables run past the last channel, repeating the first
// channels: a vector of (N, C) input starting at channel c then reads its constants with one
// load from c, even when it runs on into the next sample (or several: C may be below the width).
inline constexpr int64_t kTablePadding = 64;

// The forward's per-channel constants. The float32 lanes use the hi + lo split of centre (the
// mean, NaN for a channel to poison) and of rstd; gamma is 1 and beta 0 when absent. These six
// hold C + kTablePadding entries, entry c being channel c % C. A channel flagged `wide` is
// normalised in float64 lanes from `centre` and `scale` instead: one with rstd >= 2^64, whose
// split would not survive float32, or with |mean| >= 2^100, where x - mean_hi could overflow
// float32 (any x - mean_hi with |mean_hi| < 2^100 rounds to at most FLT_MAX).
struct NormaliseTables {
  const float* centre_hi;
  const float* centre_lo;
  const float* rstd_hi;
  const float* rstd_lo;
  const float* gamma;
  const float* beta;
  const double* centre;
  const double* centre_low;  // the mean's low part (RowMoments, norm_numerics.hpp)
  const double* scale;
  const uint8_t* wide;
  bool any_wide;
};

// The training backward's per-chunk float64 sums over d = x - shift.
struct BackwardSums {
  double* d;
  double* d2;
  double* dy;
  double* dy_d;
};

// The passes over (N, C) input walk kBatchNormStreams distant stretches of it in
// lock-step, a vector of each in turn: the normalising pass and the backward's pass 2 stretches
// of their range, the statistics and the backward's pass 1 chunks of the batch (for C < 512:
// across_chunks). One stretch at a time ran at half the speed from memory: with six table loads
// and the arithmetic to each vector of x, too few cache lines were in flight (docs/performance.md,
// "Tunables: what was tried").
inline constexpr int kBatchNormStreams = static_cast<int>(tuned("kBatchNormStreams", 4));
static_assert(kBatchNormStreams >= 1, "at least one stretch");

struct SampleRange {
  int64_t begin, end;
};

// A chunk of the batch and the per-channel float64 sums it adds its samples into, in order:
// the statistics' sum(d) and sum(d^2) in the first two, the backward's BackwardSums in order.
struct SumsChunk {
  SampleRange samples;
  double* sums[4];
};

}  // namespace addnorm::cpu
#endif  // ADDNORM_BATCH_NORM_KERNELS_TABLES

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Samples are taken this many at a time when length = 1, so that each vector of per-channel
// sums or constants is loaded once for four rows of x rather than once per row. The sums still
// receive the samples one by one in order.
constexpr int kSampleGroup = 4;

// The length-1 skeleton: body(first_sample, std::integral_constant<int, rows>{}) over samples
// [begin, end), kGroup samples at a time and then one at a time, in order.
template <int kGroup = kSampleGroup, class Body>
void for_sample_groups(int64_t begin, int64_t end, const Body& body) {
  int64_t n = begin;
  for (; n + kGroup <= end; n += kGroup) {
    body(n, std::integral_constant<int, kGroup>{});
  }
  for (; n < end; ++n) body(n, std::integral_constant<int, 1>{});
}

// The passes over x prefetch ahead per stream of rows: kPrefetchFloats (shifted_sums-inl.h), or
// a fold's own distance (ChannelSums, ChannelBackwardSums).
// The hardware prefetcher alone left the statistics pass well below the read bandwidth: the
// float64 work per cache line keeps too few lines in flight.

// x, y, dy and dx are rows of one storage policy S (row_storage-inl.h): float32, or the bits of
// a 16-bit type, widened exactly on load and rounded once on store.
template <class S>
using Stored = typename S::Elem;

// Half a register of values from p widened to float32, for promotion to float64 lanes.
template <class S>
HWY_INLINE hn::Vec<HalfFloatTag> widened(const Stored<S>* HWY_RESTRICT p) {
  return load<S>(HalfFloatTag(), p);
}

// An output vector. 16-bit outputs are never streamed: the dispatch passes stream = false for
// them (batch_norm_kernels.hpp says why).
template <class S, class D, class V>
HWY_INLINE void store_output(V v, D d, Stored<S>* HWY_RESTRICT out, bool stream) {
  if constexpr (S::kHalf) {
    store<S>(d, v, out);
  } else if (stream) {
    hn::Stream(v, d, out);
  } else {
    hn::StoreU(v, d, out);
  }
}

// ---- Statistics --------------------------------------------------------------------------

// How far ahead a pass that walks kRows samples `stride` floats apart a vector of channels at a
// time prefetches from channel c: kDistance elements on in the same sample, or, within that
// distance of the sample's end, the same distance on in the same sample of the next group (kRows
// samples further), which is what the pass reads next there. Prefetching past the end instead
// (into the group's next sample, already being read) left the end of every sample unprefetched.
template <int kRows, int64_t kDistance = kPrefetchFloats>
int64_t group_prefetch_ahead(int64_t c, int64_t channels, int64_t stride) {
  return kDistance + (c + kDistance >= channels ? (kRows - 1) * stride : 0);
}

// The length-1 skeleton (BatchNorm over (N, C)) that the statistics and the backward's pass 1
// share: kRows samples of [channels], `stride` floats apart, from each of kFolds chunks, folded
// channel-wise into each chunk's float64 sums by its `Fold` (ChannelSums, ChannelBackwardSums):
// a vector of channels at a time, the accumulators in registers across the samples, then the
// channels short of a vector. Each chunk receives its samples in order.
// Each load prefetches (group_prefetch_ahead) Fold::kPrefetch elements ahead in its sample.
template <int kRows, int kFolds, class Fold>
void across_channels(const Fold (&folds)[kFolds], int64_t stride, int64_t channels) {
  walk_lanes(
      DoubleTag(), 0, channels,
      [&](int64_t c) ADDNORM_LANE_BODY {
        typename Fold::Acc sums[kFolds];
        for (int f = 0; f < kFolds; ++f) sums[f] = folds[f].load(c);
        const int64_t ahead = group_prefetch_ahead<kRows, Fold::kPrefetch>(c, channels, stride);
        for (int r = 0; r < kRows; ++r) {
          for (int f = 0; f < kFolds; ++f) folds[f].add(sums[f], r * stride + c, ahead);
        }
        for (int f = 0; f < kFolds; ++f) folds[f].store(sums[f], c);
      },
      [&](int64_t c) ADDNORM_LANE_BODY {
        for (int f = 0; f < kFolds; ++f) {
          for (int r = 0; r < kRows; ++r) folds[f].add_one(r * stride + c, c);
        }
      });
}

// How the statistics and the backward's pass 1 walk (N, C) input. A sample shorter than
// kLockStepMaxSampleBytes (2 KiB, C < 512) is folded kSampleGroup samples at a time
// from kBatchNormStreams chunks in lock-step: the samples of one group are in effect one stream of
// x, and four chunks make four. Longer samples are folded Fold::kLongGroup at a time from one
// chunk: each sample is a stream of its own (two in the backward, x and dy), and a larger group
// loads and stores the per-channel accumulators (which no longer stay in L1 beside the data) less
// often. The statistics take 8 samples (8 streams), the backward 4 (8 streams). The size counts
// float32 bytes whatever the storage (C < 512 for 16-bit samples too), as measured on float32;
// the 16-bit passes have not been tuned apart.
inline constexpr int64_t kLockStepMaxSampleBytes = tuned("kLockStepMaxSampleBytes", 2048);
inline bool lock_step_chunks(int64_t channels) {
  return channels * int64_t{sizeof(float)} < kLockStepMaxSampleBytes;
}

// The samples of `count` chunks of (N, C) input, folded by fold_at(chunk, first_sample) as
// lock_step_chunks says: kBatchNormStreams chunks in lock-step as far as the shortest goes, then
// the rest of each chunk (every chunk of a smaller group) on its own. Either way each chunk's sums
// are those of its samples in order.
template <class FoldAt>
void across_chunks(const SumsChunk* chunks, int count, int64_t channels, const FoldAt& fold_at) {
  using Fold = decltype(fold_at(0, int64_t{0}));
  const auto fold_one = [&](int k) {
    return [&, k](int64_t first, auto rows) {
      const Fold folds[1] = {fold_at(k, first)};
      across_channels<rows()>(folds, channels, channels);
    };
  };
  if (!lock_step_chunks(channels)) {
    for (int k = 0; k < count; ++k) {
      for_sample_groups<Fold::kLongGroup>(chunks[k].samples.begin, chunks[k].samples.end,
                                          fold_one(k));
    }
    return;
  }
  int64_t done = 0;
  if (count == kBatchNormStreams) {
    int64_t common = chunks[0].samples.end - chunks[0].samples.begin;
    for (int k = 1; k < kBatchNormStreams; ++k) {
      common = std::min(common, chunks[k].samples.end - chunks[k].samples.begin);
    }
    for (; done + kSampleGroup <= common; done += kSampleGroup) {
      Fold folds[kBatchNormStreams];
      for (int k = 0; k < kBatchNormStreams; ++k)
        folds[k] = fold_at(k, chunks[k].samples.begin + done);
      across_channels<kSampleGroup>(folds, channels, channels);
    }
  }
  for (int k = 0; k < count; ++k) {
    for_sample_groups(chunks[k].samples.begin + done, chunks[k].samples.end, fold_one(k));
  }
}

// How far ahead the statistics pass prefetches x in each sample (floats).
constexpr int64_t kColumnStatsPrefetchFloats = tuned("kColumnStatsPrefetchFloats", kPrefetchFloats);

// The statistics' fold: with d = x - shift, sum(d) and sum(d^2) per channel.
template <class S>
struct ChannelSums {
  static constexpr int kLongGroup = 8;  // samples per fold when C >= 512 (across_chunks)
  static constexpr int64_t kPrefetch = kColumnStatsPrefetchFloats;
  const Stored<S>* HWY_RESTRICT x;
  const double* HWY_RESTRICT shifts;
  double* HWY_RESTRICT sums;
  double* HWY_RESTRICT squares;

  using V = hn::Vec<DoubleTag>;
  struct Acc {
    V shift, sum, square;
  };
  Acc load(int64_t c) const {
    const DoubleTag dd;
    return {hn::LoadU(dd, shifts + c), hn::LoadU(dd, sums + c), hn::LoadU(dd, squares + c)};
  }
  // Adds the vector at `at`, prefetching `ahead` floats on (across_channels).
  HWY_INLINE void add(Acc& l, int64_t at, int64_t ahead) const {
    hwy::Prefetch(x + at + ahead);
    const auto d = hn::Sub(hn::PromoteTo(DoubleTag(), widened<S>(x + at)), l.shift);
    l.sum = hn::Add(l.sum, d);
    l.square = hn::MulAdd(d, d, l.square);
  }
  void store(const Acc& l, int64_t c) const {
    hn::StoreU(l.sum, DoubleTag(), sums + c);
    hn::StoreU(l.square, DoubleTag(), squares + c);
  }
  void add_one(int64_t at, int64_t c) const {
    const double d = static_cast<double>(load_one<S>(x, at)) - shifts[c];
    sums[c] += d;
    squares[c] += d * d;
  }
};

// The samples of `count` chunks added into each chunk's per-channel shifted sums and sums of
// squares.
template <class S>
void accumulate_statistics_as(const Stored<S>* x, const BatchShape& shape, const double* shifts,
                              const SumsChunk* chunks, int count) {
  const int64_t channels = shape.channels, length = shape.length;
  if (length == 1) {
    across_chunks(chunks, count, channels, [&](int k, int64_t first) {
      return ChannelSums<S>{x + first * channels, shifts, chunks[k].sums[0], chunks[k].sums[1]};
    });
    return;
  }
  const int64_t sample_size = channels * length;
  for (int k = 0; k < count; ++k) {
    for (int64_t n = chunks[k].samples.begin; n < chunks[k].samples.end; ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        const ShiftedSums run =
            shifted_sums_row<S>(x + n * sample_size + c * length, length, shifts[c]);
        chunks[k].sums[0][c] += run.sum;
        chunks[k].sums[1][c] += run.squares;
      }
    }
  }
}

// ---- Normalise -----------------------------------------------------------------------------

// y = fma(x_hat, gamma, beta) with centred = (x - centre_hi) - centre_lo, which is exact whenever
// x is within a factor 2 of the mean, and x_hat = fma(centred, rstd_hi, centred * rstd_lo),
// rounded once.
template <class V>
V normalise_lanes(V x, V hi, V lo, V rstd_hi, V rstd_lo, V gamma, V beta) {
  return hn::MulAdd(x_hat_lanes(x, hi, lo, rstd_hi, rstd_lo), gamma, beta);
}

HWY_INLINE float normalise_scalar(float x, const NormaliseTables& t, int64_t c) {
  const float x_hat = x_hat_one(x, {t.centre_hi[c], t.centre_lo[c]}, {t.rstd_hi[c], t.rstd_lo[c]});
  return mul_add(x_hat, t.gamma[c], t.beta[c]);
}

// The float64-lanes form, for channels with rstd >= 2^64: x_hat = float((x - centre) * scale).
HWY_INLINE float normalise_wide_scalar(float x, const NormaliseTables& t, int64_t c) {
  const auto x_hat =
      static_cast<float>(((static_cast<double>(x) - t.centre[c]) - t.centre_low[c]) * t.scale[c]);
  return mul_add(x_hat, t.gamma[c], t.beta[c]);
}

// kRows windows of `window` elements (a multiple of the vector width), `stride` floats apart,
// of (N, C) input viewed flat from x and y on, the first element being channel c0; stride is a
// multiple of C, so every window has its vectors at the same channels and each load of the
// constants serves kRows vectors. All kRows vectors of x are loaded before any is stored:
// windows a multiple of 4 KiB apart would otherwise load each right after a store to the same
// address modulo 4 KiB (when x and y are so aligned), which the CPU takes for a possible
// dependency and stalls on.
template <class S, int kRows>
void normalise_windows(const Stored<S>* x, Stored<S>* y, int64_t window, int64_t stride,
                       int64_t channels, int64_t c0, const NormaliseTables& t, bool stream) {
  const FloatTag df;
  const auto n = static_cast<int64_t>(hn::Lanes(df));
  const int64_t step = n % channels;  // how far the channel advances per vector
  // Local copies: the stores to y could otherwise alias the table pointers held in t.
  const float* HWY_RESTRICT centre_hi = t.centre_hi;
  const float* HWY_RESTRICT centre_lo = t.centre_lo;
  const float* HWY_RESTRICT rstd_hi = t.rstd_hi;
  const float* HWY_RESTRICT rstd_lo = t.rstd_lo;
  const float* HWY_RESTRICT gamma = t.gamma;
  const float* HWY_RESTRICT beta = t.beta;
  int64_t c = c0;
  for (int64_t j = 0; j < window; j += n) {
    hn::Vec<FloatTag> v[kRows];
    for (int r = 0; r < kRows; ++r) {
      hwy::Prefetch(x + r * stride + j + kPrefetchFloats);
      v[r] = load<S>(df, x + r * stride + j);
    }
    const auto hi_v = hn::LoadU(df, centre_hi + c), lo_v = hn::LoadU(df, centre_lo + c);
    const auto rstd_hi_v = hn::LoadU(df, rstd_hi + c), rstd_lo_v = hn::LoadU(df, rstd_lo + c);
    const auto gamma_v = hn::LoadU(df, gamma + c), beta_v = hn::LoadU(df, beta + c);
    for (int r = 0; r < kRows; ++r) {
      store_output<S>(normalise_lanes(v[r], hi_v, lo_v, rstd_hi_v, rstd_lo_v, gamma_v, beta_v), df,
                      y + r * stride + j, stream);
    }
    c += step;
    if (c >= channels) c -= channels;
  }
}

// Elements [begin, end) of (N, C) input viewed as one flat array, element i being channel
// i % C. Viewing it flat keeps every vector full whatever C is (no per-sample head or tail of
// scalars, which for small C would be most of the work) and lets streaming stores start at one
// aligned address instead of one per sample.
template <class S>
void normalise_flat(const Stored<S>* x, Stored<S>* y, int64_t begin, int64_t end, int64_t channels,
                    const NormaliseTables& t, bool stream) {
  const FloatTag df;
  const auto n = static_cast<int64_t>(hn::Lanes(df));
  static_assert(HWY_MAX_BYTES / sizeof(float) <= kTablePadding, "tables too short");
  const int64_t start = begin + aligned_start(df, y + begin, end - begin, stream);
  int64_t i = begin;
  int64_t c = begin % channels;
  for (; i < start; ++i) {
    store_one<S>(y, i, normalise_scalar(load_one<S>(x, i), t, c));
    if (++c == channels) c = 0;
  }
  // The stretches: a multiple of lcm(C, n) elements each, so that they start at channel c and
  // (for streaming stores) at aligned addresses.
  const int64_t unit = std::lcm(channels, n);
  const int64_t stretch = (end - i) / (kBatchNormStreams * unit) * unit;
  if (stretch > 0) {
    normalise_windows<S, kBatchNormStreams>(x + i, y + i, stretch, stretch, channels, c, t, stream);
    i += kBatchNormStreams * stretch;
  }
  const int64_t step = n % channels;
  walk_lanes(
      df, i, end,
      [&](int64_t at) ADDNORM_LANE_BODY {
        normalise_windows<S, 1>(x + at, y + at, n, n, channels, c, t, stream);
        c += step;
        if (c >= channels) c -= channels;
      },
      [&](int64_t at) ADDNORM_LANE_BODY {
        store_one<S>(y, at, normalise_scalar(load_one<S>(x, at), t, c));
        if (++c == channels) c = 0;
      });
}

// One sample of [channels] (length 1) in float64 lanes: the whole tensor goes this way when any
// channel needs it (spreads below ~5e-20, e.g. denormal inputs with eps = 0, or means beyond
// 1e30: rare).
template <class S>
void normalise_across_channels_wide(const Stored<S>* x, Stored<S>* y, int64_t channels,
                                    const NormaliseTables& t) {
  const DoubleTag dd;
  const HalfFloatTag df;
  walk_lanes(
      dd, 0, channels,
      [&](int64_t c) ADDNORM_LANE_BODY {
        const auto centred =
            hn::Sub(hn::Sub(hn::PromoteTo(dd, load<S>(df, x + c)), hn::LoadU(dd, t.centre + c)),
                    hn::LoadU(dd, t.centre_low + c));
        const auto x_hat = hn::DemoteTo(df, hn::Mul(centred, hn::LoadU(dd, t.scale + c)));
        store<S>(df, hn::MulAdd(x_hat, hn::LoadU(df, t.gamma + c), hn::LoadU(df, t.beta + c)),
                 y + c);
      },
      [&](int64_t c) ADDNORM_LANE_BODY {
        store_one<S>(y, c, normalise_wide_scalar(load_one<S>(x, c), t, c));
      });
}

// One channel's run of `length` floats (length > 1), its constants broadcast.
template <class S>
void normalise_along_length(const Stored<S>* x, Stored<S>* y, int64_t length,
                            const NormaliseTables& t, int64_t c, bool stream) {
  const FloatTag df;
  const auto hi = hn::Set(df, t.centre_hi[c]), lo = hn::Set(df, t.centre_lo[c]);
  const auto rstd_hi = hn::Set(df, t.rstd_hi[c]), rstd_lo = hn::Set(df, t.rstd_lo[c]);
  const auto gamma = hn::Set(df, t.gamma[c]), beta = hn::Set(df, t.beta[c]);
  const auto scalar = [&](int64_t i) ADDNORM_LANE_BODY {
    store_one<S>(y, i, normalise_scalar(load_one<S>(x, i), t, c));
  };
  const int64_t start = aligned_start(df, y, length, stream);
  for (int64_t i = 0; i < start; ++i) scalar(i);
  walk_lanes(
      df, start, length,
      [&](int64_t i) ADDNORM_LANE_BODY {
        store_output<S>(normalise_lanes(load<S>(df, x + i), hi, lo, rstd_hi, rstd_lo, gamma, beta),
                        df, y + i, stream);
      },
      scalar);
}

template <class S>
void normalise_along_length_wide(const Stored<S>* x, Stored<S>* y, int64_t length,
                                 const NormaliseTables& t, int64_t c) {
  const DoubleTag dd;
  const HalfFloatTag df;
  const auto centre = hn::Set(dd, t.centre[c]), scale = hn::Set(dd, t.scale[c]);
  const auto centre_low = hn::Set(dd, t.centre_low[c]);
  const auto gamma = hn::Set(df, t.gamma[c]), beta = hn::Set(df, t.beta[c]);
  walk_lanes(
      dd, 0, length,
      [&](int64_t i) ADDNORM_LANE_BODY {
        const auto centred =
            hn::Sub(hn::Sub(hn::PromoteTo(dd, load<S>(df, x + i)), centre), centre_low);
        const auto x_hat = hn::DemoteTo(df, hn::Mul(centred, scale));
        store<S>(df, hn::MulAdd(x_hat, gamma, beta), y + i);
      },
      [&](int64_t i) ADDNORM_LANE_BODY {
        store_one<S>(y, i, normalise_wide_scalar(load_one<S>(x, i), t, c));
      });
}

// Samples [begin, end) of (N, C) input.
template <class S>
void normalise_rows(const Stored<S>* x, Stored<S>* y, int64_t channels, const NormaliseTables& t,
                    int64_t begin, int64_t end, bool stream) {
  if (t.any_wide) {
    for (int64_t n = begin; n < end; ++n) {
      normalise_across_channels_wide<S>(x + n * channels, y + n * channels, channels, t);
    }
    return;
  }
  normalise_flat<S>(x, y, begin * channels, end * channels, channels, t, stream);
}

// Samples [begin, end); y may be x (each element is loaded before it is stored). With `stream`,
// y is written with non-temporal stores, which are weakly ordered: they are fenced before
// returning, so another thread may read y.
template <class S>
void normalise_samples_as(const Stored<S>* x, Stored<S>* y, const BatchShape& shape,
                          const NormaliseTables& t, int64_t begin, int64_t end, bool stream) {
  const int64_t channels = shape.channels, length = shape.length;
  if (length == 1) {
    normalise_rows<S>(x, y, channels, t, begin, end, stream);
  } else {
    for (int64_t n = begin; n < end; ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t offset = (n * channels + c) * length;
        if (t.wide[c]) {
          normalise_along_length_wide<S>(x + offset, y + offset, length, t, c);
        } else {
          normalise_along_length<S>(x + offset, y + offset, length, t, c, stream);
        }
      }
    }
  }
  if (stream) hwy::FlushStream();
}

// ---- Training backward -----------------------------------------------------------------------

// How far ahead the training backward's pass 1 prefetches x and dy in each sample, in bytes (so
// that 16-bit samples look as far ahead as float32 ones): a quarter of the other passes' 2 KiB
// for float32 samples (half their 1 KiB for 16-bit ones), 1.16-1.20x faster at C = 128 and
// 1.04-1.06x from C = 1024 in float32 (docs/performance.md: "What limits each op", the
// BatchNorm training backward, and "Tunables: what was tried").
constexpr int64_t kBatchNormBackwardPrefetchBytes = tuned("kBatchNormBackwardPrefetchBytes", 512);

// The backward's pass 1 fold (across_channels): with d = x - shift, sum(d), sum(d^2), sum(dy)
// and sum(dy * d) per channel.
template <class S>
struct ChannelBackwardSums {
  static constexpr int kLongGroup = kSampleGroup;  // samples per fold when C >= 512
  static constexpr int64_t kPrefetch =
      kBatchNormBackwardPrefetchBytes / static_cast<int64_t>(sizeof(Stored<S>));
  const Stored<S>* HWY_RESTRICT dy;
  const Stored<S>* HWY_RESTRICT x;
  const double* HWY_RESTRICT shifts;
  BackwardSums s;

  using V = hn::Vec<DoubleTag>;
  struct Acc {
    V shift, d, d2, dy, dy_d;
  };
  Acc load(int64_t c) const {
    const DoubleTag dd;
    return {hn::LoadU(dd, shifts + c), hn::LoadU(dd, s.d + c), hn::LoadU(dd, s.d2 + c),
            hn::LoadU(dd, s.dy + c), hn::LoadU(dd, s.dy_d + c)};
  }
  HWY_INLINE void add(Acc& l, int64_t at, int64_t ahead) const {
    const DoubleTag dd;
    hwy::Prefetch(x + at + ahead);
    hwy::Prefetch(dy + at + ahead);
    const auto d = hn::Sub(hn::PromoteTo(dd, widened<S>(x + at)), l.shift);
    const auto g = hn::PromoteTo(dd, widened<S>(dy + at));
    l.d = hn::Add(l.d, d);
    l.d2 = hn::MulAdd(d, d, l.d2);
    l.dy = hn::Add(l.dy, g);
    l.dy_d = hn::MulAdd(g, d, l.dy_d);
  }
  void store(const Acc& l, int64_t c) const {
    const DoubleTag dd;
    hn::StoreU(l.d, dd, s.d + c);
    hn::StoreU(l.d2, dd, s.d2 + c);
    hn::StoreU(l.dy, dd, s.dy + c);
    hn::StoreU(l.dy_d, dd, s.dy_d + c);
  }
  void add_one(int64_t at, int64_t c) const {
    const double d = static_cast<double>(load_one<S>(x, at)) - shifts[c];
    const double g = static_cast<double>(load_one<S>(dy, at));
    s.d[c] += d;
    s.d2[c] += d * d;
    s.dy[c] += g;
    s.dy_d[c] += g * d;
  }
};

// Pass 1 for one channel's run of `length` floats (length > 1), added into the sums at c.
template <class S>
void backward_sums_along_length(const Stored<S>* HWY_RESTRICT dy, const Stored<S>* HWY_RESTRICT x,
                                int64_t length, double shift, const BackwardSums& s, int64_t c) {
  const DoubleTag dd;
  const HalfFloatTag df;
  const auto shift_v = hn::Set(dd, shift);
  auto sum_d = hn::Zero(dd), sum_d2 = hn::Zero(dd), sum_dy = hn::Zero(dd), sum_dy_d = hn::Zero(dd);
  double total_d, total_d2, total_dy, total_dy_d;
  walk_lanes(
      dd, 0, length,
      [&](int64_t i) ADDNORM_LANE_BODY {
        const auto d = hn::Sub(hn::PromoteTo(dd, load<S>(df, x + i)), shift_v);
        const auto g = hn::PromoteTo(dd, load<S>(df, dy + i));
        sum_d = hn::Add(sum_d, d);
        sum_d2 = hn::MulAdd(d, d, sum_d2);
        sum_dy = hn::Add(sum_dy, g);
        sum_dy_d = hn::MulAdd(g, d, sum_dy_d);
      },
      [&]() ADDNORM_LANE_BODY {
        total_d = hn::GetLane(hn::SumOfLanes(dd, sum_d));
        total_d2 = hn::GetLane(hn::SumOfLanes(dd, sum_d2));
        total_dy = hn::GetLane(hn::SumOfLanes(dd, sum_dy));
        total_dy_d = hn::GetLane(hn::SumOfLanes(dd, sum_dy_d));
      },
      [&](int64_t i) ADDNORM_LANE_BODY {
        const double d = static_cast<double>(load_one<S>(x, i)) - shift;
        const double g = static_cast<double>(load_one<S>(dy, i));
        total_d += d;
        total_d2 += d * d;
        total_dy += g;
        total_dy_d += g * d;
      });
  s.d[c] += total_d;
  s.d2[c] += total_d2;
  s.dy[c] += total_dy;
  s.dy_d[c] += total_dy_d;
}

// Pass 1 over the samples of `count` chunks, each into its own sums.
template <class S>
void backward_training_sums_as(const Stored<S>* dy, const Stored<S>* x, const BatchShape& shape,
                               const double* shifts, const SumsChunk* chunks, int count) {
  const int64_t channels = shape.channels, length = shape.length;
  const auto sums_of = [&](int k) {
    const SumsChunk& chunk = chunks[k];
    return BackwardSums{chunk.sums[0], chunk.sums[1], chunk.sums[2], chunk.sums[3]};
  };
  if (length == 1) {
    across_chunks(chunks, count, channels, [&](int k, int64_t first) {
      return ChannelBackwardSums<S>{dy + first * channels, x + first * channels, shifts,
                                    sums_of(k)};
    });
    return;
  }
  for (int k = 0; k < count; ++k) {
    for (int64_t n = chunks[k].samples.begin; n < chunks[k].samples.end; ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t offset = (n * channels + c) * length;
        backward_sums_along_length<S>(dy + offset, x + offset, length, shifts[c], sums_of(k), c);
      }
    }
  }
}

// Pass 2's formula, the same operations in float64 lanes or scalars.
template <class V>
V training_dx(V dy, V x, V mean, V mean_lo, V rstd, V scale, V mean_dy, V mean_dy_xhat) {
  const V x_hat = hn::Mul(hn::Sub(hn::Sub(x, mean), mean_lo), rstd);
  return hn::Mul(scale, hn::Sub(hn::Sub(dy, mean_dy), hn::Mul(x_hat, mean_dy_xhat)));
}

HWY_INLINE float training_dx_scalar(float dy, float x, const BatchBackwardConstants& t, int64_t c) {
  const double x_hat = ((static_cast<double>(x) - t.mean[c]) - t.mean_lo[c]) * t.rstd[c];
  const double g = t.dy_scale ? static_cast<double>(dy) * t.dy_scale[c] : static_cast<double>(dy);
  return static_cast<float>(t.scale[c] * ((g - t.mean_dy[c]) - x_hat * t.mean_dy_xhat[c]));
}

// Pass 2 for kRows samples of [channels] (length 1). dx may be dy or x: each element of both is
// loaded before dx's element is stored. `stream` (non-temporal stores) needs every dx + c
// vector-aligned: dx aligned to 64 bytes and C a multiple of 16.
template <class S, int kRows, bool kDyScale>
void training_dx_across_channels(const Stored<S>* dy, const Stored<S>* x, Stored<S>* dx,
                                 int64_t stride, int64_t channels, const BatchBackwardConstants& t,
                                 bool stream) {
  const DoubleTag dd;
  const HalfFloatTag df;
  const auto n = static_cast<int64_t>(hn::Lanes(dd));
  // Highway streams a vector of under 16 bytes (two floats, on SSE4) as 16: past its end.
  stream = stream && n * int64_t{sizeof(float)} >= 16;
  walk_lanes(
      dd, 0, channels,
      [&](int64_t c) ADDNORM_LANE_BODY {
        const auto mean = hn::LoadU(dd, t.mean + c), rstd = hn::LoadU(dd, t.rstd + c);
        const auto mean_lo = hn::LoadU(dd, t.mean_lo + c);
        const auto scale = hn::LoadU(dd, t.scale + c), mean_dy = hn::LoadU(dd, t.mean_dy + c);
        const auto mean_dy_xhat = hn::LoadU(dd, t.mean_dy_xhat + c);
        // dy * dy_scale, exact in float64 (a product of two floats); BatchNorm's dy as it is.
        const auto scaled = [&](hn::Vec<DoubleTag> g) HWY_ATTR {
          if constexpr (kDyScale) return hn::Mul(g, hn::LoadU(dd, t.dy_scale + c));
          return g;
        };
        for (int r = 0; r < kRows; ++r) {
          const int64_t at = r * stride + c;
          hwy::Prefetch(x + at + kPrefetchFloats);
          hwy::Prefetch(dy + at + kPrefetchFloats);
          const auto grad = training_dx(scaled(hn::PromoteTo(dd, widened<S>(dy + at))),
                                        hn::PromoteTo(dd, widened<S>(x + at)), mean, mean_lo, rstd,
                                        scale, mean_dy, mean_dy_xhat);
          store_output<S>(hn::DemoteTo(df, grad), df, dx + at, stream);
        }
      },
      [&](int64_t c) ADDNORM_LANE_BODY {
        for (int r = 0; r < kRows; ++r) {
          const int64_t at = r * stride + c;
          store_one<S>(dx, at, training_dx_scalar(load_one<S>(dy, at), load_one<S>(x, at), t, c));
        }
      });
}

// Pass 2 for one channel's run of `length` floats (length > 1).
template <class S>
void training_dx_along_length(const Stored<S>* dy, const Stored<S>* x, Stored<S>* dx,
                              int64_t length, const BatchBackwardConstants& t, int64_t c) {
  const DoubleTag dd;
  const HalfFloatTag df;
  const auto mean = hn::Set(dd, t.mean[c]), rstd = hn::Set(dd, t.rstd[c]);
  const auto mean_lo = hn::Set(dd, t.mean_lo[c]);
  const auto scale = hn::Set(dd, t.scale[c]), mean_dy = hn::Set(dd, t.mean_dy[c]);
  const auto mean_dy_xhat = hn::Set(dd, t.mean_dy_xhat[c]);
  const auto dy_scale = hn::Set(dd, t.dy_scale ? t.dy_scale[c] : 1.0);  // x 1 is exact
  walk_lanes(
      dd, 0, length,
      [&](int64_t i) ADDNORM_LANE_BODY {
        const auto grad = training_dx(hn::Mul(hn::PromoteTo(dd, load<S>(df, dy + i)), dy_scale),
                                      hn::PromoteTo(dd, load<S>(df, x + i)), mean, mean_lo, rstd,
                                      scale, mean_dy, mean_dy_xhat);
        store<S>(df, hn::DemoteTo(df, grad), dx + i);
      },
      [&](int64_t i) ADDNORM_LANE_BODY {
        store_one<S>(dx, i, training_dx_scalar(load_one<S>(dy, i), load_one<S>(x, i), t, c));
      });
}

// Pass 2 over samples [begin, end). With length 1, kBatchNormStreams samples from as many
// stretches of the range go together, so that they are that many streams of x and dy; and with
// `stream` (length 1 only: training_dx_across_channels' alignment), dx is written with
// non-temporal stores, fenced before returning.
template <class S, bool kDyScale>
void backward_training_dx_as(const Stored<S>* dy, const Stored<S>* x, Stored<S>* dx,
                             const BatchShape& shape, const BatchBackwardConstants& t,
                             int64_t begin, int64_t end, bool stream) {
  const int64_t channels = shape.channels, length = shape.length;
  int64_t n = begin;
  if (length == 1) {
    const int64_t stretch = (end - begin) / kBatchNormStreams;
    for (int64_t i = 0; i < stretch; ++i) {
      const int64_t offset = (begin + i) * channels;
      training_dx_across_channels<S, kBatchNormStreams, kDyScale>(
          dy + offset, x + offset, dx + offset, stretch * channels, channels, t, stream);
    }
    for_sample_groups(begin + kBatchNormStreams * stretch, end, [&](int64_t first, auto rows) {
      const int64_t offset = first * channels;
      training_dx_across_channels<S, rows(), kDyScale>(dy + offset, x + offset, dx + offset,
                                                       channels, channels, t, stream);
    });
    if (stream) hwy::FlushStream();
    return;
  }
  for (; n < end; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t offset = (n * channels + c) * length;
      training_dx_along_length<S>(dy + offset, x + offset, dx + offset, length, t, c);
    }
  }
}

// ---- Inference backward ----------------------------------------------------------------------

// With constant statistics: dx = float(dy * scale), scale = gamma * rstd, and the sums of dy and
// (with kXhat, when dgamma is asked for) dy * x_hat = (x - mean) * rstd, where an exactly centred
// value has x_hat = 0 (the reference's normalise) unless rstd is NaN (inference_rstd_of), which
// makes every x_hat NaN. Without kXhat x is not read (its pointer is only offset): a frozen
// BatchNorm in eval mode moves two tensors, not three.
template <class D, class V>
V inference_xhat(D d, V x, V mean, V rstd) {
  const V centred = hn::Sub(x, mean);
  const auto exact_zero = hn::AndNot(hn::IsNaN(rstd), hn::Eq(centred, hn::Zero(d)));
  return hn::IfThenZeroElse(exact_zero, hn::Mul(centred, rstd));
}

HWY_INLINE double inference_xhat_scalar(float x, double mean, double rstd) {
  const double centred = static_cast<double>(x) - mean;
  return centred == 0 && !std::isnan(rstd) ? 0.0 : centred * rstd;
}

// kRows samples of [channels] (length 1). dx may be dy or x.
template <class S, int kRows, bool kXhat>
void inference_across_channels(const Stored<S>* dy, const Stored<S>* x, Stored<S>* dx,
                               int64_t stride, int64_t channels, const double* HWY_RESTRICT mean,
                               const double* HWY_RESTRICT rstd, const double* HWY_RESTRICT scale,
                               double* HWY_RESTRICT sum_dy, double* HWY_RESTRICT sum_dy_xhat) {
  const DoubleTag dd;
  const HalfFloatTag df;
  walk_lanes(
      dd, 0, channels,
      [&](int64_t c) ADDNORM_LANE_BODY {
        const auto mean_v = hn::LoadU(dd, mean + c), rstd_v = hn::LoadU(dd, rstd + c);
        const auto scale_v = hn::LoadU(dd, scale + c);
        auto total_dy = hn::LoadU(dd, sum_dy + c), total_dy_xhat = hn::LoadU(dd, sum_dy_xhat + c);
        const int64_t ahead = group_prefetch_ahead<kRows>(c, channels, stride);
        for (int r = 0; r < kRows; ++r) {
          const int64_t at = r * stride + c;
          hwy::Prefetch(dy + at + ahead);
          const auto g = hn::PromoteTo(dd, widened<S>(dy + at));
          if constexpr (kXhat) {
            hwy::Prefetch(x + at + ahead);
            const auto x_hat =
                inference_xhat(dd, hn::PromoteTo(dd, widened<S>(x + at)), mean_v, rstd_v);
            total_dy_xhat = hn::MulAdd(g, x_hat, total_dy_xhat);
          }
          total_dy = hn::Add(total_dy, g);
          store<S>(df, hn::DemoteTo(df, hn::Mul(g, scale_v)), dx + at);
        }
        hn::StoreU(total_dy, dd, sum_dy + c);
        hn::StoreU(total_dy_xhat, dd, sum_dy_xhat + c);
      },
      [&](int64_t c) ADDNORM_LANE_BODY {
        for (int r = 0; r < kRows; ++r) {
          const int64_t at = r * stride + c;
          const auto g = static_cast<double>(load_one<S>(dy, at));
          sum_dy[c] += g;
          if constexpr (kXhat) {
            sum_dy_xhat[c] += g * inference_xhat_scalar(load_one<S>(x, at), mean[c], rstd[c]);
          }
          store_one<S>(dx, at, static_cast<float>(g * scale[c]));
        }
      });
}

// One channel's run of `length` floats (length > 1).
template <class S, bool kXhat>
void inference_along_length(const Stored<S>* dy, const Stored<S>* x, Stored<S>* dx, int64_t length,
                            double mean, double rstd, double scale, double& sum_dy,
                            double& sum_dy_xhat) {
  const DoubleTag dd;
  const HalfFloatTag df;
  const auto mean_v = hn::Set(dd, mean), rstd_v = hn::Set(dd, rstd), scale_v = hn::Set(dd, scale);
  auto total_dy = hn::Zero(dd), total_dy_xhat = hn::Zero(dd);
  double run_dy, run_dy_xhat;
  walk_lanes(
      dd, 0, length,
      [&](int64_t i) ADDNORM_LANE_BODY {
        const auto g = hn::PromoteTo(dd, load<S>(df, dy + i));
        if constexpr (kXhat) {
          const auto x_hat =
              inference_xhat(dd, hn::PromoteTo(dd, load<S>(df, x + i)), mean_v, rstd_v);
          total_dy_xhat = hn::MulAdd(g, x_hat, total_dy_xhat);
        }
        total_dy = hn::Add(total_dy, g);
        store<S>(df, hn::DemoteTo(df, hn::Mul(g, scale_v)), dx + i);
      },
      [&]() ADDNORM_LANE_BODY {
        run_dy = hn::GetLane(hn::SumOfLanes(dd, total_dy));
        run_dy_xhat = hn::GetLane(hn::SumOfLanes(dd, total_dy_xhat));
      },
      [&](int64_t i) ADDNORM_LANE_BODY {
        const auto g = static_cast<double>(load_one<S>(dy, i));
        run_dy += g;
        if constexpr (kXhat) {
          run_dy_xhat += g * inference_xhat_scalar(load_one<S>(x, i), mean, rstd);
        }
        store_one<S>(dx, i, static_cast<float>(g * scale));
      });
  sum_dy += run_dy;
  sum_dy_xhat += run_dy_xhat;
}

// Samples [begin, end): dx, and one chunk's sums of dy and (with kXhat) dy * x_hat.
template <class S, bool kXhat>
void backward_inference_samples_as(const Stored<S>* dy, const Stored<S>* x, Stored<S>* dx,
                                   const BatchShape& shape, const double* mean, const double* rstd,
                                   const double* scale, double* sum_dy, double* sum_dy_xhat,
                                   int64_t begin, int64_t end) {
  const int64_t channels = shape.channels, length = shape.length;
  int64_t n = begin;
  if (length == 1) {
    for_sample_groups(begin, end, [&](int64_t first, auto rows) {
      const int64_t offset = first * channels;
      inference_across_channels<S, rows(), kXhat>(dy + offset, x + offset, dx + offset, channels,
                                                  channels, mean, rstd, scale, sum_dy, sum_dy_xhat);
    });
    return;
  }
  for (; n < end; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t offset = (n * channels + c) * length;
      inference_along_length<S, kXhat>(dy + offset, x + offset, dx + offset, length, mean[c],
                                       rstd[c], scale[c], sum_dy[c], sum_dy_xhat[c]);
    }
  }
}

// ---- Entry points: the passes above for x (y, dy, dx) of the call's storage type -------------

// Each channel's first value (the shift of its sums).
void first_values(const void* x, DType storage, const BatchShape& shape, double* shifts) {
  with_storage(storage, [&](auto policy) {
    using S = decltype(policy);
    const auto* values = static_cast<const Stored<S>*>(x);
    for (int64_t c = 0; c < shape.channels; ++c) shifts[c] = load_one<S>(values, c * shape.length);
  });
}

void accumulate_statistics(const void* x, DType storage, const BatchShape& shape,
                           const double* shifts, const SumsChunk* chunks, int count) {
  with_storage(storage, [&](auto policy) {
    using S = decltype(policy);
    accumulate_statistics_as<S>(static_cast<const Stored<S>*>(x), shape, shifts, chunks, count);
  });
}

void normalise_samples(const void* x, void* y, DType storage, const BatchShape& shape,
                       const NormaliseTables& t, int64_t begin, int64_t end, bool stream) {
  with_storage(storage, [&](auto policy) {
    using S = decltype(policy);
    normalise_samples_as<S>(static_cast<const Stored<S>*>(x), static_cast<Stored<S>*>(y), shape, t,
                            begin, end, stream);
  });
}

void backward_training_sums(const void* dy, const void* x, DType storage, const BatchShape& shape,
                            const double* shifts, const SumsChunk* chunks, int count) {
  with_storage(storage, [&](auto policy) {
    using S = decltype(policy);
    backward_training_sums_as<S>(static_cast<const Stored<S>*>(dy),
                                 static_cast<const Stored<S>*>(x), shape, shifts, chunks, count);
  });
}

void backward_training_dx(const void* dy, const void* x, void* dx, DType storage,
                          const BatchShape& shape, const BatchBackwardConstants& t, int64_t begin,
                          int64_t end, bool stream) {
  with_storage(storage, [&](auto policy) {
    using S = decltype(policy);
    with_flag(t.dy_scale != nullptr, [&](auto dy_scale) {
      backward_training_dx_as<S, dy_scale()>(
          static_cast<const Stored<S>*>(dy), static_cast<const Stored<S>*>(x),
          static_cast<Stored<S>*>(dx), shape, t, begin, end, stream);
    });
  });
}

void backward_inference_samples(const void* dy, const void* x, void* dx, DType storage,
                                const BatchShape& shape, const double* mean, const double* rstd,
                                const double* scale, double* sum_dy, double* sum_dy_xhat,
                                int64_t begin, int64_t end, bool read_x) {
  with_storage(storage, [&](auto policy) {
    using S = decltype(policy);
    with_flag(read_x, [&](auto xhat) {  // x is read only for dgamma
      backward_inference_samples_as<S, xhat()>(
          static_cast<const Stored<S>*>(dy), static_cast<const Stored<S>*>(x),
          static_cast<Stored<S>*>(dx), shape, mean, rstd, scale, sum_dy, sum_dy_xhat, begin, end);
    });
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/scratch.hpp"
#include "ops/cpu/threading.hpp"

namespace addnorm::cpu {

HWY_EXPORT(first_values);
HWY_EXPORT(accumulate_statistics);
HWY_EXPORT(normalise_samples);
HWY_EXPORT(backward_training_sums);
HWY_EXPORT(backward_training_dx);
HWY_EXPORT(backward_inference_samples);

namespace {

// Per-channel float64 accumulators for `count` quantities, one set per fixed chunk of the batch,
// zeroed, in the calling thread's scratch. Each chunk sums its samples in order; chunks are
// added in chunk order by total().
class ChannelPartials {
 public:
  ChannelPartials(Scratch& scratch, int64_t chunks, int64_t channels, int count)
      : chunks_(chunks),
        channels_(channels),
        count_(count),
        values_(scratch.zeroed<double>(chunks * channels * count)) {}

  int count() const { return count_; }
  double* chunk(int64_t index, int quantity) {
    return values_ + (index * count_ + quantity) * channels_;
  }
  // Every channel's total of one quantity into totals[C]: the chunks added in chunk order,
  // walking each chunk's channels contiguously (the same sums as channel by channel, without
  // the strides).
  void total(int quantity, double* totals) const {
    std::fill(totals, totals + channels_, 0.0);
    for (int64_t index = 0; index < chunks_; ++index) {
      const double* values = values_ + (index * count_ + quantity) * channels_;
      for (int64_t c = 0; c < channels_; ++c) totals[c] += values[c];
    }
  }

 private:
  int64_t chunks_, channels_;
  int count_;
  double* values_;
};

// The first sample of each channel: the shift that keeps one-pass variances exact.
double* channel_shifts(Scratch& scratch, const void* x, DType storage, const BatchShape& shape) {
  double* shifts = scratch.take<double>(shape.channels);
  HWY_DYNAMIC_DISPATCH(first_values)(x, storage, shape, shifts);
  return shifts;
}

// How many bytes the call's tensors of `storage` hold.
int64_t tensor_bytes(const BatchShape& shape, DType storage) {
  return shape.batch * shape.channels * shape.length * dtype_size(storage);
}

// Runs body(chunk, begin, end) over the batch's fixed chunks, chunks spread over threads.
template <class Body>
void for_each_chunk(const BatchShape& shape, int64_t chunks, const Body& body) {
  parallel_chunks(chunks, shape.batch, shape.channels * shape.length, body);
}

// Runs body(group, count) over the batch's fixed chunks kBatchNormStreams consecutive ones at a
// time (fewer in the last group), groups spread over threads: group[k] is chunk first + k's samples
// and its sums in `partials`.
template <class Body>
void for_each_chunk_group(const BatchShape& shape, int64_t chunks, ChannelPartials& partials,
                          const Body& body) {
  const int64_t groups = (chunks + kBatchNormStreams - 1) / kBatchNormStreams;
  parallel_chunks(groups, shape.batch, shape.channels * shape.length,
                  [&](int64_t group_index, int64_t, int64_t) {
                    const int64_t first = group_index * kBatchNormStreams;
                    const int count =
                        static_cast<int>(std::min<int64_t>(kBatchNormStreams, chunks - first));
                    SumsChunk group[kBatchNormStreams] = {};
                    for (int k = 0; k < count; ++k) {
                      const int64_t chunk = first + k;
                      group[k].samples = {chunk_begin(shape.batch, chunks, chunk),
                                          chunk_begin(shape.batch, chunks, chunk + 1)};
                      for (int q = 0; q < partials.count(); ++q) {
                        group[k].sums[q] = partials.chunk(chunk, q);
                      }
                    }
                    body(group, count);
                  });
}

// The per-channel constants of NormaliseTables, in the calling thread's scratch: a channel with
// a non-finite mean or a NaN rstd gets a NaN centre (its outputs become NaN), and an infinite
// rstd from a zero-variance channel with eps = 0 becomes 0 (its centred values are all exactly
// 0, and so is x_hat).
NormaliseTables normalise_constants(Scratch& scratch, const double* mean, const double* mean_lo,
                                    const double* rstd, const double* variance, const float* gamma,
                                    const float* beta, int64_t channels) {
  const int64_t extended = channels + kTablePadding;
  const auto [centre_hi, centre_lo, rstd_hi, rstd_lo, gammas, betas] =
      scratch.take_each<float, 6>(extended);
  const auto [centres, centres_low, scales] = scratch.take_each<double, 3>(channels);
  uint8_t* wide = scratch.take<uint8_t>(channels);
  bool any_wide = false;
  for (int64_t c = 0; c < channels; ++c) {
    const bool finite = std::isfinite(mean[c]) && !std::isnan(rstd[c]);
    const double centre = finite ? mean[c] : std::numeric_limits<double>::quiet_NaN();
    const double scale = xhat_scale(rstd[c]);
    centres[c] = centre;
    centres_low[c] = finite && mean_lo ? mean_lo[c] : 0.0;
    scales[c] = scale;
    wide[c] = finite && !forward_fits_float32(centre, variance[c], rstd[c]) ? 1 : 0;
    // The split of a wide channel is unused (and rstd might not fit in a float32).
    const bool split = finite && !wide[c];
    const HiLo centre_split = cpu::split(centre, centres_low[c]), scale_split = cpu::split(scale);
    centre_hi[c] = split ? centre_split.hi : std::numeric_limits<float>::quiet_NaN();
    centre_lo[c] = split ? centre_split.lo : 0.0f;
    rstd_hi[c] = split ? scale_split.hi : 0.0f;
    rstd_lo[c] = split ? scale_split.lo : 0.0f;
    any_wide = any_wide || wide[c] != 0;
    gammas[c] = gamma ? gamma[c] : 1.0f;
    betas[c] = beta ? beta[c] : 0.0f;
  }
  for (int64_t c = channels; c < extended; ++c) {
    for (float* table : {centre_hi, centre_lo, rstd_hi, rstd_lo, gammas, betas}) {
      table[c] = table[c % channels];
    }
  }
  return {centre_hi, centre_lo,   rstd_hi, rstd_lo, gammas,  betas,
          centres,   centres_low, scales,  wide,    any_wide};
}

}  // namespace

void batch_statistics(const void* x, DType storage, const BatchShape& shape, double* mean,
                      double* mean_lo, double* variance) {
  Scratch scratch;
  const int64_t chunks = reduction_chunks(shape.batch);
  const double* shifts = channel_shifts(scratch, x, storage, shape);
  ChannelPartials partials(scratch, chunks, shape.channels, 2);
  for_each_chunk_group(shape, chunks, partials, [&](const SumsChunk* group, int count) {
    HWY_DYNAMIC_DISPATCH(accumulate_statistics)(x, storage, shape, shifts, group, count);
  });
  const int64_t values = shape.batch * shape.length;
  const auto [sums, squares] = scratch.take_each<double, 2>(shape.channels);
  partials.total(0, sums);
  partials.total(1, squares);
  for (int64_t c = 0; c < shape.channels; ++c) {
    const RowMoments moments =
        moments_about(shifts[c], shifted_moments(sums[c], squares[c], values));
    mean[c] = moments.mean;
    mean_lo[c] = moments.mean_lo;
    variance[c] = moments.variance;
  }
}

void batch_normalise(const void* x, DType storage, const double* mean, const double* mean_lo,
                     const double* rstd, const double* variance, const float* gamma,
                     const float* beta, void* y, const BatchShape& shape) {
  Scratch scratch;
  const NormaliseTables tables =
      normalise_constants(scratch, mean, mean_lo, rstd, variance, gamma, beta, shape.channels);
  const int64_t sample_size = shape.channels * shape.length;
  const bool stream = storage == DType::float32 && streams_output(tensor_bytes(shape, storage));
  parallel_rows(shape.batch, sample_size, [&](int64_t begin, int64_t end) {
    HWY_DYNAMIC_DISPATCH(normalise_samples)(x, y, storage, shape, tables, begin, end, stream);
  });
}

void batch_backward_totals(const void* dy, const void* x, DType storage, const BatchShape& shape,
                           const BatchBackwardTotals& totals) {
  Scratch scratch;
  const int64_t chunks = reduction_chunks(shape.batch);
  HWY_DYNAMIC_DISPATCH(first_values)(x, storage, shape, totals.shift);
  ChannelPartials partials(scratch, chunks, shape.channels, 4);
  for_each_chunk_group(shape, chunks, partials, [&](const SumsChunk* group, int count) {
    HWY_DYNAMIC_DISPATCH(backward_training_sums)
    (dy, x, storage, shape, totals.shift, group, count);
  });
  partials.total(0, totals.d);
  partials.total(1, totals.d2);
  partials.total(2, totals.dy);
  partials.total(3, totals.dy_d);
}

void batch_backward_dx(const void* dy, const void* x, void* dx, DType storage,
                       const BatchShape& shape, const BatchBackwardConstants& constants) {
  // Each element is read before it is written, so dx may be dy or x.
  const bool stream = storage == DType::float32 && shape.length == 1 && shape.channels % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(dx) % 64 == 0 &&
                      streams_output(tensor_bytes(shape, storage));
  parallel_rows(shape.batch, shape.channels * shape.length, [&](int64_t begin, int64_t end) {
    HWY_DYNAMIC_DISPATCH(backward_training_dx)
    (dy, x, dx, storage, shape, constants, begin, end, stream);
  });
}

void batch_norm_backward_training(const void* dy, const void* x, void* dx, DType storage,
                                  const float* gamma, float* dgamma, float* dbeta,
                                  const BatchShape& shape, double eps) {
  Scratch scratch;
  const int64_t channels = shape.channels;
  // Pass 1: per channel, with d = x - shift: sum(d), sum(d^2), sum(dy), sum(dy * d).
  const auto [shifts, mean, mean_lo, rstd, scale, mean_dy, mean_dy_xhat] =
      scratch.take_each<double, 7>(channels);
  // The totals of pass 1, in the tables pass 2 reads (each is read before it is overwritten).
  double* sum_d = mean;
  double* sum_d2 = rstd;
  double* sum_dy = mean_dy;
  double* sum_dy_d = mean_dy_xhat;
  batch_backward_totals(dy, x, storage, shape, {shifts, sum_d, sum_d2, sum_dy, sum_dy_d});
  // Per channel: dx = rstd * gamma * (dy - mean(dy) - x_hat * mean(dy * x_hat)).
  const double count = static_cast<double>(shape.batch * shape.length);
  for (int64_t c = 0; c < channels; ++c) {
    const ShiftedMoments shifted = shifted_moments(sum_d[c], sum_d2[c], shape.batch * shape.length);
    const RowMoments moments = moments_about(shifts[c], shifted);
    const double total_dy = sum_dy[c];
    const double channel_rstd = rstd_of(moments.variance, eps);
    const double total_dy_xhat = channel_rstd * (sum_dy_d[c] - shifted.offset * total_dy);
    mean[c] = moments.mean;
    mean_lo[c] = moments.mean_lo;
    rstd[c] = channel_rstd;
    scale[c] = (gamma ? static_cast<double>(gamma[c]) : 1.0) * channel_rstd;
    mean_dy[c] = total_dy / count;
    mean_dy_xhat[c] = total_dy_xhat / count;
    if (dgamma) dgamma[c] = static_cast<float>(total_dy_xhat);
    if (dbeta) dbeta[c] = static_cast<float>(total_dy);
  }
  // Pass 2: dx.
  batch_backward_dx(dy, x, dx, storage, shape,
                    {mean, mean_lo, rstd, scale, nullptr, mean_dy, mean_dy_xhat});
}

void batch_norm_backward_inference(const void* dy, const void* x, void* dx, DType storage,
                                   const float* gamma, const double* mean, const double* rstd,
                                   float* dgamma, float* dbeta, const BatchShape& shape) {
  Scratch scratch;
  const int64_t chunks = reduction_chunks(shape.batch);
  double* scale = scratch.take<double>(shape.channels);
  for (int64_t c = 0; c < shape.channels; ++c) {
    scale[c] = (gamma ? static_cast<double>(gamma[c]) : 1.0) * rstd[c];
  }
  ChannelPartials partials(scratch, chunks, shape.channels, 2);
  // x is read only for dgamma's sums of dy * x_hat.
  for_each_chunk(shape, chunks, [&](int64_t chunk, int64_t begin, int64_t end) {
    HWY_DYNAMIC_DISPATCH(backward_inference_samples)
    (dy, x, dx, storage, shape, mean, rstd, scale, partials.chunk(chunk, 0),
     partials.chunk(chunk, 1), begin, end, dgamma != nullptr);
  });
  const auto [sum_dy, sum_dy_xhat] = scratch.take_each<double, 2>(shape.channels);
  partials.total(0, sum_dy);
  partials.total(1, sum_dy_xhat);
  for (int64_t c = 0; c < shape.channels; ++c) {
    if (dgamma) dgamma[c] = static_cast<float>(sum_dy_xhat[c]);
    if (dbeta) dbeta[c] = static_cast<float>(sum_dy[c]);
  }
}

}  // namespace addnorm::cpu
#endif  // HWY_ONCE
