// `dlaunch --nproc 2 --max-restarts 1 train` as a user runs it: real launcher, real rank
// processes. An injected failure on the first attempt must be followed by a restart that resumes
// from the checkpoint and completes the run; bad flags must exit 2 before any rank starts.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "launcher/supervision/placement.h"
#include "tests/common/test_dir.h"
#include "tests/train/train_test_util.h"

namespace {

namespace fs = std::filesystem;
using dlaunch::testing::TestDir;

struct Result {
  int exit_code = -1;
  std::string output;
};

// Runs a shell command line, capturing stdout and stderr. Blocks until it exits (ctest's timeout
// bounds a hang).
Result RunShell(const std::string& command) {
  Result r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// The single run directory the launcher created under `log_dir`.
fs::path RunDir(const std::string& log_dir) {
  for (const auto& e : fs::directory_iterator(log_dir)) {
    if (e.is_directory()) return e.path();
  }
  return {};
}

const std::string kTrain =
    " train --data synthetic --model mlp --features 16 --hidden 32 --classes 4 --samples 512 "
    "--batch-size 16"
    " --heartbeat-interval 0.05";

TEST(TrainLauncherTest, RestartAfterInjectedFailureResumesAndCompletes) {
  TestDir dir("train-launch");
  const std::string log_dir = dir.string() + "/logs";
  Result r = RunShell(std::string(DLAUNCH_BIN) + " --nproc 2 --max-restarts 1 --log-dir " +
                      log_dir + kTrain + " --steps 24 --checkpoint-dir " + dir.string() +
                      "/ckpt --checkpoint-every 8 --fail-at-step 13");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("done: 24 steps"), std::string::npos) << r.output;
  fs::path run = RunDir(log_dir);
  ASSERT_FALSE(run.empty());
  // The failure at step 13 leaves the step-8 checkpoint as the latest: the restart starts there.
  std::ifstream events(run / "rank0" / "events.jsonl");
  std::string line;
  bool resumed_at_8 = false;
  while (std::getline(events, line)) {
    auto e = nlohmann::json::parse(line);
    if (e["kind"] == "resumed") resumed_at_8 = e["step"] == 8;
  }
  EXPECT_TRUE(resumed_at_8);
  auto summary = nlohmann::json::parse(std::ifstream(run / "summary.json"));
  EXPECT_EQ(summary["exit_code"], 0) << summary.dump();
}

TEST(TrainLauncherTest, BadFlagExitsTwoBeforeSpawning) {
  TestDir dir("train-launch");
  Result r = RunShell(std::string(DLAUNCH_BIN) + " --nproc 2 --log-dir " + dir.string() +
                      "/logs train --model transformer");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--model"), std::string::npos) << r.output;
}

TEST(TrainLauncherTest, OutOfMemoryRankIsNamedInTheRunDirectory) {
  TestDir dir("train-launch");
  const std::string log_dir = dir.string() + "/logs";
  // A rank's address space is limited by the shell's ulimit, inherited through the launcher; the
  // first convolution's output alone (512 x 16 x 256 x 256 floats) is 2 GiB.
  Result r = RunShell("ulimit -v 3000000; " + std::string(DLAUNCH_BIN) + " --nproc 1 --log-dir " +
                      log_dir +
                      " train --data synthetic --model cnn --image-size 256 --samples 512 "
                      "--batch-size 512 --steps 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("OOM on rank 0"), std::string::npos) << r.output;
  fs::path run = RunDir(log_dir);
  ASSERT_FALSE(run.empty());
  auto error = nlohmann::json::parse(std::ifstream(run / "rank0" / "error.json"));
  EXPECT_EQ(error["kind"], "oom");
}

bool HasRunDir(const std::string& log_dir) {
  return fs::exists(log_dir) && !RunDir(log_dir).empty();
}

TEST(TrainLauncherTest, HelpIsPrintedOnceWithoutStartingRanks) {
  TestDir dir("train-launch");
  const std::string log_dir = dir.string() + "/logs";
  Result r =
      RunShell(std::string(DLAUNCH_BIN) + " --nproc 3 --log-dir " + log_dir + " train --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  size_t first = r.output.find("usage: dlaunch --nproc N train");
  ASSERT_NE(first, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("usage: dlaunch --nproc N train", first + 1), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--lr-schedule"), std::string::npos);
  EXPECT_FALSE(HasRunDir(log_dir)) << "a run directory was made for --help";
}

// Every bad option or data file is refused by the launcher itself: exit 2, one line naming the
// problem, no rank started and no run directory made.
TEST(TrainLauncherTest, BadOptionsAndDataFilesExitTwoBeforeAnyRank) {
  TestDir dir("train-launch");
  const std::string bad_idx = dir.string() + "/idx";
  fs::create_directories(bad_idx);
  dlaunch::worker::testing::WriteTinyIdxDataSet(bad_idx, 20, 10);
  std::string magic = dlaunch::worker::testing::IdxBytes({10, 12, 12}, std::vector<uint8_t>(1440));
  magic[1] = 7;
  dlaunch::worker::testing::WriteFile(bad_idx + "/t10k-images-idx3-ubyte.gz", magic);
  const std::string csv = dir.string() + "/points.csv";
  std::ofstream(csv) << "1,2,0\n1,oops,1\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--lr inf", "--lr"},
      {"--lr-schedule linear", "--lr-schedule"},
      {"--amp fp16", "--amp fp16"},
      {"--data-dir " + bad_idx, bad_idx + "/t10k-images-idx3-ubyte.gz: bad magic"},
      {"--data-dir " + dir.string() + "/nothing", "nothing has neither train-images-idx3-ubyte.gz"},
      {"--data " + csv, csv + ":2:"},
      {"--data " + dir.string() + "/missing.csv", "missing.csv"},
      {"--epochs -1", "--epochs"},
  };
  for (const auto& [flags, expect] : cases) {
    const std::string log_dir = dir.string() + "/logs";
    Result r =
        RunShell(std::string(DLAUNCH_BIN) + " --nproc 2 --log-dir " + log_dir + " train " + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(expect), std::string::npos) << flags << "\n" << r.output;
    EXPECT_EQ(r.output.find("[rank"), std::string::npos) << flags << "\n" << r.output;
    EXPECT_FALSE(HasRunDir(log_dir)) << flags;
  }
}

TEST(TrainLauncherTest, NanLossStopsTheJobNamingStepAndRank) {
  TestDir dir("train-launch");
  const std::string log_dir = dir.string() + "/logs";
  // A learning rate this large drives the loss to inf/NaN within a few steps.
  Result r = RunShell(std::string(DLAUNCH_BIN) + " --nproc 2 --log-dir " + log_dir + kTrain +
                      " --steps 500 --lr 1e12 --warmup-steps 0 --momentum 0 --no-preflight");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m,
                                std::regex("loss became (NaN|inf) at step ([0-9]+) on rank [01]")))
      << r.output;
  EXPECT_LT(std::stoi(m[2]), 500);
  fs::path run = RunDir(log_dir);
  ASSERT_FALSE(run.empty());
  bool named = false;
  for (int rank = 0; rank < 2; ++rank) {
    if (!fs::exists(run / ("rank" + std::to_string(rank)) / "error.json")) continue;
    auto error =
        nlohmann::json::parse(std::ifstream(run / ("rank" + std::to_string(rank)) / "error.json"));
    named |= error["kind"] == "nan";
  }
  EXPECT_TRUE(named);
}

