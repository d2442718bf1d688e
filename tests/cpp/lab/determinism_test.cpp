// The same seed gives bitwise-identical results for 1 and 2 OpenMP threads: every experiment's
// JSON (NaN included, as text) is compared whole.
#include <gtest/gtest.h>
#include <omp.h>

#include <functional>
#include <string>

#include "addnorm/lab/activation_growth.hpp"
#include "addnorm/lab/batch_vs_layer.hpp"
#include "addnorm/lab/depth_training.hpp"
#include "addnorm/lab/gradient_flow.hpp"
#include "addnorm/lab/init_gradients.hpp"
#include "addnorm/lab/norm_steps.hpp"
#include "addnorm/lab/rank_collapse.hpp"
#include "addnorm/lab/trainability_map.hpp"
#include "addnorm/lab/update_size.hpp"

namespace addnorm::lab {
namespace {

std::string with_threads(int threads, const std::function<nlohmann::json()>& run) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  const std::string text = run().dump();
  omp_set_num_threads(before);
  return text;
}

void expect_same_for_1_and_2_threads(const std::function<nlohmann::json()>& run) {
  EXPECT_EQ(with_threads(1, run), with_threads(2, run));
}

TEST(LabDeterminism, SmallExperiments) {
  expect_same_for_1_and_2_threads([] { return to_json(run_gradient_flow({})); });
  expect_same_for_1_and_2_threads([] { return to_json(run_activation_growth({})); });
  expect_same_for_1_and_2_threads([] { return to_json(run_norm_steps({})); });
  expect_same_for_1_and_2_threads([] { return to_json(run_batch_vs_layer({})); });
}

TEST(LabDeterminism, TransformerExperiments) {
  expect_same_for_1_and_2_threads(
      [] { return to_json(run_init_gradients(init_gradients_quick())); });
  expect_same_for_1_and_2_threads([] { return to_json(run_update_size(update_size_quick())); });
  expect_same_for_1_and_2_threads([] { return to_json(run_rank_collapse(rank_collapse_quick())); });
  expect_same_for_1_and_2_threads(
      [] { return to_json(run_trainability_map(trainability_map_quick())); });
  expect_same_for_1_and_2_threads([] {
    DepthTrainingParams params = depth_training_quick();
    params.steps = 20;
    params.warmup_steps = 5;
    params.depths = {2};
    return to_json(run_depth_training(params));
  });
}

TEST(LabDeterminism, DifferentSeedsDiffer) {
  GradientFlowParams params;
  params.seed = 43;
  EXPECT_NE(to_json(run_gradient_flow(params)).dump(), to_json(run_gradient_flow({})).dump());
}

}  // namespace
}  // namespace addnorm::lab
