// NumPy's SeedSequence for one non-negative integer of entropy: the entropy is hashed into a pool
// of four 32-bit words, and generate_state hashes the pool again into as many words as asked.
// The constants and the order of the mixing are NumPy's (numpy/random/bit_generator.pyx).
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "addnorm/numpy_random.hpp"

namespace addnorm::numpy_random {
namespace {

constexpr int kPoolWords = 4;
constexpr uint32_t kEntropyHashStart = 0x43b0d7e5;
constexpr uint32_t kEntropyHashMultiplier = 0x931e8875;
constexpr uint32_t kStateHashStart = 0x8b51f9dd;
constexpr uint32_t kStateHashMultiplier = 0x58f38ded;
constexpr uint32_t kMixLeftMultiplier = 0xca01f9dd;
constexpr uint32_t kMixRightMultiplier = 0x4973f715;
constexpr int kXorShift = 16;

// Hashes one word with a multiplier that advances on every call, so equal words hash
// differently at different points of the mixing.
class EntropyHash {
 public:
  uint32_t operator()(uint32_t value) {
    value ^= multiplier_;
    multiplier_ *= kEntropyHashMultiplier;
    value *= multiplier_;
    return value ^ (value >> kXorShift);
  }

 private:
  uint32_t multiplier_ = kEntropyHashStart;
};

uint32_t mix(uint32_t into, uint32_t from) {
  const uint32_t result = kMixLeftMultiplier * into - kMixRightMultiplier * from;
  return result ^ (result >> kXorShift);
}

// NumPy turns a Python int into its 32-bit words, least significant first; zero is one word.
std::vector<uint32_t> entropy_words(uint64_t entropy) {
  std::vector<uint32_t> words{static_cast<uint32_t>(entropy)};
  if (entropy >> 32 != 0) words.push_back(static_cast<uint32_t>(entropy >> 32));
  return words;
}

std::vector<uint32_t> mixed_pool(uint64_t entropy) {
  const std::vector<uint32_t> words = entropy_words(entropy);
  EntropyHash hash;
  std::vector<uint32_t> pool(kPoolWords);
  for (int i = 0; i < kPoolWords; ++i) {
    pool[i] = hash(i < static_cast<int>(words.size()) ? words[i] : 0);
  }
  // Every word influences every other one.
  for (int source = 0; source < kPoolWords; ++source) {
    for (int target = 0; target < kPoolWords; ++target) {
      if (source != target) pool[target] = mix(pool[target], hash(pool[source]));
    }
  }
  // A uint64 has at most two words, so none is left over for NumPy's extra-entropy loop.
  return pool;
}

}  // namespace

std::vector<uint32_t> seed_sequence_state(uint64_t entropy, int n_words) {
  if (n_words < 0) {
    throw Error("n_words is " + std::to_string(n_words) + ", expected a non-negative count");
  }
  const std::vector<uint32_t> pool = mixed_pool(entropy);
  std::vector<uint32_t> state(n_words);
  uint32_t multiplier = kStateHashStart;
  for (int i = 0; i < n_words; ++i) {
    uint32_t value = pool[i % kPoolWords] ^ multiplier;
    multiplier *= kStateHashMultiplier;
    value *= multiplier;
    state[i] = value ^ (value >> kXorShift);
  }
  return state;
}

}  // namespace addnorm::numpy_random
