// The CPU kernels of torch.ops.addnorm.* (kernels.hpp): argument checks in PyTorch's terms,
// then one call into addnorm's library per storage type.
#include "kernels.hpp"

#include <ATen/Functions.h>
#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "addnorm/ops.hpp"
#include "library.hpp"

namespace addnorm::torch_ops {

namespace library = python::library;

void check_defined(const char* name, const at::Tensor& tensor) {
  TORCH_CHECK(tensor.defined(), name, " is an undefined tensor, expected a tensor");
}

namespace {

// ---------------------------------------------------------------------------------------------
// Checks. Each names the argument and says what was expected, and raises RuntimeError in Python
// (TORCH_CHECK), the class PyTorch's own operators raise for the same mistakes (a wrong shape,
// dtype or device: issue 33, code that catches RuntimeError around torch.nn.functional keeps
// working after patch).

const char* dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return "torch.float32";
    case at::kBFloat16:
      return "torch.bfloat16";
    case at::kHalf:
      return "torch.float16";
    case at::kDouble:
      return "torch.float64";
    default:
      return c10::toString(type);
  }
}

std::string shape_text(at::IntArrayRef sizes) {
  std::ostringstream text;
  text << "[";
  for (size_t i = 0; i < sizes.size(); ++i) text << (i ? ", " : "") << sizes[i];
  text << "]";
  return text.str();
}

bool is_16_bit(at::ScalarType type) {
  return type == at::kBFloat16 || type == at::kHalf;
}

void check_tensor(const char* name, const at::Tensor& tensor) {
  check_defined(name, tensor);
  TORCH_CHECK(tensor.device().is_cpu(), name, " is on device ", tensor.device().str(),
              ", expected a CPU tensor (addnorm runs on the CPU)");
  const at::ScalarType type = tensor.scalar_type();
  TORCH_CHECK(type == at::kFloat || type == at::kDouble || is_16_bit(type), name, " has dtype ",
              dtype_name(type),
              ", expected torch.float32, torch.bfloat16, torch.float16 or torch.float64");
  TORCH_CHECK(tensor.layout() == at::kStrided, name, " is a sparse tensor, expected a ",
              "dense one");
}

// A tensor that must have input's dtype and shape (r, s, grad_y...).
void check_like(const char* name, const at::Tensor& tensor, const at::Tensor& input) {
  check_tensor(name, tensor);
  TORCH_CHECK(tensor.scalar_type() == input.scalar_type(), name, " has dtype ",
              dtype_name(tensor.scalar_type()), ", expected ", dtype_name(input.scalar_type()),
              " like input");
  TORCH_CHECK(tensor.sizes() == input.sizes(), name, " has shape ", shape_text(tensor.sizes()),
              ", expected ", shape_text(input.sizes()), " like input");
}

// A parameter or statistic: input's dtype, or float32 beside 16-bit input (mixed precision, as
// autocast leaves float32 parameters next to bfloat16 activations).
void check_parameter(const char* name, const OptionalTensor& tensor, const at::Tensor& input,
                     at::IntArrayRef shape) {
  if (!tensor.has_value() || !tensor->defined()) return;
  check_tensor(name, *tensor);
  const at::ScalarType type = tensor->scalar_type();
  const bool widened = type == at::kFloat && is_16_bit(input.scalar_type());
  TORCH_CHECK(type == input.scalar_type() || widened, name, " has dtype ", dtype_name(type),
              ", expected ", dtype_name(input.scalar_type()), " like input",
              is_16_bit(input.scalar_type()) ? " (or torch.float32)" : "");
  TORCH_CHECK(tensor->sizes() == shape, name, " has shape ", shape_text(tensor->sizes()),
              ", expected ", shape_text(shape));
}

// The library's own checks come after this face's; an addnorm::Error from it (a case the checks
// here do not foresee) becomes a RuntimeError too.
template <class Call>
void run_library(Call&& call) {
  try {
    call();
  } catch (const Error& error) {
    TORCH_CHECK(false, face_message(error));  // weight and bias, as PyTorch names them
  }
}

// eps by the library's one rule (finite, and within float32's range unless input is float64,
// where it is held in float64), checked on the double before any conversion.
void check_eps(double eps, const at::Tensor& input) {
  run_library([&] {
    if (compute_type(input) == at::kFloat) {
      static_cast<void>(eps_as<float>(eps));
    } else {
      static_cast<void>(eps_as<double>(eps));
    }
  });
}

void check_norm(const at::Tensor& input, const OptionalTensor& weight, const OptionalTensor& bias,
                const NormSpec& spec) {
  check_tensor("input", input);
  const auto& shape = spec.normalized_shape;
  const auto count = static_cast<int64_t>(shape.size());
  TORCH_CHECK(
      !shape.empty() && count <= input.dim() &&
          input.sizes().slice(static_cast<size_t>(input.dim() - count)) == at::IntArrayRef(shape),
      "normalized_shape is ", shape_text(shape),
      ", expected the trailing dimensions of input, whose shape is ", shape_text(input.sizes()));
  check_parameter("weight", weight, input, shape);
  if (!norm_traits(spec.kind).has_shift) {
    TORCH_CHECK(!bias.has_value() || !bias->defined(), "bias is given, expected none for ",
                norm_traits(spec.kind).name, " (it has no shift)");
  }
  check_parameter("bias", bias, input, shape);
  check_eps(spec.eps, input);
}

