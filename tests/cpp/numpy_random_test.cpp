// The NumPy-compatible generator against values obtained from NumPy 1.24 itself
// (np.random.default_rng, SeedSequence, and the tables in NumPy's compiled module), and against
// the numbers the seed page prints for its gradient-flow script.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "addnorm/numpy_random.hpp"
#include "random/ziggurat_tables.hpp"

namespace {

namespace nr = addnorm::numpy_random;

// FNV-1a over 64-bit words, bytes least significant first. The expected hashes were computed
// the same way in Python over NumPy's own values.
class Fnv1a64 {
 public:
  void add(uint64_t word) {
    for (int byte = 0; byte < 8; ++byte) {
      hash_ ^= (word >> (8 * byte)) & 0xff;
      hash_ *= 0x100000001b3ULL;
    }
  }
  void add(double value) { add(std::bit_cast<uint64_t>(value)); }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

TEST(NumpyRandom, SeedSequenceStateMatchesNumpy) {
  // np.random.SeedSequence(seed).generate_state(8)
  const std::vector<std::pair<uint64_t, std::vector<uint32_t>>> cases = {
      {0,
       {0xb0f478be, 0xdb2cd7e7, 0x2c71ba49, 0xabf4641a, 0x9d7b8d41, 0x20c6ed6d, 0x223c39d4,
        0x2c4099de}},
      {42,
       {0xcd540ab7, 0x9f1e2e6d, 0x79fb94b6, 0xd57873dc, 0x64d420b7, 0x7d282a1b, 0x4692d5ff,
        0x33657971}},
      {(1ULL << 32) + 5,
       {0xe249d9ac, 0xf9c15bd6, 0x36320ed7, 0xb2021b40, 0xe6dcf739, 0x9388b47f, 0xad6439e1,
        0x5eeba8d9}},
      {1ULL << 63,
       {0x56c9650a, 0xd360dfe1, 0xb58db8d7, 0x6d067215, 0x13077984, 0xb8f7f436, 0x0037409d,
        0xaa2ec05d}},
  };
  for (const auto& [seed, expected] : cases) {
    EXPECT_EQ(nr::seed_sequence_state(seed, 8), expected) << "seed " << seed;
  }
  // Fewer words are a prefix of more words.
  EXPECT_EQ(nr::seed_sequence_state(42, 3),
            (std::vector<uint32_t>{0xcd540ab7, 0x9f1e2e6d, 0x79fb94b6}));
  EXPECT_TRUE(nr::seed_sequence_state(42, 0).empty());
}

TEST(NumpyRandom, RawOutputMatchesNumpy) {
  // np.random.default_rng(seed).bit_generator.random_raw(3)
  const std::vector<std::pair<uint64_t, std::array<uint64_t, 3>>> cases = {
      {0, {0xa30febcfd9c2825f, 0x4510bdf882d9d721, 0x0a7d3da94ecde8b8}},
      {42, {0xc621fbcd16d92688, 0x705a5661a791ffc1, 0xdbcd12c26eda1624}},
      {(1ULL << 32) + 5, {0xc6323ec321deb8d1, 0x78814821c73a0583, 0xb22536d8e0ec17c0}},
      {1ULL << 63, {0xcfb443e389167cfd, 0x98b11eb7647f71b8, 0xde463a1436212dfd}},
  };
  for (const auto& [seed, expected] : cases) {
    nr::Generator generator(seed);
    for (uint64_t word : expected) EXPECT_EQ(generator.next_uint64(), word) << "seed " << seed;
  }
}

TEST(NumpyRandom, NextDoubleMatchesNumpyRandom) {
  // np.random.default_rng(42).random(3)
  nr::Generator generator(42);
  EXPECT_EQ(generator.next_double(), 0.7739560485559633);
  EXPECT_EQ(generator.next_double(), 0.4388784397520523);
  EXPECT_EQ(generator.next_double(), 0.8585979199113825);
}

TEST(NumpyRandom, FirstNormalsMatchNumpy) {
  // np.random.default_rng(42).normal(0, 1, 6)
  const std::vector<double> expected = {0.30471707975443135, -1.0399841062404955,
                                        0.7504511958064572,  0.9405647163912139,
                                        -1.9510351886538364, -1.302179506862318};
  EXPECT_EQ(nr::Generator(42).normal(0.0, 1.0, 6), expected);
  // One value at a time continues the same stream.
  nr::Generator one_at_a_time(42);
  for (double value : expected) EXPECT_EQ(one_at_a_time.normal(0.0, 1.0), value);
  // np.random.default_rng(2**63).normal(3.0, 2.5, 3): loc and scale applied as NumPy does.
  EXPECT_EQ(nr::Generator(1ULL << 63).normal(3.0, 2.5, 3),
            (std::vector<double>{7.073566994613335, -0.7689248554485264, -4.85298155339868}));
}

TEST(NumpyRandom, MillionNormalsMatchNumpyIncludingTailAndWedges) {
  // np.random.default_rng(42).standard_normal(10**6): 279 of them lie beyond the tail start,
  // the largest at |x| = 5.0072352319089966; thousands go through the wedge test.
  nr::Generator generator(42);
  Fnv1a64 hash;
  int beyond_tail_start = 0;
  double largest = 0.0;
  for (int i = 0; i < 1000000; ++i) {
    const double value = generator.standard_normal();
    hash.add(value);
    if (std::abs(value) > nr::kZigguratTailStart) ++beyond_tail_start;
    largest = std::max(largest, std::abs(value));
  }
  EXPECT_EQ(beyond_tail_start, 279);
  EXPECT_EQ(largest, 5.0072352319089966);
  EXPECT_EQ(hash.value(), 0x6a0914c45759142fULL);
}

TEST(NumpyRandom, ZigguratTablesEqualNumpys) {
  // Hashes of ki_double, wi_double and fi_double as stored in NumPy 1.24's _generator module.
  const nr::ZigguratTables& tables = nr::normal_ziggurat_tables();
  Fnv1a64 accept, width, density;
  for (int i = 0; i < nr::kZigguratLayers; ++i) {
    accept.add(tables.accept_below[i]);
    width.add(tables.width_scale[i]);
    density.add(tables.density_at_edge[i]);
  }
  EXPECT_EQ(accept.value(), 0xd271bfe7421e8d28ULL);
  EXPECT_EQ(width.value(), 0x8dc0debf0ba9cdc4ULL);
  EXPECT_EQ(density.value(), 0x0c954fbcd5a26724ULL);
  // A few entries, so a failure says where to look.
  EXPECT_EQ(tables.accept_below[0], 0x000ef33d8025ef6aULL);
  EXPECT_EQ(tables.accept_below[1], 0u);
  EXPECT_EQ(tables.accept_below[255], 0x000f1a5a4b331c4aULL);
  EXPECT_EQ(tables.width_scale[0], 0x1.f493b7815d979p-51);
  EXPECT_EQ(tables.width_scale[255], 0x1.d3bb48209ad33p-51);
  EXPECT_EQ(tables.density_at_edge[0], 1.0);
  EXPECT_EQ(tables.density_at_edge[255], 0x1.4a605b6b9f70fp-10);
}

// The seed page's script: gradients carried down a stack of d x d layers with and without skips.
std::array<double, 2> gradient_norms(nr::Generator& rng, int n_layers) {
  constexpr int d = 8;
  std::vector<std::vector<double>> weights;  // each d x d, row-major as NumPy fills (d, d)
  for (int layer = 0; layer < n_layers; ++layer) weights.push_back(rng.normal(0.0, 0.1, d * d));
  std::vector<double> plain(d, 1.0), residual(d, 1.0);
  for (auto w = weights.rbegin(); w != weights.rend(); ++w) {
    std::vector<double> next_plain(d, 0.0), next_residual(d, 0.0);
    for (int col = 0; col < d; ++col) {
      // (W.T @ g)[col] = sum over rows of W[row][col] * g[row]; (I + W).T adds g[col].
      for (int row = 0; row < d; ++row) {
        next_plain[col] += (*w)[row * d + col] * plain[row];
        next_residual[col] += ((row == col ? 1.0 : 0.0) + (*w)[row * d + col]) * residual[row];
      }
    }
    plain = next_plain;
    residual = next_residual;
  }
  auto norm = [](const std::vector<double>& v) {
    double sum = 0.0;
    for (double x : v) sum += x * x;
    return std::sqrt(sum);
  };
  return {norm(plain), norm(residual)};
}

std::string format(const char* spec, double value) {
  char text[64];
  std::snprintf(text, sizeof text, spec, value);
  return text;
}

TEST(NumpyRandom, SeedPageGradientFlowNumbers) {
  nr::Generator rng(42);  // the same generator serves both depths, as on the page
  const auto six = gradient_norms(rng, 6);
  EXPECT_EQ(format("%.2e", six[0]), "8.62e-04");
  EXPECT_EQ(format("%.2f", six[1]), "3.31");
  const auto twenty_four = gradient_norms(rng, 24);
  EXPECT_EQ(format("%.2e", twenty_four[0]), "6.86e-14");
  EXPECT_EQ(format("%.2f", twenty_four[1]), "2.79");
  // NumPy prints 0.0008618550018821013, 3.310074832928725, 6.861952342973359e-14 and
  // 2.7909856251034793; the summation order differs (BLAS), so compare to a few ulp.
  EXPECT_NEAR(six[0], 0.0008618550018821013, 1e-15 * six[0] * 8);
  EXPECT_NEAR(six[1], 3.310074832928725, 1e-15 * 8);
  EXPECT_NEAR(twenty_four[0], 6.861952342973359e-14, 1e-13 * twenty_four[0]);
  EXPECT_NEAR(twenty_four[1], 2.7909856251034793, 1e-15 * 8);
}

TEST(NumpyRandom, BadArgumentsThrowNamingTheArgument) {
  nr::Generator rng(0);
  EXPECT_THROW(nr::seed_sequence_state(0, -1), addnorm::Error);
  EXPECT_THROW(rng.normal(0.0, 1.0, -1), addnorm::Error);
  EXPECT_THROW(rng.normal(0.0, -0.5), addnorm::Error);
  EXPECT_THROW(rng.normal(0.0, -0.0, 3), addnorm::Error);
  try {
    rng.normal(0.0, -1.0, 2);
    FAIL() << "a negative scale was accepted";
  } catch (const addnorm::Error& error) {
    EXPECT_NE(std::string(error.what()).find("scale"), std::string::npos) << error.what();
  }
  // NumPy lets a NaN scale through (the values are NaN) and accepts count 0.
  EXPECT_TRUE(std::isnan(rng.normal(0.0, std::nan(""))));
  EXPECT_TRUE(rng.normal(0.0, 1.0, 0).empty());
}

}  // namespace
