// The built-in `train` under the real launcher: a rank slowed by 150 ms per step is named a
// straggler in summary.json within 50 steps, and `dlaunch diagnose` of the run carries the verdict;
// a healthy run names none; bad --straggler-* values are refused before any rank starts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "process_harness.h"
#include "tests/common/test_dir.h"

namespace dlaunch::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
using Args = std::vector<std::string>;

class StragglerProcessTest : public ::testing::Test {
 protected:
  // dlaunch --nproc 2 ... train on synthetic data, `steps` steps: a small MLP, or the CNN
  // (~25 ms steps, so that a short healthy run still spans several heartbeats and is judged).
  Args Train(int steps, int slow_rank, bool cnn = false) {
    Args argv = {DLAUNCH_BIN, "--log-dir", (dir_ / "logs").string(), "--run-id", "run"};
    std::istringstream words(
        std::string("--skip-doctor --nproc 2 train --data synthetic --no-preflight --quiet "
                    "--slow-ms 150 ") +
        (cnn ? "--model cnn --batch-size 32"
             : "--model mlp --features 16 --hidden 32 --classes 4 --samples 512 --batch-size 16"));
    for (std::string w; words >> w;) argv.push_back(w);
    argv.insert(argv.end(),
                {"--steps", std::to_string(steps), "--slow-rank", std::to_string(slow_rank)});
    return argv;
  }
  fs::path Run() const { return dir_ / "logs" / "run"; }
  nlohmann::json Summary() const {
    std::ifstream in(Run() / "summary.json");
    return nlohmann::json::parse(in);
  }

  const TestDir test_dir_{"straggler"};
  const fs::path dir_ = test_dir_.path();
};

TEST_F(StragglerProcessTest, SlowTrainRankIsNamedWithin50Steps) {
  Launched job(Train(60, 1));
  ASSERT_EQ(job.Wait(seconds(90)), 0) << job.err_text();
  const nlohmann::json summary = Summary();
  ASSERT_TRUE(summary.contains("stragglers")) << summary.dump(1);
  ASSERT_EQ(summary["stragglers"].size(), 1u) << summary["stragglers"].dump(1);
  const nlohmann::json& v = summary["stragglers"][0];
  EXPECT_EQ(v["rank"], 1);
  EXPECT_GE(v["relative"].get<double>(), 1.2);
  EXPECT_GE(v["start_step"].get<int64_t>(), 0);
  EXPECT_LE(v["start_step"].get<int64_t>(), 50) << "named within 50 steps";
  EXPECT_GE(v["last_share"].get<double>(), 0.5) << "it enters most collectives last";
  EXPECT_EQ(v["text"].get<std::string>().rfind("straggler: rank 1 (host ", 0), 0u);
  int said = 0;
  for (const std::string& l : job.err_lines) {
    said += l.rfind("dlaunch: straggler: rank 1 (host ", 0) == 0;
  }
  EXPECT_EQ(said, 1) << "said once when it starts\n" << job.err_text();

  // The offline diagnosis of the same run carries it too.
  Launched diagnose({DLAUNCH_BIN, "diagnose", "--json", Run().string()});
  ASSERT_EQ(diagnose.Wait(seconds(30)), 0) << diagnose.err_text();
  std::string out;
  for (const std::string& l : diagnose.out_lines) out += l + "\n";
  const nlohmann::json diagnosis = nlohmann::json::parse(out);
  ASSERT_EQ(diagnosis["stragglers"].size(), 1u) << diagnosis.dump(1);
  EXPECT_EQ(diagnosis["stragglers"][0]["rank"], 1);
  EXPECT_EQ(diagnosis["stragglers"][0]["start_step"], v["start_step"]);
}

TEST_F(StragglerProcessTest, HealthyTrainRunNamesNone) {
  Launched job(Train(300, -1, /*cnn=*/true));
  ASSERT_EQ(job.Wait(seconds(90)), 0) << job.err_text();
  const nlohmann::json summary = Summary();
  EXPECT_FALSE(summary.contains("stragglers")) << summary.dump(1);
  for (const std::string& l : job.err_lines) {
    EXPECT_EQ(l.find("dlaunch: straggler"), std::string::npos) << l;
  }
}

TEST_F(StragglerProcessTest, BadSettingsExitTwoBeforeAnyRank) {
  const std::vector<std::pair<Args, std::string>> cases = {
      {{"--straggler-threshold", "-1"}, "--straggler-threshold must be a factor in (1, 100]"},
      {{"--straggler-threshold", "1"}, "--straggler-threshold must be a factor in (1, 100]"},
      {{"--straggler-threshold", "0.5"}, "--straggler-threshold must be a factor in (1, 100]"},
      {{"--straggler-threshold", "101"}, "--straggler-threshold must be a factor in (1, 100]"},
      {{"--straggler-threshold", "nan"}, "--straggler-threshold must be a factor in (1, 100]"},
      {{"--straggler-threshold", "inf"}, "--straggler-threshold must be a factor in (1, 100]"},
      {{"--straggler-threshold", "abc"}, "--straggler-threshold"},
      {{"--straggler-threshold", ""}, "--straggler-threshold"},
      {{"--straggler-threshold=1.2x"}, "--straggler-threshold"},
      {{"--straggler-window", "0"}, "--straggler-window must be a number of steps in [20, 100000]"},
      {{"--straggler-window", "-5"}, "--straggler-window"},
      {{"--straggler-window", "19"},
       "--straggler-window must be a number of steps in [20, 100000]"},
      {{"--straggler-window", "100001"}, "--straggler-window must be a number of steps"},
      {{"--straggler-window", "1.5"}, "--straggler-window"},
      {{"--straggler-window", "abc"}, "--straggler-window"},
      {{"--straggler-window", "99999999999999999999"}, "--straggler-window"},
  };
  const fs::path logs = dir_ / "bad-logs";
  for (const auto& [flags, message] : cases) {
    Args argv = {DLAUNCH_BIN, "--log-dir", logs.string(), "--nproc", "2"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("true");
    Launched l(argv);
    const std::string shown = flags[0] + (flags.size() > 1 ? " '" + flags[1] + "'" : "");
    EXPECT_EQ(l.Wait(seconds(10)), 2) << shown << "\n" << l.err_text();
    // One line saying what is wrong; at most the launcher's usual pointer to --help after it.
    ASSERT_FALSE(l.err_lines.empty()) << shown;
    EXPECT_EQ(l.err_lines[0].rfind("dlaunch: ", 0), 0u) << l.err_lines[0];
    for (size_t i = 1; i < l.err_lines.size(); ++i) {
      EXPECT_EQ(l.err_lines[i], "(see dlaunch --help)") << shown << "\n" << l.err_text();
    }
    EXPECT_NE(l.err_lines[0].find(message), std::string::npos) << shown << ": " << l.err_lines[0];
    EXPECT_TRUE(l.out_lines.empty()) << shown;
  }
  // Nothing ran, so no run directory was made.
  EXPECT_FALSE(fs::exists(logs));
  // 0 turns detection off and is no error.
  Launched off({DLAUNCH_BIN, "--log-dir", logs.string(), "--straggler-threshold", "0", "true"});
  EXPECT_EQ(off.Wait(seconds(30)), 0) << off.err_text();
}

}  // namespace
}  // namespace dlaunch::testing