void check_dropout(const DropoutSpec& spec) {
  run_library([&] { checked_dropout_p(spec.p); });  // the library's one rule for p
  TORCH_CHECK(spec.seed >= 0, "seed is ", spec.seed, ", expected an integer >= 0");
  TORCH_CHECK(spec.offset >= 0, "offset is ", spec.offset, ", expected an integer >= 0");
}

// ---------------------------------------------------------------------------------------------
// Views of tensors for the library (contiguous tensors only).

Shape shape_of(at::IntArrayRef sizes) {
  return Shape(std::span<const int64_t>(sizes.data(), sizes.size()));
}

// T is the element type: float for float32 tensors, double for float64 ones.
template <class T>
TensorView<const T> const_view(const at::Tensor& tensor) {
  return {tensor.data_ptr<T>(), shape_of(tensor.sizes())};
}
template <class T>
TensorView<T> mutable_view(const at::Tensor& tensor) {
  return {tensor.data_ptr<T>(), shape_of(tensor.sizes())};
}
template <class T>
std::optional<TensorView<const T>> optional_view(const at::Tensor& tensor) {
  if (!tensor.defined()) return std::nullopt;
  return const_view<T>(tensor);
}
template <class T>
std::optional<TensorView<T>> optional_mutable(const at::Tensor& tensor) {
  if (!tensor.defined()) return std::nullopt;
  return mutable_view<T>(tensor);
}

// Calls body(T{}) with T = double for a float64 tensor, float otherwise (float32): the element
// type of the library call, whose float32 and float64 ops take the same arguments.
template <class Body>
void with_element_type(const at::Tensor& tensor, const Body& body) {
  if (tensor.scalar_type() == at::kDouble) {
    body(double{});
  } else {
    body(float{});
  }
}

DType storage_type(at::ScalarType type) {
  if (type == at::kBFloat16) return DType::bfloat16;
  if (type == at::kHalf) return DType::float16;
  return DType::float32;
}
AnyConstView any_view(const at::Tensor& tensor) {
  return {tensor.data_ptr(), shape_of(tensor.sizes()), storage_type(tensor.scalar_type())};
}
AnyMutableView any_mutable(const at::Tensor& tensor) {
  return {tensor.data_ptr(), shape_of(tensor.sizes()), storage_type(tensor.scalar_type())};
}
std::optional<AnyConstView> optional_any(const at::Tensor& tensor) {
  if (!tensor.defined()) return std::nullopt;
  return any_view(tensor);
}

// A tensor as the library's ops for element type T take x, y, gamma and the like (NormConst,
// NormMutable): a view of any storage type for the float32 ops, a float64 view for the float64
// ones.
template <class T>
NormConst<T> norm_view(const at::Tensor& tensor) {
  if constexpr (std::is_same_v<T, double>) {
    return const_view<T>(tensor);
  } else {
    return any_view(tensor);
  }
}
template <class T>
NormMutable<T> norm_mutable(const at::Tensor& tensor) {
  if constexpr (std::is_same_v<T, double>) {
    return mutable_view<T>(tensor);
  } else {
    return any_mutable(tensor);
  }
}
template <class T>
std::optional<NormConst<T>> optional_norm_view(const at::Tensor& tensor) {
  if (!tensor.defined()) return std::nullopt;
  return norm_view<T>(tensor);
}

at::Tensor contiguous(const OptionalTensor& tensor) {
  return tensor.has_value() && tensor->defined() ? tensor->contiguous() : at::Tensor();
}

// The leading (row) dims of x: the shape of the per-row statistics.
at::IntArrayRef row_dims(const at::Tensor& x, const NormSpec& spec) {
  return x.sizes().slice(0, x.sizes().size() - spec.normalized_shape.size());
}

// ---------------------------------------------------------------------------------------------
// The norm on contiguous tensors of one storage type, from x into y.

struct NormTensors {
  at::Tensor weight, bias;  // contiguous or undefined
  at::Tensor mean, rstd;    // outputs (forward) or saved inputs (backward); may be undefined
};

