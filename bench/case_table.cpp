#include "case_table.hpp"

#include <limits>
#include <random>

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
  for (RowKind kind :
       {RowKind::large_mean, RowKind::constant, RowKind::tiny, RowKind::huge, RowKind::nan_row}) {
    for (Fusion fusion : kFusions) {
      for (NormKind norm : kNorms) {
        for (int64_t dim : {1, 9, 64, 257}) {
          all.push_back({.fusion = fusion, .norm = norm, .rows = 3, .dim = dim, .row_kind = kind});
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
  std::vector<float> x(static_cast<size_t>(c.rows * c.dim));
  for (float& v : x) v = uniform(engine);
  switch (c.row_kind) {
    case RowKind::ordinary:
      break;
    case RowKind::large_mean:
      for (float& v : x) v = 1e6f + v * 1e-1f;
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
      if (c.rows > 1)
        x[static_cast<size_t>(c.dim + c.dim / 2)] = std::numeric_limits<float>::quiet_NaN();
      break;
  }
  return x;
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
  std::string name = std::string(norm_traits(norm).name) + " " + fusion_name(fusion) + " " +
                     std::to_string(rows) + "x" + std::to_string(dim) + " " + dtype_name(stream) +
                     "/" + dtype_name(branch) + " " + row_kind_name(row_kind);
  if (!affine) name += " no-affine";
  if (zero_centered_gamma) name += " zero-centred";
  if (dropout_p > 0) name += " p=" + std::to_string(dropout_p);
  return name;
}

}  // namespace addnorm::cases
