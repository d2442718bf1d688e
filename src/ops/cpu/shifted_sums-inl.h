// A row's sums, per SIMD target, shared by the norm and BatchNorm kernels, forward and backward:
// the float64-lane walk (RowSumsRun) and the float32 block sums' walk (BlockSumsRun). Highway's
// "-inl.h" convention: included once per target from a file that uses foreach_target.h, so the
// guard toggles with HWY_TARGET_TOGGLE.
#if defined(ADDNORM_OPS_CPU_SHIFTED_SUMS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ADDNORM_OPS_CPU_SHIFTED_SUMS_INL_H_
#undef ADDNORM_OPS_CPU_SHIFTED_SUMS_INL_H_
#else
#define ADDNORM_OPS_CPU_SHIFTED_SUMS_INL_H_
#endif

#include <cstdint>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "ops/cpu/lane_ops-inl.h"
#include "ops/cpu/norm_numerics.hpp"
#include "ops/cpu/row_storage-inl.h"
#include "ops/cpu/tuning.hpp"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// How far ahead the streaming passes prefetch, in floats.
constexpr int64_t kPrefetchFloats = tuned("kPrefetchFloats", 512);

// Shifted sums of one row: with d = x - shift, sum(d) and sum(d^2), in float64. Choosing the
// shift from the row itself (its first element) keeps the one-pass variance
// sum(d^2)/D - (sum(d)/D)^2 exact to float64 rounding times D: no element lies further than
// sqrt(D) standard deviations from the mean, so the cancellation is bounded, unlike the
// textbook E[x^2] - E[x]^2 whose error grows with mean^2 / variance.
struct ShiftedSums {
  double sum = 0;
  double squares = 0;
};

// ---- one row-sums routine for both directions ----------------------------------------------
// RowSumsRun<Terms, kChains> walks a row in float64 lanes and adds what Terms takes of each
// vector (the forward: the shifted values and their squares, ShiftedTerms; the backward's pass 1:
// those and the gradient's sums, BackwardTerms in norm_backward-inl.h) to kChains accumulator
// sets: vector v of the row (elements v * n ... v * n + n - 1, n float64 lanes) to set v % kChains,
// so that a row in cache is not held to one addition per vector per latency of the adder (the
// sums of a decode-sized row are latency-bound otherwise). The run owns the walk: the pairs of
// vectors, the tail vectors short of a group of kChains, the elements short of a vector
// (Terms::add_elements, in float64), and the order in which the sets are combined ((0 + 1) + (2 +
// 3)).
//
// A run is resumable: step() adds the next two vectors and finish() the rest, so the forward
// can interleave one row's sums with the normalising pass of the row before it (its reads from
// memory then overlap that pass's stores, as in a copy); the backward only finishes runs.
// Each element goes to the same accumulator lane in the same order however the steps are
// interleaved: the sums, and so every output, are bit for bit those of an
// uninterrupted run. row_lanes() takes a whole row of whole pairs at once and leaves its sums in
// lanes, for the group paths that total a group of short rows one row per lane (row_totals).
//
// What Terms provides: Lanes (one accumulator set) and Sums (its totals); zero(); add(set, i),
// one vector at element i; prefetch(i), ahead of a pair at i; combine(a, b), two sets; total(set),
// across lanes; add_elements(sums, begin, end), one element at a time.
template <class Terms, int kChains>
class RowSumsRun {
  static_assert(kChains == 2 || kChains == 4, "pairs of vectors go to pairs of sets");

 public:
  using Lanes = typename Terms::Lanes;
  using Sums = typename Terms::Sums;

  RowSumsRun(const Terms& terms, int64_t dim) : terms_(terms), dim_(dim) {
    for (Lanes& set : sets_) set = Terms::zero();
  }

  const Terms& terms() const { return terms_; }
  // Elements one step adds: two vectors.
  static int64_t step_elements() { return 2 * lanes(); }
  bool has_step() const { return i_ + step_elements() <= dim_; }