template <class T>
BasicNormOptions<T> norm_options(const NormTensors& t, const NormSpec& spec) {
  return {spec.kind, optional_view<T>(t.weight), optional_view<T>(t.bias),
          spec.zero_centered_weight, argument_as<T>("eps", spec.eps)};
}
// The channel norms' description (GroupNorm, BatchNorm): weight and bias of shape [C] in any
// storage type, and eps.
template <class T>
BasicNormOptions<T> channel_norm_options(const at::Tensor& weight, const at::Tensor& bias,
                                         double eps) {
  return {NormKind::layer_norm, optional_norm_view<T>(weight), optional_norm_view<T>(bias), false,
          argument_as<T>("eps", eps)};
}
template <class T>
BasicDropoutOptions<T> dropout_options(const DropoutSpec& spec) {
  return {dropout_p_as<T>(spec.p), static_cast<uint64_t>(spec.seed),
          static_cast<uint64_t>(spec.offset)};
}
// 16-bit input: the float32 ops take every tensor in its own storage type (addnorm/ops.hpp).
NormOptions any_norm_options(const NormTensors& t, const NormSpec& spec) {
  return {spec.kind, optional_any(t.weight), optional_any(t.bias), spec.zero_centered_weight,
          argument_as<float>("eps", spec.eps)};
}
// Statistics in the compute type (float32 for 16-bit input, as add_stats makes them).
template <class T>
std::optional<BasicNormStats<T>> stats_out(const NormTensors& t) {
  if (!t.rstd.defined()) return std::nullopt;
  return BasicNormStats<T>{t.mean.defined() ? mutable_view<T>(t.mean) : TensorView<T>{},
                           mutable_view<T>(t.rstd)};
}
template <class T>
std::optional<BasicSavedStats<T>> stats_in(const NormTensors& t) {
  if (!t.rstd.defined()) return std::nullopt;
  return BasicSavedStats<T>{t.mean.defined() ? const_view<T>(t.mean) : TensorView<const T>{},
                            const_view<T>(t.rstd)};
}
// Saved statistics are reused only when given (both, for a norm that centres); otherwise the
// backward recomputes them. check_saved_statistics has refused any that the forward would not
// have written.
void use_saved_stats(NormTensors& t, const at::Tensor& x, const NormSpec& spec) {
  check_saved_statistics(t.mean, t.rstd, x, spec);
  if (!t.rstd.defined()) t.mean = at::Tensor();
}

void norm_into(const at::Tensor& x, const at::Tensor& y, const NormTensors& t,
               const NormSpec& spec) {
  const Shape shape = shape_of(spec.normalized_shape);
  if (is_16_bit(x.scalar_type())) {
    return run_library([&] {
      norm(any_view(x), shape, any_mutable(y), any_norm_options(t, spec), stats_out<float>(t));
    });
  }
  with_element_type(x, [&](auto element) {
    using T = decltype(element);
    run_library([&] {
      library::norm(const_view<T>(x), shape, mutable_view<T>(y), norm_options<T>(t, spec),
                    stats_out<T>(t));
    });
  });
}

// Statistics tensors for a forward that saves them.
void add_stats(NormTensors& t, const at::Tensor& x, const NormSpec& spec) {
  const auto options = x.options().dtype(compute_type(x));
  t.rstd = at::empty(row_dims(x, spec), options);
  if (norm_traits(spec.kind).centres) t.mean = at::empty(row_dims(x, spec), options);
}

// dweight/dbias come back in their parameter's dtype.
at::Tensor like_parameter(const at::Tensor& gradient, const OptionalTensor& parameter) {
  if (!gradient.defined()) return gradient;
  return gradient.to(parameter->scalar_type());
}

// The gradients' tensors, allocated for the library to write (an empty batch included: it
// writes dweight and dbias as sums of nothing, src/ops/empty_batch.hpp); a parameter gradient
// not wanted stays undefined, and the library skips its sums.
// dx as x; dweight and dbias, where wanted, in the compute dtype. `dx` replaces the first when
// the caller has allocated it (in a layout of its own).
NormGrads allocate_grads(const at::Tensor& x, const NormTensors& t, ParameterGrads wanted = {},
                         at::Tensor dx = {}) {
  const auto wide = x.options().dtype(compute_type(x));
  NormGrads grads;
  grads.dx = dx.defined() ? std::move(dx) : at::empty(x.sizes(), x.options());
  if (t.weight.defined() && wanted.weight) grads.dweight = at::empty(t.weight.sizes(), wide);
  if (t.bias.defined() && wanted.bias) grads.dbias = at::empty(t.bias.sizes(), wide);
  return grads;
}

}  // namespace

