// GroupNorm on a channels-last tensor (group_norm_kernels.hpp), on BatchNorm's column kernels
// (batch_norm_kernels.hpp): stored channels last, a sample is a (positions, C) matrix, the layout
// BatchNorm walks, and a group is a band of its columns. Per sample, the forward takes each
// channel's float64 statistics (batch_statistics), pools them into its group's, then runs the
// normalising pass (batch_normalise) with every channel given its group's mean and rstd; the
// backward takes BatchNorm's pass-1 totals of each channel, pools them into its group's means of
// g = gamma_c * dy and g * x_hat, then runs BatchNorm's pass 2 with those. Each reads the
// tensors twice and writes once, as the channels-first path does, with no transposition.
#include <cmath>
#include <cstddef>

#include <omp.h>

#include "ops/cpu/batch_norm_kernels.hpp"
#include "ops/cpu/group_norm_kernels.hpp"
#include "ops/cpu/norm_numerics.hpp"
#include "ops/cpu/scratch.hpp"
#include "ops/cpu/threading.hpp"
#include "ops/cpu/tuning.hpp"

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

// Channel c's moments from its pass-1 totals over `count` positions.
RowMoments channel_moments(const BatchBackwardTotals& totals, int64_t c, int64_t count) {
  return moments_about(totals.shift[c], shifted_moments(totals.d[c], totals.d2[c], count));
}

// Samples of fewer values than this are spread over the threads whole, each running BatchNorm's
// passes on its own thread (parallel_rows and parallel_chunks stay on the calling thread inside
// a parallel region); larger ones are taken one at a time, each pass spreading the sample's
// rows. Three parallel regions a sample cost more than a small sample's passes: at 32768 values
// (64, 128, 16, 16) the backward took 2.5 times its contiguous time that way.
constexpr int64_t kSpreadSampleMinValues = tuned("kSpreadSampleMinValues", int64_t{1} << 18);

// Runs body(chunk, begin, end) over the batch's fixed chunks of samples (reduction_chunks, at
// most 16), each chunk's samples in order: the chunks over the threads when samples are small and
// there are at least as many chunks as threads, one chunk after another otherwise (a batch of 2
// on 16 threads would leave 14 idle). The chunks are the same either way, so sums kept per chunk
// are too.
template <class Body>
void for_each_sample_chunk(const reference::GroupLayout& layout, const Body& body) {
  const int64_t chunks = reduction_chunks(layout.batch);
  const int64_t sample_values = layout.spatial * layout.channels;
  if (sample_values < kSpreadSampleMinValues && chunks >= omp_get_max_threads()) {
    parallel_chunks(chunks, layout.batch, sample_values, body);
    return;
  }
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    body(chunk, chunk_begin(layout.batch, chunks, chunk),
         chunk_begin(layout.batch, chunks, chunk + 1));
  }
}

}  // namespace

