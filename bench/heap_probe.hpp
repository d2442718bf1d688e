// --heap-probe N: a diagnostic, not a measurement. Each implementation of a case is called N
// times, untimed, and every call's minor page faults and growth of the heap's end (sbrk(0)) are
// printed: what shows whether an allocator settles or keeps growing (docs/performance.md,
// "PyTorch: as installed and allocator-tuned").
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "runner.hpp"

namespace addnorm::bench {

void probe_heap(std::ostream& out, const std::string& case_name, const std::vector<Runner>& runners,
                int calls);

}  // namespace addnorm::bench
