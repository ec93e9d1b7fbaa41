// A launcher configured by Kubeflow's PET_* variables alone, and the command line winning over
// them, through a real dlaunch and its ranks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "process_harness.h"
#include "tests/common/test_dir.h"

namespace dlaunch {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
using testing::Launched;

class KubeflowProcessTest : public ::testing::Test {
 protected:
  nlohmann::json Summary(const std::string& run_id) {
    std::ifstream in(dir_ / run_id / "summary.json");
    return nlohmann::json::parse(in, nullptr, false);
  }
  const testing::TestDir test_dir_{"kf"};
  const fs::path dir_ = test_dir_.path();
};

TEST_F(KubeflowProcessTest, RanksRunIdLogDirAndRestartsFromPetVariables) {
  Launched l({DLAUNCH_BIN, TEST_RANK_BIN, "exit-after", "1", "7"},
             {"PET_NPROC_PER_NODE=3", "PET_RDZV_ID=kf-job", "PET_LOG_DIR=" + dir_.string(),
              "PET_MAX_RESTARTS=1"});
  EXPECT_EQ(l.Wait(seconds(60)), 1) << l.err_text();
  auto summary = Summary("kf-job");
  EXPECT_EQ(summary["ranks"].size(), 3u) << summary.dump();
  EXPECT_EQ(summary["restarts"], 1) << summary.dump();
}

TEST_F(KubeflowProcessTest, TheCommandLineWins) {
  Launched l({DLAUNCH_BIN, "--nproc", "2", "--max-restarts", "0", TEST_RANK_BIN, "register"},
             {"PET_NPROC_PER_NODE=3", "PET_RDZV_ID=kf-job", "PET_LOG_DIR=" + dir_.string(),
              "PET_MAX_RESTARTS=4"});
  ASSERT_EQ(l.Wait(seconds(60)), 0) << l.err_text();
  auto summary = Summary("kf-job");
  EXPECT_EQ(summary["ranks"].size(), 2u) << summary.dump();
  EXPECT_EQ(summary["restarts"], 0);
}

TEST_F(KubeflowProcessTest, ABadVariableIsAUsageErrorNamingIt) {
  Launched l({DLAUNCH_BIN, TEST_RANK_BIN, "register"}, {"PET_NNODES=two"});
  EXPECT_EQ(l.Wait(seconds(30)), 2);
  EXPECT_NE(l.err_text().find("PET_NNODES"), std::string::npos) << l.err_text();
}

}  // namespace
}  // namespace dlaunch
