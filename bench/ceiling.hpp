// The bandwidth ceiling, measured in the same run as the ops: three ways to copy a buffer, each
// split over the case's threads in contiguous chunks. GB/s counts bytes read + written (2x the
// buffer), STREAM's convention, which is also how the ops' byte model counts.
#pragma once

#include <cstddef>
#include <string>

namespace addnorm::bench {

// Copy with ordinary vector stores (the CPU reads each destination line before writing it).
void copy_plain(float* dst, const float* src, size_t count);
// Copy with non-temporal (streaming) stores that bypass the cache: no read of the destination.
void copy_nontemporal(float* dst, const float* src, size_t count);
// glibc's memcpy on each thread's chunk (it switches to non-temporal stores past a size).
void copy_memcpy(float* dst, const float* src, size_t count);

// "avx512", "avx2" or "scalar": what the plain and non-temporal copies use on this machine.
std::string copy_isa();

}  // namespace addnorm::bench
