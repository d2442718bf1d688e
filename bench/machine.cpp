// /proc/cpuinfo and /proc/loadavg (see machine.hpp).
#include "machine.hpp"

#include <fstream>

namespace addnorm::bench {
namespace {

// The value of the first "field : value" line of /proc/cpuinfo whose field is `field`.
std::string cpuinfo_field(const std::string& field) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind(field, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

}  // namespace

std::string cpu_model() {
  const std::string model = cpuinfo_field("model name");
  return model.empty() ? "unknown" : model;
}

std::string cpu_family() {
  const std::string vendor = cpuinfo_field("vendor_id");
  if (vendor == "GenuineIntel") return "Intel";
  if (vendor == "AuthenticAMD") return "AMD";
  return vendor.empty() ? "unknown" : vendor;
}

std::string load_average() {
  std::ifstream file("/proc/loadavg");
  std::string one;
  file >> one;
  return one.empty() ? "?" : one;
}

}  // namespace addnorm::bench
