// x + Dropout(s) per SIMD target, the one definition behind every dropout path: the norm
// engine's post-norm input stage (rows built in float32 into a buffer that its two passes read
// from the L1 cache), the post-norm backward's rebuilt input and mask, and the dropout op itself
// (without x). x and s in any storage type (row_storage-inl.h), widened exactly; the dropped value
// and the sum round as the unfused dropout -> add does (dropout.hpp), so the fused ops agree with
// it bit for bit. Highway's "-inl.h" convention: included once per target.
#if defined(ADDNORM_OPS_CPU_DROPOUT_INPUT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ADDNORM_OPS_CPU_DROPOUT_INPUT_INL_H_
#undef ADDNORM_OPS_CPU_DROPOUT_INPUT_INL_H_
#else
#define ADDNORM_OPS_CPU_DROPOUT_INPUT_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "ops/cpu/lane_ops-inl.h"
#include "ops/cpu/philox-inl.h"
#include "ops/cpu/row_storage-inl.h"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One call's dropout stream, set up once per thread's range of rows (the vector Philox's keys
// and lane layout cost about as much as a short row).
struct DropoutStream {
  explicit DropoutStream(uint64_t seed, float p)
      : constants(constants_of(seed, p))
#if HWY_TARGET != HWY_SCALAR
        ,
        groups(seed)
#endif
  {
  }
  DropoutConstants constants;
#if HWY_TARGET != HWY_SCALAR
  PhiloxGroups groups;
#endif
};

// The x of a plain dropout: none, h[i] = Dropout(s)[i] (not 0 + Dropout(s)[i], which would turn a
// kept -0 into +0).
struct NoRows {
  using Elem = float;
  static constexpr bool kHalf = false;
};

// h[i] = x[i] + Dropout(s)[i] for i in [0, count) (a run of whole rows), s[i] being element
// first_element + i of the dropout stream; with kKeep, keep[i] = 1 for a kept element and 0 for
// a dropped one (the backward's mask). Without kDrop (p = 0) dropout is the identity and no bits
// are drawn. h may be x or s (each vector is loaded before it is stored). x and s come from
// memory and are prefetched a few KiB ahead (up to `readable` elements from x and s: rows are
// contiguous, so that runs into the next rows): the Philox work between the loads leaves the
// hardware prefetcher behind.
template <class SX, class SD, bool kDrop, bool kKeep>
void dropout_input(const DropoutStream& stream, const void* x_rows, const void* s_rows, float* h,
                   uint8_t* keep, int64_t count, uint64_t first_element, int64_t readable) {
  const auto* x = static_cast<const typename SX::Elem*>(x_rows);
  const auto* s = static_cast<const typename SD::Elem*>(s_rows);
  constexpr bool kAddX = !std::is_same_v<SX, NoRows>;
  const DropoutConstants& c = stream.constants;
  ScalarPhilox scalar(c.seed);
  auto one = [&](int64_t i) {
    float dropped = load_one<SD>(s, i);
    if constexpr (kDrop) {
      const uint32_t bits = scalar.bits(first_element + static_cast<uint64_t>(i));
      if constexpr (kKeep) keep[i] = bits >= c.threshold ? 1 : 0;
      dropped = dropped_one(c, bits, dropped);
    } else if constexpr (kKeep) {
      keep[i] = 1;
    }
    if constexpr (kAddX) {
      h[i] = load_one<SX>(x, i) + dropped;
    } else {
      h[i] = dropped;
    }
  };
  int64_t i = 0;
  if constexpr (kDrop) {  // up to a Philox block boundary
    for (; i < count && (first_element + static_cast<uint64_t>(i)) % 4 != 0; ++i) one(i);
  }
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<float> df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  constexpr int64_t kPrefetchAhead = 2048;  // elements
  // Elements per cache line of the wider of x and s, so that each line of both is prefetched.
  constexpr int64_t kLineElements =
      64 / int64_t{std::max(sizeof(typename SX::Elem), sizeof(typename SD::Elem))};
  // One vector of lanes at element `at`, with their random bits.
  auto lanes = [&](int64_t at, PhiloxV32 bits) HWY_ATTR {
    auto dropped = load<SD>(df, s + at);
    if constexpr (kDrop) {
      const auto kept = kept_lanes(c, bits);
      dropped = dropped_lanes(df, dropped, kept, c.scale);
      if constexpr (kKeep) store_keep_bytes(kept, keep + at);
    } else if constexpr (kKeep) {
      const hn::Rebind<uint8_t, PhiloxU32Tag> du8;
      hn::StoreU(hn::Set(du8, uint8_t{1}), du8, keep + at);
    }
    if constexpr (kAddX) {
      hn::StoreU(hn::Add(load<SX>(df, x + at), dropped), df, h + at);
    } else {
      hn::StoreU(dropped, df, h + at);
    }
  };
  // kVectors vectors per step: a step of Philox groups, independent chains the core overlaps.
  constexpr int kGroups = PhiloxGroups::kGroupsPerStep;
  constexpr int64_t kVectors = 2 * kGroups;
  PhiloxV32 bits[kVectors];
  if constexpr (!kDrop) {  // no bits are drawn; the lanes still take (and ignore) a vector
    for (PhiloxV32& b : bits) b = hn::Zero(PhiloxU32Tag());
  }
  // A local copy: the stores to h cannot reach it, so its keys stay where the compiler put them.
  const PhiloxGroups groups = stream.groups;
  // The bits of kDrawn groups from element `at` on, into bits[0 .. 2 kDrawn).
  auto draw = [&](int64_t at, auto drawn) HWY_ATTR {
    if constexpr (kDrop) {
      groups.run<decltype(drawn)::value>((first_element + static_cast<uint64_t>(at)) / 4, bits);
    }
  };
  for (; i + kVectors * n <= count; i += kVectors * n) {
    if (i + kVectors * n + kPrefetchAhead <= readable) {
      for (int64_t line = 0; line < kVectors * n; line += kLineElements) {
        if constexpr (kAddX) hwy::Prefetch(x + i + line + kPrefetchAhead);
        hwy::Prefetch(s + i + line + kPrefetchAhead);
      }
    }
    draw(i, std::integral_constant<int, kGroups>());
    for (int64_t k = 0; k < kVectors; ++k) lanes(i + k * n, bits[k]);
  }
  while (i + n <= count) {  // fewer than kVectors vectors left: a group (two vectors) at a time
    draw(i, std::integral_constant<int, 1>());
    for (int64_t k = 0; k < 2 && i + n <= count; ++k, i += n) lanes(i, bits[k]);
  }
#else
  (void)readable;
#endif
  for (; i < count; ++i) one(i);
}

using DropoutInputFn = void (*)(const DropoutStream&, const void*, const void*, float*, uint8_t*,
                                int64_t, uint64_t, int64_t);

// The instance for x stored as `x_storage` and s as `s_storage`, with the mask or without.
template <bool kKeep>
DropoutInputFn pick_dropout_input(DType x_storage, DType s_storage, bool drop) {
  DropoutInputFn fn = nullptr;
  with_storage(x_storage, [&](auto x_policy) {
    with_storage(s_storage, [&](auto s_policy) {
      with_flag(drop, [&](auto drops) {
        fn = &dropout_input<decltype(x_policy), decltype(s_policy), drops(), kKeep>;
      });
    });
  });
  return fn;
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#endif  // ADDNORM_OPS_CPU_DROPOUT_INPUT_INL_H_
