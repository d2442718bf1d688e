// The exact aliases the header allows (an output replacing the input of the same shape: y = x,
// h = x or r, dx = dy, ...) are accepted and give bitwise the same results as separate memory.
// Their partial overlaps are rejected in the other errors_*.cpp files.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <vector>

#include "addnorm/ops.hpp"
#include "errors_test_support.hpp"

namespace addnorm {
namespace {

using testing::random_floats;
using Buffers = std::vector<std::vector<float>>;
// The memory of buffer i for one run of an op.
using Memory = std::function<float*(size_t)>;

// Runs `op` twice on copies of `start`: once with every buffer separate, once with buffer
// `output` replaced by buffer `input`'s memory. Checks both runs agree bit for bit, the aliased
// input then holding what the separate output holds.
template <class Op>
void expect_alias_matches(const Buffers& start, size_t input, size_t output, Op op) {
  Buffers separate = start;
  Buffers aliased = start;
  ASSERT_NO_THROW(op([&](size_t i) { return separate[i].data(); }));
  ASSERT_NO_THROW(op([&](size_t i) { return aliased[i == output ? input : i].data(); }));
  const auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  EXPECT_FALSE(same_bits(separate[output], start[output])) << "the op wrote nothing";
  EXPECT_TRUE(same_bits(aliased[input], separate[output])) << "the aliased output differs";
  for (size_t i = 0; i < start.size(); ++i) {
    if (i != input && i != output) {
      EXPECT_TRUE(same_bits(aliased[i], separate[i])) << "buffer " << i << " differs";
    }
  }
}

// Buffers of the given sizes with seeded values in [0.5, 2) (valid as data, gamma, variance).
Buffers seeded(std::initializer_list<int64_t> sizes) {
  Buffers buffers;
  uint32_t seed = 11;
  for (int64_t size : sizes) {
    buffers.push_back(random_floats(static_cast<size_t>(size), seed++, 0.5f, 2.0f));
  }
  return buffers;
}

using testing::kDim;
using testing::kRows;
using testing::kX;
const Shape kBatchX{4, 3, 5};
const Shape kChannels{3};

TEST(ExactAliases, AddOutMayBeXOrR) {
  enum { X, R, OUT };
  const auto op = [](const Memory& m) { add({m(X), kX}, {m(R), kX}, {m(OUT), kX}); };
  expect_alias_matches(seeded({24, 24, 24}), X, OUT, op);
  expect_alias_matches(seeded({24, 24, 24}), R, OUT, op);
}

TEST(ExactAliases, LayerNormYMayBeX) {
  enum { X, Y, GAMMA, BETA, MEAN, RSTD };
  expect_alias_matches(seeded({24, 24, 8, 8, 3, 3}), X, Y, [](const Memory& m) {
    layer_norm({m(X), kX}, kDim, {m(Y), kX},
               NormOptions{.gamma = ConstView{m(GAMMA), kDim}, .beta = ConstView{m(BETA), kDim}},
               NormStats{{m(MEAN), kRows}, {m(RSTD), kRows}});
  });
}

TEST(ExactAliases, LayerNormBackwardDxMayBeDyOrX) {
  enum { DY, X, DX, GAMMA, BETA, DGAMMA, DBETA };
  const auto op = [](const Memory& m) {
    layer_norm_backward(
        {m(DY), kX}, {m(X), kX}, kDim,
        LayerNormGrads{{m(DX), kX}, MutableView{m(DGAMMA), kDim}, MutableView{m(DBETA), kDim}},
        NormOptions{.gamma = ConstView{m(GAMMA), kDim}, .beta = ConstView{m(BETA), kDim}});
  };
  expect_alias_matches(seeded({24, 24, 24, 8, 8, 8, 8}), DY, DX, op);
  expect_alias_matches(seeded({24, 24, 24, 8, 8, 8, 8}), X, DX, op);
}

TEST(ExactAliases, RmsNormYMayBeX) {
  enum { X, Y, GAMMA, RSTD };
  expect_alias_matches(seeded({24, 24, 8, 3}), X, Y, [](const Memory& m) {
    rms_norm({m(X), kX}, kDim, {m(Y), kX},
             NormOptions{.gamma = ConstView{m(GAMMA), kDim}, .zero_centered_gamma = true},
             MutableView{m(RSTD), kRows});
  });
}

TEST(ExactAliases, RmsNormBackwardDxMayBeDyOrX) {
  enum { DY, X, DX, GAMMA, DGAMMA, SAVED_RSTD };
  const auto op = [](const Memory& m) {
    rms_norm_backward(
        {m(DY), kX}, {m(X), kX}, kDim, RmsNormGrads{{m(DX), kX}, MutableView{m(DGAMMA), kDim}},
        NormOptions{.gamma = ConstView{m(GAMMA), kDim}}, ConstView{m(SAVED_RSTD), kRows});
  };
  expect_alias_matches(seeded({24, 24, 24, 8, 8, 3}), DY, DX, op);
  expect_alias_matches(seeded({24, 24, 24, 8, 8, 3}), X, DX, op);
}

TEST(ExactAliases, BatchNormYMayBeXInBothModes) {
  enum { X, Y, GAMMA, BETA, RUNNING_MEAN, RUNNING_VAR, BATCH_MEAN, BATCH_RSTD };
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "inference");
    expect_alias_matches(seeded({60, 60, 3, 3, 3, 3, 3, 3}), X, Y, [training](const Memory& m) {
      BatchNormOptions options;
      options.gamma = ConstView{m(GAMMA), kChannels};
      options.beta = ConstView{m(BETA), kChannels};
      options.training = training;
      std::optional<NormStats> batch_stats;
      if (training) batch_stats = NormStats{{m(BATCH_MEAN), kChannels}, {m(BATCH_RSTD), kChannels}};
      batch_norm({m(X), kBatchX}, {m(Y), kBatchX}, options,
                 RunningStats{{m(RUNNING_MEAN), kChannels}, {m(RUNNING_VAR), kChannels}},
                 batch_stats);
    });
  }
}

