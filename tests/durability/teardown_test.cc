// A stopped or hung rank does not hold the teardown for --grace-period: SIGCONT goes with its
// SIGTERM, and a rank whose stacks the hang diagnosis took is killed at once. The bounds are
// generous (well under the grace period), a behaviour check rather than a speed test.
#include <signal.h>

#include <fstream>

#include "durability_harness.h"

namespace dlaunch::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST_F(DurabilityTest, StoppedRankDoesNotHoldAnInterruptTeardown) {
  Launched l(Cmd({"--nproc", "2", "--grace-period", "30", "--", "bash", "-c",
                  "echo ready $$; exec sleep 300"}));
  ASSERT_TRUE(l.WaitFor(ReadyCount(2), seconds(30))) << l.err_text();
  ASSERT_EQ(::kill(ReadyPids(l.out_lines).at(1), SIGSTOP), 0);
  const auto start = Clock::now();
  ::kill(l.pid(), SIGTERM);
  EXPECT_EQ(l.Wait(seconds(60)), 143);
  EXPECT_LT(SecondsSince(start), 10.0) << "the stopped rank held the teardown";
}

TEST_F(DurabilityTest, StoppedRankDoesNotHoldAFailureTeardown) {
  const fs::path flag = dir_ / "fail-now";
  Launched l(Cmd({"--nproc", "2", "--grace-period", "30", "--", "bash", "-c",
                  "echo ready $$; if [ \"$RANK\" = 0 ]; then while [ ! -e " + flag.string() +
                      " ]; do sleep 0.05; done; exit 1; fi; exec sleep 300"}));
  ASSERT_TRUE(l.WaitFor(ReadyCount(2), seconds(30))) << l.err_text();
  ASSERT_EQ(::kill(ReadyPids(l.out_lines).at(1), SIGSTOP), 0);
  const auto start = Clock::now();
  std::ofstream(flag.string()) << "x";
  EXPECT_EQ(l.Wait(seconds(60)), 1) << l.err_text();
  EXPECT_LT(SecondsSince(start), 10.0) << "the stopped rank held the teardown";
  rundir::Summary s;
  ASSERT_TRUE(ReadSummaryFile(&s));
  ASSERT_EQ(s.ranks.size(), 2u);
  EXPECT_EQ(s.ranks[0].status, rundir::RankStatus::kFailed);
  EXPECT_EQ(s.ranks[1].status, rundir::RankStatus::kKilled);
}

// Ranks that ignore SIGTERM and go silent; one is stopped too. After the hang diagnosis took
// their stacks they are killed at once, not after the 60 s grace period.
TEST_F(DurabilityTest, HungRanksWhoseStacksWereTakenAreKilledAtOnce) {
  Launched l(
      Cmd({"--nproc", "2", "--hang-on-silence", "--hang-timeout", "2", "--grace-period", "60", "--",
           "bash", "-c", "trap '' TERM; echo ready $$; while :; do sleep 1; done"}));
  ASSERT_TRUE(l.WaitFor(ReadyCount(2), seconds(30))) << l.err_text();
  ASSERT_EQ(::kill(ReadyPids(l.out_lines).at(1), SIGSTOP), 0);
  const auto start = Clock::now();
  EXPECT_EQ(l.Wait(seconds(90)), 3) << l.err_text();
  // 2 s to detect, stacks in parallel (gdb, at most 10 s), then the kill.
  EXPECT_LT(SecondsSince(start), 25.0) << l.err_text();
  EXPECT_TRUE(fs::exists(RankDir(1) / "stacks.txt"));
}

}  // namespace
}  // namespace dlaunch::testing
