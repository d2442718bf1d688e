// Interleaved timing: every implementation of a case runs once per round, in a rotating order,
// so minute-to-minute drift of this shared VM's bandwidth hits all of them alike and same-run
// ratios stay meaningful. Slow implementations get fewer rounds so a full run stays bounded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runner.hpp"

namespace addnorm::bench {

// Page faults in a timed loop are time an implementation spends on the allocator, not the op
// (a fresh output's pages are zeroed and mapped one by one). Each costs at least kFaultCostS, so
// a call may take as many as cost kFaultAllowanceShare of its time: about 40 for a 4 ms call, one
// per 100 calls for a 1 us decode call. Beyond that the report flags it (report.hpp).
inline constexpr double kFaultCostS = 1e-6;
inline constexpr double kFaultAllowanceShare = 0.01;
double fault_allowance_per_call(double seconds_per_call);

// Untimed calls of an implementation before each of its samples. Without them a sample of one
// out-of-cache call began with the last level cache full of what the implementation before it in
// the round had written: ordinary stores leave up to L3's size of dirty lines, whose write-back
// then fell on the next call. An implementation that streams its outputs (leaving nothing
// dirty) was charged the write-back of the one before it and handed a clean cache to the one
// after: on AMD EPYC (32 MiB L3), addnorm's float32 LayerNorm forward, which streams, read
// 0.65-0.83x oneDNN that way at D = 64-1024, 1 thread, against 1.0-1.4x when each implementation
// follows itself (bench runs of 2026-12-03, docs/performance.md). Implementations whose calls
// take longer than slow_call_s get none: their few samples are far from the ceiling, and a
// lead-in call would double their share of a full run.
inline constexpr int kLeadInCalls = 1;

struct MeasureOptions {
  int max_reps = 9;            // samples for fast implementations
  int min_reps = 3;            // samples for slow ones (1 in smoke mode)
  double case_budget_s = 3.0;  // rough time for all implementations of one case together
  double min_sample_s = 2e-3;  // in-cache calls are batched until a sample lasts this long
  double slow_call_s = 0.15;   // calls longer than this get fewer samples (see measure.cpp)
};

struct Measurement {
  std::string impl;
  std::string note;
  std::vector<double> seconds_per_call;  // one entry per sample
  int calls_per_sample = 1;
  double median_s = 0;
  double faults_per_call = 0;   // minor page faults during the timed calls
  int64_t extra_rss_bytes = 0;  // most resident memory a sample added over what was there
  int64_t peak_rss_bytes = 0;   // the process's peak resident memory during its samples
};

std::vector<Measurement> measure_interleaved(const std::vector<Runner>& runners,
                                             const MeasureOptions& options);

}  // namespace addnorm::bench
