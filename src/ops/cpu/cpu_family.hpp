// The CPU family the library runs on, for the few decisions that are measured to differ between
// vendors' cores rather than between SIMD targets (which Highway dispatches): read once, from
// CPUID's vendor string.
#pragma once

namespace addnorm::cpu {

enum class CpuFamily { intel, amd, other };

CpuFamily cpu_family();

}  // namespace addnorm::cpu