at::ScalarType compute_type(const at::Tensor& tensor) {
  return tensor.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

void check_saved_statistics(const OptionalTensor& mean, const OptionalTensor& rstd,
                            const at::Tensor& x, const NormSpec& spec) {
  const bool centres = norm_traits(spec.kind).centres;
  const bool has_mean = mean.has_value() && mean->defined();
  const bool has_rstd = rstd.has_value() && rstd->defined();
  TORCH_CHECK(!has_mean || centres, "mean is given, expected none for ",
              norm_traits(spec.kind).name, " (it does not centre)");
  TORCH_CHECK(!centres || has_mean == has_rstd,
              "mean and rstd: one is given, expected both or neither");
  const std::pair<const char*, const OptionalTensor*> stats[] = {{"mean", &mean}, {"rstd", &rstd}};
  for (const auto& [name, stat] : stats) {
    if (!stat->has_value() || !(*stat)->defined()) continue;
    const at::Tensor& tensor = **stat;
    check_tensor(name, tensor);
    TORCH_CHECK(tensor.scalar_type() == compute_type(x), name, " has dtype ",
                dtype_name(tensor.scalar_type()), ", expected ", dtype_name(compute_type(x)),
                " (what the forward saves for input of ", dtype_name(x.scalar_type()), ")");
    TORCH_CHECK(tensor.sizes() == row_dims(x, spec), name, " has shape ",
                shape_text(tensor.sizes()), ", expected ", shape_text(row_dims(x, spec)),
                " (input's dimensions before normalized_shape)");
  }
}

// ---------------------------------------------------------------------------------------------

NormKind norm_kind(c10::string_view norm) {
  const std::optional<NormKind> kind = norm_kind_named(std::string_view(norm.data(), norm.size()));
  TORCH_CHECK(kind.has_value(), "norm is '", std::string(norm),
              "', expected 'layer_norm' or 'rms_norm'");
  return *kind;
}

namespace {

// torch.finfo(t).eps of the type the input is computed in (PyTorch's opmath type): float64 for
// float64, float32 for float32 and the 16-bit types. F.rms_norm(eps=None) has used it since
// pytorch/pytorch#142848 (PyTorch 2.6); before, it took the 16-bit dtype's own epsilon, 7.8e-3
// for bfloat16, which swamps the mean square of small activations.
double machine_eps(const at::Tensor& input) {
  return input.scalar_type() == at::kDouble ? std::numeric_limits<double>::epsilon()
                                            : std::numeric_limits<float>::epsilon();
}

}  // namespace

double eps_or_default(c10::optional<double> eps, NormKind kind, const at::Tensor& input) {
  if (eps.has_value()) return *eps;
  switch (kind) {
    case NormKind::layer_norm:
      return norm_traits(kind).default_eps;  // F.layer_norm's 1e-5
    case NormKind::rms_norm:
      return machine_eps(input);  // F.rms_norm's eps=None
  }
  return norm_traits(kind).default_eps;
}

NormOutputs norm_forward(const at::Tensor& input, const OptionalTensor& weight,
                         const OptionalTensor& bias, const NormSpec& spec, bool save_stats) {
  check_norm(input, weight, bias, spec);
  const at::Tensor x = input.contiguous();
  NormTensors t{contiguous(weight), contiguous(bias), {}, {}};
  if (save_stats) add_stats(t, x, spec);
  const at::Tensor y = at::empty(x.sizes(), x.options());
  norm_into(x, y, t, spec);
  return {y, t.mean, t.rstd};
}

NormGrads norm_backward(const at::Tensor& grad_y, const OptionalTensor& grad_h,
                        const at::Tensor& input, const OptionalTensor& weight,
                        const OptionalTensor& bias, const NormSpec& spec,
                        const OptionalTensor& mean, const OptionalTensor& rstd,
                        ParameterGrads wanted) {
  check_norm(input, weight, bias, spec);
  check_like("grad_y", grad_y, input);
  const at::Tensor dh_next = contiguous(grad_h);
  if (dh_next.defined()) check_like("grad_h", dh_next, input);
  const at::Tensor x = input.contiguous(), dy = grad_y.contiguous();
  NormTensors t{contiguous(weight), contiguous(bias), contiguous(mean), contiguous(rstd)};
  use_saved_stats(t, x, spec);
  NormGrads grads = allocate_grads(x, t, wanted);
  if (is_16_bit(x.scalar_type())) {
    run_library([&] {
      add_norm_pre_backward(any_view(dy), optional_any(dh_next), any_view(x),
                            shape_of(spec.normalized_shape),
                            {any_mutable(grads.dx), optional_mutable<float>(grads.dweight),
                             optional_mutable<float>(grads.dbias)},
                            any_norm_options(t, spec), stats_in<float>(t));
    });
  } else {
    with_element_type(x, [&](auto element) {
      using T = decltype(element);
      run_library([&] {
        library::add_norm_pre_backward(
            const_view<T>(dy), optional_view<T>(dh_next), const_view<T>(x),
            shape_of(spec.normalized_shape),
            {mutable_view<T>(grads.dx), optional_mutable<T>(grads.dweight),
             optional_mutable<T>(grads.dbias)},
            norm_options<T>(t, spec), stats_in<T>(t));
      });
    });
  }
  return {grads.dx, like_parameter(grads.dweight, weight), like_parameter(grads.dbias, bias)};
}

std::pair<at::Tensor, at::Tensor> as_addends(const at::Tensor& x, const at::Tensor& r,
                                             const char* branch) {
  check_defined("x", x);
  check_defined(branch, r);
  const at::ScalarType dtype = at::result_type(x, r);
  at::Tensor a = x.scalar_type() == dtype ? x : x.to(dtype);
  at::Tensor b = r.scalar_type() == dtype ? r : r.to(dtype);
  if (x.sizes() != r.sizes()) {
    const std::vector<int64_t> shape = at::infer_size(x.sizes(), r.sizes());
    if (a.sizes() != at::IntArrayRef(shape)) a = a.expand(shape);
    if (b.sizes() != at::IntArrayRef(shape)) b = b.expand(shape);
  }
  return {a, b};
}

PreNormOutputs add_norm_pre_forward(const at::Tensor& x_in, const at::Tensor& r_in,
                                    const OptionalTensor& weight, const OptionalTensor& bias,
                                    const NormSpec& spec, bool save_stats) {
  check_norm(x_in, weight, bias, spec);
  check_like("r", r_in, x_in);
  const at::Tensor x = x_in.contiguous(), r = r_in.contiguous();
  NormTensors t{contiguous(weight), contiguous(bias), {}, {}};
  if (save_stats) add_stats(t, x, spec);
  const at::Tensor h = at::empty(x.sizes(), x.options()), y = at::empty(x.sizes(), x.options());
  const Shape shape = shape_of(spec.normalized_shape);
  if (is_16_bit(x.scalar_type())) {
    run_library([&] {
      add_norm_pre(any_view(x), any_view(r), shape, any_mutable(h), any_mutable(y),
                   any_norm_options(t, spec), stats_out<float>(t));
    });
  } else {
    with_element_type(x, [&](auto element) {
      using T = decltype(element);
      run_library([&] {
        library::add_norm_pre(const_view<T>(x), const_view<T>(r), shape, mutable_view<T>(h),
                              mutable_view<T>(y), norm_options<T>(t, spec), stats_out<T>(t));
      });
    });
  }
  return {h, y, t.mean, t.rstd};
}

NormOutputs add_norm_post_forward(const at::Tensor& x_in, const at::Tensor& s_in,
                                  const OptionalTensor& weight, const OptionalTensor& bias,
                                  const NormSpec& spec, const DropoutSpec& dropout,
                                  bool save_stats) {
  check_norm(x_in, weight, bias, spec);
  check_like("s", s_in, x_in);
  check_dropout(dropout);
  const at::Tensor x = x_in.contiguous(), s = s_in.contiguous();
  NormTensors t{contiguous(weight), contiguous(bias), {}, {}};
  if (save_stats) add_stats(t, x, spec);
  const at::Tensor y = at::empty(x.sizes(), x.options());
  if (is_16_bit(x.scalar_type())) {
    run_library([&] {
      add_norm_post(any_view(x), any_view(s), shape_of(spec.normalized_shape), any_mutable(y),
                    any_norm_options(t, spec), dropout_options<float>(dropout),
                    stats_out<float>(t));
    });
    return {y, t.mean, t.rstd};
  }
  with_element_type(x, [&](auto element) {
    using T = decltype(element);
    run_library([&] {
      library::add_norm_post(const_view<T>(x), const_view<T>(s), shape_of(spec.normalized_shape),
                             mutable_view<T>(y), norm_options<T>(t, spec),
                             dropout_options<T>(dropout), stats_out<T>(t));
    });
  });
  return {y, t.mean, t.rstd};
}

PostNormGrads add_norm_post_backward(const at::Tensor& grad_y, const at::Tensor& x_in,
                                     const at::Tensor& s_in, const OptionalTensor& weight,
                                     const OptionalTensor& bias, const NormSpec& spec,
                                     const DropoutSpec& dropout, const OptionalTensor& mean,
                                     const OptionalTensor& rstd, ParameterGrads wanted) {
  check_norm(x_in, weight, bias, spec);
  check_like("s", s_in, x_in);
  check_like("grad_y", grad_y, x_in);
  check_dropout(dropout);
  const at::Tensor x = x_in.contiguous(), s = s_in.contiguous(), dy = grad_y.contiguous();
  NormTensors t{contiguous(weight), contiguous(bias), contiguous(mean), contiguous(rstd)};
  use_saved_stats(t, x, spec);
  NormGrads grads = allocate_grads(x, t, wanted);
  const at::Tensor ds = at::empty(x.sizes(), x.options());
  if (is_16_bit(x.scalar_type())) {
    run_library([&] {
      add_norm_post_backward(
          any_view(dy), any_view(x), any_view(s), shape_of(spec.normalized_shape),
          {any_mutable(grads.dx), any_mutable(ds), optional_mutable<float>(grads.dweight),
           optional_mutable<float>(grads.dbias)},
          any_norm_options(t, spec), dropout_options<float>(dropout), stats_in<float>(t));
    });
  } else {
    with_element_type(x, [&](auto element) {
      using T = decltype(element);
      run_library([&] {
        library::add_norm_post_backward(
            const_view<T>(dy), const_view<T>(x), const_view<T>(s), shape_of(spec.normalized_shape),
            {mutable_view<T>(grads.dx), mutable_view<T>(ds), optional_mutable<T>(grads.dweight),
             optional_mutable<T>(grads.dbias)},
            norm_options<T>(t, spec), dropout_options<T>(dropout), stats_in<T>(t));
      });
    });
  }
  return {grads.dx, ds, like_parameter(grads.dweight, weight), like_parameter(grads.dbias, bias)};
}

// ---------------------------------------------------------------------------------------------
// BatchNorm.

namespace {

// Whether two (C,) tensors share any byte: their elements' byte ranges compared exactly, so a
// strided view is judged by the memory it covers, not by identity or by its outer bounds.
bool vectors_overlap(const at::Tensor& a, const at::Tensor& b) {
  if (!a.storage().is_alias_of(b.storage())) return false;
  const auto ranges = [](const at::Tensor& t) {
    const int64_t item = t.element_size();
    std::vector<std::pair<int64_t, int64_t>> bytes;
    bytes.reserve(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) {
      const int64_t begin = (t.storage_offset() + i * t.stride(0)) * item;
      bytes.emplace_back(begin, begin + item);
    }
    std::sort(bytes.begin(), bytes.end());
    return bytes;
  };
  const auto ra = ranges(a), rb = ranges(b);
  for (size_t i = 0, j = 0; i < ra.size() && j < rb.size();) {
    if (ra[i].first < rb[j].second && rb[j].first < ra[i].second) return true;
    ra[i].second <= rb[j].second ? ++i : ++j;
  }
  return false;
}

// The running statistics are written. The library refuses an overlap with each other or with
// what it reads when it sees the memory itself; a strided tensor reaches it as a copy, so the
// same rule is applied here first, on the caller's tensors (a running mean lost to a view passed
// twice was the finding). Against input, ATen's overlap test; where it cannot decide (a strided
// input sharing the statistics' storage) the call is refused too, since an exact test of an
// N-d strided input could cost as much as the op.
void check_running_memory(const at::Tensor& input, const OptionalTensor& weight,
                          const OptionalTensor& bias, const OptionalTensor& running_mean,
                          const OptionalTensor& running_var) {
  const std::pair<const char*, const OptionalTensor*> written[] = {{"running_mean", &running_mean},
                                                                   {"running_var", &running_var}};
  const std::pair<const char*, const OptionalTensor*> vectors[] = {{"running_mean", &running_mean},
                                                                   {"running_var", &running_var},
                                                                   {"weight", &weight},
                                                                   {"bias", &bias}};
  for (const auto& [name, stat] : written) {
    if (!stat->has_value() || !(*stat)->defined()) continue;
    const at::Tensor& tensor = **stat;
    for (const auto& [other_name, other] : vectors) {
      if (other == stat || !other->has_value() || !(*other)->defined()) continue;
      TORCH_CHECK(!vectors_overlap(tensor, **other), name, " overlaps ", other_name,
                  ", expected separate memory");
    }
    if (!tensor.storage().is_alias_of(input.storage())) continue;
    const at::MemOverlapStatus with_input = at::get_overlap_status(tensor, input);
    TORCH_CHECK(
        with_input != at::MemOverlapStatus::Full && with_input != at::MemOverlapStatus::Partial,
        name, " overlaps input, expected separate memory");
    TORCH_CHECK(with_input != at::MemOverlapStatus::TooHard, name,
                " shares its storage with a strided input, expected separate memory (or a "
                "contiguous input, whose overlap can be checked)");
  }
}

void check_batch_norm(const at::Tensor& input, const OptionalTensor& weight,
                      const OptionalTensor& bias, const OptionalTensor& running_mean,
                      const OptionalTensor& running_var, const BatchNormSpec& spec) {
  check_tensor("input", input);
  TORCH_CHECK(input.dim() >= 2 && input.dim() <= 5, "input has shape ", shape_text(input.sizes()),
              ", expected rank 2 to 5: (N, C, *)");
  const std::vector<int64_t> channels{input.size(1)};
  check_parameter("weight", weight, input, channels);
  check_parameter("bias", bias, input, channels);
  check_parameter("running_mean", running_mean, input, channels);
  check_parameter("running_var", running_var, input, channels);
  const bool has_mean = running_mean.has_value() && running_mean->defined();
  const bool has_var = running_var.has_value() && running_var->defined();
  TORCH_CHECK(has_mean == has_var, "running_mean and running_var: one is given, expected ",
              "both or neither");
  TORCH_CHECK(spec.training || has_mean, "running_mean is None in inference mode ",
              "(training=False), expected the running statistics to normalise with");
  run_library([&] { checked_momentum(spec.momentum); });  // the library's one rule for momentum
  check_eps(spec.eps, input);
  check_running_memory(input, weight, bias, running_mean, running_var);
}

// The running statistics as the kernel needs them (contiguous, x's compute dtype); `write_back`
// copies the kernel's update into the caller's tensors when that needed a copy.
struct RunningBuffers {
  at::Tensor mean, var;
  at::Tensor original_mean, original_var;
  void write_back() const {
    if (mean.defined() && !mean.is_same(original_mean)) original_mean.copy_(mean);
    if (var.defined() && !var.is_same(original_var)) original_var.copy_(var);
  }
};
RunningBuffers running_for(const OptionalTensor& mean, const OptionalTensor& var,
                           at::ScalarType compute) {
  RunningBuffers stats;
  if (!mean.has_value() || !mean->defined()) return stats;
  stats.original_mean = *mean;
  stats.original_var = *var;
  const auto prepare = [&](const at::Tensor& t) {
    return t.scalar_type() == compute && t.is_contiguous() ? t : t.to(compute).contiguous();
  };
  stats.mean = prepare(*mean);
  stats.var = prepare(*var);
  return stats;
}

template <class T>
BasicBatchNormOptions<T> batch_options(const at::Tensor& weight, const at::Tensor& bias,
                                       const BatchNormSpec& spec) {
  BasicBatchNormOptions<T> options{channel_norm_options<T>(weight, bias, spec.eps)};
  options.training = spec.training;
  options.momentum = argument_as<T>("momentum", spec.momentum);
  return options;
}
template <class T>
std::optional<BasicRunningStats<T>> running_views(const RunningBuffers& running) {
  if (!running.mean.defined()) return std::nullopt;
  return BasicRunningStats<T>{mutable_view<T>(running.mean), mutable_view<T>(running.var)};
}

// The layout PyTorch 1.13's CPU batch_norm gives a result: channels-last for a 4-D input that
// is not contiguous and is stored channels-last or strided like it (c10's suggestion), for a 5-D
// one that is not contiguous and c10 suggests channels_last_3d for; contiguous otherwise. The rules
// differ only for dimensions of size 1; each is the one PyTorch was found to follow
// (test_torch_patch_batch_norm2d.py sweeps such layouts, sliced ones too).
at::MemoryFormat batch_norm_layout(const at::Tensor& input) {
  const at::MemoryFormat suggested = input.suggest_memory_format();
  if (input.dim() == 4 && !input.is_contiguous() &&
      (input.is_contiguous(at::MemoryFormat::ChannelsLast) ||
       suggested == at::MemoryFormat::ChannelsLast)) {
    return at::MemoryFormat::ChannelsLast;
  }
  if (input.dim() == 5 && !input.is_contiguous() && suggested == at::MemoryFormat::ChannelsLast3d) {
    return suggested;
  }
  return at::MemoryFormat::Contiguous;
}

// `t`, shaped (N, C, *) like input, as the kernel reads or writes it in `layout`: contiguous,
// or, channels-last, the (N * positions, C) matrix it is stored as: every position a row, every
// channel a column, BatchNorm over it BatchNorm over t (a view, no copy, when t is stored
// exactly so; a contiguous copy otherwise, as the kernel reads it).
at::Tensor batch_norm_operand(const at::Tensor& t, at::MemoryFormat layout) {
  if (layout == at::MemoryFormat::Contiguous) return t.contiguous();
  std::vector<int64_t> channels_last_order{0};
  for (int64_t d = 2; d < t.dim(); ++d) channels_last_order.push_back(d);
  channels_last_order.push_back(1);
  return t.permute(channels_last_order).reshape({-1, t.size(1)}).contiguous();
}

// A result of BatchNorm on input: shaped as input, stored in `layout`; channels-last, exactly
// as the (N * positions, C) matrix, so that batch_norm_operand is a view of it whatever the
// sizes of 1 (the memory format's own strides differ there).
at::Tensor batch_norm_result(const at::Tensor& input, at::MemoryFormat layout) {
  if (layout == at::MemoryFormat::Contiguous) return at::empty(input.sizes(), input.options());
  std::vector<int64_t> strides(input.dim());
  int64_t stride = 1;
  strides[1] = stride;
  stride *= input.size(1);
  for (int64_t d = input.dim() - 1; d >= 2; --d) {
    strides[d] = stride;
    stride *= input.size(d);
  }
  strides[0] = stride;
  return at::empty_strided(input.sizes(), strides, input.options());
}

}  // namespace

at::Tensor batch_norm_forward(const at::Tensor& input, const OptionalTensor& weight,
                              const OptionalTensor& bias, const OptionalTensor& running_mean,
                              const OptionalTensor& running_var, const BatchNormSpec& spec) {
  check_batch_norm(input, weight, bias, running_mean, running_var, spec);
  const at::MemoryFormat layout = batch_norm_layout(input);
  const at::Tensor x = batch_norm_operand(input, layout);
  const at::Tensor w = contiguous(weight), b = contiguous(bias);
  const RunningBuffers running = running_for(running_mean, running_var, compute_type(x));
  const at::Tensor result = batch_norm_result(input, layout);
  const at::Tensor y = batch_norm_operand(result, layout);
  with_element_type(x, [&](auto element) {
    using T = decltype(element);
    run_library([&] {
      library::batch_norm(norm_view<T>(x), norm_mutable<T>(y), batch_options<T>(w, b, spec),
                          running_views<T>(running));
    });
  });
  running.write_back();
  return result;
}

NormGrads batch_norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                              const OptionalTensor& weight, const OptionalTensor& bias,
                              const OptionalTensor& running_mean, const OptionalTensor& running_var,
                              const BatchNormSpec& spec, ParameterGrads wanted) {
  check_batch_norm(input, weight, bias, running_mean, running_var, spec);
  check_like("grad_y", grad_y, input);
  const at::MemoryFormat layout = batch_norm_layout(input);
  const at::Tensor x = batch_norm_operand(input, layout);
  const at::Tensor dy = batch_norm_operand(grad_y, layout);
  const at::Tensor w = contiguous(weight), b = contiguous(bias);
  // The backward only reads the running statistics (inference mode), so training=false here
  // never writes them; in training they are not needed.
  const RunningBuffers running =
      spec.training ? RunningBuffers{} : running_for(running_mean, running_var, compute_type(x));
  const at::Tensor dx = batch_norm_result(input, layout);
  NormGrads grads = allocate_grads(x, {w, b, {}, {}}, wanted, batch_norm_operand(dx, layout));
  with_element_type(x, [&](auto element) {
    using T = decltype(element);
    run_library([&] {
      library::batch_norm_backward(norm_view<T>(dy), norm_view<T>(x),
                                   {norm_mutable<T>(grads.dx), optional_mutable<T>(grads.dweight),
                                    optional_mutable<T>(grads.dbias)},
                                   batch_options<T>(w, b, spec), running_views<T>(running));
    });
  });
  return {dx, like_parameter(grads.dweight, weight), like_parameter(grads.dbias, bias)};
}

