/* addnorm's C ABI: the norms (LayerNorm, RMSNorm, GroupNorm, BatchNorm) and the fused pre-norm
 * and post-norm Add & Norm, forward and backward, for C and for any language that reaches a C
 * library through its FFI (Rust, Go, Julia, C#, Python's ctypes). Each function calls the C++ op
 * of the same name (addnorm/ops.hpp, or addnorm/float64.hpp for float64 tensors), so the numbers
 * are those of the C++ API, bit for bit.
 *
 * Tensors: every tensor argument is a pointer to an addnorm_tensor, a plain descriptor of a
 * C-contiguous array (data pointer, shape array, rank, storage type) that the caller owns and
 * that is only read during the call. A descriptor per tensor, rather than a data pointer and one
 * shared shape, because each tensor of a call may be stored in its own type (a float32 residual
 * stream beside bfloat16 activations) and so that a tensor of the wrong shape is refused with
 * its name instead of being read out of bounds. A NULL descriptor pointer is an absent optional
 * argument; required ones may not be NULL.
 *
 * Storage types: float32, bfloat16 and float16 tensors run the float32 ops (computed in float32
 * with float64 reductions, each output rounded once to its storage type), under the C++ API's
 * rules on which tensors of a call must share a type (addnorm/ops.hpp). Their statistics (mean,
 * rstd) and parameter gradients (dgamma, dbeta) are float32. A call whose x (h in
 * add_norm_pre_backward) is float64 runs the float64 ops instead (addnorm/float64.hpp), and
 * then every tensor of the call is float64. BatchNorm's running statistics stay float32 beside
 * 16-bit x, as mixed-precision training keeps them.
 *
 * Argument order: the inputs, then the shape argument (normalized_ndim or num_groups), the
 * parameters gamma and beta, the scalar options, the saved statistics a backward may reuse,
 * and last the outputs, optional ones (statistics, parameter gradients) at the end.
 *
 * Options, mirroring the C++ option structs:
 * - normalized_ndim: LayerNorm and RMSNorm normalise the trailing normalized_ndim dims of x
 *   (PyTorch's normalized_shape is x's shape[rank - normalized_ndim:]); 1 to x's rank.
 * - eps: a value >= 0 is used as given (rounded to float32 in a float32 call); a negative
 *   value, ADDNORM_DEFAULT_EPS, selects the norm's default (1e-5 for LayerNorm, GroupNorm and
 *   BatchNorm, 1e-6 for RMSNorm: addnorm_default_eps), so a negative eps, which the C++ ops
 *   take as PyTorch does, is not expressible here. NaN and Inf are refused.
 * - Flags (zero_centered_gamma, training, channels_last) are int32_t: 0 false, anything else
 *   true. zero_centered_gamma scales by (1 + gamma) and is for RMSNorm only.
 * - gamma, beta: NULL means absent (scale 1, shift 0). dgamma (dbeta) may be given only with
 *   gamma (beta). RMSNorm has no beta.
 * - Statistics: mean and rstd outputs are optional. Where a norm has a mean (LayerNorm,
 *   GroupNorm, BatchNorm, the fused ops with ADDNORM_LAYER_NORM) give both or neither; with
 *   RMSNorm mean must be NULL. A backward's saved mean/rstd are optional: absent, they are
 *   recomputed from the input (the result is the same to within rounding).
 * - Dropout (add_norm_post): probability p in [0, 1) (rounded to float32 in a float32 call),
 *   seed and offset keying the counter-based mask, which the backward regenerates.
 *
 * Errors: every function returns an addnorm_status and never lets an exception out. On
 * ADDNORM_ERROR_INVALID_ARGUMENT nothing has been written to any output, and
 * addnorm_last_error() says which argument is wrong and what was expected. After
 * ADDNORM_ERROR_OUT_OF_MEMORY or ADDNORM_ERROR_INTERNAL the outputs' contents are unspecified.
 *
 * Memory rules are the C++ API's: outputs may be exactly the memory of the input they replace
 * (y may be x, h may be x or r, dx may be dy or x, ds may be s) but may not otherwise overlap
 * another argument.
 *
 * Empty batches: a tensor may have no elements (a dimension of 0), and then its data may be
 * NULL. Nothing is read; dweight and dbias are 0 (sums over nothing), statistics over no
 * elements (mean, rstd) are NaN, and BatchNorm's running statistics keep their values, as
 * PyTorch's F.batch_norm leaves them. */