  // Vectors v and v + 1 (v even) to sets v % kChains and v % kChains + 1.
  HWY_INLINE void step() {
    if (kChains == 2 || i_ % (4 * lanes()) == 0) {
      add_pair(i_, sets_[0], sets_[1]);
    } else {
      add_pair(i_, sets_[kChains - 2], sets_[kChains - 1]);
    }
    i_ += step_elements();
  }

  // The remaining vectors, then the elements short of one. In locals: a caller's run may live
  // in memory, and its sets would otherwise go through memory at every step.
  Sums finish() {
    const int64_t n = lanes();
    Lanes s0 = sets_[0], s1 = sets_[1];
    Lanes s2 = kChains == 4 ? sets_[kChains - 2] : Terms::zero();
    Lanes s3 = kChains == 4 ? sets_[kChains - 1] : Terms::zero();
    int64_t i = i_;
    if constexpr (kChains == 4) {
      if (i % (4 * n) != 0 && i + 2 * n <= dim_) {  // the second pair of a group of four
        add_pair(i, s2, s3);
        i += 2 * n;
      }
    }
    for (; i + kChains * n <= dim_; i += kChains * n) {
      add_pair(i, s0, s1);
      if constexpr (kChains == 4) add_pair(i + 2 * n, s2, s3);
    }
    // Up to kChains - 1 vectors left, each to set v % kChains as in an uninterrupted run: from a
    // group's start, sets 0, 1, 2; after steps that ended on a group's second pair (fewer than
    // two vectors were left for it), its one remaining vector to set 2. (Until 2026-12-07 that
    // vector went to set 0, so a stepped row's sums could differ in the last bit from the same
    // row's taken alone, which made the float32 forward's statistics depend on where a thread's
    // rows began.)
    auto tail_vector = [&](Lanes& set) HWY_ATTR {
      if (i + n > dim_) return false;
      terms_.add(set, i);
      i += n;
      return true;
    };
    if (kChains == 4 && i % (4 * n) != 0) {
      tail_vector(s2);
    } else if (tail_vector(s0) && kChains == 4 && tail_vector(s1)) {
      tail_vector(s2);
    }
    Sums sums = terms_.total(combined(s0, s1, s2, s3));
    terms_.add_elements(sums, i, dim_);
    i_ = dim_;
    return sums;
  }

  // A whole row of whole pairs of vectors, on a run not stepped, its sums left in lanes (the sets
  // combined as finish() combines them).
  HWY_INLINE Lanes row_lanes() {
    const int64_t n = lanes();
    Lanes s0 = Terms::zero(), s1 = Terms::zero();
    int64_t i = 0;
    if constexpr (kChains == 4) {
      Lanes s2 = Terms::zero(), s3 = Terms::zero();
      for (; i + 4 * n <= dim_; i += 4 * n) {
        add_pair(i, s0, s1);
        add_pair(i + 2 * n, s2, s3);
      }
      for (; i < dim_; i += 2 * n) add_pair(i, s0, s1);
      i_ = dim_;
      return Terms::combine(Terms::combine(s0, s1), Terms::combine(s2, s3));
    } else {
      for (; i < dim_; i += 2 * n) add_pair(i, s0, s1);
      i_ = dim_;
      return Terms::combine(s0, s1);
    }
  }

 private:
  static int64_t lanes() { return static_cast<int64_t>(hn::Lanes(DoubleTag())); }

  HWY_INLINE void add_pair(int64_t i, Lanes& a, Lanes& b) const {
    terms_.prefetch(i);
    terms_.add(a, i);
    terms_.add(b, i + lanes());
  }
  // With two sets, s2 and s3 are zero (no vector reached them): left out.
  static Lanes combined(const Lanes& s0, const Lanes& s1, const Lanes& s2, const Lanes& s3) {
    if constexpr (kChains == 4) {
      return Terms::combine(Terms::combine(s0, s1), Terms::combine(s2, s3));
    } else {
      (void)s2;
      (void)s3;
      return Terms::combine(s0, s1);
    }
  }

  Terms terms_;
  int64_t dim_;
  int64_t i_ = 0;
  Lanes sets_[kChains];
};

