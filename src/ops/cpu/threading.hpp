// How the fast kernels spread rows over OpenMP threads, and the fixed-order reduction that keeps
// dgamma/dbeta bitwise identical for any thread count.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "ops/cpu/scratch.hpp"
#include "ops/cpu/tuning.hpp"

namespace addnorm::cpu {

// Below this many elements a call runs on the calling thread: waking threads costs more.
inline constexpr int64_t kParallelThreshold = tuned("kParallelThreshold", int64_t{1} << 16);

// Runs body(begin, end) over [0, rows), one contiguous range of rows per thread, so each
// thread streams through its own part of memory and small rows cost no per-row dispatch.
// Inside a parallel region (a caller that spreads whole calls over the threads: GroupNorm's
// channels-last samples, the lab's runs) the calling thread runs it all: no nested team.
template <class Body>
void parallel_rows(int64_t rows, int64_t dim, const Body& body) {
  if (rows * dim < kParallelThreshold || omp_get_max_threads() == 1 || omp_in_parallel()) {
    body(0, rows);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t thread = omp_get_thread_num();
    const int64_t begin = rows * thread / threads;
    const int64_t end = rows * (thread + 1) / threads;
    if (begin < end) body(begin, end);
  }
}

// The number of fixed row chunks a backward reduces over: a function of the row count only.
inline int64_t reduction_chunks(int64_t rows) {
  return std::min<int64_t>(rows, 16);
}

// The same for a row norm's backward, rows of dim: one chunk when the call runs on one thread
// anyway (fewer than kParallelThreshold elements), still a function of the shape alone. More
// chunks there only add partial rows to zero and sum: at 8 x 768 float32 (LayerNorm backward
// from PyTorch) 8 chunks' 96 KiB of float64 partials were a quarter of the call's time.
inline int64_t row_reduction_chunks(int64_t rows, int64_t dim) {
  return rows * dim < kParallelThreshold ? 1 : reduction_chunks(rows);
}

// The first row of chunk `chunk` of [0, rows) cut into `chunks` fixed chunks.
inline int64_t chunk_begin(int64_t rows, int64_t chunks, int64_t chunk) {
  return rows * chunk / chunks;
}

// Runs body(chunk, begin, end) for every chunk of [0, rows), chunks spread over threads. A small
// call runs on the calling thread without entering an OpenMP region: even one whose `if` clause
// is false costs libgomp a team allocation per call. So does one inside a parallel region.
template <class Body>
void parallel_chunks(int64_t chunks, int64_t rows, int64_t dim, const Body& body) {
  const auto run = [&](int64_t chunk) {
    body(chunk, chunk_begin(rows, chunks, chunk), chunk_begin(rows, chunks, chunk + 1));
  };
  if (rows * dim < kParallelThreshold || chunks <= 1 || omp_get_max_threads() == 1 ||
      omp_in_parallel()) {
    for (int64_t chunk = 0; chunk < chunks; ++chunk) run(chunk);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) run(chunk);
}

// Float64 partial sums of dgamma and dbeta, one row of `dim` per chunk, zeroed, in the calling
// thread's scratch (scratch.hpp): steady-state calls do not allocate.
class PartialSums {
 public:
  PartialSums(int64_t chunks, int64_t dim, bool with_dgamma, bool with_dbeta)
      : chunks_(chunks), dim_(dim) {
    if (with_dgamma) dgamma_ = scratch_.zeroed<double>(chunks * dim);
    if (with_dbeta) dbeta_ = scratch_.zeroed<double>(chunks * dim);
  }

  double* dgamma(int64_t chunk) const { return dgamma_ ? dgamma_ + chunk * dim_ : nullptr; }
  double* dbeta(int64_t chunk) const { return dbeta_ ? dbeta_ + chunk * dim_ : nullptr; }

  void reduce_dgamma(float* out) const { reduce(dgamma_, out); }
  void reduce_dbeta(float* out) const { reduce(dbeta_, out); }

 private:
  // out[i] = the chunks' partials added in chunk order, rounded once. The chunks are added
  // into chunk 0's row one whole row at a time (contiguous, so it vectorises); each element
  // still sees the same additions in the same order. The final + 0.0 turns a -0 into +0, as
  // a sum started from 0 would.
  void reduce(double* partials, float* out) const {
    for (int64_t chunk = 1; chunk < chunks_; ++chunk) {
      const double* next = partials + chunk * dim_;
      for (int64_t i = 0; i < dim_; ++i) partials[i] += next[i];
    }
    for (int64_t i = 0; i < dim_; ++i) out[i] = static_cast<float>(partials[i] + 0.0);
  }

  Scratch scratch_;
  int64_t chunks_;
  int64_t dim_;
  double* dgamma_ = nullptr;
  double* dbeta_ = nullptr;
};

}  // namespace addnorm::cpu