TEST(TrainLauncherTest, EpochLinesReportTestAccuracy) {
  TestDir dir("train-launch");
  dlaunch::worker::testing::WriteTinyIdxDataSet(dir.string(), 320, 101);
  Result r = RunShell(std::string(DLAUNCH_BIN) + " --nproc 2 --log-dir " + dir.string() +
                      "/logs train --data-dir " + dir.string() +
                      " --epochs 2 --batch-size 16 --warmup-steps 5 --no-preflight");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Each rank's intra-op threads are the launcher's OMP_NUM_THREADS: its share of the cores.
  dlaunch::launcher::PlacementRequest two;
  two.nproc = 2;
  const int threads =
      dlaunch::launcher::PlanPlacement(two, dlaunch::launcher::ReadTopology())[0].threads;
  EXPECT_NE(r.output.find("on 2 ranks (" + std::to_string(threads) + " CPU thread" +
                          (threads == 1 ? "" : "s") + " each)"),
            std::string::npos)
      << r.output;
  for (const char* epoch : {"1/2", "2/2"}) {
    EXPECT_TRUE(std::regex_search(
        r.output, std::regex(std::string("epoch ") + epoch +
                             ": train loss [0-9.]+, test loss [0-9.]+, test accuracy "
                             "[0-9]+\\.[0-9]{2}% \\(101 images\\), [0-9.]+ s")))
        << r.output;
  }
}

// SIGUSR1 to a training rank: a checkpoint now, and training goes on (Slurm's --signal=USR1@T).
TEST(TrainLauncherTest, Sigusr1WritesACheckpointAndTrainingGoesOn) {
  TestDir dir("train-launch");
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  const std::string ckpt = dir.string() + "/ckpt";
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(out[1], 2);
    close(out[0]);
    // A world of one without a launcher: the worker runs the trainer directly.
    execl(DLAUNCH_WORKER_BIN, DLAUNCH_WORKER_BIN, "train", "--data", "synthetic", "--model", "mlp",
          "--steps", "200000", "--heartbeat-interval", "0.05", "--checkpoint-dir", ckpt.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  FILE* f = fdopen(out[0], "r");
  std::string output;
  char line[4096];
  enum { kWaitStep, kWaitCheckpoint, kWaitLaterStep, kDone } state = kWaitStep;
  while (state != kDone && fgets(line, sizeof line, f)) {
    output += line;
    std::string l = line;
    if (state == kWaitStep && l.find("[train] step ") != std::string::npos) {
      ASSERT_EQ(kill(pid, SIGUSR1), 0);
      state = kWaitCheckpoint;
    } else if (state == kWaitCheckpoint &&
               l.find("SIGUSR1: checkpoint at step") != std::string::npos) {
      state = kWaitLaterStep;
    } else if (state == kWaitLaterStep && l.find("[train] step ") != std::string::npos) {
      state = kDone;  // still training after the checkpoint
    }
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  fclose(f);
  EXPECT_EQ(state, kDone) << output;
  EXPECT_TRUE(fs::exists(ckpt + "/checkpoint.pt")) << output;
}

}  // namespace
