// Widening and narrowing rows between float32 and the storage types, per SIMD target, with the
// conversions of narrow-inl.h on every target; the scalar conversions (the same bits) serve the
// ends of rows.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/convert_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "addnorm/dtype.hpp"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "ops/cpu/convert.hpp"
#include "ops/cpu/narrow-inl.h"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using narrow::Half;
using narrow::narrow_one;
using narrow::widen_one;

using FloatTag = hn::ScalableTag<float>;
using U16Tag = hn::Rebind<uint16_t, FloatTag>;

// Float lanes in one vector: the step of every whole-vector loop below.
int64_t float_lanes() {
  return static_cast<int64_t>(hn::Lanes(FloatTag()));
}

template <Half kType>
void widen_row(const uint16_t* HWY_RESTRICT source, float* HWY_RESTRICT target, int64_t count) {
  const int64_t n = float_lanes();
  int64_t i = 0;
  for (; i + n <= count; i += n) {
    // Widening is usually the first touch of a block read from memory: prefetch 4 KiB ahead
    // (the hardware prefetcher alone leaves this short loop waiting on memory).
    hwy::Prefetch(source + i + 2048);
    hn::StoreU(narrow::widen<kType>(FloatTag(), hn::LoadU(U16Tag(), source + i)), FloatTag(),
               target + i);
  }
  for (; i < count; ++i) target[i] = widen_one(kType, source[i]);
}

template <Half kType>
void narrow_row(const float* HWY_RESTRICT source, uint16_t* HWY_RESTRICT target, int64_t count) {
  const int64_t n = float_lanes();
  int64_t i = 0;
  for (; i + n <= count; i += n) {
    hn::StoreU(narrow::narrow<kType>(FloatTag(), hn::LoadU(FloatTag(), source + i)), U16Tag(),
               target + i);
  }
#if HWY_TARGET != HWY_SCALAR
  // Half a register of what is left, then one at a time.
  const hn::Half<FloatTag> dh;
  if (i + n / 2 <= count) {
    hn::StoreU(narrow::narrow<kType>(dh, hn::LoadU(dh, source + i)),
               hn::Rebind<uint16_t, decltype(dh)>(), target + i);
    i += n / 2;
  }
#endif
  for (; i < count; ++i) target[i] = narrow_one(kType, source[i]);
}

// The same with non-temporal stores, for outputs larger than the cache: two float vectors
// make one full vector of 16-bit lanes (streaming stores take whole, aligned vectors).
template <Half kType>
void narrow_row_streaming(const float* HWY_RESTRICT source, uint16_t* HWY_RESTRICT target,
                          int64_t count) {
  int64_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const FloatTag df;
  const hn::Repartition<uint16_t, FloatTag> du16;  // full width: twice the float lanes
  const int64_t n = float_lanes();
  const auto bytes = static_cast<uintptr_t>(hn::Lanes(du16) * sizeof(uint16_t));
  const auto misalignment = reinterpret_cast<uintptr_t>(target) % bytes;
  if (misalignment % sizeof(uint16_t) == 0) {
    const int64_t head =
        misalignment == 0 ? 0 : static_cast<int64_t>((bytes - misalignment) / sizeof(uint16_t));
    for (; i < head && i < count; ++i) target[i] = narrow_one(kType, source[i]);
    for (; i + 2 * n <= count; i += 2 * n) {
      hn::Stream(
          narrow::narrow_pair<kType>(df, hn::LoadU(df, source + i), hn::LoadU(df, source + i + n)),
          du16, target + i);
    }
    hwy::FlushStream();
  }
#endif
  narrow_row<kType>(source + i, target + i, count - i);
}

void widen_bfloat16(const uint16_t* source, float* target, int64_t count) {
  widen_row<Half::bfloat16>(source, target, count);
}
void widen_float16(const uint16_t* source, float* target, int64_t count) {
  widen_row<Half::float16>(source, target, count);
}
void narrow_bfloat16(const float* source, uint16_t* target, int64_t count, bool stream) {
  if (stream) return narrow_row_streaming<Half::bfloat16>(source, target, count);
  narrow_row<Half::bfloat16>(source, target, count);
}
void narrow_float16(const float* source, uint16_t* target, int64_t count, bool stream) {
  if (stream) return narrow_row_streaming<Half::float16>(source, target, count);
  narrow_row<Half::float16>(source, target, count);
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cstring>

namespace addnorm::cpu {

HWY_EXPORT(widen_bfloat16);
HWY_EXPORT(widen_float16);
HWY_EXPORT(narrow_bfloat16);
HWY_EXPORT(narrow_float16);

void to_float32(const void* source, DType dtype, float* target, int64_t count) {
  const auto* halves = static_cast<const uint16_t*>(source);
  switch (dtype) {
    case DType::float32:
      std::memcpy(target, source, static_cast<size_t>(count) * sizeof(float));
      break;
    case DType::bfloat16:
      HWY_DYNAMIC_DISPATCH(widen_bfloat16)(halves, target, count);
      break;
    case DType::float16:
      HWY_DYNAMIC_DISPATCH(widen_float16)(halves, target, count);
      break;
  }
}

void from_float32(const float* source, void* target, DType dtype, int64_t count, bool stream) {
  auto* halves = static_cast<uint16_t*>(target);
  switch (dtype) {
    case DType::float32:
      std::memcpy(target, source, static_cast<size_t>(count) * sizeof(float));
      break;
    case DType::bfloat16:
      HWY_DYNAMIC_DISPATCH(narrow_bfloat16)(source, halves, count, stream);
      break;
    case DType::float16:
      HWY_DYNAMIC_DISPATCH(narrow_float16)(source, halves, count, stream);
      break;
  }
}

}  // namespace addnorm::cpu
#endif  // HWY_ONCE
