// set_num_threads: one switch for OpenMP and OpenBLAS.
#include "addnorm/nn/threads.hpp"

#include <omp.h>

#include <string>

#include "addnorm/error.hpp"

namespace addnorm::nn {

void set_num_threads(int threads) {
  if (threads < 1) throw Error("threads is " + std::to_string(threads) + ", expected >= 1");
  // OpenBLAS stays single-threaded: matmul.cpp shares products out over OpenMP threads.
  omp_set_num_threads(threads);
}

}  // namespace addnorm::nn
