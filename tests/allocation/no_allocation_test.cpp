// Every public op, once the calling thread (and OpenMP's) have run a call of its size, allocates
// nothing: the per-call tables and partial sums live in per-thread storage that is kept. The C
// allocator's entry points are interposed here and count calls while a test measures; operator
// new and the standard containers go through them. This is its own executable, left out of the
// sanitizer build, whose allocator interposes the same functions.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "addnorm/dtype.hpp"
#include "addnorm/ops.hpp"

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* pointer, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
}

namespace {
std::atomic<bool> counting{false};
std::atomic<int64_t> allocations{0};
void note() {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1);
}
}  // namespace

extern "C" {
void* malloc(size_t size) {
  note();
  return __libc_malloc(size);
}
void* calloc(size_t count, size_t size) {
  note();
  return __libc_calloc(count, size);
}
void* realloc(void* pointer, size_t size) {
  note();
  return __libc_realloc(pointer, size);
}
void* memalign(size_t alignment, size_t size) {
  note();
  return __libc_memalign(alignment, size);
}
void* aligned_alloc(size_t alignment, size_t size) {
  note();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) {
  note();
  void* pointer = __libc_memalign(alignment, size);
  if (!pointer) return ENOMEM;
  *out = pointer;
  return 0;
}
}

namespace addnorm {
namespace {

// Allocations made by the second of two identical calls of `op`.
int64_t steady_state_allocations(const std::function<void()>& op) {
  op();
  allocations = 0;
  counting = true;
  op();
  counting = false;
  return allocations.load();
}

// Data for one shape: float32 and bfloat16 copies of x, r (or s) and dy, outputs, parameters.
struct Tensors {
  int64_t rows, dim;
  std::vector<float> x, r, dy, out, out2, gamma, beta, dgamma, dbeta, mean, rstd;
  std::vector<bfloat16> x16, r16, dy16, out16, out16b;
  std::vector<uint8_t> mask;

