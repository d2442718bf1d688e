/* The C ABI's failures, from a program compiled as C11: each bad argument gives
 * ADDNORM_ERROR_INVALID_ARGUMENT, addnorm_last_error() names the argument, and no output is
 * touched (every output is pre-filled with a sentinel and compared bit for bit). A success
 * clears the message. */
#include <math.h>

#include "check.h"

enum { kRows = 2, kDim = 4, kCount = kRows * kDim };

/* Every buffer a call may write, filled with the sentinel before each call. */
typedef struct {
  float y[kCount], h[kCount], dx[kCount], ds[kCount], mean[kRows], rstd[kRows], dgamma[kDim],
      dbeta[kDim], running_mean[kDim], running_var[kDim];
} outputs;

static outputs sentinel_outputs(void) {
  outputs out;
  memset(&out, 0xA5, sizeof out);
  return out;
}

static float x[kCount] = {1, 2, 3, 4, -1, 0.5f, 2, 7};
static float r[kCount] = {0.5f, 0.25f, -1, 2, 3, 1, 0, -2};
static float gamma_[kDim] = {1, 0.5f, 2, 1.5f};
static float beta_[kDim] = {0, 0.1f, -0.2f, 0.3f};
static double gamma64[kDim] = {1, 0.5, 2, 1.5};
static uint16_t rstd16[kRows];
static const int64_t kShape[2] = {kRows, kDim};
static const int64_t kWrongShape[2] = {kRows + 1, kDim};
static const int64_t kWideShape[1] = {kDim + 1};
static const int64_t kNegativeShape[2] = {kRows, -kDim};

/* A failed call: its status, the message naming what it must, and every output untouched. */
static void expect_refusal(const char* what, addnorm_status status, const outputs* out,
                           const char* message_part) {
  const outputs untouched = sentinel_outputs();
  CHECK(status == ADDNORM_ERROR_INVALID_ARGUMENT, "%s: status %s, expected %s", what,
        addnorm_status_name(status), "ADDNORM_ERROR_INVALID_ARGUMENT");
  CHECK(strstr(addnorm_last_error(), message_part) != NULL,
        "%s: message '%s' does not contain '%s'", what, addnorm_last_error(), message_part);
  CHECK(memcmp(out, &untouched, sizeof untouched) == 0, "%s: an output was written", what);
}

