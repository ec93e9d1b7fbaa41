// Signals while launchers wait in the node rendezvous, with real launchers on loopback: node 0
// waiting for nodes, a node waiting for node 0, an elastic last call, and a late node whose job
// ended without it. Every wait ends on the signal (exit 128+n, as torchrun's) and leaves a
// summary; a late node takes the job's exit code.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "launchers_fixture.h"

namespace dlaunch::testing {
namespace {

// Join waits far longer than any bound below: a wait that ends does so because of the signal.
const std::vector<std::string> kLongJoin = {"--rdzv-conf", "join_timeout=300"};

// Reads `l`'s output until its stderr has `what`, at most 60 s.
bool WaitForErr(Launched* l, const std::string& what) {
  return l->WaitFor(
      [&](const std::vector<std::string>&) {
        return l->err_text().find(what) != std::string::npos;
      },
      seconds(60));
}

class RendezvousSignalTest : public ElasticJobTest {
 protected:
  // Node 0 and node 1 of 2:3 nodes, both in the round that waits out the last call for a third.
  void StartInTheLastCall() {
    const std::vector<std::string> conf = {"--rdzv-conf", "join_timeout=300,last_call_timeout=300"};
    n0_ = Start("n0", "2:3", "echo started", {"--node-rank", "0", conf[0], conf[1]});
    ASSERT_TRUE(WaitForErr(n0_.get(), "waiting for 2 to 3 nodes")) << n0_->err_text();
    n1_ = Start("n1", "2:3", "echo started", {"--node-rank", "1", conf[0], conf[1]});
    ASSERT_TRUE(WaitForErr(n0_.get(), "last call for more")) << n0_->err_text();
  }
  std::unique_ptr<Launched> n0_, n1_;
};

TEST_F(RendezvousSignalTest, NodeZeroWaitingForNodesEndsOnSigtermWithASummary) {
  auto n0 = Start("n0", "2", "true", {"--node-rank", "0", "--rdzv-conf", "join_timeout=300"});
  ASSERT_TRUE(WaitForErr(n0.get(), "waiting for 2 nodes")) << n0->err_text();
  ASSERT_EQ(::kill(n0->pid(), SIGTERM), 0);
  EXPECT_EQ(n0->Wait(seconds(15)), 143) << n0->err_text();
  EXPECT_TRUE(Has(n0->err_text(), "interrupted by SIGTERM")) << n0->err_text();
  const auto summary = Json(RunDir("n0") / "summary.json");
  EXPECT_EQ(summary["exit_code"], 143) << summary.dump();
  EXPECT_TRUE(Has(summary.value("error", ""), "SIGTERM")) << summary.dump();
}

TEST_F(RendezvousSignalTest, ANodeWaitingForNodeZeroEndsOnSigintWithASummary) {
  // No node 0 at all: the join waits for the coordinator's port to answer.
  auto n1 = Start("n1", "2", "true", {"--node-rank", "1", "--rdzv-conf", "join_timeout=300"});
  ASSERT_TRUE(WaitForErr(n1.get(), "joining")) << n1->err_text();
  ASSERT_EQ(::kill(n1->pid(), SIGINT), 0);
  EXPECT_EQ(n1->Wait(seconds(15)), 130) << n1->err_text();
  EXPECT_TRUE(Has(n1->err_text(), "interrupted by SIGINT")) << n1->err_text();
  const auto summary = Json(RunDir("n1") / "summary.node1.json");
  EXPECT_EQ(summary["exit_code"], 130) << summary.dump();
}

TEST_F(RendezvousSignalTest, SigtermInTheElasticLastCallEndsEveryWaitingNode) {
  ASSERT_NO_FATAL_FAILURE(StartInTheLastCall());
  // A scheduler's cancel signals every launcher at once.
  ASSERT_EQ(::kill(n1_->pid(), SIGTERM), 0);
  ASSERT_EQ(::kill(n0_->pid(), SIGTERM), 0);
  EXPECT_EQ(n0_->Wait(seconds(15)), 143) << n0_->err_text();
  EXPECT_EQ(n1_->Wait(seconds(15)), 143) << n1_->err_text();
  EXPECT_TRUE(n0_->out_lines.empty() && n1_->out_lines.empty()) << "a rank started";
  EXPECT_EQ(Json(RunDir("n0") / "summary.json")["exit_code"], 143);
}

TEST_F(RendezvousSignalTest, NodeZeroInterruptedInTheLastCallEndsTheNodeWaitingThere) {
  ASSERT_NO_FATAL_FAILURE(StartInTheLastCall());
  ASSERT_EQ(::kill(n0_->pid(), SIGINT), 0);
  EXPECT_EQ(n0_->Wait(seconds(15)), 130) << n0_->err_text();
  // Node 0's verdict reaches the node waiting in its round: the job's exit code.
  EXPECT_EQ(n1_->Wait(seconds(15)), 130) << n1_->err_text();
}

// A node that arrives while the job runs waits for the next attempt; the job then succeeds (or
// is interrupted) without another: the late node ends with the job's exit code.
class LateNodeTest : public ElasticJobTest {
 protected:
  void RunWithALateNode() {
    const std::string script =
        "echo started; while [ ! -e " + go_.string() + " ]; do sleep 0.05; done";
    const std::vector<std::string> flags = {"--rdzv-conf", "last_call_timeout=0.2"};
    n0_ = Start("n0", "1:2", script, flags);
    ASSERT_TRUE(n0_->WaitFor(Count("started", 2), seconds(60))) << n0_->err_text();
    late_ = Start("late", "1:2", script, flags);
    ASSERT_TRUE(WaitForErr(n0_.get(), "waits to join the next attempt")) << n0_->err_text();
  }
  const fs::path go_ = dir_ / "go";
  std::unique_ptr<Launched> n0_, late_;
};

TEST_F(LateNodeTest, ALateNodeOfAJobThatSucceededExitsZero) {
  RunWithALateNode();
  std::ofstream(go_) << "go\n";
  ASSERT_EQ(n0_->Wait(seconds(60)), 0) << n0_->err_text();
  EXPECT_EQ(late_->Wait(seconds(30)), 0) << late_->err_text();
  EXPECT_TRUE(Has(late_->err_text(), "the job ended before this node could join"))
      << late_->err_text();
}

TEST_F(LateNodeTest, ALateNodeOfAnInterruptedJobTakesItsExitCode) {
  RunWithALateNode();
  ASSERT_EQ(::kill(n0_->pid(), SIGTERM), 0);
  ASSERT_EQ(n0_->Wait(seconds(60)), 143) << n0_->err_text();
  EXPECT_EQ(late_->Wait(seconds(30)), 143) << late_->err_text();
}

}  // namespace
}  // namespace dlaunch::testing
