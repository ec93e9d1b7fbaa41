// GradScaler's arithmetic on CPU float tensors, one process: scaling, unscaling, skipping a step on
// inf/NaN, backing off and growing the scale as torch.cuda.amp.GradScaler does. The cross-rank
// skip is in ddp_test.cc (real Gloo).
#include "ddp/grad_scaler.h"

#include <gtest/gtest.h>

#include <limits>

namespace dlaunch::ddp {
namespace {

GradScalerOptions Options(int64_t growth_interval) {
  GradScalerOptions o;
  o.init_scale = 1024;
  o.growth_interval = growth_interval;
  return o;
}

TEST(GradScalerTest, ScalesTheLossAndUnscalesTheGradients) {
  GradScaler scaler(Options(2000), torch::kCPU, nullptr);
  EXPECT_FLOAT_EQ(scaler.Scale(torch::tensor({0.5f})).item<float>(), 512.0f);
  std::vector<torch::Tensor> grads = {torch::full({3}, 2048.0f), torch::full({2, 2}, -512.0f)};
  EXPECT_TRUE(scaler.Unscale(grads));
  EXPECT_TRUE(grads[0].eq(2.0f).all().item<bool>());
  EXPECT_TRUE(grads[1].eq(-0.5f).all().item<bool>());
  scaler.Update();
  EXPECT_EQ(scaler.scale(), 1024);
  EXPECT_EQ(scaler.growth_tracker(), 1);
}

TEST(GradScalerTest, InfOrNanSkipsTheStepAndHalvesTheScale) {
  GradScaler scaler(Options(2000), torch::kCPU, nullptr);
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                    -std::numeric_limits<float>::infinity()}) {
    const double before = scaler.scale();
    std::vector<torch::Tensor> grads = {torch::ones({4}), torch::tensor({1.0f, bad})};
    EXPECT_FALSE(scaler.Unscale(grads)) << bad;
    scaler.Update();
    EXPECT_EQ(scaler.scale(), before / 2) << bad;
    EXPECT_EQ(scaler.growth_tracker(), 0);
  }
  EXPECT_EQ(scaler.skipped_steps(), 3);
}

TEST(GradScalerTest, GrowsAfterGrowthIntervalGoodStepsInARow) {
  GradScaler scaler(Options(3), torch::kCPU, nullptr);
  auto step = [&](float g) {
    std::vector<torch::Tensor> grads = {torch::full({2}, g)};
    bool ok = scaler.Unscale(grads);
    scaler.Update();
    return ok;
  };
  EXPECT_TRUE(step(1));
  EXPECT_TRUE(step(1));
  EXPECT_EQ(scaler.scale(), 1024);
  EXPECT_TRUE(step(1));
  EXPECT_EQ(scaler.scale(), 2048);  // the third good step in a row
  EXPECT_EQ(scaler.growth_tracker(), 0);
  // An overflow resets the count: two good steps after it do not grow the scale.
  EXPECT_FALSE(step(std::numeric_limits<float>::infinity()));
  EXPECT_EQ(scaler.scale(), 1024);
  EXPECT_TRUE(step(1));
  EXPECT_TRUE(step(1));
  EXPECT_EQ(scaler.scale(), 1024);
  EXPECT_TRUE(step(1));
  EXPECT_EQ(scaler.scale(), 2048);
}

TEST(GradScalerTest, DoesNotGrowPastFloatRange) {
  GradScalerOptions o = Options(1);
  o.init_scale = 3e38;
  GradScaler scaler(o, torch::kCPU, nullptr);
  std::vector<torch::Tensor> grads = {torch::ones({1})};
  EXPECT_TRUE(scaler.Unscale(grads));
  scaler.Update();
  EXPECT_EQ(scaler.scale(), 3e38);
}

}  // namespace
}  // namespace dlaunch::ddp
