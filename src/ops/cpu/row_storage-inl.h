// How the norm kernels read and write rows of each storage type, per SIMD target: float32, or
// the bits (uint16_t) of bfloat16/float16. One kernel template serves every type: loads widen
// exactly to float32, stores round once (narrow-inl.h). Also the row moments every norm kernel
// takes from its shifted sums. Highway's "-inl.h" convention: included once per target.
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

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#endif  // ADDNORM_OPS_CPU_ROW_STORAGE_INL_H_