#ifndef ADDNORM_ADDNORM_H
#define ADDNORM_ADDNORM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks what libaddnorm.so exports: the library is compiled with hidden visibility. */
#if defined(__GNUC__)
#define ADDNORM_C_API __attribute__((visibility("default")))
#else
#define ADDNORM_C_API
#endif

typedef enum addnorm_status {
  ADDNORM_OK = 0,
  ADDNORM_ERROR_INVALID_ARGUMENT = 1, /* a bad argument; addnorm_last_error() names it */
  ADDNORM_ERROR_OUT_OF_MEMORY = 2,
  ADDNORM_ERROR_INTERNAL = 3 /* a bug in addnorm: please report addnorm_last_error() */
} addnorm_status;

/* Storage types. The first three have the values of the C++ API's addnorm::DType. */
typedef enum addnorm_dtype {
  ADDNORM_FLOAT32 = 0,
  ADDNORM_BFLOAT16 = 1,
  ADDNORM_FLOAT16 = 2,
  ADDNORM_FLOAT64 = 3
} addnorm_dtype;

/* The row norm of the fused Add & Norm ops. */
typedef enum addnorm_norm_kind { ADDNORM_LAYER_NORM = 0, ADDNORM_RMS_NORM = 1 } addnorm_norm_kind;

/* How BatchNorm's training forward updates the running statistics:
 * PYTORCH: running = (1 - momentum) * running + momentum * batch, running_var unbiased;
 * ONNX: running = momentum * running + (1 - momentum) * batch, running_var biased. */
typedef enum addnorm_momentum_convention {
  ADDNORM_MOMENTUM_PYTORCH = 0,
  ADDNORM_MOMENTUM_ONNX = 1
} addnorm_momentum_convention;

/* The largest rank a tensor may have. */
#define ADDNORM_MAX_RANK 8
/* Passed as eps: the norm's default. */
#define ADDNORM_DEFAULT_EPS (-1.0)

/* A C-contiguous tensor (last dimension contiguous, no strides). Enum-valued fields are
 * int32_t so that the layout is the same in every language: 24 bytes on 64-bit targets. */
typedef struct addnorm_tensor {
  void* data;           /* the elements; written only when the tensor is an output */
  const int64_t* shape; /* rank dimensions, each >= 0; may be NULL when rank is 0 */
  int32_t rank;         /* 0 to ADDNORM_MAX_RANK */
  int32_t dtype;        /* an addnorm_dtype */
} addnorm_tensor;

/* The message of the last call on this thread that failed, naming the argument; "" when the
 * last op call on this thread succeeded or none failed. Valid until this thread's next op
 * call. */
ADDNORM_C_API const char* addnorm_last_error(void);
/* After ADDNORM_ERROR_INVALID_ARGUMENT: the argument's name as the C++ API spells it ("x",
 * "gamma", "eps"; "" when the message names none) and what is wrong with it, for a binding that
 * maps failures to its own exception types. Same lifetime as addnorm_last_error(). */
typedef enum addnorm_error_kind {
  ADDNORM_ERROR_KIND_NONE = 0,   /* no invalid-argument failure recorded */
  ADDNORM_ERROR_KIND_VALUE = 1,  /* a value outside what is accepted, a missing part */
  ADDNORM_ERROR_KIND_SHAPE = 2,  /* a tensor's shape, rank or element count */
  ADDNORM_ERROR_KIND_TYPE = 3,   /* a tensor's dtype */
  ADDNORM_ERROR_KIND_OVERLAP = 4 /* an output sharing memory it may not */
} addnorm_error_kind;
ADDNORM_C_API const char* addnorm_last_error_argument(void);
ADDNORM_C_API addnorm_error_kind addnorm_last_error_kind(void);
/* The enumerator's name ("ADDNORM_OK", ...), or "ADDNORM_STATUS_UNKNOWN". */
ADDNORM_C_API const char* addnorm_status_name(int status);

