// The kernels' speed tunables, each defined once: which path a row length takes, how many rows
// a group holds, how far ahead passes prefetch, when outputs stream and threads wake. The
// defaults are the measured winners; what was measured, and how to measure it again, is in
// docs/performance.md ("Tunables: what was tried"). No value changes what the numerics contract
// promises (docs/numerics.md): some change the order of a row's additions, and so a last bit,
// none makes a result depend on the thread count.
//
// A dev/ build overrides them (dev/ab.sh): CMake's ADDNORM_TUNING="kName=value,..." reaches
// this file as the string ADDNORM_TUNING_OVERRIDES, and tuned() reads it at compile time.
// CMake checks each name against this file (cmake/core_library.cmake); a release build has none.
#ifndef ADDNORM_OPS_CPU_TUNING_HPP_
#define ADDNORM_OPS_CPU_TUNING_HPP_

#include <cstdint>
#include <string_view>

#ifndef ADDNORM_TUNING_OVERRIDES
#define ADDNORM_TUNING_OVERRIDES ""
#endif

namespace addnorm::cpu {

namespace tuning_detail {

inline constexpr std::string_view kOverrides = ADDNORM_TUNING_OVERRIDES;

// A non-negative decimal integer (CMake has checked the form).
constexpr int64_t parse_count(std::string_view digits) {
  int64_t value = 0;
  for (char c : digits) value = value * 10 + (c - '0');
  return value;
}

}  // namespace tuning_detail

// `name`'s value in ADDNORM_TUNING_OVERRIDES ("kName=value,..."), or `fallback`.
constexpr int64_t tuned(std::string_view name, int64_t fallback) {
  std::string_view rest = tuning_detail::kOverrides;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t equals = item.find('=');
    if (item.substr(0, equals) == name) return tuning_detail::parse_count(item.substr(equals + 1));
  }
  return fallback;
}

// ---- every kernel ----------------------------------------------------------------------------

// Outputs of at least this many bytes are written with non-temporal stores (streams_output).
inline constexpr int64_t kStreamingStoreBytes = tuned("kStreamingStoreBytes", int64_t{8} << 20);
// Below this many elements a call runs on the calling thread (parallel_rows).
inline constexpr int64_t kParallelThreshold = tuned("kParallelThreshold", int64_t{1} << 16);
// How far ahead, in floats, the float32 streams' passes prefetch (the backward, BatchNorm).
inline constexpr int64_t kPrefetchFloats = tuned("kPrefetchFloats", 512);
// How far ahead, in floats, a resumable row run (ShiftedSumsRun) and the short rows' float64
// sums prefetch.
inline constexpr int64_t kRunPrefetchFloats = tuned("kRunPrefetchFloats", 1024);
// How far ahead, in elements, a 16-bit row's block sums prefetch.
inline constexpr int64_t kPrefetchHalves = tuned("kPrefetchHalves", 2048);

// ---- the LayerNorm and RMSNorm forward (norm_forward-inl.h) --------------------------------

// A group of rows: at most kMaxGroup rows and kGroupBytes of input.
inline constexpr int64_t kMaxGroup = tuned("kMaxGroup", 8);
inline constexpr int64_t kGroupBytes = tuned("kGroupBytes", int64_t{16} << 10);
// Rows up to these lengths (and a whole number of float32 registers) take their moments a group
// at a time, one row per float64 lane: float32 streams, and 16-bit ones.
inline constexpr int64_t kShortRowMaxDim = tuned("kShortRowMaxDim", 1024);
inline constexpr int64_t kShortHalfRowMaxDim = tuned("kShortHalfRowMaxDim", 128);
// From this row length a short row's float64 sums run on four chains of additions, not two.
inline constexpr int64_t kFourChainsMinDim = tuned("kFourChainsMinDim", 512);
// Short rows up to this length take the next group's moments before this group's outputs.
inline constexpr int64_t kMomentsAheadMaxDim = tuned("kMomentsAheadMaxDim", 128);
// From this row length the general loop steps the sums of the row a group on inside the
// normalising pass of this one.
inline constexpr int64_t kInterleaveMinDim = tuned("kInterleaveMinDim", 512);
// The block of h that a 16-bit pre-norm stores before normalising it (add_then_norm_rows).
inline constexpr int64_t kAddBlockBytes = tuned("kAddBlockBytes", int64_t{256} << 10);

// ---- the backward (norm_backward-inl.h) -----------------------------------------------------

// Rows up to these lengths take pass 1 a group at a time: float32 streams, and 16-bit ones.
inline constexpr int64_t kShortBackwardMaxDim = tuned("kShortBackwardMaxDim", 1024);
inline constexpr int64_t kShortHalfBackwardMaxDim = tuned("kShortHalfBackwardMaxDim", 128);
// float32 rows up to this length go eight to a group, not four, where dx is streamed.
inline constexpr int64_t kWideGroupMaxDim = tuned("kWideGroupMaxDim", 2048);

// ---- BatchNorm and GroupNorm ---------------------------------------------------------------

// Stretches of (N, C) input that BatchNorm's passes walk in lock-step.
inline constexpr int kBatchNormStreams = static_cast<int>(tuned("kBatchNormStreams", 4));
// Samples shorter than this many bytes fold in lock-step across chunks of the batch.
inline constexpr int64_t kLockStepMaxSampleBytes = tuned("kLockStepMaxSampleBytes", 2048);
// Values GroupNorm normalises a block at a time.
inline constexpr int64_t kGroupNormBlockValues = tuned("kGroupNormBlockValues", int64_t{1} << 15);

static_assert(kMaxGroup >= 1 && kGroupBytes >= 1 && kBatchNormStreams >= 1 && kAddBlockBytes >= 1 &&
                  kGroupNormBlockValues >= 1,
              "a group, block or stream count must be at least 1");

}  // namespace addnorm::cpu

#endif  // ADDNORM_OPS_CPU_TUNING_HPP_
