/* The C ABI's numbers, from a program compiled as C11: LayerNorm, RMSNorm and the pre-norm
 * Add & Norm against float64 references written here (two-pass mean and variance in double),
 * their backwards against the analytic float64 gradients (themselves checked against central
 * finite differences), bfloat16 storage, and float64 tensors routed to the float64 ops.
 *
 * Tolerances are docs/numerics.md's contract: forwards within 2 float32 ulp of the result plus
 * 2 ulp of the size of the terms it is a difference of, backwards 4 and 4. */
#include "check.h"

static const double kEps = 1e-5;

/* Within k ulp of ref plus k ulp of the terms' size. */
static int close32(double value, double ref, double terms, double k) {
  return fabs(value - ref) <= k * (ulp32(ref) + ulp32(terms));
}

/* ---- float64 references ------------------------------------------------------------------ */

typedef struct {
  double mean;
  double rstd;
} row_stats;

/* Two passes: the mean, then the variance of the centred values. */
static row_stats layer_norm_stats(const float* x, int64_t dim, double eps) {
  double sum = 0;
  for (int64_t i = 0; i < dim; ++i) sum += x[i];
  const double mean = sum / (double)dim;
  double squares = 0;
  for (int64_t i = 0; i < dim; ++i) squares += (x[i] - mean) * (x[i] - mean);
  row_stats stats = {mean, 1.0 / sqrt(squares / (double)dim + eps)};
  return stats;
}

static double rms_rstd(const float* x, int64_t dim, double eps) {
  double squares = 0;
  for (int64_t i = 0; i < dim; ++i) squares += (double)x[i] * x[i];
  return 1.0 / sqrt(squares / (double)dim + eps);
}

/* The LayerNorm of one double row, for the finite differences. */
static void layer_norm_row64(const double* x, const double* gamma, const double* beta, int64_t dim,
                             double* y) {
  double sum = 0, squares = 0;
  for (int64_t i = 0; i < dim; ++i) sum += x[i];
  const double mean = sum / (double)dim;
  for (int64_t i = 0; i < dim; ++i) squares += (x[i] - mean) * (x[i] - mean);
  const double rstd = 1.0 / sqrt(squares / (double)dim + kEps);
  for (int64_t i = 0; i < dim; ++i) y[i] = (x[i] - mean) * rstd * gamma[i] + beta[i];
}

/* The analytic LayerNorm gradient of one row: dx = rstd (g - mean(g) - x_hat mean(g x_hat)),
 * g = dy gamma. `terms` receives the size of the terms each dx is a difference of. */
static void layer_norm_row_grad(const float* x, const float* dy, const float* gamma, int64_t dim,
                                double eps, double* dx, double* terms) {
  const row_stats stats = layer_norm_stats(x, dim, eps);
  double mean_g = 0, mean_gx = 0;
  for (int64_t i = 0; i < dim; ++i) {
    const double g = (double)dy[i] * gamma[i];
    mean_g += g;
    mean_gx += g * (x[i] - stats.mean) * stats.rstd;
  }
  mean_g /= (double)dim;
  mean_gx /= (double)dim;
  for (int64_t i = 0; i < dim; ++i) {
    const double g = (double)dy[i] * gamma[i];
    const double x_hat = (x[i] - stats.mean) * stats.rstd;
    dx[i] = stats.rstd * (g - mean_g - x_hat * mean_gx);
    terms[i] = stats.rstd * fmax(fabs(g), fmax(fabs(mean_g), fabs(x_hat * mean_gx)));
  }
}

/* ---- the checks ---------------------------------------------------------------------------- */

/* The oracle of the backward checks: the analytic gradient against central differences of the
 * double forward, for loss = sum(dy * y). */
