// Round-robin timing (see measure.hpp).
#include "measure.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "memory_stats.hpp"

namespace addnorm::bench {
namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  if (n == 0) return 0;
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

double fault_allowance_per_call(double seconds_per_call) {
  return kFaultAllowanceShare * seconds_per_call / kFaultCostS;
}

std::vector<Measurement> measure_interleaved(const std::vector<Runner>& runners,
                                             const MeasureOptions& options) {
  const size_t count = runners.size();
  std::vector<Measurement> results(count);
  std::vector<int> reps(count);
  std::vector<int> lead_in(count, kLeadInCalls);
  std::vector<int64_t> faults(count, 0);
  std::vector<int64_t> calls(count, 0);
  // Warm-up: untimed-for-the-record calls (lazy initialisation, thread pools, the allocator
  // settling), the faster of the last two of which sizes the samples and the number of rounds.
  for (size_t i = 0; i < count; ++i) {
    // Warm up until a call takes no more faults than the allowance and the calls have lasted a
    // sample's length (code paths met for the first time fault their pages in too), or until
    // the implementation's share of the case's budget is spent (an allocator that never
    // settles, such as PyTorch's as installed with outputs glibc mmaps).
    const double warm_budget =
        std::max(options.min_sample_s, options.case_budget_s / static_cast<double>(count));
    //
    // At least two calls, and the faster of the last two sizes the samples: a call made after
    // PyTorch as installed has mapped, faulted in and unmapped its outputs can stall for 0.1-0.2 s
    // (no page fault of its own counted), and when that one call alone decided the case, it passed
    // for a slow implementation's (slow_call_s below) and became one of its two samples, whose
    // median (their mean) then read 5-20 times the true time: the "disturbed first cases" of the
    // full runs up to 2026-12-02 (docs/performance.md).
    double warm = 0, previous = 0, warm_total = 0;
    int warm_calls = 0;
    int64_t warm_faults = 0;
    while (true) {
      const int64_t warm_faults_before = minor_faults();
      const double start = seconds_now();
      runners[i].run();
      previous = warm;
      warm = std::max(seconds_now() - start, 1e-7);
      warm_faults = minor_faults() - warm_faults_before;
      warm_total += warm;
      ++warm_calls;
      const bool settled = double(warm_faults) <= fault_allowance_per_call(warm);
      const bool enough =
          (settled && warm_total >= options.min_sample_s) || warm_total >= warm_budget;
      if (enough && warm_calls >= 2) break;
    }
    const double typical = std::min(warm, previous);
    results[i].impl = runners[i].impl;
    results[i].note = runners[i].note;
    results[i].calls_per_sample =
        std::max(1, static_cast<int>(std::ceil(options.min_sample_s / typical)));
    const double per_sample = typical * results[i].calls_per_sample;
    const double share = options.case_budget_s / static_cast<double>(std::max<size_t>(count, 1));
    reps[i] = std::clamp(static_cast<int>(share / per_sample), options.min_reps,
                         std::max(options.min_reps, options.max_reps));
    // A slow implementation's calls are far from the ceiling and each stands on its own: a
    // lead-in call would only double its share of the run.
    lead_in[i] = typical > options.slow_call_s ? 0 : kLeadInCalls;
    if (typical > options.slow_call_s) {
      // Calls this long (the last two both) have nothing left to warm up and are far from the
      // ceiling: the last warm-up call counts as a sample, and the implementation gets only
      // what the budget allows, at least one more sample.
      results[i].seconds_per_call.push_back(warm);
      calls[i] += 1;
      faults[i] += warm_faults;
      reps[i] = std::clamp(static_cast<int>(share / typical), 1, options.min_reps);
    }
  }
  const int rounds = count ? *std::max_element(reps.begin(), reps.end()) : 0;
  // No allocation between samples either (see memory_stats.cpp).
  for (Measurement& m : results) m.seconds_per_call.reserve(static_cast<size_t>(rounds) + 1);
  for (int round = 0; round < rounds; ++round) {
    for (size_t k = 0; k < count; ++k) {
      const size_t i = (k + static_cast<size_t>(round)) % count;  // rotate who goes first
      if (round >= reps[i]) continue;
      // One untimed call first, so that every sample starts from the cache its own
      // implementation's last call left, never another's (see kLeadInCalls).
      for (int call = 0; call < lead_in[i]; ++call) runners[i].run();
      reset_peak_rss();
      const int64_t rss_before = current_rss_bytes();
      const int64_t faults_before = minor_faults();
      const int per_sample = results[i].calls_per_sample;
      const double start = seconds_now();
      for (int call = 0; call < per_sample; ++call) runners[i].run();
      const double elapsed = seconds_now() - start;
      faults[i] += minor_faults() - faults_before;
      calls[i] += per_sample;
      const int64_t peak = window_peak_rss_bytes();
      results[i].extra_rss_bytes = std::max(results[i].extra_rss_bytes, peak - rss_before);
      results[i].peak_rss_bytes = std::max(results[i].peak_rss_bytes, peak);
      results[i].seconds_per_call.push_back(elapsed / per_sample);
    }
  }
  for (size_t i = 0; i < count; ++i) {
    results[i].median_s = median(results[i].seconds_per_call);
    results[i].faults_per_call =
        calls[i] ? static_cast<double>(faults[i]) / static_cast<double>(calls[i]) : 0.0;
  }
  return results;
}

}  // namespace addnorm::bench
