// Dropout at SIMD speed: the dropout op, the post-norm backward's rebuilt x + Dropout(s) and
// mask (both by dropout_input-inl.h, the norm engine's post-norm input stage), the mask applied
// to the gradients, and the raw Philox bits (philox-inl.h). Bit for bit the same stream and
// values as the scalar definition in ops/reference/philox.hpp.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/dropout_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include <algorithm>
#include <array>
#include <cstdint>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "ops/cpu/dropout.hpp"
#include "ops/cpu/dropout_input-inl.h"
#include "ops/cpu/philox-inl.h"
#include "ops/cpu/row_storage-inl.h"
#include "ops/reference/philox.hpp"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// out = x + Dropout(s) (x and s of any storage type) with the mask or without
// (dropout_input-inl.h).
void dropout_add_range(const void* x, DType x_storage, const void* s, DType s_storage, float* out,
                       uint8_t* keep, int64_t count, uint64_t seed, float p, uint64_t first_element,
                       int64_t readable) {
  const DropoutStream stream(seed, p);
  const bool drop = p != 0.0f;
  const DropoutInputFn fn = keep ? pick_dropout_input<true>(x_storage, s_storage, drop)
                                 : pick_dropout_input<false>(x_storage, s_storage, drop);
  fn(stream, x, s, out, keep, count, first_element, std::max(readable, count));
}

// How many values a 16-bit dropout takes through its float32 buffer at a time: 8 KiB, in L1.
constexpr int64_t kDropoutBlock = 2048;

// output = Dropout(input) (p > 0), both stored as S: float32 straight from the input stage,
// 16-bit a block at a time through a float32 buffer on the stack, each value the float32 op's
// rounded once. A block is read whole before it is written, so output may be input.
template <class S>
void dropout_as(const DropoutStream& stream, const void* input, void* output, int64_t count,
                uint64_t first_element) {
  if constexpr (!S::kHalf) {
    dropout_input<NoRows, S, true, false>(stream, nullptr, input, static_cast<float*>(output),
                                          nullptr, count, first_element, count);
  } else {
    const auto* in = static_cast<const typename S::Elem*>(input);
    auto* out = static_cast<typename S::Elem*>(output);
    HWY_ALIGN float buffer[kDropoutBlock];
    for (int64_t at = 0; at < count; at += kDropoutBlock) {
      const int64_t block = std::min(kDropoutBlock, count - at);
      dropout_input<NoRows, S, true, false>(stream, nullptr, in + at, buffer, nullptr, block,
                                            first_element + static_cast<uint64_t>(at), count - at);
      int64_t i = 0;
#if HWY_TARGET != HWY_SCALAR
      const FloatTag df;
      const auto n = static_cast<int64_t>(hn::Lanes(df));
      for (; i + n <= block; i += n) store<S>(df, hn::Load(df, buffer + i), out + at + i);
#endif
      for (; i < block; ++i) store_one<S>(out + at, i, buffer[i]);
    }
  }
}

void dropout_range(const void* input, void* output, DType storage, int64_t count, uint64_t seed,
                   float p, uint64_t first_element) {
  const DropoutStream stream(seed, p);
  with_storage(storage, [&](auto policy) {
    dropout_as<decltype(policy)>(stream, input, output, count, first_element);
  });
}

// dropped[i] = keep[i] ? input[i] * scale (float64, rounded once) : input[i] * 0 (dropped_one's
// rule; a plain copy without
// keep) and copy[i] = input[i], each rounded once to its storage type; both written with
// streaming stores when `stream` (where their alignment allows).
template <class SD, class SC>
void apply_keep_as(const float* HWY_RESTRICT input, const uint8_t* HWY_RESTRICT keep,
                   void* dropped_rows, void* copy_rows, int64_t count, float p, bool stream) {
  auto* HWY_RESTRICT dropped = static_cast<typename SD::Elem*>(dropped_rows);
  auto* HWY_RESTRICT copy = static_cast<typename SC::Elem*>(copy_rows);
  const double scale = 1.0 / (1.0 - static_cast<double>(p));
  auto scalar = [&](int64_t i) {
    const float v = input[i];
    store_one<SC>(copy, i, v);
    float d = v;
    if (keep) {
      d = keep[i] ? static_cast<float>(static_cast<double>(v) * scale)
                  : reference::dropout_dropped_value(v);
    }
    store_one<SD>(dropped, i, d);
  };
  int64_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const FloatTag df;
  const PhiloxU32Tag du32;
  const hn::Rebind<uint8_t, PhiloxU32Tag> du8;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  // Float registers per step: two where a 16-bit output takes a full register of 16-bit lanes.
  constexpr int64_t kVectors = SD::kHalf || SC::kHalf ? 2 : 1;
  const int64_t start = store_start<SD>(dropped, count, stream);
  for (; i < start; ++i) scalar(i);
  const bool stream_copy = stream && store_start<SC>(copy + i, count - i, true) == 0;
  for (; i + kVectors * n <= count; i += kVectors * n) {
    hn::Vec<FloatTag> v[kVectors], d[kVectors];
    for (int64_t k = 0; k < kVectors; ++k) {
      v[k] = hn::LoadU(df, input + i + k * n);
      d[k] = v[k];
      if (keep) {
        const auto kept =
            hn::Ne(hn::PromoteTo(du32, hn::LoadU(du8, keep + i + k * n)), hn::Zero(du32));
        d[k] = dropped_lanes(df, v[k], kept, scale);
      }
    }
    store_step<SC, true, kVectors>(df, v[0], v[kVectors - 1], copy + i, stream_copy);
    store_step<SD, true, kVectors>(df, d[0], d[kVectors - 1], dropped + i, stream);
  }
  if (stream) hwy::FlushStream();
#else
  (void)stream;
#endif
  for (; i < count; ++i) scalar(i);
}

