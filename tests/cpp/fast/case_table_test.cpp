// The case table (bench/case_table.hpp: the row norms, fused or not, GroupNorm and BatchNorm)
// in its three test modes:
// - every case on every SIMD target compiled into this binary, forward and backward, against
//   the float64 ops (addnorm/float64.hpp) on the same stored inputs, and each fused forward bit
//   for bit against the add then the plain norm (pre-norm; post-norm without dropout);
// - thread-count identity: every output, dgamma, dbeta and BatchNorm's running statistics
//   included, the same bits on 1, 2 and 3 threads, with enough rows (samples) that the call is
//   spread and its reduction chunks end unevenly;
// - finite differences: the float64 backward the other modes compare against is the derivative
//   of the float64 forward (central differences along random directions).
// The benchmark times the cases marked `timed` (addnorm-bench --cases table).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "addnorm/float64.hpp"
#include "addnorm/ops.hpp"
#include "case_table.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/threading.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using cases::Fusion;
using cases::NormCase;
using cases::NormOp;
using cases::RowKind;
using testing::max_abs;
using testing::random_floats;
using testing::within_storage_ulp;
using testing::within_ulps;

// A tensor in its storage type: the bytes an op reads or writes.
struct Stored {
  Stored(const std::vector<float>& values, DType type, const Shape& dims)
      : dtype(type), shape(dims) {
    if (dtype == DType::float32) {
      wide = values;
    } else {
      narrow = testing::narrow_all(values, dtype);
    }
  }
  // Zeros, for an output.
  Stored(size_t count, DType type, const Shape& dims) : dtype(type), shape(dims) {
    if (dtype == DType::float32) {
      wide.resize(count);
    } else {
      narrow.resize(count);
    }
  }
  size_t size() const { return dtype == DType::float32 ? wide.size() : narrow.size(); }

  AnyConstView view() const {
    return {dtype == DType::float32 ? static_cast<const void*>(wide.data()) : narrow.data(), shape,
            dtype};
  }
  AnyMutableView writable() {
    return {dtype == DType::float32 ? static_cast<void*>(wide.data()) : narrow.data(), shape,
            dtype};
  }
  // The values as the op sees them, widened to float.
  std::vector<float> values() const {
    return dtype == DType::float32 ? wide : testing::widen_all(narrow, dtype);
  }
  std::vector<double> widened() const { return testing::widen(values()); }
  // The raw bits, for bit-for-bit comparisons.
  std::vector<uint32_t> bits() const {
    std::vector<uint32_t> out;
    if (dtype == DType::float32) {
      out.resize(wide.size());
      // (An empty batch's vectors have null data, which memcpy may not be given.)
      if (!wide.empty()) std::memcpy(out.data(), wide.data(), wide.size() * sizeof(float));
    } else {
      out.assign(narrow.begin(), narrow.end());
    }
    return out;
  }

  DType dtype;
  Shape shape;
  std::vector<float> wide;       // float32 storage
  std::vector<uint16_t> narrow;  // a 16-bit type's bits
};

bool centres(const NormCase& c) {
  return norm_traits(c.norm).centres;
}
// dy is stored as y: the branch's type, except for post-norm whose y is the next stream.
DType y_storage(const NormCase& c) {
  return c.fusion == Fusion::post_norm ? c.stream : c.branch;
}

// A case's inputs, each rounded to its storage type once.
struct Inputs {
  explicit Inputs(const NormCase& c)
      : shape(c.shape()),
        x(cases::case_rows(c, 3), c.stream, shape),
        other(random_floats(static_cast<size_t>(shape.numel()), 4), c.branch, shape),
        dy(random_floats(static_cast<size_t>(shape.numel()), 5), y_storage(c), shape),
        dh_next(random_floats(static_cast<size_t>(shape.numel()), 6), c.stream, shape),
        gamma(random_floats(static_cast<size_t>(c.parameters()), 7, 0.5f, 1.5f)),
        beta(random_floats(static_cast<size_t>(c.parameters()), 8)) {}
  Shape shape;
  Stored x, other, dy, dh_next;  // other: r of pre-norm, s of post-norm
  std::vector<float> gamma, beta;
};