  Tensors(int64_t rows_, int64_t dim_) : rows(rows_), dim(dim_) {
    const auto n = static_cast<size_t>(rows * dim);
    for (auto* v : {&x, &r, &dy}) v->resize(n);
    for (size_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(i % 97) * 0.03f - 1.0f;
      r[i] = static_cast<float>(i % 89) * 0.02f;
      dy[i] = static_cast<float>(i % 83) * 0.01f - 0.4f;
    }
    out.resize(n);
    out2.resize(n);
    mask.resize(n);
    for (auto* v : {&gamma, &beta, &dgamma, &dbeta}) v->assign(static_cast<size_t>(dim), 1.0f);
    for (auto* v : {&mean, &rstd}) v->assign(static_cast<size_t>(std::max(rows, dim)), 0.0f);
    for (auto [from, to] : {std::pair{&x, &x16}, {&r, &r16}, {&dy, &dy16}}) {
      to->resize(n);
      for (size_t i = 0; i < n; ++i) (*to)[i] = to_bfloat16((*from)[i]);
    }
    out16.resize(n);
    out16b.resize(n);
  }
  Shape shape() const { return {rows, dim}; }
  Shape row() const { return {dim}; }
  ConstView in(const std::vector<float>& v) const { return {v.data(), shape()}; }
  MutableView io(std::vector<float>& v) const { return {v.data(), shape()}; }
  AnyConstView in16(const std::vector<bfloat16>& v) const {
    return {v.data(), shape(), DType::bfloat16};
  }
  AnyMutableView io16(std::vector<bfloat16>& v) const {
    return {v.data(), shape(), DType::bfloat16};
  }
  TensorView<float> param(std::vector<float>& v) const { return {v.data(), row()}; }
  ConstView cparam(const std::vector<float>& v) const { return {v.data(), row()}; }
};

// Every op on one shape, by name (the options copied into each call, the tensors shared).
std::vector<std::pair<std::string, std::function<void()>>> ops(Tensors& t) {
  const NormOptions ln{.gamma = AnyConstView(t.cparam(t.gamma)),
                       .beta = AnyConstView(t.cparam(t.beta))};
  const NormOptions rms{.gamma = AnyConstView(t.cparam(t.gamma))};
  const NormOptions an{NormKind::layer_norm, AnyConstView(t.cparam(t.gamma)),
                       AnyConstView(t.cparam(t.beta))};
  const DropoutOptions drop{0.1f, 42, 0};
  BatchNormOptions bn{{.gamma = t.cparam(t.gamma), .beta = t.cparam(t.beta)}};
  BatchNormOptions bn_eval = bn;
  bn_eval.training = false;
  const TensorView<float> running_mean{t.mean.data(), t.row()};
  const TensorView<float> running_var{t.rstd.data(), t.row()};
  return {
      {"add", [=, &t] { add(t.in(t.x), t.in(t.r), t.io(t.out)); }},
      {"layer_norm", [=, &t] { layer_norm(t.in(t.x), t.row(), t.io(t.out), ln); }},
      {"layer_norm bf16", [=, &t] { layer_norm(t.in16(t.x16), t.row(), t.io16(t.out16), ln); }},
      {"layer_norm_backward",
       [=, &t] {
         layer_norm_backward(t.in(t.dy), t.in(t.x), t.row(),
                             {t.io(t.out), t.param(t.dgamma), t.param(t.dbeta)}, ln);
       }},
      {"layer_norm_backward bf16",
       [=, &t] {
         layer_norm_backward(t.in16(t.dy16), t.in16(t.x16), t.row(),
                             {t.io16(t.out16), t.param(t.dgamma), t.param(t.dbeta)}, ln);
       }},
      {"rms_norm", [=, &t] { rms_norm(t.in(t.x), t.row(), t.io(t.out), rms); }},
      {"rms_norm_backward",
       [=, &t] {
         rms_norm_backward(t.in(t.dy), t.in(t.x), t.row(), {t.io(t.out), t.param(t.dgamma)}, rms);
       }},
      {"add_norm_pre",
       [=, &t] { add_norm_pre(t.in(t.x), t.in(t.r), t.row(), t.io(t.out), t.io(t.out2), an); }},
      {"add_norm_pre bf16",
       [=, &t] {
         add_norm_pre(t.in16(t.x16), t.in16(t.r16), t.row(), t.io16(t.out16), t.io16(t.out16b), an);
       }},
      {"add_norm_pre_backward",
       [=, &t] {
         add_norm_pre_backward(t.in(t.dy), AnyConstView(t.in(t.r)), t.in(t.x), t.row(),
                               {t.io(t.out), t.param(t.dgamma), t.param(t.dbeta)}, an);
       }},
      {"add_norm_post",
       [=, &t] { add_norm_post(t.in(t.x), t.in(t.r), t.row(), t.io(t.out), an, drop); }},
      {"add_norm_post bf16",
       [=, &t] {
         add_norm_post(t.in16(t.x16), t.in16(t.r16), t.row(), t.io16(t.out16), an, drop);
       }},
      {"add_norm_post_backward",
       [=, &t] {
         add_norm_post_backward(t.in(t.dy), t.in(t.x), t.in(t.r), t.row(),
                                {t.io(t.out), t.io(t.out2), t.param(t.dgamma), t.param(t.dbeta)},
                                an, drop);
       }},
      {"add_norm_post_backward bf16",
       [=, &t] {
         add_norm_post_backward(
             t.in16(t.dy16), t.in16(t.x16), t.in16(t.r16), t.row(),
             {t.io16(t.out16), t.io16(t.out16b), t.param(t.dgamma), t.param(t.dbeta)}, an, drop);
       }},
      {"dropout", [=, &t] { dropout(t.in(t.x), t.io(t.out), drop); }},
      {"dropout_backward", [=, &t] { dropout_backward(t.in(t.dy), t.io(t.out), drop); }},
      {"dropout_mask",
       [=, &t] {
         dropout_mask(TensorView<uint8_t>{t.mask.data(), t.shape()}, drop);
       }},
      {"batch_norm training",
       [=, &t] {
         batch_norm(t.in(t.x), t.io(t.out), bn, RunningStats{running_mean, running_var});
       }},
      {"batch_norm inference",
       [=, &t] {
         batch_norm(t.in(t.x), t.io(t.out), bn_eval, RunningStats{running_mean, running_var});
       }},
      {"batch_norm_backward training",
       [=, &t] {
         batch_norm_backward(t.in(t.dy), t.in(t.x),
                             {t.io(t.out), t.param(t.dgamma), t.param(t.dbeta)}, bn);
       }},
      {"batch_norm_backward inference",
       [=, &t] {
         batch_norm_backward(t.in(t.dy), t.in(t.x),
                             {t.io(t.out), t.param(t.dgamma), t.param(t.dbeta)}, bn_eval,
                             RunningStats{running_mean, running_var});
       }},
  };
}

class NoAllocation : public testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(NoAllocation, EveryOpInSteadyState) {
  const auto [rows, dim] = GetParam();
  Tensors tensors(rows, dim);
  // The running variance must be positive for inference.
  std::fill(tensors.rstd.begin(), tensors.rstd.end(), 1.0f);
  for (auto& [name, op] : ops(tensors)) {
    // BatchNorm's training mode needs two samples per channel.
    if (rows == 1 && name.find("training") != std::string::npos) continue;
    EXPECT_EQ(steady_state_allocations(op), 0) << name << " on " << rows << " x " << dim;
  }
}

// A decode-sized call (one thread), one above the threading threshold (every thread), and
// many short rows (BatchNorm's lock-step chunks).
INSTANTIATE_TEST_SUITE_P(Shapes, NoAllocation,
                         testing::Values(std::pair<int64_t, int64_t>{1, 4096},
                                         std::pair<int64_t, int64_t>{128, 1024},
                                         std::pair<int64_t, int64_t>{4099, 64}));

// The counter itself works: a vector's storage is counted.
TEST(NoAllocation, CountsAnAllocation) {
  const int64_t counted = steady_state_allocations([] {
    std::vector<double> values(1000, 1.0);
    EXPECT_EQ(values[999], 1.0);
  });
  EXPECT_GE(counted, 1);
}

}  // namespace
}  // namespace addnorm
