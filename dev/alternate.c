/* Calls of two or more builds of libaddnorm.so alternating in one process, on the same data:
 * the in-process A/B behind dev/ab.py --in-process. Each library is loaded with dlopen
 * (RTLD_LOCAL | RTLD_DEEPBIND, so each copy calls its own kernels), and every repetition calls
 * each one once, in an order that rotates with the repetition, so that a build is never always
 * first after another. Separate processes see this machine's memory bandwidth move 0.6-1.3x
 * between runs; calls a few milliseconds apart see the same machine.
 *
 *   alternate OP DTYPE DIM MIB REPS LIBRARY...
 *
 * OP: layer_norm_fwd, rms_norm_fwd, add_norm_pre_fwd (LayerNorm), add_norm_pre_rms_fwd (RMSNorm),
 * add_norm_post_fwd (LayerNorm, dropout 0.1 as addnorm-bench's), add_norm_post_p0_fwd (p = 0),
 * layer_norm_bwd, rms_norm_bwd, batch_norm_train_fwd (BatchNorm in training mode over (N, C) =
 * (rows, DIM), updating the running statistics and saving the batch's, as addnorm-bench's) or
 * batch_norm_train_bwd (its backward, as addnorm-bench's); DTYPE: f32 or bf16 (x, r, dy,
 * y and h; a library built before 16-bit BatchNorm refuses bf16 BatchNorm by name); DIM: the row
 * length D; MIB: the size of one tensor (rows = MIB MiB / D / element size). Threads: OpenMP's
 * (OMP_NUM_THREADS). Prints one line per library and repetition, "sample LIBRARY_INDEX REPETITION
 * SECONDS", then "rows ROWS". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "addnorm/addnorm.h"

enum { kMaxLibraries = 8 };

typedef addnorm_status (*LayerNormFn)(const addnorm_tensor*, int32_t, const addnorm_tensor*,
                                      const addnorm_tensor*, double, const addnorm_tensor*,
                                      const addnorm_tensor*, const addnorm_tensor*);
typedef addnorm_status (*RmsNormFn)(const addnorm_tensor*, int32_t, const addnorm_tensor*, int32_t,
                                    double, const addnorm_tensor*, const addnorm_tensor*);
typedef addnorm_status (*PreNormFn)(const addnorm_tensor*, const addnorm_tensor*, int32_t, int32_t,
                                    const addnorm_tensor*, const addnorm_tensor*, int32_t, double,
                                    const addnorm_tensor*, const addnorm_tensor*,
                                    const addnorm_tensor*, const addnorm_tensor*);
typedef addnorm_status (*PostNormFn)(const addnorm_tensor*, const addnorm_tensor*, int32_t, int32_t,
                                     const addnorm_tensor*, const addnorm_tensor*, int32_t, double,
                                     double, uint64_t, uint64_t, const addnorm_tensor*,
                                     const addnorm_tensor*, const addnorm_tensor*);
typedef addnorm_status (*LayerNormBackwardFn)(const addnorm_tensor*, const addnorm_tensor*, int32_t,
                                              const addnorm_tensor*, const addnorm_tensor*, double,
                                              const addnorm_tensor*, const addnorm_tensor*,
                                              const addnorm_tensor*, const addnorm_tensor*,
                                              const addnorm_tensor*);
typedef addnorm_status (*RmsNormBackwardFn)(const addnorm_tensor*, const addnorm_tensor*, int32_t,
                                            const addnorm_tensor*, int32_t, double,
                                            const addnorm_tensor*, const addnorm_tensor*,
                                            const addnorm_tensor*);
typedef addnorm_status (*BatchNormFn)(const addnorm_tensor*, const addnorm_tensor*,
                                      const addnorm_tensor*, int32_t, double, int32_t, double,
                                      int32_t, const addnorm_tensor*, const addnorm_tensor*,
                                      const addnorm_tensor*, const addnorm_tensor*,
                                      const addnorm_tensor*);
typedef addnorm_status (*BatchNormBackwardFn)(const addnorm_tensor*, const addnorm_tensor*,
                                              const addnorm_tensor*, const addnorm_tensor*, int32_t,
                                              double, int32_t, const addnorm_tensor*,
                                              const addnorm_tensor*, const addnorm_tensor*,
                                              const addnorm_tensor*, const addnorm_tensor*);
typedef const char* (*LastErrorFn)(void);

typedef struct Library {
  LayerNormFn layer_norm;
  RmsNormFn rms_norm;
  PreNormFn add_norm_pre;
  PostNormFn add_norm_post;
  LayerNormBackwardFn layer_norm_backward;
  RmsNormBackwardFn rms_norm_backward;
  BatchNormFn batch_norm;
  BatchNormBackwardFn batch_norm_backward;
  LastErrorFn last_error;
} Library;

static void fail(const char* message, const char* detail) {
  fprintf(stderr, "alternate: %s%s\n", message, detail ? detail : "");
  exit(2);
}

static void* symbol(void* handle, const char* name) {
  void* found = dlsym(handle, name);
  if (!found) fail("a library lacks ", name);
  return found;
}

static Library load(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!handle) fail("dlopen: ", dlerror());
  Library library;
  library.layer_norm = (LayerNormFn)symbol(handle, "addnorm_layer_norm");
  library.rms_norm = (RmsNormFn)symbol(handle, "addnorm_rms_norm");
  library.add_norm_pre = (PreNormFn)symbol(handle, "addnorm_add_norm_pre");
  library.add_norm_post = (PostNormFn)symbol(handle, "addnorm_add_norm_post");
  library.layer_norm_backward = (LayerNormBackwardFn)symbol(handle, "addnorm_layer_norm_backward");
  library.rms_norm_backward = (RmsNormBackwardFn)symbol(handle, "addnorm_rms_norm_backward");
  library.batch_norm = (BatchNormFn)symbol(handle, "addnorm_batch_norm");
  library.batch_norm_backward = (BatchNormBackwardFn)symbol(handle, "addnorm_batch_norm_backward");
  library.last_error = (LastErrorFn)symbol(handle, "addnorm_last_error");
  return library;
}

/* A buffer on 2 MiB boundaries (transparent huge pages, as addnorm-bench's), every page touched. */
static void* buffer(size_t bytes) {
  const size_t huge = (size_t)2 << 20;
  const size_t rounded = (bytes + huge - 1) / huge * huge;
  char* mapping =
      mmap(NULL, rounded + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) fail("out of memory", NULL);
  char* aligned = (char*)(((uintptr_t)mapping + huge - 1) / huge * huge);
  madvise(aligned, rounded, MADV_HUGEPAGE);
  memset(aligned, 0, rounded);
  return aligned;
}

