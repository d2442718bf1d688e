// What the benchmark ran on, for the report: the CPU's model string and vendor family (results
// differ between Intel and AMD cores: docs/performance.md keeps a run per family) and the load.
#pragma once

#include <string>

namespace addnorm::bench {

// /proc/cpuinfo's "model name", or "unknown".
std::string cpu_model();
// "Intel", "AMD" or the raw vendor_id (from /proc/cpuinfo), or "unknown".
std::string cpu_family();
// The 1-minute load average: above the CPU count, other work shares the cores and absolute GB/s
// mean little (same-run ratios still do).
std::string load_average();

}  // namespace addnorm::bench
