// How the norm kernels read and write rows of each storage type, per SIMD target: float32, or
// the bits (uint16_t) of bfloat16/float16. One kernel template serves every type: loads widen
// exactly to float32, stores round once (narrow-inl.h), a step of a row at a time with streaming
// stores where asked (store_step). Highway's "-inl.h" convention: included once per target.
#if defined(ADDNORM_OPS_CPU_ROW_STORAGE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ADDNORM_OPS_CPU_ROW_STORAGE_INL_H_
#undef ADDNORM_OPS_CPU_ROW_STORAGE_INL_H_
#else
#define ADDNORM_OPS_CPU_ROW_STORAGE_INL_H_
#endif

#include <cstdint>
#include <type_traits>

#include "addnorm/dtype.hpp"
#include "hwy/highway.h"
#include "ops/cpu/lane_ops-inl.h"
#include "ops/cpu/narrow-inl.h"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The storage policies.
struct Float32Rows {
  using Elem = float;
  static constexpr bool kHalf = false;
};
template <narrow::Half kType>
struct HalfRows {
  using Elem = uint16_t;
  static constexpr bool kHalf = true;
  static constexpr narrow::Half type = kType;
};

// Calls body(S{}) with the policy of `storage`. Every target takes every storage type (the
// 16-bit conversions of narrow-inl.h exist on all of them, the scalar target included).
template <class Body>
void with_storage(DType storage, const Body& body) {
  switch (storage) {
    case DType::float32:
      return body(Float32Rows{});
    case DType::bfloat16:
      return body(HalfRows<narrow::Half::bfloat16>{});
    case DType::float16:
      return body(HalfRows<narrow::Half::float16>{});
  }
}

template <class S, class D>
hn::Vec<D> load(D d, const typename S::Elem* p) {
  if constexpr (!S::kHalf) {
    return hn::LoadU(d, p);
  } else {
    return narrow::widen<S::type>(d, hn::LoadU(hn::Rebind<uint16_t, D>(), p));
  }
}
template <class S>
float load_one(const typename S::Elem* p, int64_t i) {
  if constexpr (!S::kHalf) {
    return p[i];
  } else {
    return narrow::widen_one(S::type, p[i]);
  }
}
template <class S, class D>
void store(D d, hn::Vec<D> v, typename S::Elem* p) {
  if constexpr (!S::kHalf) {
    hn::StoreU(v, d, p);
  } else {
    hn::StoreU(narrow::narrow<S::type>(d, v), hn::Rebind<uint16_t, D>(), p);
  }
}
template <class S>
void store_one(typename S::Elem* p, int64_t i, float value) {
  if constexpr (!S::kHalf) {
    p[i] = value;
  } else {
    p[i] = narrow::narrow_one(S::type, value);
  }
}

// A value rounded to the storage type, as storing and loading it would: the fused residual add
// normalises h as stored.
template <class S, class D>
hn::Vec<D> round_to(D d, hn::Vec<D> v) {
  if constexpr (!S::kHalf) {
    (void)d;
    return v;
  } else {
    return narrow::widen<S::type>(d, narrow::narrow<S::type>(d, v));
  }
}
template <class S>
float round_one(float value) {
  if constexpr (!S::kHalf) {
    return value;
  } else {
    return narrow::widen_one(S::type, narrow::narrow_one(S::type, value));
  }
}

// Where a row's vector stores begin (aligned_start, lane_ops-inl.h): 16-bit rows are stored a full
// register of 16-bit lanes (two float registers) at a time.
template <class S>
int64_t store_start(const typename S::Elem* p, int64_t dim, bool stream) {
  const FloatTag df;
  if constexpr (S::kHalf) {
    return aligned_start(hn::Repartition<uint16_t, FloatTag>(), p, dim, stream);
  } else {
    return aligned_start(df, p, dim, stream);
  }
}

// Stores one step of a row: the lanes of `lo`, and with kVectors = 2 those of `hi` after them
// (16-bit rows: one full register of 16-bit lanes). kNaNs: the values may be NaN (narrow-inl.h).
// Forced inline: GCC kept the bfloat16 instance with NaN handling out of line in the pre-norm's
// normalising pass (a call per 32 elements, 11% of its samples).
template <class S, bool kNaNs, int64_t kVectors>
HWY_INLINE void store_step(FloatTag df, hn::Vec<FloatTag> lo, hn::Vec<FloatTag> hi,
                           typename S::Elem* p, bool stream) {
  if constexpr (!S::kHalf) {
    if (stream) {
      hn::Stream(lo, df, p);
      if constexpr (kVectors == 2) hn::Stream(hi, df, p + hn::Lanes(df));
    } else {
      hn::StoreU(lo, df, p);
      if constexpr (kVectors == 2) hn::StoreU(hi, df, p + hn::Lanes(df));
    }
  } else {
    static_assert(kVectors == 2, "16-bit rows are stored a full register at a time");
#if HWY_TARGET != HWY_SCALAR
    if (stream) {
      hn::Stream(narrow::narrow_pair<S::type, kNaNs>(df, lo, hi),
                 hn::Repartition<uint16_t, FloatTag>(), p);
    } else {
      const hn::Rebind<uint16_t, FloatTag> dh;
      hn::StoreU(narrow::narrow<S::type, kNaNs>(df, lo), dh, p);
      hn::StoreU(narrow::narrow<S::type, kNaNs>(df, hi), dh, p + hn::Lanes(df));
    }
#else  // one lane: no streaming stores of whole 16-bit registers
    (void)stream;
    const hn::Rebind<uint16_t, FloatTag> dh;
    hn::StoreU(narrow::narrow<S::type, kNaNs>(df, lo), dh, p);
    hn::StoreU(narrow::narrow<S::type, kNaNs>(df, hi), dh, p + 1);
#endif
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#endif  // ADDNORM_OPS_CPU_ROW_STORAGE_INL_H_
