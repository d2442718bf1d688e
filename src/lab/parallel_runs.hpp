// Independent runs (one per seed, placement and depth) shared out over OpenMP threads, one run
// per thread at a time. The lab's models are small: splitting one model's matrix products over
// threads costs more in barriers than it gains, and on a busy machine a barrier can wait a whole
// scheduler time slice for a descheduled thread. Whole runs in parallel need no barrier until
// the end. The layers inside a run see an active parallel region and stay on their thread
// (OpenMP's nested parallelism is off by default).
//
// Results do not depend on the thread count: each run writes only its own slot, and the caller
// combines the slots in index order.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "addnorm/nn/block.hpp"

#include "addnorm/lab/progress.hpp"

namespace addnorm::lab {

// Calls run(i) for i in [0, count), in parallel. work(i) is run i's share of the total work
// (any unit) and stage(i) its name, for the progress callback, which is called only from the
// calling thread (OpenMP's master thread), with fractions that never decrease. An exception in
// a run, or from the progress callback (the server's way of cancelling), stops the runs not yet
// started and is rethrown here.
inline void run_in_parallel(int64_t count, const std::function<void(int64_t)>& run,
                            const std::function<double(int64_t)>& work,
                            const std::function<std::string(int64_t)>& stage,
                            const Progress& progress) {
  double total = 0.0;
  for (int64_t i = 0; i < count; ++i) total += work(i);
  std::atomic<double> done{0.0};
  std::atomic<bool> failed{false};
  std::exception_ptr failure;
  double reported = 0.0;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < count; ++i) {
    if (failed.load()) continue;
    // This task's own thread count (an OpenMP per-task setting): the layers' parallel regions
    // inside the run get one thread; the caller's setting is untouched.
    omp_set_num_threads(1);
    try {
      run(i);
      double expected = done.load();
      while (!done.compare_exchange_weak(expected, expected + work(i))) {
      }
      if (progress && omp_get_thread_num() == 0 && total > 0.0) {
        const double fraction = std::max(reported, std::min(1.0, done.load() / total));
        reported = fraction;
        progress(fraction, stage(i));
      }
    } catch (...) {
#pragma omp critical(addnorm_lab_run_failure)
      {
        if (!failure) failure = std::current_exception();
      }
      failed.store(true);
    }
  }
  if (failure) std::rethrow_exception(failure);
}

// Calls measure(placement, depth, seed) for every placement x depth x seed of `params` (seeds
// params.seed, params.seed + 1, ...), in parallel, and returns the results in that order: seeds
// innermost, then depths, then placements. Shared by the experiments that measure stacks at
// initialisation (init-gradients, update-size).
template <class Params, class Measure>
auto measure_every_run(const Params& params, const Measure& measure, const Progress& progress) {
  struct Run {
    nn::Placement placement;
    int depth;
    uint64_t seed;
  };
  std::vector<Run> runs;
  for (nn::Placement placement : params.placements) {
    for (int depth : params.depths) {
      for (int i = 0; i < params.seeds; ++i) {
        runs.push_back({placement, depth, params.seed + static_cast<uint64_t>(i)});
      }
    }
  }
  using Result = decltype(measure(nn::Placement{}, 0, uint64_t{}));
  std::vector<Result> measured(runs.size());
  run_in_parallel(
      static_cast<int64_t>(runs.size()),
      [&](int64_t i) {
        const Run& run = runs[static_cast<size_t>(i)];
        measured[static_cast<size_t>(i)] = measure(run.placement, run.depth, run.seed);
      },
      [&](int64_t i) { return static_cast<double>(runs[static_cast<size_t>(i)].depth); },
      [&](int64_t i) {
        const Run& run = runs[static_cast<size_t>(i)];
        return std::string(nn::placement_name(run.placement)) + ", depth " +
               std::to_string(run.depth);
      },
      progress);
  return measured;
}

}  // namespace addnorm::lab
