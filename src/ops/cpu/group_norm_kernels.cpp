// GroupNorm on the norm engine (group_norm_kernels.hpp). A block is a run of whole rows (one row
// per (sample, group)) of at most kBlockValues values, or one row when a row is longer: the
// engine writes the block's x_hat into a float32 buffer of the calling thread, still in cache
// when the per-channel affine pass reads it back.
#include "ops/cpu/group_norm_kernels.hpp"

#include <algorithm>

#include "ops/cpu/convert.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/scratch.hpp"
#include "ops/cpu/threading.hpp"

namespace addnorm::cpu {

namespace {

// 32 Ki float32 values (128 KiB) a block: a few blocks of buffers fit in one core's L2.
constexpr int64_t kBlockValues = int64_t{1} << 15;

int64_t rows_per_block(int64_t dim) {
  return std::max<int64_t>(1, kBlockValues / dim);
}

const void* row_at(const void* base, DType storage, int64_t element) {
  return static_cast<const char*>(base) + element * dtype_size(storage);
}
void* row_at(void* base, DType storage, int64_t element) {
  return static_cast<char*>(base) + element * dtype_size(storage);
}

// Runs body(first_row, row_count) over the blocks of [0, rows), blocks spread over threads.
template <class Body>
void for_each_block(int64_t rows, int64_t dim, const Body& body) {
  const int64_t per_block = rows_per_block(dim);
  const int64_t blocks = (rows + per_block - 1) / per_block;
  parallel_chunks(blocks, blocks, per_block * dim, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const int64_t first = block * per_block;
      body(first, std::min(per_block, rows - first));
    }
  });
}

// The engine's LayerNorm of rows [first, first + count) of x into `x_hat` (float32, no affine),
// with their mean and rstd.
void normalise_rows(const void* x, DType x_storage, int64_t first, int64_t count, int64_t dim,
                    double eps, float* x_hat, float* mean, float* rstd) {
  NormForward args;
  args.x = row_at(x, x_storage, first * dim);
  args.storage = x_storage;
  args.y = x_hat;
  args.branch_storage = DType::float32;
  args.mean = mean;
  args.rstd = rstd;
  args.rows = count;
  args.dim = dim;
  args.eps = eps;
  args.norm = NormKind::layer_norm;
  norm_forward_range(args, 0, count);
}

// values = values * gamma_c + beta_c over rows [first, first + count), in place.
void scale_and_shift(float* values, const float* gamma, const float* beta, int64_t first,
                     int64_t count, const reference::GroupLayout& layout) {
  const int64_t per_group = layout.channels_per_group();
  const int64_t spatial = layout.spatial;
  for (int64_t r = 0; r < count; ++r) {
    const int64_t channel0 = ((first + r) % layout.groups) * per_group;
    for (int64_t k = 0; k < per_group; ++k) {
      const float scale = gamma ? gamma[channel0 + k] : 1.0f;
      const float shift = beta ? beta[channel0 + k] : 0.0f;
      float* run = values + (r * per_group + k) * spatial;
      for (int64_t s = 0; s < spatial; ++s) run[s] = run[s] * scale + shift;
    }
  }
}

}  // namespace

void group_norm_forward(const GroupNormForward& args) {
  const reference::GroupLayout& layout = args.layout;
  const int64_t rows = layout.rows();
  const int64_t dim = layout.dim();
  if (!args.gamma && !args.beta) {
    // Without parameters GroupNorm is LayerNorm over the rows: the whole engine, streaming
    // stores and all.
    NormForward plain;
    plain.x = args.x;
    plain.storage = args.x_storage;
    plain.y = args.y;
    plain.branch_storage = args.y_storage;
    plain.mean = args.mean;
    plain.rstd = args.rstd;
    plain.rows = rows;
    plain.dim = dim;
    plain.eps = args.eps;
    plain.norm = NormKind::layer_norm;
    norm_forward(plain);
    return;
  }
  const bool y_is_float32 = args.y_storage == DType::float32;
  for_each_block(rows, dim, [&](int64_t first, int64_t count) {
    Scratch scratch;
    // A float32 y is its own buffer: the affine pass rewrites the block while it is in cache.
    float* values =
        y_is_float32 ? static_cast<float*>(args.y) + first * dim : scratch.take<float>(count * dim);
    float* mean = args.mean ? args.mean + first : nullptr;
    float* rstd = args.rstd ? args.rstd + first : nullptr;
    normalise_rows(args.x, args.x_storage, first, count, dim, args.eps, values, mean, rstd);
    scale_and_shift(values, args.gamma, args.beta, first, count, layout);
    if (!y_is_float32) {
      from_float32(values, row_at(args.y, args.y_storage, first * dim), args.y_storage,
                   count * dim);
    }
  });
}

