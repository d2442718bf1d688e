// The benchmark's round-robin timing (bench/measure.cpp): how many samples an implementation gets
// and which calls its median comes from, driven by runners that sleep for set times. This checks
// the harness's logic, not anyone's speed.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "measure.hpp"

namespace addnorm::bench {
namespace {

using std::chrono::milliseconds;

MeasureOptions options(double case_budget_s) {
  MeasureOptions o;
  o.max_reps = 9;
  o.min_reps = 3;
  o.case_budget_s = case_budget_s;
  o.min_sample_s = 2e-3;
  o.slow_call_s = 0.15;
  return o;
}

// A case's first call stalling (as calls on a shared VM sometimes do) must not make a fast
// implementation pass for a slow one: before the warm-up took two calls, this one got two
// samples, the stalled call among them, and a median of about 100 ms.
TEST(BenchMeasure, OneStalledFirstCallLeavesAFastImplementationFast) {
  int calls = 0;
  const Runner stalls_once{"stalls-once", "", [&] {
                             std::this_thread::sleep_for(milliseconds(calls++ == 0 ? 200 : 1));
                           }};
  // A budget of 2 s keeps 9 samples within reach even if a 1 ms sleep wakes 200 ms late.
  const std::vector<Measurement> measured = measure_interleaved({stalls_once}, options(2.0));
  ASSERT_EQ(measured.size(), 1u);
  EXPECT_EQ(measured[0].seconds_per_call.size(), 9u);
  EXPECT_LT(measured[0].median_s, 0.05);
}

// An implementation whose calls are all slow still gets few samples (the run stays bounded),
// its last warm-up call counting as one.
TEST(BenchMeasure, ConsistentlySlowCallsGetFewSamples) {
  const Runner slow{"slow", "", [] { std::this_thread::sleep_for(milliseconds(160)); }};
  const std::vector<Measurement> measured = measure_interleaved({slow}, options(0.2));
  ASSERT_EQ(measured.size(), 1u);
  EXPECT_EQ(measured[0].seconds_per_call.size(), 2u);
  EXPECT_GE(measured[0].median_s, 0.16);
}

// Each sample starts from the state the implementation's own previous call left (kLeadInCalls):
// here a "dirtier" leaves work (as ordinary stores leave dirty lines in the last level cache)
// that the next call, whoever's, must do first. Without the lead-in call the rotating order put
// the "clean" implementation right after the dirtier in 5 of its 9 samples, and its median was
// the dirtier's write-back, not its own time.
TEST(BenchMeasure, EachSampleFollowsItsOwnImplementation) {
  bool dirty = false;
  auto pay_for_dirty = [&] {
    if (dirty) std::this_thread::sleep_for(milliseconds(40));
    dirty = false;
  };
  const Runner dirtier{"dirtier", "", [&] {
                         pay_for_dirty();
                         std::this_thread::sleep_for(milliseconds(1));
                         dirty = true;
                       }};
  const Runner clean{"clean", "", [&] {
                       pay_for_dirty();
                       std::this_thread::sleep_for(milliseconds(1));
                     }};
  const std::vector<Measurement> measured = measure_interleaved({dirtier, clean}, options(2.0));
  ASSERT_EQ(measured.size(), 2u);
  EXPECT_EQ(measured[1].seconds_per_call.size(), 9u);
  EXPECT_LT(measured[1].median_s, 0.015);
  // The dirtier pays for its own leftovers, every sample.
  EXPECT_GE(measured[0].median_s, 0.04);
}

// A slow implementation gets no lead-in calls: its calls are counted, two warm-up calls and
// one more sample, whatever the budget asks.
TEST(BenchMeasure, SlowCallsGetNoLeadIn) {
  int calls = 0;
  const Runner slow{"slow", "", [&] {
                      ++calls;
                      std::this_thread::sleep_for(milliseconds(160));
                    }};
  const std::vector<Measurement> measured = measure_interleaved({slow}, options(0.2));
  ASSERT_EQ(measured.size(), 1u);
  EXPECT_EQ(calls, 3);
}

}  // namespace
}  // namespace addnorm::bench
