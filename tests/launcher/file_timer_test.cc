// The FileTimer's logic: torch's request lines as they are parsed or refused, and the timer
// table's acquire, release and reaping rules.
#include "launcher/supervision/file_timer.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

namespace dlaunch::launcher {
namespace {

TimerRequest Acquire(pid_t pid, const std::string& scope, double at, int sig = SIGKILL) {
  return TimerRequest{pid, scope, at, sig};
}

TEST(FileTimerParseTest, ReadsTorchsRequestLine) {
  std::string problem;
  // FileTimerRequest.to_json() of torch 1.13 and 2.x.
  const auto r = ParseTimerRequest(
      R"({"version": 1, "pid": 4321, "scope_id": "train.py#12", "expiration_time": 1764696000.25, "signal": 9})",
      &problem);
  ASSERT_TRUE(r) << problem;
  EXPECT_EQ(r->pid, 4321);
  EXPECT_EQ(r->scope, "train.py#12");
  EXPECT_DOUBLE_EQ(r->expiration_unix_s, 1764696000.25);
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_FALSE(r->release());
  // release(): expiration_time -1, signal 0.
  const auto rel = ParseTimerRequest(
      R"({"version": 1, "pid": 4321, "scope_id": "s", "expiration_time": -1, "signal": 0})",
      &problem);
  ASSERT_TRUE(rel) << problem;
  EXPECT_TRUE(rel->release());
}

TEST(FileTimerParseTest, RefusesWhatIsNotARequest) {
  const std::pair<const char*, const char*> cases[] = {
      {"not json", "not a JSON object"},
      {"[1, 2]", "not a JSON object"},
      {R"({"pid": "7", "scope_id": "s", "expiration_time": 1, "signal": 9})", "'pid'"},
      {R"({"pid": 7, "expiration_time": 1, "signal": 9})", "'scope_id'"},
      {R"({"pid": 7, "scope_id": "s", "expiration_time": "soon", "signal": 9})",
       "'expiration_time'"},
      {R"({"pid": 7, "scope_id": "s", "expiration_time": 1, "signal": 9.5})", "'signal'"},
      {R"({"pid": 0, "scope_id": "s", "expiration_time": 1, "signal": 9})", "pid 0"},
      {R"({"pid": -1, "scope_id": "s", "expiration_time": 1, "signal": 9})", "pid -1"},
      {R"({"pid": 99999999999, "scope_id": "s", "expiration_time": 1, "signal": 9})",
       "is not a process"},
      {R"({"pid": 7, "scope_id": "s", "expiration_time": 1, "signal": 4096})", "signal 4096"},
  };
  for (const auto& [line, why] : cases) {
    std::string problem;
    EXPECT_FALSE(ParseTimerRequest(line, &problem)) << line;
    EXPECT_NE(problem.find(why), std::string::npos) << line << " -> " << problem;
  }
}

TEST(FileTimerTableTest, ReleaseRemovesOnlyItsScope) {
  TimerTable t;
  t.Apply(Acquire(10, "a", 100));
  t.Apply(Acquire(10, "b", 200));
  t.Apply(TimerRequest{10, "a", -1, 0});
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.NextExpiry(), 200);
  EXPECT_TRUE(t.TakeExpired(150).empty());
  t.Apply(TimerRequest{10, "b", -1, 0});
  EXPECT_FALSE(t.Has(10));
  EXPECT_FALSE(t.NextExpiry());
}

TEST(FileTimerTableTest, ReacquireMovesTheDeadline) {
  TimerTable t;
  t.Apply(Acquire(10, "step", 100));
  t.Apply(Acquire(10, "step", 300));
  EXPECT_TRUE(t.TakeExpired(200).empty());
  ASSERT_EQ(t.TakeExpired(300).size(), 1u);
}

TEST(FileTimerTableTest, ExpiredPidGetsItsEarliestSignalAndLosesEveryTimer) {
  TimerTable t;
  t.Apply(Acquire(10, "late", 150, SIGTERM));
  t.Apply(Acquire(10, "early", 120, SIGKILL));
  t.Apply(Acquire(10, "quiet", 110, 0));        // no signal: passed over
  t.Apply(Acquire(10, "future", 900, SIGINT));  // not expired, dropped with the reaped pid
  t.Apply(Acquire(20, "other", 500));
  const auto expired = t.TakeExpired(200);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].pid, 10);
  EXPECT_EQ(expired[0].scope, "early");
  EXPECT_EQ(expired[0].signal, SIGKILL);
  EXPECT_FALSE(t.Has(10));
  EXPECT_TRUE(t.Has(20));
}

TEST(FileTimerTableTest, ExpiryWithoutSignalKillsNothingAndClears) {
  TimerTable t;
  t.Apply(Acquire(10, "s", 100, 0));
  EXPECT_TRUE(t.TakeExpired(100).empty());
  EXPECT_FALSE(t.Has(10));
}

TEST(FileTimerTableTest, ForgetDropsAGonePid) {
  TimerTable t;
  t.Apply(Acquire(10, "s", 100));
  t.Apply(Acquire(11, "s", 100));
  t.Forget(10);
  const auto expired = t.TakeExpired(1000);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].pid, 11);
}

TEST(FileTimerOwnerTest, ARankOrItsDescendantOnly) {
  // This test process plays a rank's child: its parent is "rank 3".
  EXPECT_EQ(RankOwning(::getpid(), {{::getppid(), 3}}), 3);
  EXPECT_EQ(RankOwning(::getpid(), {{::getpid(), 5}}), 5);
  EXPECT_FALSE(RankOwning(::getppid(), {{::getpid(), 5}}));  // a parent is not a child
  EXPECT_FALSE(RankOwning(1, {{::getpid(), 5}}));
}

TEST(FileTimerEnvTest, TimerFileReplacesAnInheritedOne) {
  std::vector<std::string> env = {"A=1", "TORCHELASTIC_TIMER_FILE=/tmp/theirs", "B=2"};
  SetEnvEntry(&env, kFileTimerFileVar, "/tmp/ours");
  EXPECT_EQ(env, (std::vector<std::string>{"A=1", "TORCHELASTIC_TIMER_FILE=/tmp/ours", "B=2"}));
  SetEnvEntry(&env, "C", "3");
  EXPECT_EQ(env.back(), "C=3");
}

TEST(FileTimerKillTest, TheKilledRankGetsTheCause) {
  std::vector<RankOutcome> ranks(2);
  ranks[0].rank = 0;
  ranks[0].exited = true;
  ranks[0].exit_code = 0;
  ranks[1].rank = 1;
  ranks[1].exited = true;
  ranks[1].signal = SIGKILL;
  AttachTimerKills({TimerKill{1, 77, "step", SIGKILL}}, &ranks);
  EXPECT_EQ(ranks[1].cause, "FileTimer scope 'step' expired");
  EXPECT_EQ(ranks[0].cause, "");
}

}  // namespace
}  // namespace dlaunch::launcher