// BatchNorm's running statistics before a case's training forward updates them.
constexpr float kRunningMean = 0.25f, kRunningVar = 2.0f;

// Everything a case's forward and backward write.
struct Outputs {
  Outputs(const NormCase& c, const Shape& shape)
      : y(shape.numel(), y_storage(c), shape),
        h(shape.numel(), c.stream, shape),
        dx(shape.numel(), c.stream, shape),
        ds(shape.numel(), c.branch, shape),
        mean(static_cast<size_t>(c.statistics())),
        rstd(static_cast<size_t>(c.statistics())),
        dgamma(static_cast<size_t>(c.parameters())),
        dbeta(static_cast<size_t>(c.parameters())),
        running_mean(c.op == NormOp::batch_norm ? static_cast<size_t>(c.channels) : 0,
                     kRunningMean),
        running_var(running_mean.size(), kRunningVar) {}
  Stored y, h, dx, ds;  // h: pre-norm; dx: dh for pre-norm; ds: post-norm
  std::vector<float> mean, rstd, dgamma, dbeta;
  std::vector<float> running_mean, running_var;  // BatchNorm's, updated by its forward

  std::vector<uint32_t> bits() const {
    std::vector<uint32_t> all;
    for (const Stored* part : {&y, &h, &dx, &ds}) {
      const auto part_bits = part->bits();
      all.insert(all.end(), part_bits.begin(), part_bits.end());
    }
    for (const auto* part : {&mean, &rstd, &dgamma, &dbeta, &running_mean, &running_var}) {
      const size_t at = all.size();
      all.resize(at + part->size());
      if (!part->empty()) std::memcpy(all.data() + at, part->data(), part->size() * sizeof(float));
    }
    return all;
  }
};

// The one description of the case's norm, for the float32 ops (T = float, views of any storage)
// and the float64 ones.
template <class T, class View>
BasicNormOptions<T> options_of(const NormCase& c, const View& gamma, const View& beta) {
  BasicNormOptions<T> options;
  options.norm = c.norm;
  if (c.affine) {
    options.gamma = gamma;
    if (centres(c)) options.beta = beta;
  }
  options.zero_centered_gamma = c.zero_centered_gamma;
  return options;
}

// GroupNorm's or BatchNorm's options (Options) with gamma and beta of shape [C] when the case
// is affine; the caller sets the op's own fields (groups, layout), the rest keep their defaults.
template <class Options, class View>
Options with_parameters(const NormCase& c, const View& gamma, const View& beta) {
  Options options;
  if (c.affine) {
    options.gamma = gamma;
    options.beta = beta;
  }
  return options;
}

// The shapes of a case's statistics: one per row, [N, groups], or [C].
Shape statistics_shape(const NormCase& c) {
  return c.op == NormOp::group_norm ? Shape{c.rows, c.groups} : Shape{c.statistics()};
}

// GroupNorm's or BatchNorm's forward then backward through the public float32 ops.
void run_channels_fast(const NormCase& c, Inputs& in, Outputs& out) {
  const Shape parameters{c.parameters()};
  const ConstView gamma{in.gamma.data(), parameters}, beta{in.beta.data(), parameters};
  const NormStats stats{{out.mean.data(), statistics_shape(c)},
                        {out.rstd.data(), statistics_shape(c)}};
  const OptionalMutable dgamma =
      c.affine ? OptionalMutable(MutableView{out.dgamma.data(), parameters}) : std::nullopt;
  const OptionalMutable dbeta =
      c.affine ? OptionalMutable(MutableView{out.dbeta.data(), parameters}) : std::nullopt;
  if (c.op == NormOp::group_norm) {
    auto options = with_parameters<GroupNormOptions>(c, AnyConstView(gamma), AnyConstView(beta));
    options.num_groups = c.groups;
    group_norm(in.x.view(), out.y.writable(), options, stats);
    group_norm_backward(in.dy.view(), in.x.view(), {out.dx.writable(), dgamma, dbeta}, options);
    return;
  }
  auto options = with_parameters<BatchNormOptions>(c, gamma, beta);
  options.channels_last = c.channels_last;
  options.training = c.training;
  const RunningStats running{{out.running_mean.data(), parameters},
                             {out.running_var.data(), parameters}};
  // Training saves the batch statistics and updates the running ones; inference reads the
  // running ones in both directions and saves nothing.
  batch_norm(in.x.view(), out.y.writable(), options, running,
             c.training ? std::optional(stats) : std::nullopt);
  batch_norm_backward(in.dy.view(), in.x.view(), {out.dx.writable(), dgamma, dbeta}, options,
                      c.training ? std::nullopt : std::optional(running));
}