TEST(ExactAliases, BatchNormBackwardDxMayBeDyOrXInBothModes) {
  enum { DY, X, DX, GAMMA, DGAMMA, DBETA, RUNNING_MEAN, RUNNING_VAR };
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "inference");
    const auto op = [training](const Memory& m) {
      BatchNormOptions options;
      options.gamma = ConstView{m(GAMMA), kChannels};
      options.beta = ConstView{m(GAMMA), kChannels};  // only its presence matters here
      options.training = training;
      batch_norm_backward({m(DY), kBatchX}, {m(X), kBatchX},
                          BatchNormGrads{{m(DX), kBatchX},
                                         MutableView{m(DGAMMA), kChannels},
                                         MutableView{m(DBETA), kChannels}},
                          options,
                          RunningStats{{m(RUNNING_MEAN), kChannels}, {m(RUNNING_VAR), kChannels}});
    };
    expect_alias_matches(seeded({60, 60, 60, 3, 3, 3, 3, 3}), DY, DX, op);
    expect_alias_matches(seeded({60, 60, 60, 3, 3, 3, 3, 3}), X, DX, op);
  }
}

TEST(ExactAliases, DropoutYMayBeXAndDxMayBeDy) {
  enum { IN, OUT };
  const DropoutOptions options{0.3f, 42, 5};
  expect_alias_matches(seeded({24, 24}), IN, OUT, [&](const Memory& m) {
    dropout({m(IN), kX}, {m(OUT), kX}, options);
  });
  expect_alias_matches(seeded({24, 24}), IN, OUT, [&](const Memory& m) {
    dropout_backward({m(IN), kX}, {m(OUT), kX}, options);
  });
}

