// summary.json from the moment the ranks start, rewritten on every change, valid after the
// launcher is SIGKILLed.
#include <signal.h>

#include "durability_harness.h"

namespace dlaunch::testing {
namespace {

using rundir::RankStatus;
using std::chrono::seconds;

// Every rank prints "ready PID" and waits to be killed; rank `exit_rank` (if any) exits with
// `code` instead, on the first attempt only.
std::vector<std::string> Program(int exit_rank = -1, int code = 0) {
  return {"bash", "-c",
          "if [ \"$RANK\" = " + std::to_string(exit_rank) +
              " ] && [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exit " + std::to_string(code) +
              "; fi; echo ready $$; exec sleep 300"};
}

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(DurabilityTest, SummaryListsRunningRanksAndSurvivesASigkilledLauncher) {
  Launched l(Cmd(With({"--nproc", "3", "--"}, Program())));
  ASSERT_TRUE(l.WaitFor(ReadyCount(3), seconds(30))) << l.err_text();
  // Written before any output was read: it is there once a ready line is.
  rundir::Summary s;
  ASSERT_TRUE(ReadSummaryFile(&s));
  EXPECT_EQ(s.exit_code, -1);
  ASSERT_EQ(s.ranks.size(), 3u);
  const auto pids = ReadyPids(l.out_lines);
  for (const auto& r : s.ranks) {
    EXPECT_EQ(r.status, RankStatus::kRunning) << r.rank;
    EXPECT_FALSE(r.host.empty());
    EXPECT_EQ(r.pid, pids.at(r.rank));
  }
  ASSERT_EQ(::kill(l.pid(), SIGKILL), 0);
  EXPECT_EQ(l.Wait(seconds(10)), 128 + SIGKILL);
  ASSERT_TRUE(ReadSummaryFile(&s)) << "summary.json invalid after SIGKILL";
  EXPECT_EQ(s.ranks.size(), 3u);
  // No temporary file of an atomic write is left behind.
  for (const auto& e : fs::directory_iterator(RunDir())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  }
}

TEST_F(DurabilityTest, SummaryIsRewrittenWhenARankExits) {
  Launched l(Cmd(With({"--nproc", "2", "--"}, Program(1, 0))));
  ASSERT_TRUE(WaitForSummary(
      [](const rundir::Summary& s) {
        return s.ranks.size() == 2 && s.ranks[1].status == RankStatus::kOk &&
               s.ranks[1].exit_code == 0 && s.ranks[0].status == RankStatus::kRunning;
      },
      seconds(30)))
      << l.err_text();
  rundir::Summary s;
  ASSERT_TRUE(ReadSummaryFile(&s));
  EXPECT_EQ(s.exit_code, -1);
  ::kill(l.pid(), SIGKILL);
  l.Wait(seconds(10));
}

TEST_F(DurabilityTest, SummaryFollowsARestartAndTheEnd) {
  Launched l(Cmd(
      With({"--nproc", "2", "--max-restarts", "1", "--grace-period", "5", "--"}, Program(1, 3))));
  // The failure and teardown of attempt 0, then attempt 1 running.
  ASSERT_TRUE(WaitForSummary(
      [](const rundir::Summary& s) {
        return s.restarts == 1 && s.ranks.size() == 2 &&
               s.ranks[0].status == RankStatus::kRunning &&
               s.ranks[1].status == RankStatus::kRunning;
      },
      seconds(30)))
      << l.err_text();
  ::kill(l.pid(), SIGTERM);
  EXPECT_EQ(l.Wait(seconds(30)), 143);
  rundir::Summary s;
  ASSERT_TRUE(ReadSummaryFile(&s));
  EXPECT_EQ(s.exit_code, 143);
  EXPECT_EQ(s.restarts, 1);
  EXPECT_FALSE(fs::exists(RunDir() / ".reserve"));
}

}  // namespace
}  // namespace dlaunch::testing
