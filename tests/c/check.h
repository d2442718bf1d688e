/* What the C tests of the C ABI share: a failure counter, a seeded generator, ulp measures, the
 * bfloat16 encoding and descriptor builders. Everything is static inline so that a test that
 * uses part of it still compiles with -Werror. */
#ifndef ADDNORM_TESTS_C_CHECK_H
#define ADDNORM_TESTS_C_CHECK_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addnorm/addnorm.h"

static int check_failures = 0;

/* Records a failure (and prints where) unless cond holds. */
#define CHECK(cond, ...)                                            \
  do {                                                              \
    if (!(cond)) {                                                  \
      fprintf(stderr, "%s:%d: check failed: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                 \
      fputc('\n', stderr);                                          \
      ++check_failures;                                             \
    }                                                               \
  } while (0)

/* A call expected to succeed: on failure, its status and message. */
#define CHECK_OK(call)                                                                            \
  do {                                                                                            \
    const addnorm_status check_status_ = (call);                                                  \
    CHECK(check_status_ == ADDNORM_OK, "%s returned %s: %s", #call,                               \
          addnorm_status_name(check_status_), addnorm_last_error());                              \
    CHECK(strcmp(addnorm_last_error(), "") == 0, "%s succeeded but left the message '%s'", #call, \
          addnorm_last_error());                                                                  \
  } while (0)

static inline int finish(const char* test_name) {
  if (check_failures != 0) {
    fprintf(stderr, "%s: %d check(s) failed\n", test_name, check_failures);
    return 1;
  }
  printf("%s: all checks passed\n", test_name);
  return 0;
}

/* splitmix64: the same numbers on every platform. */
static inline uint64_t next_random(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* A float32 uniform in [low, high). */
static inline float uniform(uint64_t* state, double low, double high) {
  const double unit = (double)(next_random(state) >> 11) * 0x1.0p-53;
  return (float)(low + (high - low) * unit);
}

static inline float* fill_uniform(int64_t count, uint64_t* state, double low, double high) {
  float* values = (float*)malloc((size_t)count * sizeof(float));
  for (int64_t i = 0; i < count; ++i) values[i] = uniform(state, low, high);
  return values;
}

/* The spacing of float32 values at |value| (the smallest subnormal's below FLT_MIN). */
static inline double ulp32(double value) {
  const float magnitude = (float)fabs(value);
  if (magnitude < FLT_MIN) return (double)FLT_TRUE_MIN;
  if (isinf(magnitude)) return INFINITY;
  return (double)(nextafterf(magnitude, INFINITY) - magnitude);
}

/* bfloat16 keeps float32's exponent and 7 of its 23 fraction bits. */
static inline double ulp_bf16(double value) {
  return ulp32(value) * 65536.0;
}

/* float32 to bfloat16, rounding to nearest even (no NaN in these tests). */
static inline uint16_t to_bf16(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

static inline float from_bf16(uint16_t value) {
  const uint32_t bits = (uint32_t)value << 16;
  float result;
  memcpy(&result, &bits, sizeof result);
  return result;
}

static inline addnorm_tensor tensor_of(void* data, const int64_t* shape, int32_t rank,
                                       int32_t dtype) {
  addnorm_tensor tensor;
  tensor.data = data;
  tensor.shape = shape;
  tensor.rank = rank;
  tensor.dtype = dtype;
  return tensor;
}

static inline addnorm_tensor f32(float* data, const int64_t* shape, int32_t rank) {
  return tensor_of(data, shape, rank, ADDNORM_FLOAT32);
}

#endif /* ADDNORM_TESTS_C_CHECK_H */