void group_norm_backward(const GroupNormBackward& args) {
  const reference::GroupLayout& layout = args.layout;
  const int64_t rows = layout.rows();
  const int64_t dim = layout.dim();
  const int64_t per_group = layout.channels_per_group();
  const int64_t spatial = layout.spatial;
  const bool sums = args.dgamma || args.dbeta;
  // One float64 partial per (sample, channel), each a sum over that channel's positions only:
  // which thread wrote it does not change it, and the samples are added in order below.
  Scratch scratch;
  double* dgamma_rows = sums ? scratch.zeroed<double>(rows * per_group) : nullptr;
  double* dbeta_rows = sums ? scratch.zeroed<double>(rows * per_group) : nullptr;
  for_each_block(rows, dim, [&](int64_t first, int64_t count) {
    Scratch block;
    float* x_hat = block.take<float>(count * dim);
    float* g = block.take<float>(count * dim);
    float* rstd = block.take<float>(count);
    normalise_rows(args.x, args.x_storage, first, count, dim, args.eps, x_hat, nullptr, rstd);
    to_float32(row_at(args.dy, args.dy_storage, first * dim), args.dy_storage, g, count * dim);
    for (int64_t r = 0; r < count; ++r) {
      const int64_t row = first + r;
      const int64_t channel0 = (row % layout.groups) * per_group;
      for (int64_t k = 0; k < per_group; ++k) {
        const int64_t at = (r * per_group + k) * spatial;
        if (sums) {
          double dgamma_sum = 0, dbeta_sum = 0;
          for (int64_t s = 0; s < spatial; ++s) {
            dgamma_sum += double(g[at + s]) * double(x_hat[at + s]);
            dbeta_sum += double(g[at + s]);
          }
          dgamma_rows[row * per_group + k] = dgamma_sum;
          dbeta_rows[row * per_group + k] = dbeta_sum;
        }
        if (args.gamma) {
          const float scale = args.gamma[channel0 + k];
          for (int64_t s = 0; s < spatial; ++s) g[at + s] *= scale;
        }
      }
    }
    // dx = LayerNorm'(g) at x, with the rstd just computed (the mean is recomputed exactly).
    NormBackward back;
    back.dy = g;
    back.dy_storage = DType::float32;
    back.x = row_at(args.x, args.x_storage, first * dim);
    back.dx = row_at(args.dx, args.x_storage, first * dim);
    back.storage = args.x_storage;
    back.saved_rstd = rstd;
    back.rows = count;
    back.dim = dim;
    back.eps = args.eps;
    back.norm = NormKind::layer_norm;
    norm_backward_range(back, 0, count, nullptr, nullptr);
  });
  if (!sums) return;
  for (int64_t c = 0; c < layout.channels; ++c) {
    const int64_t group = c / per_group;
    const int64_t k = c % per_group;
    double dgamma_sum = 0, dbeta_sum = 0;
    for (int64_t n = 0; n < layout.batch; ++n) {
      const int64_t row = n * layout.groups + group;
      dgamma_sum += dgamma_rows[row * per_group + k];
      dbeta_sum += dbeta_rows[row * per_group + k];
    }
    // + 0.0 turns a -0 into +0, as a sum started from 0 would.
    if (args.dgamma) args.dgamma[c] = static_cast<float>(dgamma_sum + 0.0);
    if (args.dbeta) args.dbeta[c] = static_cast<float>(dbeta_sum + 0.0);
  }
}

}  // namespace addnorm::cpu