static void test_layer_norm_refusals(void) {
  const addnorm_tensor tx = f32(x, kShape, 2), tg = f32(gamma_, kShape + 1, 1),
                       tb = f32(beta_, kShape + 1, 1);
  const addnorm_tensor bad_rank = f32(x, kShape, -1), too_high = f32(x, kShape, 9),
                       null_shape = f32(x, NULL, 2), negative = f32(x, kNegativeShape, 2),
                       null_data = f32(NULL, kShape, 2), wide_gamma = f32(gamma_, kWideShape, 1),
                       gamma_rank2 = f32(gamma_, kShape, 2),
                       gamma_f64 = tensor_of(gamma64, kShape + 1, 1, ADDNORM_FLOAT64),
                       bad_dtype = tensor_of(x, kShape, 2, 9);
  outputs out = sentinel_outputs();
  const addnorm_tensor ty = f32(out.y, kShape, 2), tmean = f32(out.mean, kShape, 1),
                       trstd = f32(out.rstd, kShape, 1), y_wrong = f32(out.y, kWrongShape, 2),
                       rstd_bf16 = tensor_of(rstd16, kShape, 1, ADDNORM_BFLOAT16),
                       mean_over_y = f32(out.y, kShape, 1);

  expect_refusal("NULL x", addnorm_layer_norm(NULL, 1, &tg, &tb, 1e-5, &ty, &tmean, &trstd), &out,
                 "x is NULL");
  expect_refusal("NULL y", addnorm_layer_norm(&tx, 1, &tg, &tb, 1e-5, NULL, &tmean, &trstd), &out,
                 "y is NULL");
  expect_refusal("x data NULL",
                 addnorm_layer_norm(&null_data, 1, &tg, &tb, 1e-5, &ty, &tmean, &trstd), &out,
                 "x has no data");
  expect_refusal("negative rank",
                 addnorm_layer_norm(&bad_rank, 1, &tg, &tb, 1e-5, &ty, &tmean, &trstd), &out,
                 "x has rank -1, expected 0 to 8");
  expect_refusal("rank above 8",
                 addnorm_layer_norm(&too_high, 1, &tg, &tb, 1e-5, &ty, &tmean, &trstd), &out,
                 "x has rank 9");
  expect_refusal("NULL shape",
                 addnorm_layer_norm(&null_shape, 1, &tg, &tb, 1e-5, &ty, &tmean, &trstd), &out,
                 "x has a NULL shape");
  expect_refusal("negative dimension",
                 addnorm_layer_norm(&negative, 1, &tg, &tb, 1e-5, &ty, &tmean, &trstd), &out,
                 "x has shape [2, -4]");
  expect_refusal("normalized_ndim above the rank",
                 addnorm_layer_norm(&tx, 3, &tg, &tb, 1e-5, &ty, &tmean, &trstd), &out,
                 "normalized_ndim is 3");
  expect_refusal("normalized_ndim 0",
                 addnorm_layer_norm(&tx, 0, &tg, &tb, 1e-5, &ty, &tmean, &trstd), &out,
                 "normalized_ndim is 0");
  expect_refusal("mismatched gamma",
                 addnorm_layer_norm(&tx, 1, &wide_gamma, &tb, 1e-5, &ty, &tmean, &trstd), &out,
                 "gamma has shape [5], expected [4]");
  expect_refusal("gamma of the wrong rank",
                 addnorm_layer_norm(&tx, 1, &gamma_rank2, &tb, 1e-5, &ty, &tmean, &trstd), &out,
                 "gamma has shape [2, 4], expected [4]");
  expect_refusal("mismatched y",
                 addnorm_layer_norm(&tx, 1, &tg, &tb, 1e-5, &y_wrong, &tmean, &trstd), &out,
                 "y has shape [3, 4], expected [2, 4]");
  expect_refusal("mean without rstd", addnorm_layer_norm(&tx, 1, &tg, &tb, 1e-5, &ty, &tmean, NULL),
                 &out, "mean was given but rstd is NULL");
  expect_refusal("bfloat16 rstd",
                 addnorm_layer_norm(&tx, 1, &tg, &tb, 1e-5, &ty, &tmean, &rstd_bf16), &out,
                 "rstd has dtype bfloat16, expected float32");
  expect_refusal("float64 gamma in a float32 call",
                 addnorm_layer_norm(&tx, 1, &gamma_f64, &tb, 1e-5, &ty, &tmean, &trstd), &out,
                 "gamma has dtype float64");
  expect_refusal("unknown dtype",
                 addnorm_layer_norm(&bad_dtype, 1, &tg, &tb, 1e-5, &ty, &tmean, &trstd), &out,
                 "x has dtype 9, expected an addnorm_dtype");
  expect_refusal("NaN eps", addnorm_layer_norm(&tx, 1, &tg, &tb, NAN, &ty, &tmean, &trstd), &out,
                 "eps is nan");
  /* A double eps beyond float32's range is refused by value, not converted (which would be
     undefined behaviour) into an infinity. */
  expect_refusal("eps beyond float32",
                 addnorm_layer_norm(&tx, 1, &tg, &tb, 1e50, &ty, &tmean, &trstd), &out,
                 "beyond float32's range");
  expect_refusal("y overlapping mean",
                 addnorm_layer_norm(&tx, 1, &tg, &tb, 1e-5, &ty, &mean_over_y, &trstd), &out,
                 "y overlaps mean");

  /* The message stays until the next op call, which clears it by succeeding. */
  CHECK(strlen(addnorm_last_error()) > 0, "the message was cleared by reading it");
  CHECK_OK(addnorm_layer_norm(&tx, 1, &tg, &tb, ADDNORM_DEFAULT_EPS, &ty, &tmean, &trstd));
}

