// The torch-free half of checkpoints: where a resume continues after a change of world size, which
// checkpoints cannot continue a run, files that are not checkpoints, and killed writers' leftovers.
// (Real torch archives, damaged every way, are tests/chaos/checkpoint_test.cc's.)
#include "worker/train/checkpoint_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tests/common/test_dir.h"

namespace dlaunch::worker {
namespace {

namespace fs = std::filesystem;
using dlaunch::testing::TestDir;

CheckpointManifest Written(int64_t step, int64_t world, int64_t per_rank, int64_t spe,
                           int64_t total, int64_t steps_option = 0) {
  CheckpointManifest m;
  m.step = step;
  m.world_size = world;
  m.per_rank_batch = per_rank;
  m.global_batch = per_rank * world;
  m.steps_per_epoch = spe;
  m.total_steps = total;
  m.steps_option = steps_option;
  m.key = {"mlp", 64, 10, 256};
  return m;
}

TEST(MapResumeTest, TheSameWorldResumesAtTheCheckpointsStepAndSaysNothing) {
  const ResumePoint r = MapResume(Written(380, 4, 32, 468, 468), 4, 32, 468, 468, 0);
  EXPECT_EQ(r.step, 380);
  EXPECT_EQ(r.total_steps, 468);
  EXPECT_EQ(r.change, "");
}

TEST(MapResumeTest, HalfTheRanksKeepThePerRankBatchAndTakeTwiceTheSteps) {
  // 60000 samples: 4 ranks of 32 make 468 steps an epoch, 2 ranks 937.
  const ResumePoint r = MapResume(Written(380, 4, 32, 468, 468), 2, 32, 937, 937, 0);
  EXPECT_EQ(r.step, 760);  // 380 x 128 samples = 760 x 64
  EXPECT_EQ(r.total_steps, 937);
  EXPECT_EQ(r.change,
            "resumed step 380 of 468 with 2 ranks instead of 4; the per-rank batch is kept, so "
            "the global batch is now 64 (was 128); this run goes on at step 760 of 937");
}

TEST(MapResumeTest, LaterEpochsAndScaleUpCarryThePositionInSamples) {
  // Epoch 2, 100 steps in, on 2 ranks; on 4 ranks that is 50 steps into epoch 2 (rounded down).
  EXPECT_EQ(MapResume(Written(2 * 937 + 101, 2, 32, 937, 3 * 937), 4, 32, 468, 3 * 468, 0).step,
            2 * 468 + 50);
  // The position past the end of a shorter epoch: the next epoch's start.
  EXPECT_EQ(MapResume(Written(9, 1, 10, 10, 20), 2, 10, 4, 8, 0).step, 4);
}

TEST(MapResumeTest, AStepsRunKeepsTheSamplesItHasLeft) {
  // --steps 1000 on 4 ranks, at 400: 600 x 128 samples left = 1200 steps of 64.
  const ResumePoint r = MapResume(Written(400, 4, 32, 468, 1000, 1000), 2, 32, 937, 1000, 1000);
  EXPECT_EQ(r.step, 800);
  EXPECT_EQ(r.total_steps, 800 + 1200);
  // Resumed again on 2 ranks: the converted total stays; another --steps is the user's.
  EXPECT_EQ(MapResume(Written(900, 2, 32, 937, 2000, 1000), 2, 32, 937, 1000, 1000).total_steps,
            2000);
  EXPECT_EQ(MapResume(Written(900, 2, 32, 937, 2000, 1000), 2, 32, 937, 3000, 3000).total_steps,
            3000);
}

TEST(MapResumeTest, TheGlobalBatchKeptOnOtherRanksIsSaid) {
  const ResumePoint r = MapResume(Written(10, 4, 8, 100, 100), 2, 16, 100, 100, 0);
  EXPECT_EQ(r.step, 10);
  EXPECT_NE(r.change.find("the global batch 32 is kept (16 per rank instead of 8)"),
            std::string::npos)
      << r.change;
}

TEST(CheckpointMismatchTest, ModelShapeOrBothBatchesRefuse) {
  const CheckpointManifest m = Written(10, 4, 32, 100, 100);
  EXPECT_EQ(CheckpointMismatch(m, {"mlp", 64, 10, 256}, 32, 0), "");
  EXPECT_EQ(CheckpointMismatch(m, {"mlp", 64, 10, 256}, 64, 128), "");  // global kept
  EXPECT_EQ(CheckpointMismatch(m, {"mlp", 0, 0, 256}, 32, 64), "");     // unknowns pass
  EXPECT_NE(CheckpointMismatch(m, {"cnn", 64, 10, 0}, 32, 0).find("--model mlp"),
            std::string::npos);
  EXPECT_NE(CheckpointMismatch(m, {"mlp", 784, 10, 256}, 32, 0).find("784"), std::string::npos);
  EXPECT_NE(CheckpointMismatch(m, {"mlp", 64, 4, 256}, 32, 0).find("classes"), std::string::npos);
  EXPECT_NE(CheckpointMismatch(m, {"mlp", 64, 10, 128}, 32, 0).find("--hidden 256"),
            std::string::npos);
  EXPECT_NE(CheckpointMismatch(m, {"mlp", 64, 10, 256}, 16, 48).find("keep one of them"),
            std::string::npos);
}

std::string Refusal(const std::string& path) {
  try {
    ReadCheckpointFile(path);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ReadCheckpointFileTest, WhatIsNotACheckpointIsRefusedWithoutBlocking) {
  TestDir dir("ckfile");
  const std::string fifo = (dir.path() / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(Refusal(fifo).find("is not a regular file (a FIFO)"), std::string::npos);
  EXPECT_NE(Refusal(dir.path().string()).find("(a directory)"), std::string::npos);
  EXPECT_NE(Refusal("/dev/null").find("(a device)"), std::string::npos);
  const fs::path empty = dir.path() / "empty", text = dir.path() / "text";
  std::ofstream(empty).close();
  std::ofstream(text) << "not a zip at all";
  EXPECT_NE(Refusal(empty.string()).find("is empty"), std::string::npos);
  EXPECT_NE(Refusal(text.string()).find("not a torch archive"), std::string::npos);
  std::ofstream(text, std::ios::trunc) << std::string("PK\3\4") + std::string(100, 'x');
  EXPECT_NE(Refusal(text.string()).find("truncated"), std::string::npos);
  EXPECT_NE(Refusal((dir.path() / "missing").string()).find("No such file"), std::string::npos);
}

TEST(RemoveStaleCheckpointTempsTest, AKilledWritersFileGoesALiveOnesStays) {
  TestDir dir("cktmp");
  const fs::path d = dir.path();
  const pid_t child = ::fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // a pid that is surely gone
  const std::string dead = "checkpoint.pt.tmp." + std::to_string(child);
  const std::string live = "checkpoint.pt.tmp." + std::to_string(::getppid());
  const std::string own = "checkpoint.pt.tmp." + std::to_string(::getpid());
  for (const auto& n : {dead, live, own, std::string("checkpoint.pt.tmp.x"),
                        std::string("checkpoint.pt"), std::string("other.tmp.1")}) {
    std::ofstream(d / n) << std::string(1000, 'c');
  }
  EXPECT_EQ(RemoveStaleCheckpointTemps(d.string()), 3);
  EXPECT_FALSE(fs::exists(d / dead));
  EXPECT_FALSE(fs::exists(d / own));
  EXPECT_TRUE(fs::exists(d / live));
  EXPECT_TRUE(fs::exists(d / "checkpoint.pt"));
  EXPECT_TRUE(fs::exists(d / "other.tmp.1"));
  EXPECT_EQ(RemoveStaleCheckpointTemps((d / "absent").string()), 0);
}

TEST(WriteFileAtomicallyTest, WritesWholeAndLeavesNoTemporaryFile) {
  TestDir dir("ckwrite");
  const std::string path = (dir.path() / "checkpoint.pt").string();
  WriteFileAtomically(path, "first");
  WriteFileAtomically(path, std::string(100000, 'z'));
  EXPECT_EQ(fs::file_size(path), 100000u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
  EXPECT_THROW(WriteFileAtomically((dir.path() / "no" / "dir").string(), "x"), Error);
  EXPECT_EQ(fs::file_size(path), 100000u);
}

}  // namespace
}  // namespace dlaunch::worker