// The case's forward then backward through the public float32 ops.
Outputs run_fast(const NormCase& c, Inputs& in) {
  Outputs out(c, in.shape);
  if (c.op != NormOp::row_norm) {
    run_channels_fast(c, in, out);
    return out;
  }
  const Shape normalized{c.dim};
  const ConstView gamma{in.gamma.data(), normalized}, beta{in.beta.data(), normalized};
  const NormOptions options = options_of<float>(c, AnyConstView(gamma), AnyConstView(beta));
  const NormStats stats{{out.mean.data(), {c.rows}}, {out.rstd.data(), {c.rows}}};
  const OptionalMutable dgamma =
      c.affine ? OptionalMutable(MutableView{out.dgamma.data(), normalized}) : std::nullopt;
  const OptionalMutable dbeta = c.affine && centres(c)
                                    ? OptionalMutable(MutableView{out.dbeta.data(), normalized})
                                    : std::nullopt;
  const DropoutOptions dropout{.p = c.dropout_p, .seed = 99, .offset = 5};
  switch (c.fusion) {
    case Fusion::none:
      norm(in.x.view(), normalized, out.y.writable(), options, stats);
      norm_backward(in.dy.view(), in.x.view(), normalized, {out.dx.writable(), dgamma, dbeta},
                    options);
      break;
    case Fusion::pre_norm:
      add_norm_pre(in.x.view(), in.other.view(), normalized, out.h.writable(), out.y.writable(),
                   options, stats);
      add_norm_pre_backward(in.dy.view(), in.dh_next.view(), out.h.view(), normalized,
                            {out.dx.writable(), dgamma, dbeta}, options);
      break;
    case Fusion::post_norm:
      add_norm_post(in.x.view(), in.other.view(), normalized, out.y.writable(), options, dropout,
                    stats);
      add_norm_post_backward(in.dy.view(), in.x.view(), in.other.view(), normalized,
                             {out.dx.writable(), out.ds.writable(), dgamma, dbeta}, options,
                             dropout);
      break;
  }
  return out;
}

// y of the plain norm (addnorm::norm, the same bits as layer_norm or rms_norm) at `x`.
Stored plain_norm_of(const NormCase& c, const Inputs& in, const Stored& x) {
  Stored y(x.size(), y_storage(c), in.shape);
  const Shape normalized{c.dim};
  const ConstView gamma{in.gamma.data(), normalized}, beta{in.beta.data(), normalized};
  const NormOptions options = options_of<float>(c, AnyConstView(gamma), AnyConstView(beta));
  norm(x.view(), normalized, y.writable(), options);
  return y;
}

// Post-norm's h at p = 0: x + s, each widened to float32, added and rounded in float32.
std::vector<float> post_norm_h(const Inputs& in) {
  std::vector<float> h = in.x.values();
  const std::vector<float> s = in.other.values();
  for (size_t i = 0; i < h.size(); ++i) h[i] += s[i];
  return h;
}

// The float64 ops' results on float64 copies of the stored inputs.
struct Want {
  std::vector<double> y, h, dx, ds, mean, rstd, dgamma, dbeta, running_mean, running_var;
};

