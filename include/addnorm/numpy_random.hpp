// A bit-exact C++ copy of NumPy's default generator: np.random.default_rng(seed) (SeedSequence ->
// PCG64) and Generator.normal (the 256-step ziggurat). The seed page draws its weights this way;
// reproducing the stream is what lets the tour print the page's numbers exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "addnorm/visibility.hpp"

ADDNORM_PUBLIC_BEGIN
namespace addnorm::numpy_random {

// NumPy's SeedSequence(entropy).generate_state(n_words) as uint32 words, for a non-negative
// integer entropy. Throws addnorm::Error if n_words < 0.
std::vector<uint32_t> seed_sequence_state(uint64_t entropy, int n_words);

// np.random.default_rng(seed): PCG64 seeded through SeedSequence.
class Generator {
 public:
  explicit Generator(uint64_t seed);

  uint64_t next_uint64();
  // Uniform on [0, 1) with 53 random bits, as NumPy's next_double.
  double next_double();
  // Generator.standard_normal() for one value.
  double standard_normal();
  // Generator.normal(loc, scale) for one value: loc + scale * standard_normal(). Like NumPy,
  // throws addnorm::Error for a negative scale (also -0.0) and lets a NaN scale through.
  double normal(double loc, double scale);
  // Generator.normal(loc, scale, size=count), in the order NumPy fills a C-order array.
  // Throws addnorm::Error for count < 0 or a negative scale.
  std::vector<double> normal(double loc, double scale, int64_t count);

 private:
  // The 128-bit PCG64 state and increment, as two 64-bit halves each.
  uint64_t state_high_ = 0, state_low_ = 0;
  uint64_t increment_high_ = 0, increment_low_ = 0;
};

}  // namespace addnorm::numpy_random
ADDNORM_PUBLIC_END
