// Thread control for the nn layer: OpenMP (attention heads, element-wise loops, the ops) and
// OpenBLAS (matrix products) together. Results never depend on the count; only speed does.
#pragma once

namespace addnorm::nn {

// Uses `threads` threads (>= 1) for both OpenMP and OpenBLAS. Throws Error for threads < 1.
void set_num_threads(int threads);

}  // namespace addnorm::nn