// ---------------------------------------------------------------------------------------------
// GroupNorm.

namespace {

void check_group_norm(const at::Tensor& input, const OptionalTensor& weight,
                      const OptionalTensor& bias, const GroupNormSpec& spec) {
  check_tensor("input", input);
  TORCH_CHECK(input.dim() >= 2, "input has shape ", shape_text(input.sizes()),
              ", expected (N, C, *) with channels on axis 1");
  TORCH_CHECK(spec.num_groups >= 1 && input.size(1) % spec.num_groups == 0, "num_groups is ",
              spec.num_groups, ", expected a divisor of the ", input.size(1), " channels of input");
  const std::vector<int64_t> channels{input.size(1)};
  check_parameter("weight", weight, input, channels);
  check_parameter("bias", bias, input, channels);
  check_eps(spec.eps, input);
}

// A GroupNorm tensor as the library reads it: (N, C, *), or channels last the (N, *, C) view of
// the same memory, whose strides are contiguous.
at::Tensor stored_order(const at::Tensor& t, bool channels_last) {
  return channels_last ? t.movedim(1, -1) : t;
}

}  // namespace

NormOutputs group_norm_forward(const at::Tensor& input, const OptionalTensor& weight,
                               const OptionalTensor& bias, const GroupNormSpec& spec,
                               bool save_stats) {
  check_group_norm(input, weight, bias, spec);
  // As PyTorch's group_norm, the result takes the input's suggested memory format; a
  // channels-last one (channels_last or channels_last_3d) is read and written in that order by
  // the library (GroupNormOptions::channels_last), with no copy when input is stored so.
  const at::MemoryFormat layout = input.suggest_memory_format();
  const bool channels_last = layout != at::MemoryFormat::Contiguous;
  const at::Tensor x = input.contiguous(layout), w = contiguous(weight), b = contiguous(bias);
  // The format's own strides, also where sizes of 1 make y count as channels-last already.
  const at::Tensor y = at::empty(x.sizes(), x.options().memory_format(layout));
  NormOutputs out{y, {}, {}};
  const auto as_stored = [&](const at::Tensor& tensor) {
    return stored_order(tensor, channels_last);
  };
  if (save_stats) {
    const auto options = x.options().dtype(compute_type(x));
    out.mean = at::empty({x.size(0), spec.num_groups}, options);
    out.rstd = at::empty({x.size(0), spec.num_groups}, options);
  }
  with_element_type(x, [&](auto element) {
    using T = decltype(element);
    std::optional<BasicNormStats<T>> stats;
    if (save_stats) stats = BasicNormStats<T>{mutable_view<T>(out.mean), mutable_view<T>(out.rstd)};
    run_library([&] {
      library::group_norm(norm_view<T>(as_stored(x)), norm_mutable<T>(as_stored(y)),
                          {channel_norm_options<T>(w, b, spec.eps), spec.num_groups, channels_last},
                          stats);
    });
  });
  return out;
}