// The forward's terms: d = v - shift and d^2, where v is x, or with kResidual h = x + residual
// rounded to the stream's type as the unfused add stores it (x stored as SS, residual as SR,
// row_storage-inl.h): the forward with a fused residual add. h itself is written by its second
// pass, which reads x and residual again from cache: storing it here would either cost a second
// write of the row or, with streaming stores, evict it before that pass. Without kCentre
// (RMSNorm's group path) the shift is 0 and neither the subtraction nor sum(d) is taken: the same
// squares for half the work. Each pair prefetches kRunPrefetchFloats ahead (4 KiB): interleaved
// with the forward's normalising pass (its one caller that steps) it advances at that pass's pace.
constexpr int64_t kRunPrefetchFloats = tuned("kRunPrefetchFloats", 1024);

template <class SS, class SR, bool kResidual, bool kCentre = true>
struct ShiftedTerms {
  struct Lanes {
    hn::Vec<DoubleTag> sum, squares;
  };
  using Sums = ShiftedSums;

  ShiftedTerms(const typename SS::Elem* HWY_RESTRICT x_in,
               const typename SR::Elem* HWY_RESTRICT residual_in, double shift_in)
      : x(x_in), residual(residual_in), shift(shift_in), shift_v(hn::Set(DoubleTag(), shift_in)) {}

  const typename SS::Elem* HWY_RESTRICT x;
  const typename SR::Elem* HWY_RESTRICT residual;  // null without kResidual
  double shift;                                    // 0 without kCentre
  hn::Vec<DoubleTag> shift_v;                      // shift in every lane

  static Lanes zero() { return {hn::Zero(DoubleTag()), hn::Zero(DoubleTag())}; }
  static Lanes combine(const Lanes& a, const Lanes& b) {
    return {hn::Add(a.sum, b.sum), hn::Add(a.squares, b.squares)};
  }
  HWY_INLINE void prefetch(int64_t i) const {
    // Ahead into the next row near the end (rows are contiguous). The hardware prefetcher
    // alone leaves this compute-heavy float64 pass short of the memory bandwidth.
    hwy::Prefetch(x + i + kRunPrefetchFloats);
    if constexpr (kResidual) hwy::Prefetch(residual + i + kRunPrefetchFloats);
  }
  HWY_INLINE void add(Lanes& set, int64_t i) const {
    const DoubleTag dd;
    const HalfFloatTag df;  // half a register of floats, promoted
    auto v = load<SS>(df, x + i);
    if constexpr (kResidual) v = round_to<SS>(df, hn::Add(v, load<SR>(df, residual + i)));
    auto d = hn::PromoteTo(dd, v);
    if constexpr (kCentre) {
      d = hn::Sub(d, shift_v);
      set.sum = hn::Add(set.sum, d);
    }
    set.squares = hn::MulAdd(d, d, set.squares);
  }
  Sums total(const Lanes& set) const {
    const DoubleTag dd;
    return {hn::GetLane(hn::SumOfLanes(dd, set.sum)), hn::GetLane(hn::SumOfLanes(dd, set.squares))};
  }
  void add_elements(Sums& sums, int64_t begin, int64_t end) const {
    for (int64_t i = begin; i < end; ++i) {
      float v = load_one<SS>(x, i);
      if constexpr (kResidual) v = round_one<SS>(v + load_one<SR>(residual, i));
      const double d = static_cast<double>(v) - shift;
      sums.sum += d;
      sums.squares += d * d;
    }
  }
};

// The forward's run over one row of a float32 stream, shifted by `shift` (the row's first value:
// ShiftedSums above).
template <class SR, bool kResidual>
using ShiftedSumsRun = RowSumsRun<ShiftedTerms<Float32Rows, SR, kResidual>, 4>;
template <class SR, bool kResidual>
ShiftedSumsRun<SR, kResidual> shifted_sums_run(const float* HWY_RESTRICT x,
                                               const typename SR::Elem* HWY_RESTRICT residual,
                                               int64_t dim, double shift) {
  return ShiftedSumsRun<SR, kResidual>(ShiftedTerms<Float32Rows, SR, kResidual>(x, residual, shift),
                                       dim);
}

