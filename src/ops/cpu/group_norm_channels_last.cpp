// GroupNorm's forward on a channels-last tensor (group_norm_kernels.hpp), on BatchNorm's column
// kernels (batch_norm_kernels.hpp): stored channels last, a sample is a (positions, C) matrix,
// the layout BatchNorm walks, and a group is a band of its columns. Per sample: each channel's
// float64 statistics (batch_statistics), pooled into its group's, then the normalising pass
// (batch_normalise) with every channel given its group's mean and rstd: the tensor is read
// twice and written once, as in the channels-first path, with no transposition.
#include <cmath>
#include <cstddef>

#include "ops/cpu/batch_norm_kernels.hpp"
#include "ops/cpu/group_norm_kernels.hpp"
#include "ops/cpu/norm_numerics.hpp"
#include "ops/cpu/scratch.hpp"

namespace addnorm::cpu {
namespace {

// A group's moments from its channels' (each over the same number of positions, so the group's
// mean is the mean of theirs and its variance the mean of their variances plus the spread of
// their means). Taken about the first channel's mean, so that a group whose channels share one
// value gets exactly that mean and a variance of exactly 0, as a constant row does in the
// channels-first path; mean_lo is what mean + mean_lo holds beyond mean (an exact two-sum).
RowMoments pooled_moments(const double* mean, const double* mean_lo, const double* variance,
                          int64_t count) {
  const double shift = mean[0];
  const double inverse = 1.0 / static_cast<double>(count);
  double offset = 0;
  for (int64_t c = 0; c < count; ++c) offset += (mean[c] - shift) + mean_lo[c];
  offset *= inverse;
  double spread = 0;
  for (int64_t c = 0; c < count; ++c) {
    const double deviation = ((mean[c] - shift) + mean_lo[c]) - offset;
    spread += variance[c] + deviation * deviation;
  }
  RowMoments moments;
  moments.mean = shift + offset;
  const double shift_part = moments.mean - offset;
  moments.mean_lo = (shift - shift_part) + (offset - (moments.mean - shift_part));
  moments.variance = spread * inverse;
  return moments;
}

}  // namespace

void group_norm_forward_channels_last(const GroupNormForward& args) {
  const reference::GroupLayout& layout = args.layout;
  const int64_t channels = layout.channels, per_group = layout.channels_per_group();
  const BatchShape sample{layout.spatial, channels, 1};
  const int64_t sample_bytes = layout.spatial * channels * dtype_size(args.x_storage);
  Scratch scratch;
  const auto [mean, mean_lo, variance, centre, centre_lo, rstd, spread] =
      scratch.take_each<double, 7>(channels);
  for (int64_t n = 0; n < layout.batch; ++n) {
    const void* x = static_cast<const std::byte*>(args.x) + n * sample_bytes;
    void* y = static_cast<std::byte*>(args.y) + n * sample_bytes;
    batch_statistics(x, args.x_storage, sample, mean, mean_lo, variance);
    for (int64_t g = 0; g < layout.groups; ++g) {
      const int64_t first = g * per_group;
      const RowMoments moments =
          pooled_moments(mean + first, mean_lo + first, variance + first, per_group);
      const double group_rstd = rstd_of(moments.variance, args.eps);
      for (int64_t c = first; c < first + per_group; ++c) {
        centre[c] = moments.mean;
        centre_lo[c] = moments.mean_lo;
        rstd[c] = group_rstd;
        spread[c] = moments.variance;
      }
      const int64_t row = n * layout.groups + g;
      if (args.mean) args.mean[row] = static_cast<float>(moments.mean);
      if (args.rstd) args.rstd[row] = static_cast<float>(group_rstd);
    }
    batch_normalise(x, args.x_storage, centre, centre_lo, rstd, spread, args.gamma, args.beta, y,
                    sample);
  }
}

}  // namespace addnorm::cpu