// run_channels_fast's calls through the float64 ops, into `want`.
void run_channels_float64(const NormCase& c, const Inputs& in, const std::vector<double>& x,
                          const std::vector<double>& gamma64, const std::vector<double>& beta64,
                          Want& want) {
  using float64::ConstView;
  using float64::MutableView;
  using float64::OptionalMutable;
  const Shape shape = in.shape, parameters{c.parameters()};
  const ConstView gamma{gamma64.data(), parameters}, beta{beta64.data(), parameters};
  const float64::NormStats stats{{want.mean.data(), statistics_shape(c)},
                                 {want.rstd.data(), statistics_shape(c)}};
  const OptionalMutable dgamma =
      c.affine ? OptionalMutable(MutableView{want.dgamma.data(), parameters}) : std::nullopt;
  const OptionalMutable dbeta =
      c.affine ? OptionalMutable(MutableView{want.dbeta.data(), parameters}) : std::nullopt;
  const auto dy = in.dy.widened();
  if (c.op == NormOp::group_norm) {
    auto options = with_parameters<float64::GroupNormOptions>(c, gamma, beta);
    options.num_groups = c.groups;
    float64::group_norm({x.data(), shape}, {want.y.data(), shape}, options, stats);
    float64::group_norm_backward({dy.data(), shape}, {x.data(), shape},

                                 {{want.dx.data(), shape}, dgamma, dbeta}, options);
    return;
  }
  want.running_mean.assign(static_cast<size_t>(c.channels), kRunningMean);
  want.running_var.assign(static_cast<size_t>(c.channels), kRunningVar);
  auto options = with_parameters<float64::BatchNormOptions>(c, gamma, beta);
  options.channels_last = c.channels_last;
  options.training = c.training;
  const float64::RunningStats running{{want.running_mean.data(), parameters},
                                      {want.running_var.data(), parameters}};
  float64::batch_norm({x.data(), shape}, {want.y.data(), shape}, options, running,
                      c.training ? std::optional(stats) : std::nullopt);
  float64::batch_norm_backward({dy.data(), shape}, {x.data(), shape},
                               {{want.dx.data(), shape}, dgamma, dbeta}, options,
                               c.training ? std::nullopt : std::optional(running));
}

// What the float64 ops give for the case. Pre-norm normalises the stream it stored, so its y and
// dh are taken at `stored_h` (the fast op's h, itself checked against x + r); post-norm at p = 0
// normalises x + s rounded to float32, so its outputs are taken there when `stored_h` is given;
// the other ops at the inputs.
Want run_float64(const NormCase& c, const Inputs& in, const std::vector<double>& x,
                 const std::vector<double>& other, const std::vector<double>& gamma64,
                 const std::vector<double>& beta64, const std::vector<double>* stored_h) {
  const auto count = static_cast<size_t>(in.shape.numel());
  const auto statistics = static_cast<size_t>(c.statistics());
  const auto parameters = static_cast<size_t>(c.parameters());
  Want want{std::vector<double>(count),
            std::vector<double>(count),
            std::vector<double>(count),
            std::vector<double>(count),
            std::vector<double>(statistics),
            std::vector<double>(statistics),
            std::vector<double>(parameters),
            std::vector<double>(parameters),
            {},
            {}};
  if (c.op != NormOp::row_norm) {
    run_channels_float64(c, in, x, gamma64, beta64, want);
    return want;
  }
  const Shape shape = in.shape, normalized{c.dim};
  using float64::ConstView;
  using float64::MutableView;
  using float64::OptionalMutable;
  const auto options = options_of<double>(c, ConstView{gamma64.data(), normalized},
                                          ConstView{beta64.data(), normalized});
  const float64::NormStats stats{{want.mean.data(), {c.rows}}, {want.rstd.data(), {c.rows}}};
  const OptionalMutable dgamma =
      c.affine ? OptionalMutable(MutableView{want.dgamma.data(), normalized}) : std::nullopt;
  const OptionalMutable dbeta = c.affine && centres(c)
                                    ? OptionalMutable(MutableView{want.dbeta.data(), normalized})
                                    : std::nullopt;
  const auto dy = in.dy.widened(), dh_next = in.dh_next.widened();
  const float64::DropoutOptions dropout{.p = c.dropout_p, .seed = 99, .offset = 5};
  switch (c.fusion) {
    case Fusion::none:
      if (centres(c)) {
        float64::layer_norm({x.data(), shape}, normalized, {want.y.data(), shape}, options, stats);
        float64::layer_norm_backward({dy.data(), shape}, {x.data(), shape}, normalized,
                                     {{want.dx.data(), shape}, dgamma, dbeta}, options);
      } else {
        float64::rms_norm({x.data(), shape}, normalized, {want.y.data(), shape}, options,
                          stats.rstd);
        float64::rms_norm_backward({dy.data(), shape}, {x.data(), shape}, normalized,
                                   {{want.dx.data(), shape}, dgamma}, options);
      }
      break;
    case Fusion::pre_norm: {
      const std::vector<double>& h = stored_h ? *stored_h : want.h;
      for (size_t i = 0; i < count; ++i) want.h[i] = x[i] + other[i];
      const std::vector<double> zeros(count, 0.0);
      std::vector<double> h_again(count);
      float64::add_norm_pre({h.data(), shape}, {zeros.data(), shape}, normalized,
                            {h_again.data(), shape}, {want.y.data(), shape}, options, stats);
      float64::add_norm_pre_backward({dy.data(), shape}, ConstView{dh_next.data(), shape},
                                     {h.data(), shape}, normalized,
                                     {{want.dx.data(), shape}, dgamma, dbeta}, options);
      break;
    }
    case Fusion::post_norm: {
      // At the stored h (x + s rounded to float32, p = 0) with s = 0, or at x and s.
      const std::vector<double> zeros(count, 0.0);
      const std::vector<double>& x_in = stored_h ? *stored_h : x;
      const std::vector<double>& s_in = stored_h ? zeros : other;
      float64::add_norm_post({x_in.data(), shape}, {s_in.data(), shape}, normalized,
                             {want.y.data(), shape}, options, dropout, stats);
      float64::add_norm_post_backward(
          {dy.data(), shape}, {x_in.data(), shape}, {s_in.data(), shape}, normalized,
          {{want.dx.data(), shape}, {want.ds.data(), shape}, dgamma, dbeta}, options, dropout);
      break;
    }
  }
  return want;
}

