// The one place that decides a node failed or is lost, with the time passed in.
#include "launcher/rendezvous/node_roster.h"

#include <gtest/gtest.h>

namespace dlaunch::launcher {
namespace {

using std::chrono::milliseconds;

v1::NodeStatus Status(int node, bool done = false, int exit_code = 0, std::string message = "") {
  v1::NodeStatus s;
  s.set_node_rank(node);
  s.set_done(done);
  s.set_exit_code(exit_code);
  s.set_message(message);
  return s;
}

class NodeRosterTest : public ::testing::Test {
 protected:
  NodeRosterTest() {
    for (int n = 0; n < 3; ++n) roster_.Join(n, "h" + std::to_string(n), "{}", 1000);
  }
  NodeRoster roster_{3, milliseconds(5000)};
};

TEST(NodeRosterJoinTest, AbsentUntilEveryNodeJoined) {
  NodeRoster roster(3, milliseconds(1000));
  roster.Join(0, "a", "", 0);
  roster.Join(2, "c", "", 0);
  EXPECT_EQ(roster.Absent(), std::vector<int>{1});
  EXPECT_FALSE(roster.AllJoined());
  roster.Join(1, "b", "", 0);
  EXPECT_TRUE(roster.AllJoined());
}

TEST_F(NodeRosterTest, AFailedNodeIsReportedOnceWithItsMessage) {
  EXPECT_FALSE(roster_.OnStatus(Status(1), 1500));
  auto fault = roster_.OnStatus(Status(1, true, 1, "rank 2 failed: exit code 5"), 2000);
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->kind, NodeFaultKind::kFailed);
  EXPECT_EQ(fault->message, "node 1 (h1) failed: rank 2 failed: exit code 5");
  EXPECT_FALSE(roster_.OnStatus(Status(1, true, 1, "again"), 2100));
  EXPECT_FALSE(roster_.OnStreamClosed(1));  // done: its stream may end now
  EXPECT_EQ(roster_.FirstFault(2200)->node_rank, 1);
  EXPECT_FALSE(roster_.AllDone());
}

// #30: `NodeStream{member_id: 0, done: true}` aborted node 0 (free(): invalid size): node 0's
// status has no fault to decide, and the roster dereferenced the empty one.
TEST_F(NodeRosterTest, NoStatusOrStreamEndSpeaksForNodeZeroOrANodeOutsideTheJob) {
  for (int node : {0, -1, 3, 1 << 30}) {
    EXPECT_FALSE(roster_.OnStatus(Status(node, true, 1, "forged"), 2000)) << node;
    roster_.OnStreamOpened(node);
    EXPECT_FALSE(roster_.OnStreamClosed(node)) << node;
  }
  EXPECT_FALSE(roster_.FirstFault(2100));
  EXPECT_TRUE(roster_.CheckHeartbeats(2100).empty());
  EXPECT_EQ(roster_.Nodes().size(), 3u);
  EXPECT_FALSE(roster_.Nodes()[0].status);
}

TEST_F(NodeRosterTest, FailureWithoutMessageNamesTheExitCode) {
  EXPECT_EQ(roster_.OnStatus(Status(2, true, 3), 2000)->message, "node 2 (h2) failed: exit code 3");
}

TEST_F(NodeRosterTest, AStreamThatEndsEarlyLosesTheNode) {
  roster_.OnStreamOpened(2);
  auto fault = roster_.OnStreamClosed(2);
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->kind, NodeFaultKind::kStreamEnded);
  EXPECT_EQ(fault->message, "node 2 (h2) lost: its agent's stream ended");
  EXPECT_TRUE(roster_.Nodes()[2].lost);
  EXPECT_FALSE(roster_.OnStreamClosed(2));
}

TEST_F(NodeRosterTest, SilenceLosesANodeOnceAndNodeZeroNever) {
  roster_.OnStatus(Status(1), 4000);
  EXPECT_TRUE(roster_.CheckHeartbeats(5900).empty());
  auto lost = roster_.CheckHeartbeats(7100);  // node 2 last heard at 1000, node 1 at 4000
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].node_rank, 2);
  EXPECT_EQ(lost[0].kind, NodeFaultKind::kSilent);
  EXPECT_EQ(lost[0].message, "node 2 (h2) lost: no heartbeat for 6 s");
  EXPECT_TRUE(roster_.CheckHeartbeats(7200).empty());
  EXPECT_TRUE(roster_.Nodes()[2].lost);
  EXPECT_FALSE(roster_.Nodes()[0].lost);
}

TEST_F(NodeRosterTest, AllDoneWhenEveryAgentSucceeded) {
  roster_.OnStatus(Status(1, true, 0), 2000);
  EXPECT_FALSE(roster_.AllDone());
  roster_.OnStatus(Status(2, true, 0), 2000);
  EXPECT_TRUE(roster_.AllDone());
  EXPECT_FALSE(roster_.FirstFault(100000));  // done nodes are never silent
}

TEST_F(NodeRosterTest, ARejoinedNodeStartsClean) {
  roster_.OnStreamClosed(1);
  roster_.Join(1, "h1", "{}", 3000);
  EXPECT_FALSE(roster_.FirstFault(3000));
  EXPECT_FALSE(roster_.Nodes()[1].lost);
}

}  // namespace
}  // namespace dlaunch::launcher
