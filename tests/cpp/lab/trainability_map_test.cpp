// trainability-map: the linear warmup's rates, a cell run alone gives exactly what the whole map
// gives it (what lets a cluster split a map), bad parameters refused, and the literature's claim
// at a seed budget that fits CI: at depth 6 and lr 3e-3 Post-LN trains in no seed with a constant
// rate and in some with a linear warmup, while Pre-LN trains in every seed without one, and so
// does Admin in most.
#include <gtest/gtest.h>

#include <string>

#include "addnorm/error.hpp"
#include "addnorm/lab/trainability_map.hpp"
#include "addnorm/nn/adam.hpp"

namespace addnorm::lab {
namespace {

TEST(LabTrainabilityMap, LinearWarmupRates) {
  nn::LrSchedule schedule;
  schedule.kind = nn::LrScheduleKind::linear_warmup;
  schedule.lr = 0.004;
  schedule.warmup_steps = 8;
  EXPECT_DOUBLE_EQ(schedule.rate(1), 0.0005);
  EXPECT_DOUBLE_EQ(schedule.rate(4), 0.002);
  EXPECT_DOUBLE_EQ(schedule.rate(8), 0.004);
  EXPECT_DOUBLE_EQ(schedule.rate(1000), 0.004);
  // The noam cell peaks at lr at its warmup step.
  const nn::LrSchedule noam = noam_schedule(0.004, 8, 32);
  EXPECT_NEAR(noam.rate(8), 0.004, 1e-15);
  EXPECT_LT(noam.rate(32), 0.004 * 0.51);
  nn::Parameter p("p", Shape{1});
  nn::AdamOptions options;
  options.schedule = schedule;
  options.schedule.warmup_steps = 0;
  EXPECT_THROW(nn::Adam({&p}, options), Error);
}

TEST(LabTrainabilityMap, ACellAloneIsTheSameCellOfTheMap) {
  const TrainabilityMapParams params = trainability_map_quick();
  const nlohmann::json whole = to_json(run_trainability_map(params));
  ASSERT_EQ(whole["cell_count"], 6);
  ASSERT_EQ(whole["cells"].size(), 6u);
  for (int k = 0; k < 6; ++k) {
    TrainabilityMapParams one = params;
    one.cell = k;
    const nlohmann::json alone = to_json(run_trainability_map(one));
    ASSERT_EQ(alone["cells"].size(), 1u);
    EXPECT_EQ(alone["cells"][0].dump(), whole["cells"][k].dump()) << "cell " << k;
    EXPECT_EQ(alone["cell_count"], 6);
  }
  // Cells vary in order placement, depth, lr, schedule: cell 4 is pre_norm's linear warmup.
  EXPECT_EQ(whole["cells"][4]["placement"], "pre_norm");
  EXPECT_EQ(whole["cells"][4]["schedule"], "linear");
}

TEST(LabTrainabilityMap, BadParametersAreRefused) {
  TrainabilityMapParams params = trainability_map_quick();
  params.cell = 6;
  try {
    validate(params);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("cell is 6, expected -1 or 0..5"), std::string::npos);
  }
  params = trainability_map_quick();
  params.warmup_steps = {41};
  EXPECT_THROW(validate(params), Error);
  params = trainability_map_quick();
  params.schedules = {};
  EXPECT_THROW(validate(params), Error);
  params = trainability_map_quick();
  params.depths = {2, 2};  // the same cell twice
  EXPECT_THROW(validate(params), Error);
  params = trainability_map_quick();
  params.lrs = {1e-3, 1e-3};
  EXPECT_THROW(validate(params), Error);
  // A warmup longer than the run matters only where a schedule warms up.
  params = trainability_map_quick();
  params.schedules = {MapSchedule::constant};
  params.warmup_steps = {500};
  EXPECT_NO_THROW(validate(params));
  EXPECT_THROW(parse_map_schedule("cosine"), Error);
  params = TrainabilityMapParams{};
  params.depths = {48};
  params.steps = 20000;
  params.seeds = 64;
  EXPECT_THROW(validate(params), Error);
}

TEST(LabTrainabilityMap, WarmupRescuesPostNormAtDepthSix) {
  TrainabilityMapParams params;
  params.placements = {nn::Placement::post_norm, nn::Placement::pre_norm, nn::Placement::admin};
  params.depths = {6};
  params.lrs = {3e-3};
  params.schedules = {MapSchedule::constant, MapSchedule::linear};
  params.seeds = 4;
  const TrainabilityMapResult result = run_trainability_map(params);
  ASSERT_EQ(result.cells.size(), 6u);
  const MapCell& post_constant = result.cells[0];
  const MapCell& post_warmup = result.cells[1];
  const MapCell& pre_constant = result.cells[2];
  ASSERT_EQ(post_constant.placement, nn::Placement::post_norm);
  ASSERT_EQ(post_warmup.schedule.kind, MapSchedule::linear);
  ASSERT_EQ(pre_constant.placement, nn::Placement::pre_norm);
  EXPECT_EQ(post_constant.trained, 0);
  EXPECT_GE(post_warmup.trained, 1);
  EXPECT_LT(post_warmup.final_loss.median, post_constant.final_loss.median);
  EXPECT_EQ(pre_constant.trained, 4);
  // Post-LN without warmup is stuck well above the target, not merely short of it.
  EXPECT_GT(post_constant.final_loss.low, 2.0 * params.target_loss);
  // Admin keeps post-norm's form and trains where it does not, without warmup.
  const MapCell& admin_constant = result.cells[4];
  ASSERT_EQ(admin_constant.placement, nn::Placement::admin);
  ASSERT_EQ(admin_constant.schedule.kind, MapSchedule::constant);
  EXPECT_GE(admin_constant.trained, 3);
}

}  // namespace
}  // namespace addnorm::lab
