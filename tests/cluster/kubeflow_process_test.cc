// A launcher configured by Kubeflow's PET_* variables alone, and the command line winning over
// them, through a real dlaunch and its ranks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "launcher/rendezvous/ports.h"
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

// Rank `rank`'s MASTER_PORT, from the "env" lines test_rank wrote to its stdout.log.
std::string MasterPort(const fs::path& run_dir, int rank) {
  std::ifstream in(run_dir / ("rank" + std::to_string(rank)) / "stdout.log");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MASTER_PORT=", 0) == 0) return line.substr(12);
  }
  return "";
}

// Two pods of a PyTorchJob: the coordinator takes PET_MASTER_PORT, so the ranks' MASTER_PORT is
// another port of node 0, the same on both nodes, and node 0 says why (#28). A PyTorchJob of one
// replica is one node: its ranks get PET_MASTER_PORT itself.
TEST_F(KubeflowProcessTest, MasterPortOfTheRanksAndWhyItDiffers) {
  const std::string port = std::to_string(launcher::PickFreePort("127.0.0.1"));
  auto pod = [&](int node) {
    return std::make_unique<Launched>(
        std::vector<std::string>{DLAUNCH_BIN, "--log-dir",
                                 (dir_ / ("n" + std::to_string(node))).string(), TEST_RANK_BIN,
                                 "env"},
        std::vector<std::string>{"PET_NNODES=2", "PET_NODE_RANK=" + std::to_string(node),
                                 "PET_NPROC_PER_NODE=1", "PET_MASTER_ADDR=127.0.0.1",
                                 "PET_MASTER_PORT=" + port, "PET_RDZV_ID=kf2",
                                 "DLAUNCH_JOB_TOKEN=kubeflow-two-pods-token-0123456789"});
  };
  auto n0 = pod(0);
  auto n1 = pod(1);
  ASSERT_EQ(n1->Wait(seconds(60)), 0) << n1->err_text();
  ASSERT_EQ(n0->Wait(seconds(60)), 0) << n0->err_text();
  const std::string p0 = MasterPort(dir_ / "n0" / "kf2", 0);
  EXPECT_FALSE(p0.empty());
  EXPECT_NE(p0, port);
  EXPECT_EQ(MasterPort(dir_ / "n1" / "kf2", 1), p0);
  EXPECT_NE(n0->err_text().find("dlaunch: Kubeflow: dlaunch's coordinator listens on the "
                                "rendezvous endpoint 127.0.0.1:" +
                                port + " (PET_MASTER_PORT)"),
            std::string::npos)
      << n0->err_text();

  Launched one({DLAUNCH_BIN, "--log-dir", (dir_ / "one").string(), TEST_RANK_BIN, "env"},
               {"PET_NNODES=1", "PET_NODE_RANK=0", "PET_MASTER_ADDR=127.0.0.1",
                "PET_MASTER_PORT=" + port, "PET_RDZV_ID=kf1"});
  ASSERT_EQ(one.Wait(seconds(60)), 0) << one.err_text();
  EXPECT_EQ(MasterPort(dir_ / "one" / "kf1", 0), port);
}

}  // namespace
}  // namespace dlaunch
