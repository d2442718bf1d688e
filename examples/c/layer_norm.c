/* A C program using addnorm through its C ABI (addnorm/addnorm.h), as a C, Rust, Go or Julia
   user's FFI would: LayerNorm of the tutorial's row [2, 4, 6, 8], checked against this file's
   own double arithmetic, and a refused call whose error names the argument. Built with
   `cc layer_norm.c $(pkg-config --cflags --libs addnorm) -lm` (scripts/test-cpp-package.sh). */
#include <addnorm/addnorm.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  float x[4] = {2, 4, 6, 8}, y[4] = {0}, mean = 0, rstd = 0;
  const int64_t shape[2] = {1, 4}, rows[1] = {1};
  const addnorm_tensor tx = {x, shape, 2, ADDNORM_FLOAT32}, ty = {y, shape, 2, ADDNORM_FLOAT32};
  const addnorm_tensor tmean = {&mean, rows, 1, ADDNORM_FLOAT32};
  const addnorm_tensor trstd = {&rstd, rows, 1, ADDNORM_FLOAT32};
  addnorm_status status = addnorm_layer_norm(&tx, 1, NULL, NULL, 1e-5, &ty, &tmean, &trstd);
  if (status != ADDNORM_OK) {
    printf("FAIL addnorm_layer_norm: %s: %s\n", addnorm_status_name(status), addnorm_last_error());
    return 1;
  }
  /* mean 5, population variance 5: y = (x - 5) / sqrt(5 + 1e-5) */
  int failures = 0;
  for (int i = 0; i < 4; ++i) {
    const double expected = ((double)x[i] - 5.0) / sqrt(5.0 + 1e-5);
    if (fabs((double)y[i] - expected) > 4 * 1.2e-7 * fabs(expected)) {
      printf("FAIL y[%d] = %.9g, expected %.9g\n", i, (double)y[i], expected);
      ++failures;
    }
  }
  if (mean != 5.0f) {
    printf("FAIL mean = %.9g, expected 5\n", (double)mean);
    ++failures;
  }

  /* gamma of the wrong length: refused, the message names gamma, y untouched. */
  float gamma[3] = {1, 1, 1}, kept[4];
  const int64_t three[1] = {3};
  const addnorm_tensor tgamma = {gamma, three, 1, ADDNORM_FLOAT32};
  memcpy(kept, y, sizeof y);
  status = addnorm_layer_norm(&tx, 1, &tgamma, NULL, 1e-5, &ty, NULL, NULL);
  if (status != ADDNORM_ERROR_INVALID_ARGUMENT || strstr(addnorm_last_error(), "gamma") == NULL ||
      memcmp(kept, y, sizeof y) != 0) {
    printf("FAIL a gamma of length 3 gave %s: %s\n", addnorm_status_name(status),
           addnorm_last_error());
    ++failures;
  }
  if (failures == 0) {
    printf("C ABI (addnorm %s): LayerNorm of [2, 4, 6, 8] matches double; bad gamma refused\n",
           addnorm_version());
  }
  return failures == 0 ? 0 : 1;
}