NormGrads group_norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                              const OptionalTensor& weight, const OptionalTensor& bias,
                              const GroupNormSpec& spec, ParameterGrads wanted) {
  check_group_norm(input, weight, bias, spec);
  check_like("grad_y", grad_y, input);
  // As the forward: a channels-last input is read and dx written in that order (grad_y is copied
  // into it where it is stored otherwise); PyTorch 1.13's backward returns dx contiguous
  // whatever the input's layout, so dx is then copied into that (code that views a gradient
  // relies on it).
  const at::MemoryFormat layout = input.suggest_memory_format();
  const bool channels_last = layout != at::MemoryFormat::Contiguous;
  const at::Tensor x = input.contiguous(layout), dy = grad_y.contiguous(layout);
  const NormTensors t{contiguous(weight), contiguous(bias), {}, {}};
  NormGrads grads =
      allocate_grads(x, t, wanted, at::empty(x.sizes(), x.options().memory_format(layout)));
  const auto as_stored = [&](const at::Tensor& tensor) {
    return stored_order(tensor, channels_last);
  };
  with_element_type(x, [&](auto element) {
    using T = decltype(element);
    run_library([&] {
      library::group_norm_backward(
          norm_view<T>(as_stored(dy)), norm_view<T>(as_stored(x)),
          {norm_mutable<T>(as_stored(grads.dx)), optional_mutable<T>(grads.dweight),
           optional_mutable<T>(grads.dbias)},
          {channel_norm_options<T>(t.weight, t.bias, spec.eps), spec.num_groups, channels_last});
    });
  });
  // A copy into fresh standard strides: contiguous() would keep the channels-last strides of a
  // tensor whose size-1 dimensions make it count as contiguous already ((N, C, 1, 1)).
  if (channels_last) grads.dx = at::empty(x.sizes(), x.options()).copy_(grads.dx);
  return {grads.dx, like_parameter(grads.dweight, weight), like_parameter(grads.dbias, bias)};
}

at::Tensor dropout_forward(const at::Tensor& input, const DropoutSpec& spec) {
  check_tensor("input", input);
  check_dropout(spec);
  const at::Tensor x = input.contiguous();
  const at::Tensor y = at::empty(x.sizes(), x.options());
  with_element_type(x, [&](auto element) {
    using T = decltype(element);
    run_library(
        [&] { library::dropout(norm_view<T>(x), norm_mutable<T>(y), dropout_options<T>(spec)); });
  });
  return y;
}

}  // namespace addnorm::torch_ops
