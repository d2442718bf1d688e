#include "ops/cpu/cpu_family.hpp"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace addnorm::cpu {
namespace {

CpuFamily read_family() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return CpuFamily::other;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);  // the vendor string is EBX, EDX, ECX in that order
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  if (std::strcmp(vendor, "GenuineIntel") == 0) return CpuFamily::intel;
  // Hygon's Dhyana cores are AMD Zen cores.
  if (std::strcmp(vendor, "AuthenticAMD") == 0 || std::strcmp(vendor, "HygonGenuine") == 0) {
    return CpuFamily::amd;
  }
#endif
  return CpuFamily::other;
}

}  // namespace

CpuFamily cpu_family() {
  static const CpuFamily family = read_family();
  return family;
}

}  // namespace addnorm::cpu
