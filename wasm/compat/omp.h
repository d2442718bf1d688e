// OpenMP's runtime calls for the WebAssembly build, which runs on one thread (Emscripten has no
// OpenMP; its `#pragma omp` lines are ignored, so every loop runs in order on this thread).
#pragma once

inline int omp_get_max_threads() {
  return 1;
}
inline int omp_get_num_threads() {
  return 1;
}
inline int omp_get_thread_num() {
  return 0;
}
inline void omp_set_num_threads(int) {}
inline int omp_in_parallel() {
  return 0;
}