static void test_reference_gradient_by_finite_differences(void) {
  enum { kDim = 9 };
  uint64_t state = 11;
  float x[kDim], dy[kDim], gamma[kDim];
  double x64[kDim], gamma64[kDim], beta64[kDim], dx[kDim], terms[kDim], y_plus[kDim], y_minus[kDim];
  for (int i = 0; i < kDim; ++i) {
    x[i] = uniform(&state, -2, 2);
    dy[i] = uniform(&state, -1, 1);
    gamma[i] = uniform(&state, 0.5, 1.5);
    x64[i] = x[i];
    gamma64[i] = gamma[i];
    beta64[i] = 0.25;
  }
  layer_norm_row_grad(x, dy, gamma, kDim, kEps, dx, terms);
  for (int i = 0; i < kDim; ++i) {
    const double step = 1e-6;
    double loss_plus = 0, loss_minus = 0;
    x64[i] = (double)x[i] + step;
    layer_norm_row64(x64, gamma64, beta64, kDim, y_plus);
    x64[i] = (double)x[i] - step;
    layer_norm_row64(x64, gamma64, beta64, kDim, y_minus);
    x64[i] = x[i];
    for (int j = 0; j < kDim; ++j) {
      loss_plus += dy[j] * y_plus[j];
      loss_minus += dy[j] * y_minus[j];
    }
    const double numeric = (loss_plus - loss_minus) / (2 * step);
    CHECK(fabs(numeric - dx[i]) <= 1e-6 * (1 + fabs(dx[i])),
          "finite differences: dx[%d] analytic %.12g, numeric %.12g", i, dx[i], numeric);
  }
}

static void test_layer_norm(int64_t rows, int64_t dim) {
  uint64_t state = (uint64_t)(rows * 1000 + dim);
  const int64_t count = rows * dim;
  float* x = fill_uniform(count, &state, -1.0, 3.0);
  float* gamma = fill_uniform(dim, &state, 0.5, 1.5);
  float* beta = fill_uniform(dim, &state, -0.5, 0.5);
  float* dy = fill_uniform(count, &state, -1.0, 1.0);
  float* y = fill_uniform(count, &state, 0, 1);
  float* dx = fill_uniform(count, &state, 0, 1);
  float* dgamma = fill_uniform(dim, &state, 0, 1);
  float* dbeta = fill_uniform(dim, &state, 0, 1);
  float* mean = fill_uniform(rows, &state, 0, 1);
  float* rstd = fill_uniform(rows, &state, 0, 1);
  double* grad = (double*)malloc((size_t)dim * sizeof(double));
  double* terms = (double*)malloc((size_t)dim * sizeof(double));
  const int64_t shape[2] = {rows, dim};
  const addnorm_tensor tx = f32(x, shape, 2), ty = f32(y, shape, 2), tdy = f32(dy, shape, 2),
                       tdx = f32(dx, shape, 2), tg = f32(gamma, shape + 1, 1),
                       tb = f32(beta, shape + 1, 1), tdg = f32(dgamma, shape + 1, 1),
                       tdb = f32(dbeta, shape + 1, 1), tmean = f32(mean, shape, 1),
                       trstd = f32(rstd, shape, 1);
  const double eps = (double)(float)kEps; /* a float32 call runs with eps rounded to float32 */

  CHECK_OK(addnorm_layer_norm(&tx, 1, &tg, &tb, kEps, &ty, &tmean, &trstd));
  for (int64_t row = 0; row < rows; ++row) {
    const float* xr = x + row * dim;
    const row_stats stats = layer_norm_stats(xr, dim, eps);
    CHECK(close32(mean[row], stats.mean, 0, 2), "layer_norm mean[%lld] %.9g, expected %.9g",
          (long long)row, mean[row], stats.mean);
    CHECK(close32(rstd[row], stats.rstd, 0, 2), "layer_norm rstd[%lld] %.9g, expected %.9g",
          (long long)row, rstd[row], stats.rstd);
    for (int64_t i = 0; i < dim; ++i) {
      const double scaled = (xr[i] - stats.mean) * stats.rstd * gamma[i];
      const double ref = scaled + beta[i];
      const double value = y[row * dim + i];
      CHECK(close32(value, ref, fmax(fabs(scaled), fabs(beta[i])), 2),
            "layer_norm [%lld x %lld] y[%lld, %lld] = %.9g, expected %.9g", (long long)rows,
            (long long)dim, (long long)row, (long long)i, value, ref);
    }
  }

  /* The backward, with its statistics recomputed and with the forward's. */
  for (int saved = 0; saved < 2; ++saved) {
    CHECK_OK(addnorm_layer_norm_backward(&tdy, &tx, 1, &tg, &tb, ADDNORM_DEFAULT_EPS,
                                         saved ? &tmean : NULL, saved ? &trstd : NULL, &tdx, &tdg,
                                         &tdb));
    for (int64_t row = 0; row < rows; ++row) {
      layer_norm_row_grad(x + row * dim, dy + row * dim, gamma, dim, eps, grad, terms);
      for (int64_t i = 0; i < dim; ++i) {
        const double value = dx[row * dim + i];
        CHECK(close32(value, grad[i], terms[i], 4),
              "layer_norm_backward (saved %d) dx[%lld, %lld] = %.9g, expected %.9g", saved,
              (long long)row, (long long)i, value, grad[i]);
      }
    }
    for (int64_t i = 0; i < dim; ++i) {
      double ref_dgamma = 0, size_dgamma = 0, ref_dbeta = 0, size_dbeta = 0;
      for (int64_t row = 0; row < rows; ++row) {
        const row_stats stats = layer_norm_stats(x + row * dim, dim, eps);
        const double term =
            (double)dy[row * dim + i] * (x[row * dim + i] - stats.mean) * stats.rstd;
        ref_dgamma += term;
        size_dgamma += fabs(term);
        ref_dbeta += dy[row * dim + i];
        size_dbeta += fabs(dy[row * dim + i]);
      }
      CHECK(close32(dgamma[i], ref_dgamma, size_dgamma, 4), "dgamma[%lld] = %.9g, expected %.9g",
            (long long)i, dgamma[i], ref_dgamma);
      CHECK(close32(dbeta[i], ref_dbeta, size_dbeta, 4), "dbeta[%lld] = %.9g, expected %.9g",
            (long long)i, dbeta[i], ref_dbeta);
    }
  }
  free(x), free(gamma), free(beta), free(dy), free(y), free(dx), free(dgamma), free(dbeta);
  free(mean), free(rstd), free(grad), free(terms);
}