Want run_float64(const NormCase& c, const Inputs& in, const std::vector<double>* stored_h) {
  return run_float64(c, in, in.x.widened(), in.other.widened(), testing::widen(in.gamma),
                     testing::widen(in.beta), stored_h);
}

// The contract's bounds: a float32 result within `ulps` ulp of float64 plus as many of `scale`,
// the size of the terms that cancelled; a 16-bit one within a unit of its type plus one of
// `narrow_scale` (docs/numerics.md).
::testing::AssertionResult close(const Stored& got, const std::vector<double>& want, double ulps,
                                 double scale, double narrow_scale) {
  if (got.dtype == DType::float32) return within_ulps(got.values(), want, ulps, scale);
  return within_storage_ulp(got.values(), want, got.dtype, narrow_scale);
}

class CaseTableOnEveryTarget : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { cpu::force_target(GetParam()); }
  void TearDown() override { cpu::force_target(0); }
};

TEST_P(CaseTableOnEveryTarget, MatchesTheFloat64Ops) {
  ASSERT_EQ(cpu::current_target_name(), cpu::target_name(GetParam()));  // really dispatched there
  for (const NormCase& c : cases::norm_case_table()) {
    SCOPED_TRACE(c.name());
    Inputs in(c);
    const Outputs got = run_fast(c, in);
    const std::vector<double> stored_h =
        c.fusion == Fusion::post_norm ? testing::widen(post_norm_h(in)) : got.h.widened();
    const bool at_stored_h =
        c.fusion == Fusion::pre_norm || (c.fusion == Fusion::post_norm && c.dropout_p == 0);
    const Want want = run_float64(c, in, at_stored_h ? &stored_h : nullptr);
    if (c.fusion == Fusion::pre_norm) {
      EXPECT_TRUE(close(got.h, want.h, 0.5, 0.0, 0.0));
      // The fused op equals add followed by the plain norm of the stored h, bit for bit.
      Stored added(static_cast<size_t>(in.shape.numel()), c.stream, in.shape);
      add(in.x.view(), in.other.view(), added.writable());
      EXPECT_EQ(added.bits(), got.h.bits());
      EXPECT_EQ(got.y.bits(), plain_norm_of(c, in, got.h).bits());
    }
    if (c.fusion == Fusion::post_norm && c.dropout_p == 0) {
      // Without dropout the fused op equals x + s, formed in float32, then the plain norm, bit
      // for bit (float32 x runs as the residual stage with h not kept, other x as a block of h).
      EXPECT_EQ(got.y.bits(),
                plain_norm_of(c, in, Stored(post_norm_h(in), DType::float32, in.shape)).bits());
    }
    // y = x_hat * gamma + beta: within 4 ulp of itself plus as many of beta, the term an output
    // near 0 cancels against; x_hat is held to its own size, however close x lies to the mean.
    const double y_terms = c.affine ? max_abs(testing::widen(in.beta)) : 0.0;
    EXPECT_TRUE(close(got.y, want.y, 4, y_terms, 1.0));
    // Every stream's statistics within 4 ulp: float64 lanes for float32 rows, float32 blocks
    // short enough for a 16-bit row's (kFloat32BlockAdditions) on every lane count.
    const double stats_ulps = 4;
    if (centres(c)) {
      EXPECT_TRUE(within_ulps(got.mean, want.mean, stats_ulps, max_abs(in.x.widened())));
    }
    EXPECT_TRUE(within_ulps(got.rstd, want.rstd, stats_ulps));
    if (c.row_kind == RowKind::nan_row) continue;  // dgamma sums the NaN row: nothing to compare
    // dx (and ds) is a difference of terms of size rstd * |g| * (1 + |x_hat|).
    EXPECT_TRUE(close(got.dx, want.dx, 4, 8.0 * max_abs(want.dx) + 8.0, 8.0 * max_abs(want.dx)));
    if (c.fusion == Fusion::post_norm) {
      EXPECT_TRUE(close(got.ds, want.ds, 4, 8.0 * max_abs(want.ds) + 8.0, 8.0 * max_abs(want.ds)));
    }
    if (c.affine) {
      // dgamma sums `terms` products dy * x_hat, each x_hat a few float32 roundings off: the
      // error is a few ulp of sum |dy * x_hat| <= sqrt(sum dy^2 * sum x_hat^2), about terms with
      // |dy| <= 1 and x_hat of mean square 1 (and at least the row norms' 8). dbeta sums dy
      // exactly in float64: only its rounding, so the same small scale as before.
      const double terms =
          static_cast<double>(in.shape.numel()) / static_cast<double>(c.parameters());
      EXPECT_TRUE(within_ulps(got.dgamma, want.dgamma, 4, std::max(8.0, terms)));
      if (centres(c)) {
        EXPECT_TRUE(within_ulps(got.dbeta, want.dbeta, 4, 8.0));
      }
    }
    // BatchNorm's running statistics, updated once from (0.25, 2) in training mode and left as
    // they are in inference. A huge row's variance
    // (1e76) overflows float32, where float64 holds it: nothing to compare.
    if (c.op == NormOp::batch_norm) {
      EXPECT_TRUE(within_ulps(got.running_mean, want.running_mean, 4, max_abs(in.x.widened())));
      if (c.row_kind != RowKind::huge) {
        EXPECT_TRUE(within_ulps(got.running_var, want.running_var, 4));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, CaseTableOnEveryTarget,
                         ::testing::ValuesIn(cpu::available_targets()),
                         [](const ::testing::TestParamInfo<int64_t>& target_info) {
                           return cpu::target_name(target_info.param);
                         });

// Enough rows that the call is spread over threads (kParallelThreshold elements) and its fixed
// reduction chunks end in partial groups.
NormCase with_spread_rows(NormCase c) {
  const Shape shape = c.shape();
  const int64_t sample = std::max<int64_t>(1, shape.product(1, shape.rank()));
  c.rows = std::max<int64_t>(c.rows, cpu::kParallelThreshold / sample + 7);
  return c;
}

TEST(CaseTable, EveryOutputIsTheSameBitsOnOneTwoAndThreeThreads) {
  const int saved_threads = omp_get_max_threads();
  for (const NormCase& table_case : cases::norm_case_table()) {
    // Rows of whole vectors and longer, up to the short-row path's end: the paths that split;
    // every ordinary GroupNorm and BatchNorm case.
    if (table_case.row_kind != RowKind::ordinary || table_case.timed) continue;
    if (table_case.op == NormOp::row_norm && (table_case.dim < 16 || table_case.dim > 1100)) {
      continue;
    }
    const NormCase c = with_spread_rows(table_case);
    SCOPED_TRACE(c.name());
    Inputs in(c);
    std::vector<std::vector<uint32_t>> results;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      results.push_back(run_fast(c, in).bits());
    }
    omp_set_num_threads(saved_threads);
    EXPECT_EQ(results[0], results[1]);
    EXPECT_EQ(results[0], results[2]);
  }
}

// <dy, y> + <dh_next, h> (pre-norm) of the float64 forward at inputs moved by t along `dir`.
double objective(const NormCase& c, const Inputs& in, const std::vector<std::vector<double>>& base,
                 const std::vector<std::vector<double>>& dir, double t) {
  std::vector<std::vector<double>> moved = base;
  for (size_t k = 0; k < moved.size(); ++k) {
    for (size_t i = 0; i < moved[k].size(); ++i) moved[k][i] += t * dir[k][i];
  }
  const auto& x = moved[0];
  std::vector<double> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = x[i] + moved[1][i];
  const Want w = run_float64(c, in, x, moved[1], moved[2], moved[3],
                             c.fusion == Fusion::pre_norm ? &h : nullptr);
  const auto dy = in.dy.widened(), dh_next = in.dh_next.widened();
  double sum = 0;
  for (size_t i = 0; i < dy.size(); ++i) {
    sum += dy[i] * w.y[i];
    if (c.fusion == Fusion::pre_norm) sum += dh_next[i] * h[i];
  }
  return sum;
}

TEST(CaseTable, Float64BackwardIsTheDerivativeOfTheFloat64Forward) {
  int checked[3] = {};  // by NormOp
  for (const NormCase& c : cases::norm_case_table()) {
    if (c.row_kind != RowKind::ordinary || c.dim > 100 || c.stream != DType::float32 ||
        c.branch != DType::float32 || c.timed) {
      continue;
    }
    SCOPED_TRACE(c.name());
    Inputs in(c);
    const std::vector<std::vector<double>> base = {
        in.x.widened(), in.other.widened(), testing::widen(in.gamma), testing::widen(in.beta)};
    const Want grads = run_float64(c, in, nullptr);
    // One random direction per input; the derivative along it is the sum of <gradient, dir>.
    std::vector<std::vector<double>> dir;
    for (size_t k = 0; k < base.size(); ++k) {
      dir.push_back(testing::widen(random_floats(base[k].size(), 40 + static_cast<uint32_t>(k))));
    }
    // Parameters the case does not have, and the branch of a plain norm, do not move.
    if (c.fusion == Fusion::none) std::fill(dir[1].begin(), dir[1].end(), 0.0);
    if (!c.affine) std::fill(dir[2].begin(), dir[2].end(), 0.0);
    if (!c.affine || !centres(c)) std::fill(dir[3].begin(), dir[3].end(), 0.0);
    const std::vector<double>& d_other = c.fusion == Fusion::pre_norm ? grads.dx : grads.ds;
    const std::vector<const std::vector<double>*> gradient = {&grads.dx, &d_other, &grads.dgamma,
                                                              &grads.dbeta};
    double analytic = 0, magnitude = 0;
    for (size_t k = 0; k < base.size(); ++k) {
      for (size_t i = 0; i < base[k].size(); ++i) {
        analytic += (*gradient[k])[i] * dir[k][i];
        magnitude += std::fabs((*gradient[k])[i] * dir[k][i]);
      }
    }
    const double t = 1e-5;
    const double numeric =
        (objective(c, in, base, dir, t) - objective(c, in, base, dir, -t)) / (2 * t);
    EXPECT_NEAR(numeric, analytic, 1e-6 * (magnitude + 1.0));
    ++checked[static_cast<int>(c.op)];
  }
  // The filter kept the table's small cases of every op.
  EXPECT_GT(checked[static_cast<int>(NormOp::row_norm)], 50);
  EXPECT_GT(checked[static_cast<int>(NormOp::group_norm)], 10);
  EXPECT_GT(checked[static_cast<int>(NormOp::batch_norm)], 10);
}

}  // namespace
}  // namespace addnorm
