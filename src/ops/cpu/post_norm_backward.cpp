#include "ops/cpu/post_norm_backward.hpp"

#include <algorithm>

#include "ops/cpu/dropout.hpp"
#include "ops/cpu/scratch.hpp"
#include "ops/cpu/threading.hpp"

namespace addnorm::cpu {
namespace {

// Where element `element` of rows stored as `storage` starts.
const uint8_t* bytes_at(const void* data, DType storage, int64_t element) {
  return static_cast<const uint8_t*>(data) + element * dtype_size(storage);
}
uint8_t* bytes_at(void* data, DType storage, int64_t element) {
  return static_cast<uint8_t*>(data) + element * dtype_size(storage);
}

// Rows per block of the in-cache h: about 16 Ki elements, at least one row.
int64_t block_rows(int64_t dim) {
  return std::max<int64_t>(1, (int64_t{1} << 14) / dim);
}

}  // namespace

// Block by block, in cache: the forward's h = x + Dropout(s) is rebuilt in a per-thread float32
// buffer (scratch.hpp) from x and s in their storage types, generating the Philox bits once and
// keeping the mask (a byte per element); the norm's backward turns h into dh = dx in place
// (reading dy in its storage type); then one pass writes dx and ds = dx * mask / (1 - p), the
// dropout's own backward, each rounded once to its storage type, with streaming stores when the
// tensors are too large to stay in cache. dgamma/dbeta partials per fixed chunk of rows, as
// norm_backward does.
void post_norm_backward(const PostNormBackward& args) {
  const int64_t rows = args.norm.rows, dim = args.norm.dim, count = rows * dim;
  const DropoutOptions& dropout = args.dropout;
  const bool stream = streams_output(count * dtype_size(args.dx_storage));
  const bool with_keep = dropout.p != 0.0f;
  const int64_t rows_per_block = block_rows(dim);
  const bool want_partials = args.norm.dgamma || args.norm.dbeta;
  const int64_t chunks = want_partials ? row_reduction_chunks(rows, dim) : 1;
  PartialSums partials(want_partials ? chunks : 0, dim, args.norm.dgamma != nullptr,
                       args.norm.dbeta != nullptr);
  parallel_chunks(chunks, rows, dim, [&](int64_t chunk, int64_t begin, int64_t end) {
    // One block of h and of its mask, in cache from being built to being normalised.
    Scratch block_scratch;
    float* h = block_scratch.take<float>(rows_per_block * dim);
    uint8_t* keep = with_keep ? block_scratch.take<uint8_t>(rows_per_block * dim) : nullptr;
    for (int64_t first = begin; first < end; first += rows_per_block) {
      const int64_t last = std::min(end, first + rows_per_block);
      const int64_t at = first * dim, length = (last - first) * dim;
      add_dropout(bytes_at(args.x, args.x_storage, at), args.x_storage,
                  bytes_at(args.s, args.s_storage, at), args.s_storage, h, keep, length, dropout,
                  dropout.offset + static_cast<uint64_t>(at), count - at);
      NormBackward block = args.norm;
      block.dy = bytes_at(args.norm.dy, args.norm.dy_storage, at);
      block.x = h;
      block.dx = h;
      block.storage = DType::float32;
      block.saved_rstd = args.norm.saved_rstd ? args.norm.saved_rstd + first : nullptr;
      block.rows = last - first;
      norm_backward_range(block, 0, block.rows, partials.dgamma(chunk), partials.dbeta(chunk));
      apply_keep(h, keep, bytes_at(args.ds, args.ds_storage, at), args.ds_storage,
                 bytes_at(args.dx, args.dx_storage, at), args.dx_storage, length, dropout.p,
                 stream);
    }
  });
  if (args.norm.dgamma) partials.reduce_dgamma(args.norm.dgamma);
  if (args.norm.dbeta) partials.reduce_dbeta(args.norm.dbeta);
}

}  // namespace addnorm::cpu