/* Values in [low, low + span) from a fixed generator, as float32 or as bfloat16 bits. */
static void fill(void* data, int64_t count, int bf16, uint64_t seed, float low, float span) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const float value = low + span * (float)(state >> 40) / (float)(1u << 24);
    if (bf16) {
      uint32_t bits;
      memcpy(&bits, &value, sizeof bits);
      ((uint16_t*)data)[i] = (uint16_t)(bits >> 16);
    } else {
      ((float*)data)[i] = value;
    }
  }
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc < 7) {
    fail("usage: alternate OP DTYPE DIM MIB REPS LIBRARY...", NULL);
  }
  const char* op = argv[1];
  const int bf16 = strcmp(argv[2], "bf16") == 0;
  if (!bf16 && strcmp(argv[2], "f32") != 0) fail("DTYPE: expected f32 or bf16, got ", argv[2]);
  const int64_t dim = atoll(argv[3]);
  const double mib = atof(argv[4]);
  const int reps = atoi(argv[5]);
  const int count = argc - 6;
  if (dim < 1 || mib <= 0 || reps < 1) fail("DIM, MIB and REPS must be positive", NULL);
  if (count > kMaxLibraries) fail("at most 8 libraries", NULL);
  const int batch_norm = strncmp(op, "batch_norm", 10) == 0;
  const size_t element = bf16 ? 2 : 4;
  const int64_t rows = (int64_t)(mib * 1048576.0 / (double)element) / dim;
  if (rows < 1) fail("MIB holds no row of DIM elements", NULL);
  const size_t bytes = (size_t)(rows * dim) * element;
  void* x = buffer(bytes);
  void* r = buffer(bytes);
  void* dy = buffer(bytes);
  void* h = buffer(bytes);
  void* y = buffer(bytes);
  float* gamma = buffer((size_t)dim * 4);
  float* beta = buffer((size_t)dim * 4);
  float* dgamma = buffer((size_t)dim * 4);
  float* dbeta = buffer((size_t)dim * 4);
  float* mean = buffer((size_t)rows * 4);
  float* rstd = buffer((size_t)rows * 4);
  float* running_mean = buffer((size_t)dim * 4);
  float* running_var = buffer((size_t)dim * 4);
  float* batch_mean = buffer((size_t)dim * 4);
  float* batch_rstd = buffer((size_t)dim * 4);
  fill(x, rows * dim, bf16, 1, -2.0f, 5.0f);
  fill(r, rows * dim, bf16, 2, -1.0f, 2.0f);
  fill(dy, rows * dim, bf16, 3, -1.0f, 2.0f);
  fill(gamma, dim, 0, 4, 0.5f, 1.0f);
  fill(beta, dim, 0, 5, -0.5f, 1.0f);
  fill(running_var, dim, 0, 6, 1.0f, 0.0f);
  const int32_t dtype = bf16 ? ADDNORM_BFLOAT16 : ADDNORM_FLOAT32;
  const int64_t shape[2] = {rows, dim};
  const int64_t row_shape[1] = {rows};
  const int64_t param_shape[1] = {dim};
  const addnorm_tensor tx = {x, shape, 2, dtype}, tr = {r, shape, 2, dtype};
  const addnorm_tensor tdy = {dy, shape, 2, dtype}, th = {h, shape, 2, dtype};
  const addnorm_tensor ty = {y, shape, 2, dtype};
  const addnorm_tensor tgamma = {gamma, param_shape, 1, ADDNORM_FLOAT32};
  const addnorm_tensor tbeta = {beta, param_shape, 1, ADDNORM_FLOAT32};
  const addnorm_tensor tdgamma = {dgamma, param_shape, 1, ADDNORM_FLOAT32};
  const addnorm_tensor tdbeta = {dbeta, param_shape, 1, ADDNORM_FLOAT32};
  const addnorm_tensor tmean = {mean, row_shape, 1, ADDNORM_FLOAT32};
  const addnorm_tensor trstd = {rstd, row_shape, 1, ADDNORM_FLOAT32};
  const addnorm_tensor trunning_mean = {running_mean, param_shape, 1, ADDNORM_FLOAT32};
  const addnorm_tensor trunning_var = {running_var, param_shape, 1, ADDNORM_FLOAT32};
  const addnorm_tensor tbatch_mean = {batch_mean, param_shape, 1, ADDNORM_FLOAT32};
  const addnorm_tensor tbatch_rstd = {batch_rstd, param_shape, 1, ADDNORM_FLOAT32};
  Library libraries[kMaxLibraries];
  for (int i = 0; i < count; ++i) libraries[i] = load(argv[6 + i]);
  /* The backward's statistics come from a forward of the same rows (the first library's). */
  const int backward = strstr(op, "_bwd") != NULL && !batch_norm;
  const int rms = strncmp(op, "rms_norm", 8) == 0;
  if (backward) {
    const addnorm_status status =
        rms ? libraries[0].rms_norm(&tx, 1, &tgamma, 0, 1e-5, &ty, &trstd)
            : libraries[0].layer_norm(&tx, 1, &tgamma, &tbeta, 1e-5, &ty, &tmean, &trstd);
    if (status != ADDNORM_OK) fail("the forward before the backward: ", libraries[0].last_error());
  }
  printf("rows %lld\n", (long long)rows);
  for (int rep = -1; rep < reps; ++rep) { /* rep -1: one untimed call each, to warm up */
    for (int k = 0; k < count; ++k) {
      const int i = (k + (rep < 0 ? 0 : rep)) % count;
      const Library* lib = &libraries[i];
      const double start = now();
      addnorm_status status;
      if (strcmp(op, "layer_norm_fwd") == 0) {
        status = lib->layer_norm(&tx, 1, &tgamma, &tbeta, 1e-5, &ty, &tmean, &trstd);
      } else if (strcmp(op, "rms_norm_fwd") == 0) {
        status = lib->rms_norm(&tx, 1, &tgamma, 0, 1e-5, &ty, &trstd);
      } else if (strcmp(op, "add_norm_pre_fwd") == 0) {
        status = lib->add_norm_pre(&tx, &tr, 1, ADDNORM_LAYER_NORM, &tgamma, &tbeta, 0, 1e-5, &th,
                                   &ty, &tmean, &trstd);
      } else if (strcmp(op, "add_norm_pre_rms_fwd") == 0) {
        status = lib->add_norm_pre(&tx, &tr, 1, ADDNORM_RMS_NORM, &tgamma, NULL, 0, 1e-5, &th, &ty,
                                   NULL, &trstd);
      } else if (strcmp(op, "add_norm_post_fwd") == 0 || strcmp(op, "add_norm_post_p0_fwd") == 0) {
        const double p = strcmp(op, "add_norm_post_fwd") == 0 ? 0.1 : 0.0;
        status = lib->add_norm_post(&tx, &tr, 1, ADDNORM_LAYER_NORM, &tgamma, &tbeta, 0, 1e-5, p,
                                    42, 0, &ty, &tmean, &trstd);
      } else if (strcmp(op, "layer_norm_bwd") == 0) {
        status = lib->layer_norm_backward(&tdy, &tx, 1, &tgamma, &tbeta, 1e-5, &tmean, &trstd, &th,
                                          &tdgamma, &tdbeta);
      } else if (strcmp(op, "rms_norm_bwd") == 0) {
        status = lib->rms_norm_backward(&tdy, &tx, 1, &tgamma, 0, 1e-5, &trstd, &th, &tdgamma);
      } else if (strcmp(op, "batch_norm_train_fwd") == 0) {
        status = lib->batch_norm(&tx, &tgamma, &tbeta, 1, 0.1, ADDNORM_MOMENTUM_PYTORCH, 1e-5, 0,
                                 &trunning_mean, &trunning_var, &ty, &tbatch_mean, &tbatch_rstd);
      } else if (strcmp(op, "batch_norm_train_bwd") == 0) {
        status = lib->batch_norm_backward(&tdy, &tx, &tgamma, &tbeta, 1, 1e-5, 0, NULL, NULL, &th,
                                          &tdgamma, &tdbeta);
      } else {
        fail(
            "OP: expected layer_norm_fwd, rms_norm_fwd, add_norm_pre_fwd, add_norm_pre_rms_fwd, "
            "add_norm_post_fwd, add_norm_post_p0_fwd, layer_norm_bwd, rms_norm_bwd, "
            "batch_norm_train_fwd or batch_norm_train_bwd, got ",
            op);
        return 2;
      }
      const double seconds = now() - start;
      if (status != ADDNORM_OK) fail("a call failed: ", lib->last_error());
      if (rep >= 0) printf("sample %d %d %.9f\n", i, rep, seconds);
    }
  }
  return 0;
}