static void test_backward_refusals(void) {
  const addnorm_tensor tx = f32(x, kShape, 2), tdy = f32(r, kShape, 2),
                       tg = f32(gamma_, kShape + 1, 1), tdy_wrong = f32(r, kWrongShape, 2);
  outputs out = sentinel_outputs();
  const addnorm_tensor tdx = f32(out.dx, kShape, 2), tdg = f32(out.dgamma, kShape + 1, 1),
                       tdb = f32(out.dbeta, kShape + 1, 1), trstd = f32(out.rstd, kShape, 1);

  expect_refusal(
      "dbeta without beta",
      addnorm_layer_norm_backward(&tdy, &tx, 1, &tg, NULL, 1e-5, NULL, NULL, &tdx, &tdg, &tdb),
      &out, "dbeta was requested but beta is absent");
  expect_refusal("mismatched dy",
                 addnorm_layer_norm_backward(&tdy_wrong, &tx, 1, &tg, NULL, 1e-5, NULL, NULL, &tdx,
                                             &tdg, NULL),
                 &out, "dy has shape [3, 4], expected [2, 4]");
  expect_refusal("NULL dx", addnorm_rms_norm_backward(&tdy, &tx, 1, &tg, 0, 1e-6, NULL, NULL, &tdg),
                 &out, "dx is NULL");
  expect_refusal(
      "saved_rstd without saved_mean",
      addnorm_layer_norm_backward(&tdy, &tx, 1, &tg, NULL, 1e-5, NULL, &trstd, &tdx, &tdg, NULL),
      &out, "saved_rstd was given but saved_mean is NULL");
}

static void test_fused_refusals(void) {
  const addnorm_tensor tx = f32(x, kShape, 2), tr = f32(r, kShape, 2),
                       tg = f32(gamma_, kShape + 1, 1), tb = f32(beta_, kShape + 1, 1),
                       r_wrong = f32(r, kWrongShape, 2);
  outputs out = sentinel_outputs();
  const addnorm_tensor th = f32(out.h, kShape, 2), ty = f32(out.y, kShape, 2),
                       tmean = f32(out.mean, kShape, 1), trstd = f32(out.rstd, kShape, 1),
                       tdx = f32(out.dx, kShape, 2);

  expect_refusal("mismatched r",
                 addnorm_add_norm_pre(&tx, &r_wrong, 1, ADDNORM_LAYER_NORM, &tg, &tb, 0, -1, &th,
                                      &ty, &tmean, &trstd),
                 &out, "r has shape [3, 4], expected [2, 4]");
  expect_refusal("unknown norm",
                 addnorm_add_norm_pre(&tx, &tr, 1, 7, &tg, NULL, 0, -1, &th, &ty, NULL, NULL), &out,
                 "norm is 7");
  expect_refusal(
      "beta with RMSNorm",
      addnorm_add_norm_pre(&tx, &tr, 1, ADDNORM_RMS_NORM, &tg, &tb, 0, -1, &th, &ty, NULL, NULL),
      &out, "beta was given for rms_norm");
  expect_refusal("mean with RMSNorm",
                 addnorm_add_norm_pre(&tx, &tr, 1, ADDNORM_RMS_NORM, &tg, NULL, 0, -1, &th, &ty,
                                      &tmean, &trstd),
                 &out, "mean was given, expected NULL with ADDNORM_RMS_NORM");
  expect_refusal("dropout p of 1",
                 addnorm_add_norm_post(&tx, &tr, 1, ADDNORM_LAYER_NORM, &tg, &tb, 0, -1, 1.0, 0, 0,
                                       &ty, &tmean, &trstd),
                 &out, "p is 1, expected a dropout probability in [0, 1)");
  expect_refusal("NULL ds",
                 addnorm_add_norm_post_backward(&tr, &tx, &tr, 1, ADDNORM_LAYER_NORM, &tg, NULL, 0,
                                                -1, 0.1, 3, 0, NULL, NULL, &tdx, NULL, NULL, NULL),
                 &out, "ds is NULL");
}

