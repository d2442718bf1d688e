// Whether the AVX-512 targets round float32 to bfloat16 with the AVX512_BF16 instructions
// (vcvtne2ps2bf16, vcvtneps2bf16; Zen 4 on, Cooper Lake, Sapphire Rapids on) rather than with
// the integer emulation of narrow-inl.h. Highway 1.0 has no target with them, so narrow-inl.h
// emits them itself, behind this flag. They give the emulation's bits (round to nearest even,
// NaNs quietened the same way) except on float32 subnormal inputs, which they flush to zero:
// a register holding one is rounded by the emulation instead.
#pragma once

namespace addnorm::cpu {

// CPUID: AVX512_BF16 (leaf 7, sub-leaf 1, EAX bit 5), on an x86 CPU.
bool cpu_has_avx512_bf16();

// Read in the kernels' inner loops, so a plain flag: set when the library loads, and by
// allow_native_bfloat16.
inline bool native_bfloat16 = cpu_has_avx512_bf16();

// Lets the tests compare the two roundings on a CPU that has the instructions. Not thread-safe:
// call it while no kernel runs.
void allow_native_bfloat16(bool allowed);

}  // namespace addnorm::cpu
