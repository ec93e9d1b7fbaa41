// The restart policy on real Python ranks: a failure that repeats stops the job with its reason,
// a transient one is restarted, an import error stops at once, a restart storm stops after three
// attempts without progress, and observe only says what auto would do. Every decision is a
// console line, an event and a field of summary.json.
#include <gmock/gmock.h>

#include <fstream>

#include "core/run_dir/summary_file.h"
#include "python_test_util.h"

namespace dlaunch::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

class RestartPolicyTest : public PythonJobTest {
 protected:
  // 2 ranks of restart_policy.py MODE, with --max-restarts `restarts`, and `extra` flags.
  int Run(const std::string& mode, int restarts, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--nproc",        "2",
                                     "--max-restarts", std::to_string(restarts),
                                     "--events-file",  (dir_ / "events.jsonl").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {Script("restart_policy.py"), mode});
    Launched l(Cmd(args));
    const int code = l.Wait(seconds(150));
    err_ = l.err_text();
    return code;
  }
  rundir::Summary Summary() const {
    rundir::Summary s;
    std::vector<std::string> problems;
    rundir::ReadSummary((RunDir() / "summary.json").string(), "summary", &s, &problems);
    return s;
  }
  std::string Events() const { return ReadText(dir_ / "events.jsonl"); }

  std::string err_;
};

TEST_F(RestartPolicyTest, TheSameValueErrorTwiceStopsTheJobWithItsReason) {
  EXPECT_EQ(Run("same", 5), 1) << err_;
  EXPECT_THAT(err_, HasSubstr("dlaunch: restart policy auto: restart (transient): rank 1 raised "
                              "ValueError at "));
  EXPECT_THAT(err_, HasSubstr("restart policy auto: stop (deterministic): rank 1 raised "
                              "ValueError at "));
  EXPECT_THAT(err_, HasSubstr("in attempts 0 and 1: a restart would fail the same way"));
  const rundir::Summary s = Summary();
  ASSERT_EQ(s.attempts.size(), 2u) << err_;
  ASSERT_TRUE(s.attempts[1].decision.has_value());
  EXPECT_EQ(s.attempts[1].decision->action, "stop");
  EXPECT_EQ(s.attempts[1].decision->rule, "deterministic");
  EXPECT_TRUE(s.attempts[1].decision->acted);
  ASSERT_TRUE(s.attempts[0].decision.has_value());
  EXPECT_EQ(s.attempts[0].decision->action, "restart");
  EXPECT_THAT(Events(), HasSubstr("\"restart_decision\""));
}

TEST_F(RestartPolicyTest, ObserveSaysWhatAutoWouldDoAndRestartsToTheBudget) {
  EXPECT_EQ(Run("same", 2, {"--restart-policy", "observe"}), 1) << err_;
  EXPECT_THAT(err_, HasSubstr("restart policy observe: would stop (deterministic)"));
  EXPECT_THAT(err_, HasSubstr("restarting all ranks (restart 2 of 2)"));
  const rundir::Summary s = Summary();
  ASSERT_EQ(s.attempts.size(), 3u) << err_;
  ASSERT_TRUE(s.attempts[1].decision.has_value());
  EXPECT_EQ(s.attempts[1].decision->action, "stop");
  EXPECT_FALSE(s.attempts[1].decision->acted);
}

TEST_F(RestartPolicyTest, ASigkillOnceIsRestartedAndTheJobFinishes) {
  EXPECT_EQ(Run("kill_once", 3), 0) << err_;
  EXPECT_THAT(err_, HasSubstr("restart policy auto: restart (transient)"));
  EXPECT_THAT(err_, Not(HasSubstr("restart policy auto: stop")));
  EXPECT_EQ(Summary().attempts.size(), 2u) << err_;
}

// The diagnosis matrix's other transient faults, once each: never a stop.
TEST_F(RestartPolicyTest, AnOutOfMemoryOnceIsRestarted) {
  EXPECT_EQ(Run("oom_once", 3), 0) << err_;
  EXPECT_THAT(err_, HasSubstr("restart policy auto: restart (transient)"));
  EXPECT_EQ(Summary().attempts.size(), 2u) << err_;
}

TEST_F(RestartPolicyTest, AHangOnceIsRestarted) {
  EXPECT_EQ(
      Run("hang_once", 3, {"--hang-timeout", "3", "--on-hang", "restart", "--grace-period", "2"}),
      0)
      << err_;
  EXPECT_THAT(err_, HasSubstr("HANG"));
  EXPECT_THAT(err_, HasSubstr("restart policy auto: restart (transient)"));
  EXPECT_EQ(Summary().attempts.size(), 2u) << err_;
}

TEST_F(RestartPolicyTest, AnImportErrorBeforeTheFirstCollectiveStopsAtOnce) {
  EXPECT_EQ(Run("import", 3), 1) << err_;
  EXPECT_THAT(err_, HasSubstr("restart policy auto: stop (startup): rank 1 raised "
                              "ModuleNotFoundError at "));
  EXPECT_THAT(err_, Not(HasSubstr("restarting all ranks")));
}

TEST_F(RestartPolicyTest, ARestartStormStopsAfterThreeAttemptsWithoutProgress) {
  EXPECT_EQ(Run("storm", 8), 1) << err_;
  EXPECT_THAT(err_, HasSubstr("restart policy auto: stop (no-progress): 3 attempts in a row got "
                              "no step beyond step 0: a restart storm"));
  EXPECT_EQ(Summary().attempts.size(), 4u) << err_;
}

TEST_F(RestartPolicyTest, AlwaysRestartsAsTorchrunDoes) {
  EXPECT_EQ(Run("same", 2, {"--restart-policy", "always"}), 1) << err_;
  EXPECT_THAT(err_, HasSubstr("restart policy always: restart (auto would stop, deterministic"));
  EXPECT_EQ(Summary().attempts.size(), 3u) << err_;
}

}  // namespace
}  // namespace dlaunch::testing
