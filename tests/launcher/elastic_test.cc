// Elastic jobs without processes: --nnodes MIN:MAX and --rdzv-conf, the node rendezvous rounds,
// what follows an attempt, and the attempt folders of a run directory.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/run_dir/attempts.h"
#include "launcher/cli/options.h"
#include "launcher/job/job_plan.h"
#include "launcher/rendezvous/node_rounds.h"
#include "tests/common/test_dir.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

TEST(ElasticOptionsTest, NnodesTakesMinColonMax) {
  auto o = ParseCommandLine({"--nnodes", "1:4", "prog"});
  EXPECT_EQ(o.min_nodes, 1);
  EXPECT_EQ(o.nnodes, 4);
  EXPECT_FALSE(o.node_rank_given);
  auto fixed = ParseCommandLine({"--nnodes", "3", "--node-rank", "0", "prog"});
  EXPECT_EQ(fixed.min_nodes, 0);
  EXPECT_EQ(fixed.nnodes, 3);
  EXPECT_TRUE(fixed.node_rank_given);
  for (const char* bad : {"0", "3:2", "1:", ":2", "a:b", "1:2:3", "-1", "0:2"}) {
    EXPECT_THROW(ParseCommandLine({"--nnodes", bad, "prog"}), UsageError) << bad;
  }
}

TEST(ElasticOptionsTest, RdzvConfTakesTorchrunsTimeouts) {
  auto o = ParseCommandLine(
      {"--rdzv-conf", "join_timeout=60,last_call_timeout=0.5,close_timeout=2", "prog"});
  EXPECT_EQ(o.join_timeout, milliseconds(60000));
  EXPECT_EQ(o.last_call_timeout, milliseconds(500));
  EXPECT_EQ(o.close_timeout, milliseconds(2000));
  EXPECT_EQ(ParseCommandLine({"--rdzv_conf=last_call_timeout=1", "prog"}).last_call_timeout,
            milliseconds(1000));
  // torchrun's `timeout` is the join timeout (#28).
  EXPECT_EQ(ParseCommandLine({"--rdzv-conf", "timeout=3", "prog"}).join_timeout,
            milliseconds(3000));
  for (const char* bad : {"timeout=x", "join_timeout", "join_timeout=x", "last_call_timeout=-1",
                          "close_timeout=inf"}) {
    EXPECT_THROW(ParseCommandLine({"--rdzv-conf", bad, "prog"}), UsageError) << bad;
  }
}

RoundMember Node(int id, int requested = -1) {
  return RoundMember{id, "h" + std::to_string(id), "{}", requested};
}

TEST(NodeRoundsTest, ClosesAtMaxAtOnce) {
  NodeRounds r({2, 3, milliseconds(10000), milliseconds(5000)}, 0);
  EXPECT_EQ(r.Join(Node(0), 0), "");
  EXPECT_EQ(r.Join(Node(r.NewMemberId()), 10), "");
  EXPECT_FALSE(r.ReadyToClose(20, {}));  // MIN joined: the last call runs
  EXPECT_EQ(r.Join(Node(r.NewMemberId()), 30), "");
  EXPECT_TRUE(r.ReadyToClose(30, {}));
  r.Close();
  ASSERT_EQ(r.members().size(), 3u);
  EXPECT_EQ(r.members()[0].member_id, 0);
  EXPECT_EQ(r.RankOf(2), 2);
}

TEST(NodeRoundsTest, ClosesWithMinAfterTheLastCall) {
  NodeRounds r({2, 4, milliseconds(10000), milliseconds(5000)}, 0);
  r.Join(Node(r.NewMemberId()), 100);  // node 0 is not there yet: nothing can close
  EXPECT_FALSE(r.ReadyToClose(9000, {}));
  r.Join(Node(0), 1000);
  EXPECT_EQ(r.NextDeadline(), 6000);
  EXPECT_FALSE(r.ReadyToClose(5999, {}));
  EXPECT_TRUE(r.ReadyToClose(6000, {}));
  r.Close();
  EXPECT_EQ(r.members()[0].member_id, 0);  // node 0 first whatever the join order
  EXPECT_EQ(r.members()[1].member_id, 1);
}