void group_norm_forward_channels_last(const GroupNormForward& args) {
  const reference::GroupLayout& layout = args.layout;
  const int64_t channels = layout.channels, per_group = layout.channels_per_group();
  const BatchShape sample{layout.spatial, channels, 1};
  const int64_t sample_bytes = layout.spatial * channels * dtype_size(args.x_storage);
  for_each_sample_chunk(layout, [&](int64_t, int64_t begin, int64_t end) {
    Scratch scratch;  // the running thread's
    const auto [mean, mean_lo, variance, centre, centre_lo, rstd, spread] =
        scratch.take_each<double, 7>(channels);
    for (int64_t n = begin; n < end; ++n) {
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
  });
}

// With x_hat = (x - mean_g) * rstd_g and g = gamma_c * dy over a sample's group of m values:
//   dx = rstd_g * ((g - mean(g)) - x_hat * mean(g * x_hat)),
// BatchNorm's pass 2 with scale rstd_g and dy_scale gamma_c. Each channel's sums about its own
// shift give the group's exactly to float64 rounding: sum dy * (x - mean_g) = sum dy * d +
// (shift_c - mean_g) * sum dy. dgamma and dbeta add each sample's channel sums in sample order
// within each fixed chunk of samples, and the chunks in chunk order (PartialSums): the same bits
// for any thread count.
void group_norm_backward_channels_last(const GroupNormBackward& args) {
  const reference::GroupLayout& layout = args.layout;
  const int64_t channels = layout.channels, per_group = layout.channels_per_group();
  const BatchShape sample{layout.spatial, channels, 1};
  const int64_t sample_bytes = layout.spatial * channels * dtype_size(args.x_storage);
  const double group_values = static_cast<double>(per_group * layout.spatial);
  const PartialSums sums(reduction_chunks(layout.batch), channels, true, true);
  for_each_sample_chunk(layout, [&](int64_t chunk, int64_t begin, int64_t end) {
    Scratch scratch;  // the running thread's
    const auto [shift, sum_d, sum_d2, sum_dy, sum_dy_d, mean, mean_lo, variance] =
        scratch.take_each<double, 8>(channels);
    const auto [centre, centre_lo, x_hat_scale, rstd, dy_scale, mean_g, mean_g_xhat] =
        scratch.take_each<double, 7>(channels);
    double* dgamma = sums.dgamma(chunk);
    double* dbeta = sums.dbeta(chunk);
    for (int64_t c = 0; c < channels; ++c) {
      dy_scale[c] = args.gamma ? static_cast<double>(args.gamma[c]) : 1.0;
    }
    const BatchBackwardTotals totals{shift, sum_d, sum_d2, sum_dy, sum_dy_d};
    for (int64_t n = begin; n < end; ++n) {
      const void* dy = static_cast<const std::byte*>(args.dy) + n * sample_bytes;
      const void* x = static_cast<const std::byte*>(args.x) + n * sample_bytes;
      void* dx = static_cast<std::byte*>(args.dx) + n * sample_bytes;
      batch_backward_totals(dy, x, args.x_storage, sample, totals);
      for (int64_t c = 0; c < channels; ++c) {
        const RowMoments m = channel_moments(totals, c, layout.spatial);
        mean[c] = m.mean;
        mean_lo[c] = m.mean_lo;
        variance[c] = m.variance;
      }
      for (int64_t first = 0; first < channels; first += per_group) {
        const RowMoments group =
            pooled_moments(mean + first, mean_lo + first, variance + first, per_group);
        const double group_rstd = rstd_of(group.variance, args.eps);
        // An infinite rstd (a constant group, eps = 0) centres every value exactly: x_hat is 0.
        const double scale = xhat_scale(group_rstd);
        double g = 0, g_xhat = 0;
        for (int64_t c = first; c < first + per_group; ++c) {
          const double dy_xhat =
              scale * (sum_dy_d[c] + ((shift[c] - group.mean) - group.mean_lo) * sum_dy[c]);
          g += dy_scale[c] * sum_dy[c];
          g_xhat += dy_scale[c] * dy_xhat;
          dgamma[c] += dy_xhat;
          dbeta[c] += sum_dy[c];
        }
        for (int64_t c = first; c < first + per_group; ++c) {
          centre[c] = group.mean;
          centre_lo[c] = group.mean_lo;
          x_hat_scale[c] = scale;
          rstd[c] = group_rstd;
          mean_g[c] = g / group_values;
          mean_g_xhat[c] = g_xhat / group_values;
        }
      }
      batch_backward_dx(dy, x, dx, args.x_storage, sample,
                        {centre, centre_lo, x_hat_scale, rstd, dy_scale, mean_g, mean_g_xhat});
    }
  });
  if (args.dgamma) sums.reduce_dgamma(args.dgamma);
  if (args.dbeta) sums.reduce_dbeta(args.dbeta);
}

}  // namespace addnorm::cpu