static void test_batch_norm_refusals(void) {
  uint16_t x16[kCount] = {0};
  const addnorm_tensor tx = f32(x, kShape, 2), tx16 = tensor_of(x16, kShape, 2, ADDNORM_BFLOAT16);
  outputs out = sentinel_outputs();
  const int64_t channels[1] = {kDim};
  const addnorm_tensor ty = f32(out.y, kShape, 2), tmean = f32(out.running_mean, channels, 1),
                       tvar = f32(out.running_var, channels, 1);

  expect_refusal("bfloat16 x with a float32 y",
                 addnorm_batch_norm(&tx16, NULL, NULL, 1, 0.1, ADDNORM_MOMENTUM_PYTORCH, -1, 0,
                                    NULL, NULL, &ty, NULL, NULL),
                 &out, "y is stored as float32, expected bfloat16 like x");
  expect_refusal("running_mean without running_var",
                 addnorm_batch_norm(&tx, NULL, NULL, 1, 0.1, ADDNORM_MOMENTUM_PYTORCH, -1, 0,
                                    &tmean, NULL, &ty, NULL, NULL),
                 &out, "running_mean was given but running_var is NULL");
  expect_refusal("infinite momentum",
                 addnorm_batch_norm(&tx, NULL, NULL, 1, HUGE_VAL, ADDNORM_MOMENTUM_PYTORCH, -1, 0,
                                    &tmean, &tvar, &ty, NULL, NULL),
                 &out, "momentum is inf, expected a finite value");
  expect_refusal(
      "unknown convention",
      addnorm_batch_norm(&tx, NULL, NULL, 1, 0.1, 2, -1, 0, &tmean, &tvar, &ty, NULL, NULL), &out,
      "convention is 2");
  expect_refusal("inference without running statistics",
                 addnorm_batch_norm(&tx, NULL, NULL, 0, 0.1, ADDNORM_MOMENTUM_PYTORCH, -1, 0, NULL,
                                    NULL, &ty, NULL, NULL),
                 &out, "running_mean and running_var are absent");
  expect_refusal("num_groups not dividing C",
                 addnorm_group_norm(&tx, 3, NULL, NULL, -1, &ty, NULL, NULL), &out,
                 "num_groups is 3");
}

static void test_constants(void) {
  CHECK(strcmp(addnorm_status_name(ADDNORM_OK), "ADDNORM_OK") == 0, "status name of OK");
  CHECK(strcmp(addnorm_status_name(ADDNORM_ERROR_INVALID_ARGUMENT),
               "ADDNORM_ERROR_INVALID_ARGUMENT") == 0,
        "status name of INVALID_ARGUMENT");
  CHECK(
      strcmp(addnorm_status_name(ADDNORM_ERROR_OUT_OF_MEMORY), "ADDNORM_ERROR_OUT_OF_MEMORY") == 0,
      "status name of OUT_OF_MEMORY");
  CHECK(strcmp(addnorm_status_name(ADDNORM_ERROR_INTERNAL), "ADDNORM_ERROR_INTERNAL") == 0,
        "status name of INTERNAL");
  CHECK(strcmp(addnorm_status_name(42), "ADDNORM_STATUS_UNKNOWN") == 0, "status name of 42");
  CHECK(addnorm_dtype_size(ADDNORM_FLOAT32) == 4 && addnorm_dtype_size(ADDNORM_BFLOAT16) == 2 &&
            addnorm_dtype_size(ADDNORM_FLOAT16) == 2 && addnorm_dtype_size(ADDNORM_FLOAT64) == 8 &&
            addnorm_dtype_size(4) == 0,
        "addnorm_dtype_size");
  CHECK(addnorm_default_eps(ADDNORM_LAYER_NORM) == 1e-5 &&
            addnorm_default_eps(ADDNORM_RMS_NORM) == 1e-6 && addnorm_default_eps(2) < 0,
        "addnorm_default_eps");
  CHECK(sizeof(addnorm_tensor) == 2 * sizeof(void*) + 8, "addnorm_tensor has padding");
}

int main(void) {
  CHECK(strcmp(addnorm_last_error(), "") == 0, "a fresh thread has the message '%s'",
        addnorm_last_error());
  test_layer_norm_refusals();
  test_backward_refusals();
  test_fused_refusals();
  test_batch_norm_refusals();
  test_constants();
  return finish("c_api_errors_test");
}
