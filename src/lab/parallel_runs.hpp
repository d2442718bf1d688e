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
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "addnorm/nn/block.hpp"

#include "addnorm/lab/progress.hpp"

namespace addnorm::lab {

// What a run calls between its steps (between optimiser steps of a training run), with the
// fraction of the run done so far. It throws to end the run early: the server's stop requests,
// time limits, hang-ups and shutdown reach a run within one step this way, not at its end
// (issue 37: a 90 s depth-training ran on after SIGTERM when the check was between runs).
using Checkpoint = std::function<void(double fraction_of_run)>;

// Thrown at a checkpoint of a run whose siblings have failed or were cancelled; never escapes
// run_in_parallel (the first failure is what is rethrown).
struct RunsAbandoned {};

// Calls run(i, checkpoint) for i in [0, count), in parallel. work(i) is run i's share of the
// total work (any unit) and stage(i) its name, for the progress callback, which is called only
// from the calling thread (OpenMP's master thread), with fractions that never decrease: at each
// of that thread's own checkpoints, after each of its runs, and every few milliseconds while it
// waits for the other threads' runs (so a cancelling callback is heard while they compute). An
// exception in a run, or from the progress callback (the server's way of cancelling), makes
// every other run stop at its next checkpoint and is rethrown here.
inline void run_in_parallel(int64_t count,
                            const std::function<void(int64_t, const Checkpoint&)>& run,
                            const std::function<double(int64_t)>& work,
                            const std::function<std::string(int64_t)>& stage,
                            const Progress& progress) {
  constexpr auto kPollInterval = std::chrono::milliseconds(5);
  double total = 0.0;
  for (int64_t i = 0; i < count; ++i) total += work(i);
  // Each run's done fraction, written by its own thread, read by the master for progress.
  std::vector<std::atomic<double>> done(static_cast<size_t>(count));
  for (auto& fraction : done) fraction.store(0.0);
  std::atomic<int64_t> next{0}, finished{0};
  std::atomic<bool> failed{false};
  std::exception_ptr failure;
  double reported = 0.0;
  std::string current_stage;
  const auto fail = [&](std::exception_ptr error) {
#pragma omp critical(addnorm_lab_run_failure)
    {
      if (!failure) failure = std::move(error);
    }
    failed.store(true);
  };
  // Master thread only.
  const auto report = [&] {
    if (!progress || failed.load()) return;
    double sum = 0.0;
    for (int64_t i = 0; i < count; ++i) sum += done[static_cast<size_t>(i)].load() * work(i);
    reported = std::max(reported, total > 0.0 ? std::min(1.0, sum / total) : 0.0);
    progress(reported, current_stage);
  };
#pragma omp parallel
  {
    const bool master = omp_get_thread_num() == 0;
    // This thread's own thread count (an OpenMP per-task setting): the layers' parallel regions
    // inside the runs get one thread; the caller's setting is untouched.
    omp_set_num_threads(1);
    for (;;) {
      if (failed.load()) break;
      const int64_t i = next.fetch_add(1);
      if (i >= count) break;
      if (master) current_stage = stage(i);
      std::atomic<double>& fraction = done[static_cast<size_t>(i)];
      const Checkpoint checkpoint = [&](double part) {
        fraction.store(std::clamp(part, 0.0, 1.0));
        if (master) report();
        if (failed.load()) throw RunsAbandoned{};
      };
      try {
        run(i, checkpoint);
        fraction.store(1.0);
        finished.fetch_add(1);
        if (master) report();
      } catch (const RunsAbandoned&) {
        break;
      } catch (...) {
        fail(std::current_exception());
        break;
      }
    }
    // Out of runs to take: the master keeps listening to the progress callback until the
    // others' runs end (or one fails), so a cancellation is not deaf while they compute.
    if (master) {
      try {
        while (!failed.load() && finished.load() < count) {
          std::this_thread::sleep_for(kPollInterval);
          report();
        }
      } catch (...) {
        fail(std::current_exception());
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
}

// measure(placement, depth, seed), or with the checkpoint as a fourth argument when it takes one
// (a measurement of several steps, such as update-size's learning rates, checks between them).
template <class Measure>
auto measure_once(const Measure& measure, nn::Placement placement, int depth, uint64_t seed,
                  const Checkpoint& checkpoint) {
  if constexpr (std::is_invocable_v<const Measure&, nn::Placement, int, uint64_t,
                                    const Checkpoint&>) {
    return measure(placement, depth, seed, checkpoint);
  } else {
    return measure(placement, depth, seed);
  }
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
  using Result = decltype(measure_once(measure, nn::Placement{}, 0, uint64_t{}, Checkpoint{}));
  std::vector<Result> measured(runs.size());
  run_in_parallel(
      static_cast<int64_t>(runs.size()),
      [&](int64_t i, const Checkpoint& checkpoint) {
        const Run& run = runs[static_cast<size_t>(i)];
        checkpoint(0.0);
        measured[static_cast<size_t>(i)] =
            measure_once(measure, run.placement, run.depth, run.seed, checkpoint);
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