/* The version of the libaddnorm this program runs with: "major.minor.patch", and
   major * 10000 + minor * 100 + patch (docs/cpp.md says which versions are compatible). */
ADDNORM_C_API const char* addnorm_version(void);
ADDNORM_C_API int32_t addnorm_version_number(void);
/* Bytes per element of an addnorm_dtype, or 0 for a value that is not one. */
ADDNORM_C_API size_t addnorm_dtype_size(int32_t dtype);
/* The default eps of an addnorm_norm_kind, or -1.0 for a value that is not one. */
ADDNORM_C_API double addnorm_default_eps(int32_t norm);

/* ---- LayerNorm: y = (x - mean) / sqrt(var + eps) * gamma + beta over the trailing
 * normalized_ndim dims (population variance). gamma, beta: shape of those dims. mean, rstd:
 * one per row, any shape with that many elements (x's leading dims, say). */
ADDNORM_C_API addnorm_status addnorm_layer_norm(const addnorm_tensor* x, int32_t normalized_ndim,
                                                const addnorm_tensor* gamma,
                                                const addnorm_tensor* beta, double eps,
                                                const addnorm_tensor* y, const addnorm_tensor* mean,
                                                const addnorm_tensor* rstd);
/* saved_mean, saved_rstd: the forward's statistics (both or neither). */
ADDNORM_C_API addnorm_status addnorm_layer_norm_backward(
    const addnorm_tensor* dy, const addnorm_tensor* x, int32_t normalized_ndim,
    const addnorm_tensor* gamma, const addnorm_tensor* beta, double eps,
    const addnorm_tensor* saved_mean, const addnorm_tensor* saved_rstd, const addnorm_tensor* dx,
    const addnorm_tensor* dgamma, const addnorm_tensor* dbeta);

/* ---- RMSNorm: y = x / sqrt(mean(x^2) + eps) * gamma, or * (1 + gamma) when
 * zero_centered_gamma. */
ADDNORM_C_API addnorm_status addnorm_rms_norm(const addnorm_tensor* x, int32_t normalized_ndim,
                                              const addnorm_tensor* gamma,
                                              int32_t zero_centered_gamma, double eps,
                                              const addnorm_tensor* y, const addnorm_tensor* rstd);
ADDNORM_C_API addnorm_status addnorm_rms_norm_backward(
    const addnorm_tensor* dy, const addnorm_tensor* x, int32_t normalized_ndim,
    const addnorm_tensor* gamma, int32_t zero_centered_gamma, double eps,
    const addnorm_tensor* saved_rstd, const addnorm_tensor* dx, const addnorm_tensor* dgamma);

/* ---- GroupNorm over x shaped (N, C, *): num_groups groups of C / num_groups channels, each
 * (sample, group) normalised; gamma, beta shape [C]; mean, rstd shape [N, num_groups].
 * InstanceNorm is num_groups = C. The backward recomputes the statistics from x. */
ADDNORM_C_API addnorm_status addnorm_group_norm(const addnorm_tensor* x, int64_t num_groups,
                                                const addnorm_tensor* gamma,
                                                const addnorm_tensor* beta, double eps,
                                                const addnorm_tensor* y, const addnorm_tensor* mean,
                                                const addnorm_tensor* rstd);
ADDNORM_C_API addnorm_status addnorm_group_norm_backward(
    const addnorm_tensor* dy, const addnorm_tensor* x, int64_t num_groups,
    const addnorm_tensor* gamma, const addnorm_tensor* beta, double eps, const addnorm_tensor* dx,
    const addnorm_tensor* dgamma, const addnorm_tensor* dbeta);

/* ---- BatchNorm over the channels of x shaped (N, C, *), rank 2 to 5, or (N, *, C) with
 * channels_last; gamma, beta, running_mean, running_var shape [C]. training: normalise with
 * the batch statistics and, when running_mean and running_var are given (both or neither),
 * update them in place (momentum finite, PyTorch's default 0.1; convention an
 * addnorm_momentum_convention); batch_mean and batch_rstd (shape [C], optional, both or
 * neither) receive the batch statistics. Inference (training = 0): normalise with the running
 * statistics, which are then required and unchanged; batch_mean and batch_rstd must be NULL.
 * x and y (dy, x and dx in the backward) share one storage type. */