static void test_rms_norm(int64_t rows, int64_t dim, int zero_centered) {
  uint64_t state = (uint64_t)(rows * 7000 + dim * 2 + zero_centered);
  const int64_t count = rows * dim;
  float* x = fill_uniform(count, &state, -2.0, 2.0);
  float* gamma = fill_uniform(dim, &state, -0.5, 1.5);
  float* dy = fill_uniform(count, &state, -1.0, 1.0);
  float* y = fill_uniform(count, &state, 0, 1);
  float* dx = fill_uniform(count, &state, 0, 1);
  float* dgamma = fill_uniform(dim, &state, 0, 1);
  float* rstd = fill_uniform(rows, &state, 0, 1);
  const int64_t shape[2] = {rows, dim};
  const addnorm_tensor tx = f32(x, shape, 2), ty = f32(y, shape, 2), tdy = f32(dy, shape, 2),
                       tdx = f32(dx, shape, 2), tg = f32(gamma, shape + 1, 1),
                       tdg = f32(dgamma, shape + 1, 1), trstd = f32(rstd, shape, 1);
  const double eps = (double)(float)addnorm_default_eps(ADDNORM_RMS_NORM);

  CHECK_OK(addnorm_rms_norm(&tx, 1, &tg, zero_centered, ADDNORM_DEFAULT_EPS, &ty, &trstd));
  CHECK_OK(addnorm_rms_norm_backward(&tdy, &tx, 1, &tg, zero_centered, ADDNORM_DEFAULT_EPS, &trstd,
                                     &tdx, &tdg));
  for (int64_t row = 0; row < rows; ++row) {
    const float* xr = x + row * dim;
    const float* dyr = dy + row * dim;
    const double rs = rms_rstd(xr, dim, eps);
    CHECK(close32(rstd[row], rs, 0, 2), "rms_norm rstd[%lld] %.9g, expected %.9g", (long long)row,
          rstd[row], rs);
    double mean_gx = 0;
    for (int64_t i = 0; i < dim; ++i) {
      const double scale = zero_centered ? 1.0 + gamma[i] : (double)gamma[i];
      const double ref = xr[i] * rs * scale;
      CHECK(close32(y[row * dim + i], ref, ref, 2),
            "rms_norm (zero-centred %d) y[%lld, %lld] = %.9g, expected %.9g", zero_centered,
            (long long)row, (long long)i, y[row * dim + i], ref);
      mean_gx += dyr[i] * scale * xr[i] * rs;
    }
    mean_gx /= (double)dim;
    /* dx = rstd (g - x_hat mean(g x_hat)), g = dy scale */
    for (int64_t i = 0; i < dim; ++i) {
      const double scale = zero_centered ? 1.0 + gamma[i] : (double)gamma[i];
      const double g = dyr[i] * scale, x_hat = xr[i] * rs;
      const double ref = rs * (g - x_hat * mean_gx);
      const double terms = rs * fmax(fabs(g), fabs(x_hat * mean_gx));
      CHECK(close32(dx[row * dim + i], ref, terms, 4),
            "rms_norm_backward dx[%lld, %lld] = %.9g, expected %.9g", (long long)row, (long long)i,
            dx[row * dim + i], ref);
    }
  }
  free(x), free(gamma), free(dy), free(y), free(dx), free(dgamma), free(rstd);
}