template <class SR, bool kResidual>
ShiftedSums shifted_sums_of(const float* HWY_RESTRICT x,
                            const typename SR::Elem* HWY_RESTRICT residual, int64_t dim,
                            double shift) {
  return shifted_sums_run<SR, kResidual>(x, residual, dim, shift).finish();
}

// One row of x's storage SS (BatchNorm's runs along the length take any).
template <class SS = Float32Rows>
ShiftedSums shifted_sums_row(const typename SS::Elem* HWY_RESTRICT x, int64_t dim, double shift) {
  using Terms = ShiftedTerms<SS, Float32Rows, false>;
  return RowSumsRun<Terms, 4>(Terms(x, nullptr, shift), dim).finish();
}

#if HWY_TARGET != HWY_SCALAR
// ---- float32 block sums: the 16-bit streams' statistics, forward and backward -----------------
// A row's sums are taken in float32 blocks (kFloat32BlockAdditions) shifted by a first estimate
// of its mean, and taken again centred on the mean itself where that estimate was poor
// (recentre_at, norm_numerics.hpp): the one rule of the 16-bit forward's statistics and the
// 16-bit backward's pass 1.

// The first estimate: the mean of the row's first register of values, rounded to float.
inline float register_mean(hn::Vec<FloatTag> first) {
  const FloatTag df;
  return hn::GetLane(hn::SumOfLanes(df, first)) / static_cast<float>(hn::Lanes(df));
}

// The float32 block sums' walk, the one routine of both directions (the forward's CentredTerms,
// norm_forward-inl.h; the backward's BackwardBlockTerms, norm_backward-inl.h): pairs of float32
// registers, the first of a pair to the even set of lanes and the second to the odd one, at most
// kFloat32BlockAdditions pairs a block; a block's two sets are added (even + odd) and Terms::fold
// adds the block to the row's float64 sums, so no float32 lane adds more than
// kFloat32BlockAdditions values. The elements short of a pair are Terms::finish's, in float64.
// What Terms provides: Lanes (a set) and Sums; zero(); prefetch(i); add_pair(even, odd, i), the
// registers at i and i + one register; add_one(set, i), one register; combine(a, b);
// fold(sums, block); finish(sums, begin, end).
template <class Terms>
class BlockSumsRun {
 public:
  using Lanes = typename Terms::Lanes;
  using Sums = typename Terms::Sums;

  explicit BlockSumsRun(const Terms& terms) : terms_(terms) {}
  Terms& terms() { return terms_; }

  // One block's lanes: the pairs of registers from i on, at most kFloat32BlockAdditions of them
  // and none past dim; i is left after them. With kOddLast, a last register short of a pair (a
  // short row's) goes to the even set before the sets are added.
  template <bool kOddLast = false>
  HWY_INLINE Lanes block(int64_t& i, int64_t dim) {
    const int64_t n = static_cast<int64_t>(hn::Lanes(FloatTag()));
    Lanes even = Terms::zero(), odd = Terms::zero();
    for (int64_t pair = 0; pair < kFloat32BlockAdditions && i + 2 * n <= dim; ++pair, i += 2 * n) {
      terms_.prefetch(i);
      terms_.add_pair(even, odd, i);
    }
    if constexpr (kOddLast) {
      if (i + n <= dim) {
        terms_.add_one(even, i);
        i += n;
      }
    }
    return Terms::combine(even, odd);
  }

  // A whole row: block after block, then the elements short of a pair.
  Sums row(int64_t dim) {
    const int64_t n = static_cast<int64_t>(hn::Lanes(FloatTag()));
    Sums sums;
    int64_t i = 0;
    while (i + 2 * n <= dim) terms_.fold(sums, block(i, dim));
    terms_.finish(sums, i, dim);
    return sums;
  }

 private:
  Terms terms_;
};

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#endif  // ADDNORM_OPS_CPU_SHIFTED_SUMS_INL_H_
