// Per-call page faults and heap growth (see heap_probe.hpp).
#include "heap_probe.hpp"

#include <unistd.h>

#include <cstdint>

#include "memory_stats.hpp"

namespace addnorm::bench {
namespace {

// The end of malloc's main heap; it moves only when glibc grows or trims the heap with brk.
uintptr_t heap_end() {
  return reinterpret_cast<uintptr_t>(sbrk(0));
}

double mib(int64_t bytes) {
  return static_cast<double>(bytes) / double(1 << 20);
}

}  // namespace

void probe_heap(std::ostream& out, const std::string& case_name, const std::vector<Runner>& runners,
                int calls) {
  for (const Runner& runner : runners) {
    out << case_name << " " << runner.impl << ", " << calls << " calls;"
        << " the calls that faulted (faults, heap growth):";
    const uintptr_t first_end = heap_end();
    int faulting_calls = 0;
    for (int call = 0; call < calls; ++call) {
      const int64_t faults_before = minor_faults();
      const uintptr_t end_before = heap_end();
      runner.run();
      const int64_t faults = minor_faults() - faults_before;
      const int64_t grew = static_cast<int64_t>(heap_end()) - static_cast<int64_t>(end_before);
      if (faults == 0 && grew == 0) continue;
      ++faulting_calls;
      out << " " << call << " (" << faults << ", " << mib(grew) << " MiB)";
    }
    const int64_t total = static_cast<int64_t>(heap_end()) - static_cast<int64_t>(first_end);
    out << (faulting_calls ? "" : " none") << "; heap grew " << mib(total) << " MiB in all"
        << std::endl;
  }
}

}  // namespace addnorm::bench