void apply_keep_range(const float* input, const uint8_t* keep, void* dropped, DType dropped_storage,
                      void* copy, DType copy_storage, int64_t count, float p, bool stream) {
  with_storage(dropped_storage, [&](auto dropped_policy) {
    with_storage(copy_storage, [&](auto copy_policy) {
      apply_keep_as<decltype(dropped_policy), decltype(copy_policy)>(input, keep, dropped, copy,
                                                                     count, p, stream);
    });
  });
}

// Elements [0, count) of the stream keyed by seed from first_element: one(i, bits) element by
// element up to a block boundary and after the last whole group, and group(i, first_half,
// second_half) for each whole group of PhiloxGroups::group_elements() elements from i on (a step
// of groups at a time while a whole step is left).
template <class One, class Group>
void walk_stream(uint64_t seed, uint64_t first_element, int64_t count, const One& one,
                 const Group& group) {
  ScalarPhilox scalar(seed);
  int64_t i = 0;
  for (; i < count && (first_element + static_cast<uint64_t>(i)) % 4 != 0; ++i) {
    one(i, scalar.bits(first_element + static_cast<uint64_t>(i)));
  }
#if HWY_TARGET != HWY_SCALAR
  const PhiloxGroups philox(seed);
  constexpr int kGroups = PhiloxGroups::kGroupsPerStep;
  const int64_t elements = PhiloxGroups::group_elements();
  PhiloxV32 bits[2 * kGroups];
  for (; i + kGroups * elements <= count; i += kGroups * elements) {
    philox.run<kGroups>((first_element + static_cast<uint64_t>(i)) / 4, bits);
    for (int g = 0; g < kGroups; ++g) group(i + g * elements, bits[2 * g], bits[2 * g + 1]);
  }
  for (; i + elements <= count; i += elements) {
    philox.run<1>((first_element + static_cast<uint64_t>(i)) / 4, bits);
    group(i, bits[0], bits[1]);
  }
#else
  (void)group;
#endif
  for (; i < count; ++i) one(i, scalar.bits(first_element + static_cast<uint64_t>(i)));
}

// bits[i] = the 32 random bits of element first_element + i of the stream keyed by seed.
void philox_bits_range(uint64_t seed, uint64_t first_element, uint32_t* HWY_RESTRICT bits,
                       int64_t count) {
  walk_stream(
      seed, first_element, count, [&](int64_t i, uint32_t word) { bits[i] = word; },
      [&](int64_t i, auto first_half, auto second_half) HWY_ATTR {
        const hn::DFromV<decltype(first_half)> du32;  // (a dependent name: no vectors on SCALAR)
        hn::StoreU(first_half, du32, bits + i);
        hn::StoreU(second_half, du32, bits + i + static_cast<int64_t>(hn::Lanes(du32)));
      });
}

// keep[i] = 1 if element first_element + i of the stream is kept at drop probability p, else 0.
void keep_mask_range(uint64_t seed, float p, uint64_t first_element, uint8_t* HWY_RESTRICT keep,
                     int64_t count) {
  const DropoutConstants c = constants_of(seed, p);
  walk_stream(
      seed, first_element, count,
      [&](int64_t i, uint32_t word) { keep[i] = word >= c.threshold ? 1 : 0; },
      [&](int64_t i, auto first_half, auto second_half) HWY_ATTR {
        const hn::DFromV<decltype(first_half)> du32;
        store_keep_bytes(kept_lanes(c, first_half), keep + i);
        store_keep_bytes(kept_lanes(c, second_half),
                         keep + i + static_cast<int64_t>(hn::Lanes(du32)));
      });
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cstring>

namespace addnorm::cpu {

HWY_EXPORT(philox_bits_range);
HWY_EXPORT(keep_mask_range);
HWY_EXPORT(dropout_add_range);
HWY_EXPORT(dropout_range);
HWY_EXPORT(apply_keep_range);

void philox_bits(uint64_t seed, uint64_t first_element, uint32_t* bits, int64_t count) {
  HWY_DYNAMIC_DISPATCH(philox_bits_range)(seed, first_element, bits, count);
}

void keep_mask(uint64_t seed, float p, uint64_t first_element, uint8_t* keep, int64_t count) {
  HWY_DYNAMIC_DISPATCH(keep_mask_range)(seed, p, first_element, keep, count);
}

void apply_dropout(const void* input, void* output, DType storage, int64_t count,
                   const DropoutOptions& options, uint64_t first_element) {
  if (count == 0) return;
  if (options.p == 0.0f) {  // the identity, in any storage type
    if (output != input)
      std::memcpy(output, input, static_cast<size_t>(count * dtype_size(storage)));
    return;
  }
  HWY_DYNAMIC_DISPATCH(dropout_range)
  (input, output, storage, count, options.seed, options.p, first_element);
}

void add_dropout(const void* x, DType x_storage, const void* s, DType s_storage, float* out,
                 uint8_t* keep, int64_t count, const DropoutOptions& options,
                 uint64_t first_element, int64_t readable) {
  HWY_DYNAMIC_DISPATCH(dropout_add_range)
  (x, x_storage, s, s_storage, out, keep, count, options.seed, options.p, first_element, readable);
}

void apply_keep(const float* input, const uint8_t* keep, void* dropped, DType dropped_storage,
                void* copy, DType copy_storage, int64_t count, float p, bool stream) {
  HWY_DYNAMIC_DISPATCH(apply_keep_range)
  (input, p == 0.0f ? nullptr : keep, dropped, dropped_storage, copy, copy_storage, count, p,
   stream);
}

}  // namespace addnorm::cpu
#endif  // HWY_ONCE