ADDNORM_C_API addnorm_status addnorm_batch_norm(
    const addnorm_tensor* x, const addnorm_tensor* gamma, const addnorm_tensor* beta,
    int32_t training, double momentum, int32_t convention, double eps, int32_t channels_last,
    const addnorm_tensor* running_mean, const addnorm_tensor* running_var, const addnorm_tensor* y,
    const addnorm_tensor* batch_mean, const addnorm_tensor* batch_rstd);
/* training: the gradient through the batch statistics (recomputed from x; running statistics
 * optional and unused). Inference: through the running statistics, then required. */
ADDNORM_C_API addnorm_status addnorm_batch_norm_backward(
    const addnorm_tensor* dy, const addnorm_tensor* x, const addnorm_tensor* gamma,
    const addnorm_tensor* beta, int32_t training, double eps, int32_t channels_last,
    const addnorm_tensor* running_mean, const addnorm_tensor* running_var, const addnorm_tensor* dx,
    const addnorm_tensor* dgamma, const addnorm_tensor* dbeta);

/* ---- Pre-norm Add & Norm (GPT-2): h = x + r and y = Norm(h) in one pass, Norm the row norm
 * `norm` (an addnorm_norm_kind) over the trailing normalized_ndim dims. x and h share one
 * storage type (the residual stream), r and y another (the branch). beta is LayerNorm's only,
 * zero_centered_gamma RMSNorm's only. */
ADDNORM_C_API addnorm_status addnorm_add_norm_pre(
    const addnorm_tensor* x, const addnorm_tensor* r, int32_t normalized_ndim, int32_t norm,
    const addnorm_tensor* gamma, const addnorm_tensor* beta, int32_t zero_centered_gamma,
    double eps, const addnorm_tensor* h, const addnorm_tensor* y, const addnorm_tensor* mean,
    const addnorm_tensor* rstd);
/* dh = dh_next + Norm'(dy) at h: the gradient of both x and r. dh_next may be NULL (zero). */
ADDNORM_C_API addnorm_status addnorm_add_norm_pre_backward(
    const addnorm_tensor* dy, const addnorm_tensor* dh_next, const addnorm_tensor* h,
    int32_t normalized_ndim, int32_t norm, const addnorm_tensor* gamma, const addnorm_tensor* beta,
    int32_t zero_centered_gamma, double eps, const addnorm_tensor* saved_mean,
    const addnorm_tensor* saved_rstd, const addnorm_tensor* dh, const addnorm_tensor* dgamma,
    const addnorm_tensor* dbeta);

/* ---- Post-norm Add & Norm (2017 paper): y = Norm(x + Dropout(s)), dropout probability p on
 * the sub-layer output s, its mask keyed by (seed, offset) as addnorm's dropout. */
ADDNORM_C_API addnorm_status addnorm_add_norm_post(
    const addnorm_tensor* x, const addnorm_tensor* s, int32_t normalized_ndim, int32_t norm,
    const addnorm_tensor* gamma, const addnorm_tensor* beta, int32_t zero_centered_gamma,
    double eps, double p, uint64_t seed, uint64_t offset, const addnorm_tensor* y,
    const addnorm_tensor* mean, const addnorm_tensor* rstd);
/* dx = Norm'(dy) at h = x + Dropout(s), ds = dx through the same mask; x and s are the
 * forward's inputs, p, seed and offset its dropout. */
ADDNORM_C_API addnorm_status addnorm_add_norm_post_backward(
    const addnorm_tensor* dy, const addnorm_tensor* x, const addnorm_tensor* s,
    int32_t normalized_ndim, int32_t norm, const addnorm_tensor* gamma, const addnorm_tensor* beta,
    int32_t zero_centered_gamma, double eps, double p, uint64_t seed, uint64_t offset,
    const addnorm_tensor* saved_mean, const addnorm_tensor* saved_rstd, const addnorm_tensor* dx,
    const addnorm_tensor* ds, const addnorm_tensor* dgamma, const addnorm_tensor* dbeta);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ADDNORM_ADDNORM_H */
