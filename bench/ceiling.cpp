// Copy kernels for the ceiling. AVX-512 and AVX2 versions are compiled with target attributes and
// chosen at run time, so the benchmark needs no -march flag. Loops use intrinsics so the compiler
// cannot turn the "plain" copy into a memcpy call.
#include "ceiling.hpp"

#include <immintrin.h>
#include <omp.h>

#include <cstdint>
#include <cstring>

namespace addnorm::bench {
namespace {

enum class Isa { avx512, avx2, scalar };

Isa detect_isa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return Isa::avx512;
  if (__builtin_cpu_supports("avx2")) return Isa::avx2;
  return Isa::scalar;
}

const Isa kIsa = detect_isa();

__attribute__((target("avx512f"))) void copy_avx512(float* dst, const float* src, size_t count,
                                                    bool streaming) {
  size_t i = 0;
  // Streaming stores need 64-byte aligned destinations: do the unaligned head by hand.
  while (i < count && (reinterpret_cast<uintptr_t>(dst + i) & 63) != 0) {
    dst[i] = src[i];
    ++i;
  }
  if (streaming) {
    for (; i + 64 <= count; i += 64) {
      for (size_t k = 0; k < 64; k += 16) {
        _mm512_stream_ps(dst + i + k, _mm512_loadu_ps(src + i + k));
      }
    }
    _mm_sfence();
  } else {
    for (; i + 64 <= count; i += 64) {
      for (size_t k = 0; k < 64; k += 16) {
        _mm512_store_ps(dst + i + k, _mm512_loadu_ps(src + i + k));
      }
    }
  }
  for (; i < count; ++i) dst[i] = src[i];
}

__attribute__((target("avx2"))) void copy_avx2(float* dst, const float* src, size_t count,
                                               bool streaming) {
  size_t i = 0;
  while (i < count && (reinterpret_cast<uintptr_t>(dst + i) & 31) != 0) {
    dst[i] = src[i];
    ++i;
  }
  if (streaming) {
    for (; i + 32 <= count; i += 32) {
      for (size_t k = 0; k < 32; k += 8) {
        _mm256_stream_ps(dst + i + k, _mm256_loadu_ps(src + i + k));
      }
    }
    _mm_sfence();
  } else {
    for (; i + 32 <= count; i += 32) {
      for (size_t k = 0; k < 32; k += 8) {
        _mm256_store_ps(dst + i + k, _mm256_loadu_ps(src + i + k));
      }
    }
  }
  for (; i < count; ++i) dst[i] = src[i];
}

void copy_sse(float* dst, const float* src, size_t count, bool streaming) {
  size_t i = 0;
  while (i < count && (reinterpret_cast<uintptr_t>(dst + i) & 15) != 0) {
    dst[i] = src[i];
    ++i;
  }
  for (; i + 4 <= count; i += 4) {
    if (streaming) {
      _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
    } else {
      _mm_store_ps(dst + i, _mm_loadu_ps(src + i));
    }
  }
  if (streaming) _mm_sfence();
  for (; i < count; ++i) dst[i] = src[i];
}

void copy_chunk(float* dst, const float* src, size_t count, bool streaming) {
  switch (kIsa) {
    case Isa::avx512:
      copy_avx512(dst, src, count, streaming);
      break;
    case Isa::avx2:
      copy_avx2(dst, src, count, streaming);
      break;
    case Isa::scalar:
      copy_sse(dst, src, count, streaming);
      break;
  }
}

// Each thread copies one contiguous chunk, chunk starts on 64-byte boundaries.
template <class Chunk>
void split(size_t count, Chunk chunk) {
#pragma omp parallel
  {
    const size_t threads = static_cast<size_t>(omp_get_num_threads());
    const size_t thread = static_cast<size_t>(omp_get_thread_num());
    const size_t per = (count / threads + 15) / 16 * 16;
    const size_t begin = std::min(count, thread * per);
    const size_t end = thread + 1 == threads ? count : std::min(count, begin + per);
    if (end > begin) chunk(begin, end - begin);
  }
}

}  // namespace

void copy_plain(float* dst, const float* src, size_t count) {
  split(count, [&](size_t begin, size_t n) { copy_chunk(dst + begin, src + begin, n, false); });
}

void copy_nontemporal(float* dst, const float* src, size_t count) {
  split(count, [&](size_t begin, size_t n) { copy_chunk(dst + begin, src + begin, n, true); });
}

void copy_memcpy(float* dst, const float* src, size_t count) {
  split(count,
        [&](size_t begin, size_t n) { std::memcpy(dst + begin, src + begin, n * sizeof(float)); });
}

std::string copy_isa() {
  switch (kIsa) {
    case Isa::avx512:
      return "avx512";
    case Isa::avx2:
      return "avx2";
    case Isa::scalar:
      return "sse";
  }
  return "?";
}

}  // namespace addnorm::bench
