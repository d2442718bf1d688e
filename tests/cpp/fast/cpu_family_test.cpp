// cpu::cpu_family() (src/ops/cpu/cpu_family.hpp), which the kernels' per-vendor choices read
// (streams_narrow_outputs), agrees with the vendor the kernel reports in /proc/cpuinfo.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "ops/cpu/cpu_family.hpp"

namespace addnorm {
namespace {

TEST(CpuFamily, AgreesWithProcCpuinfo) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  if (!cpuinfo) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string line, vendor;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("vendor_id", 0) == 0) {
      vendor = line.substr(line.find(':') + 2);
      break;
    }
  }
  if (vendor.empty()) GTEST_SKIP() << "no vendor_id in /proc/cpuinfo (not x86)";
  const cpu::CpuFamily want = vendor == "GenuineIntel" ? cpu::CpuFamily::intel
                              : vendor == "AuthenticAMD" || vendor == "HygonGenuine"
                                  ? cpu::CpuFamily::amd
                                  : cpu::CpuFamily::other;
  EXPECT_EQ(cpu::cpu_family(), want) << vendor;
}

}  // namespace
}  // namespace addnorm
