#include "ops/cpu/native_bfloat16.hpp"

namespace addnorm::cpu {

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  // May run in a static initialiser, before the compiler's own CPU model is set up.
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

void allow_native_bfloat16(bool allowed) {
  native_bfloat16 = allowed && cpu_has_avx512_bf16();
}

}  // namespace addnorm::cpu