/* h = x + r rounded to float32, then LayerNorm or RMSNorm of h. */
static void test_add_norm_pre(int64_t rows, int64_t dim, int32_t norm) {
  uint64_t state = (uint64_t)(rows * 31 + dim * 3 + norm);
  const int64_t count = rows * dim;
  float* x = fill_uniform(count, &state, -1.0, 3.0);
  float* r = fill_uniform(count, &state, -1.0, 1.0);
  float* gamma = fill_uniform(dim, &state, 0.5, 1.5);
  float* beta = fill_uniform(dim, &state, -0.5, 0.5);
  float* h = fill_uniform(count, &state, 0, 1);
  float* y = fill_uniform(count, &state, 0, 1);
  float* rstd = fill_uniform(rows, &state, 0, 1);
  const int layer = norm == ADDNORM_LAYER_NORM;
  const int64_t shape[3] = {1, rows, dim};
  const addnorm_tensor tx = f32(x, shape, 3), tr = f32(r, shape, 3), th = f32(h, shape, 3),
                       ty = f32(y, shape, 3), tg = f32(gamma, shape + 2, 1),
                       tb = f32(beta, shape + 2, 1), trstd = f32(rstd, shape, 2);
  const double eps = (double)(float)addnorm_default_eps(norm);

  CHECK_OK(addnorm_add_norm_pre(&tx, &tr, 1, norm, &tg, layer ? &tb : NULL, 0, ADDNORM_DEFAULT_EPS,
                                &th, &ty, NULL, layer ? NULL : &trstd));
  for (int64_t row = 0; row < rows; ++row) {
    const float* hr = h + row * dim;
    for (int64_t i = 0; i < dim; ++i) {
      const float sum = x[row * dim + i] + r[row * dim + i];
      CHECK(memcmp(&hr[i], &sum, sizeof sum) == 0,
            "add_norm_pre h[%lld, %lld] = %.9g, expected %.9g", (long long)row, (long long)i, hr[i],
            sum);
    }
    const row_stats stats =
        layer ? layer_norm_stats(hr, dim, eps) : (row_stats){0.0, rms_rstd(hr, dim, eps)};
    if (!layer) {
      CHECK(close32(rstd[row], stats.rstd, 0, 2), "add_norm_pre rstd[%lld] %.9g, expected %.9g",
            (long long)row, rstd[row], stats.rstd);
    }
    for (int64_t i = 0; i < dim; ++i) {
      const double scaled = (hr[i] - stats.mean) * stats.rstd * gamma[i];
      const double shift = layer ? beta[i] : 0.0;
      CHECK(close32(y[row * dim + i], scaled + shift, fmax(fabs(scaled), fabs(shift)), 2),
            "add_norm_pre (norm %d) y[%lld, %lld] = %.9g, expected %.9g", (int)norm, (long long)row,
            (long long)i, y[row * dim + i], scaled + shift);
    }
  }
  free(x), free(r), free(gamma), free(beta), free(h), free(y), free(rstd);
}

/* bfloat16 x and y: the result is the float64 LayerNorm of the stored inputs, rounded once to
 * bfloat16 (within 1 bfloat16 ulp), and a float32 y from the same bfloat16 x rounds to the
 * same bits. */
