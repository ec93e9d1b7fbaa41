// `dlaunch --nproc 2 --max-restarts 1 train` as a user runs it: real launcher, real rank
// processes. An injected failure on the first attempt must be followed by a restart that resumes
// from the checkpoint and completes the run; bad flags must exit 2 before any rank starts.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

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

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/dlaunch-train-launch-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The single run directory the launcher created under `log_dir`.
fs::path RunDir(const std::string& log_dir) {
  for (const auto& e : fs::directory_iterator(log_dir)) {
    if (e.is_directory()) return e.path();
  }
  return {};
}

const std::string kTrain =
    " train --model mlp --features 16 --hidden 32 --classes 4 --samples 512 --batch-size 16"
    " --heartbeat-interval 0.05";

TEST(TrainLauncherTest, RestartAfterInjectedFailureResumesAndCompletes) {
  TempDir dir;
  const std::string log_dir = dir.path() + "/logs";
  Result r = RunShell(std::string(DLAUNCH_BIN) + " --nproc 2 --max-restarts 1 --log-dir " +
                      log_dir + kTrain + " --steps 24 --checkpoint-dir " + dir.path() +
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
  TempDir dir;
  Result r = RunShell(std::string(DLAUNCH_BIN) + " --nproc 2 --log-dir " + dir.path() +
                      "/logs train --model transformer");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--model"), std::string::npos) << r.output;
}

TEST(TrainLauncherTest, OutOfMemoryRankIsNamedInTheRunDirectory) {
  TempDir dir;
  const std::string log_dir = dir.path() + "/logs";
  // A rank's address space is limited by the shell's ulimit, inherited through the launcher; the
  // first convolution's output alone (512 x 16 x 256 x 256 floats) is 2 GiB.
  Result r = RunShell(
      "ulimit -v 3000000; " + std::string(DLAUNCH_BIN) + " --nproc 1 --log-dir " + log_dir +
      " train --model cnn --image-size 256 --samples 512 --batch-size 512 --steps 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("OOM on rank 0"), std::string::npos) << r.output;
  fs::path run = RunDir(log_dir);
  ASSERT_FALSE(run.empty());
  auto error = nlohmann::json::parse(std::ifstream(run / "rank0" / "error.json"));
  EXPECT_EQ(error["kind"], "oom");
}

}  // namespace