TEST(NodeRoundsTest, FailsWhenMinNeverJoinsAndNamesTheAbsent) {
  NodeRounds r({3, 3, milliseconds(1000), milliseconds(0)}, 0);
  r.Join(Node(0), 0);
  r.Join(Node(r.NewMemberId(), 2), 0);
  EXPECT_EQ(r.Failure(999), "");
  EXPECT_EQ(r.Failure(1000),
            "node rendezvous timed out after 1 s: 2 of 3 nodes joined; node 1 never joined");
}

TEST(NodeRoundsTest, RequestedRanksComeFirstAndAreNotGivenTwice) {
  NodeRounds r({3, 3, milliseconds(1000), milliseconds(0)}, 0);
  r.Join(Node(0), 0);
  const int late = r.NewMemberId(), asked = r.NewMemberId();
  r.Join(Node(late), 0);
  r.Join(Node(asked, 1), 0);
  EXPECT_NE(r.Join(Node(r.NewMemberId(), 1), 0), "");  // rank 1 is taken
  r.Close();
  EXPECT_EQ(r.RankOf(asked), 1);
  EXPECT_EQ(r.RankOf(late), 2);
}

TEST(NodeRoundsTest, ALaterRoundClosesOnceEveryConnectedNodeIsBack) {
  NodeRounds r({1, 3, milliseconds(10000), milliseconds(30000)}, 0);
  r.Join(Node(0), 0);
  const int a = r.NewMemberId(), b = r.NewMemberId();
  r.Join(Node(a), 0);
  r.Join(Node(b), 0);
  r.Close();
  r.Open(100);
  EXPECT_EQ(r.round(), 1);
  r.Join(Node(0), 100);
  EXPECT_FALSE(r.ReadyToClose(200, {a}));  // a is still connected: it is awaited
  r.Join(Node(a), 300);
  EXPECT_TRUE(r.ReadyToClose(300, {a}));  // b went away: nobody else to wait for
  r.Close();
  EXPECT_EQ(r.members().size(), 2u);
  EXPECT_FALSE(r.RankOf(b).has_value());
}

TEST(NodeRoundsTest, NodesBeyondMaxWaitForTheNextRound) {
  NodeRounds r({1, 2, milliseconds(10000), milliseconds(0)}, 0);
  r.Join(Node(0), 0);
  const int a = r.NewMemberId(), b = r.NewMemberId();
  r.Join(Node(a), 0);
  r.Join(Node(b), 0);
  r.Close();
  EXPECT_FALSE(r.RankOf(b).has_value());
  r.Open(10);
  EXPECT_TRUE(r.Joined(b));  // first in line for the next attempt
}

JobPlan ElasticPlan(int min, int max, int nnodes, int max_restarts) {
  LaunchOptions o;
  o.min_nodes = min;
  o.nnodes = max;
  o.max_restarts = max_restarts;
  NodeSetup setup;
  setup.role = NodeRoleKind::kCoordinatorHost;
  Membership m;
  m.nnodes = nnodes;
  return JobPlan(o, setup, JobIdentity{"run", "a", 1, "a:2", m, false}, {"x"}, {});
}