static void test_bfloat16_round_trip(void) {
  enum { kRows = 6, kDim = 70 };
  uint64_t state = 99;
  uint16_t x[kRows * kDim], y16[kRows * kDim], gamma16[kDim];
  float y32[kRows * kDim], decoded[kRows * kDim];
  for (int i = 0; i < kRows * kDim; ++i) {
    x[i] = to_bf16(uniform(&state, -3, 5));
    decoded[i] = from_bf16(x[i]);
    CHECK(to_bf16(decoded[i]) == x[i], "bfloat16 %#x does not survive float32", x[i]);
  }
  for (int i = 0; i < kDim; ++i) gamma16[i] = to_bf16(uniform(&state, 0.5, 2));
  const int64_t shape[2] = {kRows, kDim};
  const addnorm_tensor tx = tensor_of(x, shape, 2, ADDNORM_BFLOAT16),
                       ty16 = tensor_of(y16, shape, 2, ADDNORM_BFLOAT16),
                       ty32 = tensor_of(y32, shape, 2, ADDNORM_FLOAT32),
                       tg = tensor_of(gamma16, shape + 1, 1, ADDNORM_BFLOAT16);
  CHECK_OK(addnorm_layer_norm(&tx, 1, &tg, NULL, kEps, &ty16, NULL, NULL));
  CHECK_OK(addnorm_layer_norm(&tx, 1, &tg, NULL, kEps, &ty32, NULL, NULL));
  for (int row = 0; row < kRows; ++row) {
    const row_stats stats = layer_norm_stats(decoded + row * kDim, kDim, (double)(float)kEps);
    for (int i = 0; i < kDim; ++i) {
      const int at = row * kDim + i;
      const double ref = (decoded[at] - stats.mean) * stats.rstd * from_bf16(gamma16[i]);
      CHECK(fabs(from_bf16(y16[at]) - ref) <= ulp_bf16(ref),
            "bfloat16 layer_norm y[%d, %d] = %.9g, expected %.9g", row, i, from_bf16(y16[at]), ref);
      CHECK(to_bf16(y32[at]) == y16[at],
            "bfloat16 y[%d, %d] = %#x, float32 y rounds to %#x: not one rounding of one value", row,
            i, y16[at], to_bf16(y32[at]));
    }
  }
}

/* float64 tensors run the float64 ops: the reference kernels, within a few float64 ulp. */
static void test_float64_routing(void) {
  enum { kRows = 3, kDim = 33 };
  uint64_t state = 5;
  double x[kRows * kDim], y[kRows * kDim], gamma[kDim], mean[kRows], rstd[kRows];
  for (int i = 0; i < kRows * kDim; ++i) x[i] = uniform(&state, -1, 3) + 1e-9 * i;
  for (int i = 0; i < kDim; ++i) gamma[i] = uniform(&state, 0.5, 1.5);
  const int64_t shape[2] = {kRows, kDim};
  const addnorm_tensor tx = tensor_of(x, shape, 2, ADDNORM_FLOAT64),
                       ty = tensor_of(y, shape, 2, ADDNORM_FLOAT64),
                       tg = tensor_of(gamma, shape + 1, 1, ADDNORM_FLOAT64),
                       tmean = tensor_of(mean, shape, 1, ADDNORM_FLOAT64),
                       trstd = tensor_of(rstd, shape, 1, ADDNORM_FLOAT64);
  const double eps = 1e-7; /* not representable in float32: the float64 op keeps it exactly */
  CHECK_OK(addnorm_layer_norm(&tx, 1, &tg, NULL, eps, &ty, &tmean, &trstd));
  for (int row = 0; row < kRows; ++row) {
    const double* xr = x + row * kDim;
    double sum = 0, squares = 0;
    for (int i = 0; i < kDim; ++i) sum += xr[i];
    const double mu = sum / kDim;
    for (int i = 0; i < kDim; ++i) squares += (xr[i] - mu) * (xr[i] - mu);
    const double rs = 1.0 / sqrt(squares / kDim + eps);
    CHECK(fabs(mean[row] - mu) <= 1e-15 * fabs(mu) + 1e-300, "float64 mean[%d] %.17g vs %.17g", row,
          mean[row], mu);
    CHECK(fabs(rstd[row] - rs) <= 1e-14 * rs, "float64 rstd[%d] %.17g vs %.17g", row, rstd[row],
          rs);
    for (int i = 0; i < kDim; ++i) {
      const double ref = (xr[i] - mu) * rs * gamma[i];
      CHECK(fabs(y[row * kDim + i] - ref) <= 1e-14 * (1 + fabs(ref)),
            "float64 y[%d, %d] = %.17g, expected %.17g", row, i, y[row * kDim + i], ref);
    }
  }
}

int main(void) {
  test_reference_gradient_by_finite_differences();
  const int64_t dims[] = {1, 7, 37, 256, 1500};
  for (size_t d = 0; d < sizeof dims / sizeof dims[0]; ++d) {
    test_layer_norm(5, dims[d]);
    test_rms_norm(4, dims[d], 0);
    test_rms_norm(4, dims[d], 1);
    test_add_norm_pre(3, dims[d], ADDNORM_LAYER_NORM);
    test_add_norm_pre(3, dims[d], ADDNORM_RMS_NORM);
  }
  test_bfloat16_round_trip();
  test_float64_routing();
  return finish("c_api_test");
}
