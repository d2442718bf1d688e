#include "case_table.hpp"

#include <limits>
#include <random>
#include <utility>

namespace addnorm::cases {
namespace {

constexpr NormKind kNorms[] = {NormKind::layer_norm, NormKind::rms_norm};
constexpr Fusion kFusions[] = {Fusion::none, Fusion::pre_norm, Fusion::post_norm};
constexpr DType kStorages[] = {DType::float32, DType::bfloat16, DType::float16};

std::vector<NormCase> build_table() {
  std::vector<NormCase> all;
  // Row lengths around every vector width (4, 8, 16 floats) and each of the engine's path
  // boundaries: the group path of short rows (whole registers up to D = 1024), the 16-bit short
  // rows (up to 128), the resumable sums of long float32 rows (from 512), a tail in each.
  for (Fusion fusion : kFusions) {
    for (NormKind norm : kNorms) {
      for (int64_t dim : {1, 3, 7, 8, 15, 16, 17, 33, 64, 100, 128, 129, 768, 1024, 1040, 4097}) {
        all.push_back({.fusion = fusion, .norm = norm, .dim = dim});
      }
      // Without parameters, and RMSNorm's zero-centred scale.
      for (int64_t dim : {17, 256}) {
        all.push_back({.fusion = fusion, .norm = norm, .dim = dim, .affine = false});
        if (!norm_traits(norm).centres) {
          all.push_back({.fusion = fusion, .norm = norm, .dim = dim, .zero_centered_gamma = true});
        }
      }
    }
  }
  // Rows that stress the numerics, float32 (a float16 cannot hold the huge ones). Post-norm forms
  // x + s in float32 without storing it; at p = 0 that h is x + s rounded once, which the tests
  // reproduce, so post-norm takes every kind there (with dropout its bound is stated for
  // ordinary rows, docs/numerics.md).
  for (RowKind kind : {RowKind::large_mean, RowKind::one_outlier, RowKind::constant, RowKind::tiny,
                       RowKind::huge, RowKind::nan_row}) {
    for (Fusion fusion : kFusions) {
      for (NormKind norm : kNorms) {
        for (int64_t dim : {1, 9, 64, 257}) {
          all.push_back({.fusion = fusion, .norm = norm, .rows = 3, .dim = dim, .row_kind = kind});
        }
        // Rows long enough, and of a length not a power of 2, for the mean's rounding to show.
        // Without beta too, whose size would otherwise set the bound of outputs near 0.
        if (kind == RowKind::one_outlier || kind == RowKind::large_mean) {
          for (int64_t dim : {1023, 5000}) {
            for (bool affine : {true, false}) {
              all.push_back({.fusion = fusion,
                             .norm = norm,
                             .rows = 3,
                             .dim = dim,
                             .row_kind = kind,
                             .affine = affine});
            }
          }
        }
      }
    }
  }
  // Every pair of storage types, each fusion and norm, a short row, a tail and a long row.
  for (DType stream : kStorages) {
    for (DType branch : kStorages) {
      if (stream == DType::float32 && branch == DType::float32) continue;  // above
      for (Fusion fusion : kFusions) {
        for (NormKind norm : kNorms) {
          for (int64_t dim : {16, 100, 1024}) {
            all.push_back(
                {.fusion = fusion, .norm = norm, .dim = dim, .stream = stream, .branch = branch});
          }
        }
      }
    }
  }
  // An empty batch (no rows, as PyTorch allows): outputs of no elements, dgamma and dbeta 0
  // (sums over nothing) on every target and in float64 alike (src/ops/empty_batch.hpp).
  for (DType storage : {DType::float32, DType::bfloat16}) {
    for (Fusion fusion : kFusions) {
      for (NormKind norm : kNorms) {
        all.push_back(
            {.fusion = fusion, .norm = norm, .rows = 0, .stream = storage, .branch = storage});
      }
    }
  }
  // Post-norm with its dropout, the 2017 paper's p = 0.1 and a heavy one.
  for (NormKind norm : kNorms) {
    for (float p : {0.1f, 0.5f}) {
      for (int64_t dim : {64, 1000}) {
        all.push_back({.fusion = Fusion::post_norm, .norm = norm, .dim = dim, .dropout_p = p});
      }
    }
  }
  // GroupNorm over (N, C, L) and BatchNorm over (N, C, L) or channels-last (N, L, C): three and
  // four samples, ordinary rows, float32 unless changed.
  const auto group_case = [](int64_t dim, int64_t channels, int64_t groups) {
    return NormCase{
        .op = NormOp::group_norm, .rows = 3, .dim = dim, .channels = channels, .groups = groups};
  };
  const auto batch_case = [](int64_t dim, int64_t channels, bool channels_last) {
    return NormCase{.op = NormOp::batch_norm,
                    .rows = 4,
                    .dim = dim,
                    .channels = channels,
                    .channels_last = channels_last};
  };
  // GroupNorm: one group (LayerNorm over (C, L)), a few, and one channel a group (InstanceNorm);
  // L from 1 (vectors across channels) past a register, with tails; every storage type (x, y
  // and their gradients share one); without parameters.
  constexpr std::pair<int64_t, int64_t> kChannelsGroups[] = {{6, 1}, {6, 3}, {6, 6}, {32, 8}};
  for (DType storage : kStorages) {
    for (const auto& [channels, groups] : kChannelsGroups) {
      for (int64_t dim : {1, 7, 64, 257}) {
        NormCase c = group_case(dim, channels, groups);
        c.stream = c.branch = storage;
        all.push_back(c);
      }
    }
  }
  // BatchNorm in training mode: L = 1 is (N, C), whose vectors run across channels; channel
  // counts that are no multiple of a register; every storage type (x, y and their gradients
  // share one); without parameters.
  for (DType storage : kStorages) {
    for (bool channels_last : {false, true}) {
      for (int64_t channels : {3, 17}) {
        for (int64_t dim : {1, 5, 64}) {
          NormCase c = batch_case(dim, channels, channels_last);
          c.stream = c.branch = storage;
          all.push_back(c);
        }
      }
    }
  }
  for (NormCase c : {group_case(1, 6, 2), group_case(33, 6, 2), batch_case(9, 5, false),
                     batch_case(9, 5, true)}) {
    c.affine = false;
    all.push_back(c);
  }
  // BatchNorm in inference mode: the running statistics normalise, and are constants to the
  // backward.
  for (DType storage : kStorages) {
    for (bool channels_last : {false, true}) {
      for (int64_t dim : {1, 12}) {
        NormCase c = batch_case(dim, 5, channels_last);
        c.training = false;
        c.stream = c.branch = storage;
        all.push_back(c);
      }
    }
  }
  // Every rank from 2 to 5 (L spread over 0 to 3 dims), both layouts for BatchNorm.
  for (int spatial_rank : {0, 2, 3}) {
    const int64_t dim = spatial_rank == 0 ? 1 : 12;
    for (NormCase c :
         {group_case(dim, 6, 3), batch_case(dim, 5, false), batch_case(dim, 5, true)}) {
      c.spatial_rank = spatial_rank;
      all.push_back(c);
    }
  }
  // The contents that stress the numerics (a NaN: in the second sample), BatchNorm in both
  // layouts.
  for (RowKind kind : {RowKind::large_mean, RowKind::one_outlier, RowKind::constant, RowKind::tiny,
                       RowKind::huge, RowKind::nan_row}) {
    for (int64_t dim : {1, 40, 1023}) {
      if (dim == 1023 && kind != RowKind::one_outlier) continue;  // where the mean's rounding shows
      for (NormCase c :
           {group_case(dim, 6, 3), batch_case(dim, 5, false), batch_case(dim, 5, true)}) {
        c.row_kind = kind;
        all.push_back(c);
        if (kind == RowKind::one_outlier) {
          c.affine = false;
          all.push_back(c);
        }
      }
      // The same contents stored in bfloat16 (float32's range; tiny rows take the float64-lanes
      // normalising pass), BatchNorm in both layouts.
      for (NormCase c : {batch_case(dim, 5, false), batch_case(dim, 5, true)}) {
        c.row_kind = kind;
        c.stream = c.branch = DType::bfloat16;
        all.push_back(c);
      }
    }
  }
  // BatchNorm over (N, C) with samples of 2 KiB or more (C >= 512): the statistics and the
  // backward's pass 1 take one chunk at a time, in groups of samples; every storage type.
  for (DType storage : kStorages) {
    NormCase c = batch_case(1, 520, false);
    c.stream = c.branch = storage;
    all.push_back(c);
  }
  // What the benchmark times (bench_case.hpp's ops and storage types; its post-norm runs
  // LayerNorm with p = 0.1): the row lengths of issue 32's targets and the ones between.
  for (DType storage : {DType::float32, DType::bfloat16}) {
    for (int64_t dim : {64, 128, 512, 768, 1024, 4096, 8192}) {
      const auto timed = [&](Fusion fusion, NormKind norm, float p) {
        all.push_back({.fusion = fusion,
                       .norm = norm,
                       .rows = 4,
                       .dim = dim,
                       .stream = storage,
                       .branch = storage,
                       .dropout_p = p,
                       .timed = true});
      };
      timed(Fusion::none, NormKind::layer_norm, 0);
      timed(Fusion::none, NormKind::rms_norm, 0);
      timed(Fusion::pre_norm, NormKind::layer_norm, 0);
      timed(Fusion::post_norm, NormKind::layer_norm, 0.1f);
    }
  }
  return all;
}

}  // namespace

const std::vector<NormCase>& norm_case_table() {
  static const std::vector<NormCase> table = build_table();
  return table;
}

std::vector<float> case_rows(const NormCase& c, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> uniform(-2.0f, 3.0f);
  std::vector<float> x(static_cast<size_t>(c.shape().numel()));
  for (float& v : x) v = uniform(engine);
  switch (c.row_kind) {
    case RowKind::ordinary:
      break;
    case RowKind::large_mean:
      for (float& v : x) v = 1e6f + v * 1e-1f;
      break;
    case RowKind::one_outlier:
      for (size_t i = 0; i < x.size(); ++i) {
        x[i] =
            i % static_cast<size_t>(c.dim) == static_cast<size_t>(c.dim / 2) ? 1e7f + 1.0f : 1e7f;
      }
      break;
    case RowKind::constant:
      for (float& v : x) v = 42.5f;
      break;
    case RowKind::tiny:
      for (float& v : x) v *= 1e-40f;
      break;
    case RowKind::huge:
      for (float& v : x) v *= 1e38f;
      break;
    case RowKind::nan_row:
      if (c.rows > 1) {
        const auto sample = static_cast<size_t>(c.shape().numel() / c.rows);
        x[sample + sample / 2] = std::numeric_limits<float>::quiet_NaN();
      }
      break;
  }
  return x;
}

std::string op_name(NormOp op) {
  switch (op) {
    case NormOp::row_norm:
      return "row_norm";
    case NormOp::group_norm:
      return "group_norm";
    case NormOp::batch_norm:
      return "batch_norm";
  }
  return "?";
}

std::string fusion_name(Fusion fusion) {
  switch (fusion) {
    case Fusion::none:
      return "none";
    case Fusion::pre_norm:
      return "pre_norm";
    case Fusion::post_norm:
      return "post_norm";
  }
  return "?";
}

std::string row_kind_name(RowKind kind) {
  switch (kind) {
    case RowKind::ordinary:
      return "ordinary";
    case RowKind::large_mean:
      return "large_mean";
    case RowKind::one_outlier:
      return "one_outlier";
    case RowKind::constant:
      return "constant";
    case RowKind::tiny:
      return "tiny";
    case RowKind::huge:
      return "huge";
    case RowKind::nan_row:
      return "nan_row";
  }
  return "?";
}

std::string NormCase::name() const {
  std::string name = op == NormOp::row_norm
                         ? std::string(norm_traits(norm).name) + " " + fusion_name(fusion)
                         : op_name(op);
  std::string dims;               // "5x64", "3x6x7"
  const Shape dims_of = shape();  // (a span into a temporary would dangle in the loop)
  for (int64_t d : dims_of.dims()) dims += (dims.empty() ? "" : "x") + std::to_string(d);
  name += " " + dims + " " + dtype_name(stream) + "/" + dtype_name(branch) + " " +
          row_kind_name(row_kind);
  if (op == NormOp::group_norm) name += " groups=" + std::to_string(groups);
  if (channels_last) name += " channels-last";
  if (!training) name += " inference";
  if (!affine) name += " no-affine";
  if (zero_centered_gamma) name += " zero-centred";
  if (dropout_p > 0) name += " p=" + std::to_string(dropout_p);
  return name;
}

Shape NormCase::shape() const {
  if (op == NormOp::row_norm) return {rows, dim};
  // The L positions over spatial_rank dims, the first ones 2 each.
  std::vector<int64_t> spatial;
  for (int axis = 1; axis < spatial_rank; ++axis) spatial.push_back(2);
  if (spatial_rank > 0) spatial.push_back(dim >> (spatial_rank - 1));
  std::vector<int64_t> dims = {rows};
  if (!channels_last) dims.push_back(channels);
  dims.insert(dims.end(), spatial.begin(), spatial.end());
  if (channels_last) dims.push_back(channels);
  return Shape(dims);
}

int64_t NormCase::statistics() const {
  switch (op) {
    case NormOp::row_norm:
      return rows;
    case NormOp::group_norm:
      return rows * groups;
    case NormOp::batch_norm:
      return channels;
  }
  return 0;
}

int64_t NormCase::parameters() const {
  return op == NormOp::row_norm ? dim : channels;
}

}  // namespace addnorm::cases