TEST(ExactAliases, AddNormPreHMayBeXOrR) {
  enum { X, R, H, Y, GAMMA, BETA, MEAN, RSTD };
  for (NormKind norm : {NormKind::layer_norm, NormKind::rms_norm}) {
    SCOPED_TRACE(norm == NormKind::layer_norm ? "layer_norm" : "rms_norm");
    const auto op = [norm](const Memory& m) {
      NormOptions options;
      options.norm = norm;
      options.gamma = ConstView{m(GAMMA), kDim};
      if (norm == NormKind::layer_norm) options.beta = ConstView{m(BETA), kDim};
      add_norm_pre({m(X), kX}, {m(R), kX}, kDim, {m(H), kX}, {m(Y), kX}, options,
                   NormStats{{m(MEAN), kRows}, {m(RSTD), kRows}});
    };
    expect_alias_matches(seeded({24, 24, 24, 24, 8, 8, 3, 3}), X, H, op);
    expect_alias_matches(seeded({24, 24, 24, 24, 8, 8, 3, 3}), R, H, op);
  }
}

TEST(ExactAliases, AddNormPreBackwardDhMayBeDyDhNextOrH) {
  enum { DY, DH_NEXT, H, DH, GAMMA, DGAMMA, DBETA, SAVED_RSTD, SAVED_MEAN };
  for (NormKind norm : {NormKind::layer_norm, NormKind::rms_norm}) {
    SCOPED_TRACE(norm == NormKind::layer_norm ? "layer_norm" : "rms_norm");
    const auto op = [norm](const Memory& m) {
      NormOptions options;
      options.norm = norm;
      options.gamma = ConstView{m(GAMMA), kDim};
      OptionalMutable dbeta;
      if (norm == NormKind::layer_norm) {
        options.beta = ConstView{m(GAMMA), kDim};  // only its presence matters here
        dbeta = MutableView{m(DBETA), kDim};
      }
      add_norm_pre_backward({m(DY), kX}, ConstView{m(DH_NEXT), kX}, {m(H), kX}, kDim,
                            AddNormPreGrads{{m(DH), kX}, MutableView{m(DGAMMA), kDim}, dbeta},
                            options, SavedStats{{m(SAVED_MEAN), kRows}, {m(SAVED_RSTD), kRows}});
    };
    for (size_t input : {DY, DH_NEXT, H}) {
      SCOPED_TRACE(input);
      expect_alias_matches(seeded({24, 24, 24, 24, 8, 8, 8, 3, 3}), input, DH, op);
    }
  }
}

TEST(ExactAliases, AddNormPostYMayBeXOrS) {
  enum { X, S, Y, GAMMA, BETA, MEAN, RSTD };
  const auto op = [](const Memory& m) {
    NormOptions options;
    options.gamma = ConstView{m(GAMMA), kDim};
    options.beta = ConstView{m(BETA), kDim};
    add_norm_post({m(X), kX}, {m(S), kX}, kDim, {m(Y), kX}, options, DropoutOptions{0.25f, 9, 0},
                  NormStats{{m(MEAN), kRows}, {m(RSTD), kRows}});
  };
  expect_alias_matches(seeded({24, 24, 24, 8, 8, 3, 3}), X, Y, op);
  expect_alias_matches(seeded({24, 24, 24, 8, 8, 3, 3}), S, Y, op);
}

TEST(ExactAliases, AddNormPostBackwardDxMayBeDyOrXAndDsMayBeS) {
  enum { DY, X, S, DX, DS, GAMMA, DGAMMA };
  const auto op = [](const Memory& m) {
    NormOptions options;
    options.gamma = ConstView{m(GAMMA), kDim};
    add_norm_post_backward(
        {m(DY), kX}, {m(X), kX}, {m(S), kX}, kDim,
        AddNormPostGrads{{m(DX), kX}, {m(DS), kX}, MutableView{m(DGAMMA), kDim}, {}}, options,
        DropoutOptions{0.25f, 9, 0});
  };
  expect_alias_matches(seeded({24, 24, 24, 24, 24, 8, 8}), DY, DX, op);
  expect_alias_matches(seeded({24, 24, 24, 24, 24, 8, 8}), X, DX, op);
  expect_alias_matches(seeded({24, 24, 24, 24, 24, 8, 8}), S, DS, op);
}

}  // namespace
}  // namespace addnorm
