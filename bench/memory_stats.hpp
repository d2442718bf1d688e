// Resident memory and page faults of this process, from /proc and getrusage, so the report can
// show what each implementation allocates and faults in while it is timed.
#pragma once

#include <cstdint>

namespace addnorm::bench {

int64_t current_rss_bytes();
// Starts a new peak-resident-memory window (Linux: "5" to /proc/self/clear_refs). The peak of the
// window that ends is kept for process_peak_rss_bytes(). Returns false where the kernel refuses.
bool reset_peak_rss();
// The peak resident memory of the current window (VmHWM).
int64_t window_peak_rss_bytes();
// The peak over the whole process life, across windows.
int64_t process_peak_rss_bytes();
// Minor page faults so far, all threads.
int64_t minor_faults();
// Grows malloc's heap by `bytes`, touches every page and frees it again. Under the tuned
// allocator (no mmap, no trimming) the freed block stays in the heap, resident, so an
// implementation's fresh outputs are carved from memory that takes no more page faults:
// PyTorch's steady state in a training loop, reached before the first timed call.
void prefault_heap(int64_t bytes);

}  // namespace addnorm::bench