TEST(ElasticPlanTest, ALostNodeIsAMembershipChangeWhileMinRemains) {
  // 1:2 with both nodes; one lost: the other goes on without using a restart.
  EXPECT_EQ(ElasticPlan(1, 2, 2, 0).Decide(1, false, false, 1), NextAttempt::kRejoin);
  // Below MIN: a failure like any other, within --max-restarts.
  EXPECT_EQ(ElasticPlan(2, 3, 2, 0).Decide(1, false, false, 1), NextAttempt::kNone);
  EXPECT_EQ(ElasticPlan(2, 3, 2, 1).Decide(1, false, false, 1), NextAttempt::kRestart);
  // A fixed node count never goes on smaller.
  EXPECT_EQ(ElasticPlan(2, 2, 2, 1).Decide(1, false, false, 1), NextAttempt::kRestart);
  EXPECT_EQ(ElasticPlan(1, 2, 2, 1).Decide(0, false, false, 0), NextAttempt::kNone);
  EXPECT_EQ(ElasticPlan(1, 2, 2, 1).Decide(130, true, false, 1), NextAttempt::kNone);
}

TEST(ElasticPlanTest, MembershipSetsRanksAndVariables) {
  JobPlan plan = ElasticPlan(1, 3, 3, 0);
  plan.SetMembership(Membership{2, 1, 1, 2, "attempt2"});
  EXPECT_EQ(plan.world_size(), 2);
  EXPECT_EQ(plan.ranks()[0].rank, 1);
  auto v = plan.JobVariables(plan.ranks()[0], plan.membership().restart_count);
  EXPECT_EQ(v["GROUP_RANK"], "1");
  EXPECT_EQ(v["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(v["WORLD_SIZE"], "2");
  EXPECT_EQ(v["TORCHELASTIC_RESTART_COUNT"], "1");
}

void Touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "x\n";
}

TEST(AttemptFoldersTest, AnAttemptMovesAsideAndTheTopStaysForTheNext) {
  const dlaunch::testing::TestDir dir("attempts");
  const fs::path run = dir.path();
  Touch(run / "rank0" / "stdout.log");
  Touch(run / "rank1" / "stdout.log");
  Touch(run / "diagnosis.txt");
  Touch(run / "summary.json");
  EXPECT_EQ(rundir::NextAttemptNumber(run), 0);
  EXPECT_EQ(rundir::PutAttemptAway(run, "attempt0", false), "attempt0");
  EXPECT_TRUE(fs::exists(run / "attempt0" / "rank1" / "stdout.log"));
  EXPECT_TRUE(fs::exists(run / "attempt0" / "diagnosis.txt"));
  EXPECT_FALSE(fs::exists(run / "rank0"));
  EXPECT_TRUE(fs::exists(run / "summary.json"));  // the job's, rewritten every attempt
  EXPECT_EQ(rundir::NextAttemptNumber(run), 1);
  EXPECT_EQ(rundir::PutAttemptAway(run, "attempt1", false), "");  // nothing left to move
}

TEST(AttemptFoldersTest, AnEarlierRunMovesAsideWholeAndNeverOverwrites) {
  const dlaunch::testing::TestDir dir("attempts");
  const fs::path run = dir.path();
  Touch(run / "attempt0" / "rank0" / "stdout.log");
  Touch(run / "rank0" / "stdout.log");
  Touch(run / "summary.json");
  Touch(run / "user-notes.txt");  // not dlaunch's: stays
  // attempt0 holds rank0 already: the next free folder.
  EXPECT_EQ(rundir::PutAttemptAway(run, "attempt0", true), "attempt1");
  EXPECT_TRUE(fs::exists(run / "attempt1" / "summary.json"));
  EXPECT_TRUE(fs::exists(run / "attempt1" / "rank0" / "stdout.log"));
  EXPECT_TRUE(fs::exists(run / "user-notes.txt"));
  Touch(run / "rank2" / "stdout.log");
  Touch(run / "rank3" / "stdout.log");
  EXPECT_EQ(rundir::PutAttemptAway(run, "attempt2", false, {"rank3"}), "attempt2");
  EXPECT_TRUE(fs::exists(run / "rank2"));  // another node's, sharing the folder
  EXPECT_FALSE(fs::exists(run / "rank3"));
}

}  // namespace
}  // namespace dlaunch::launcher
