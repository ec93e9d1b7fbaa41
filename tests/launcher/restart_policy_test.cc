// The restart decision as a table: the facts of the failed attempts in, RESTART, STOP or EXCLUDE
// out, with the rule and its reason. Pure.
#include "launcher/job/restart_policy.h"

#include <gtest/gtest.h>

namespace dlaunch::launcher {
namespace {

FailureFacts Raised(int attempt, const std::string& exception, const std::string& site,
                    int64_t step, bool collective = true) {
  FailureFacts f;
  f.attempt = attempt;
  f.culprit_rank = 1;
  f.culprit_node = 0;
  f.rank_exit_code = 1;
  f.exception = exception;
  f.call_site = site;
  f.step = step;
  f.best_step = step;
  f.collective_completed = collective;
  f.heartbeat_seen = true;
  return f;
}

FailureFacts Killed(int attempt, int signal, int64_t step) {
  FailureFacts f;
  f.attempt = attempt;
  f.culprit_rank = 0;
  f.culprit_node = 0;
  f.rank_signal = signal;
  f.step = f.best_step = step;
  f.collective_completed = true;
  return f;
}

struct Row {
  const char* name;
  std::vector<FailureFacts> attempts;
  RestartAction action;
  const char* rule;
  int node = -1;
};

TEST(RestartPolicyTest, TheFactsOfTheFailedAttemptsDecide) {
  FailureFacts oom = Raised(1, "OutOfMemoryError", "t.py:9 step", 4);
  oom.oom = true;
  FailureFacts oom_before = oom;
  oom_before.attempt = 0;
  FailureFacts hang = Killed(1, 15, 7);
  hang.hang = true;
  FailureFacts hang_before = hang;
  hang_before.attempt = 0;
  FailureFacts argparse = Raised(0, "", "", 0, false);
  argparse.rank_exit_code = 2;
  FailureFacts no_agent = argparse;
  no_agent.heartbeat_seen = false;
  FailureFacts import_late = Raised(0, "ImportError", "t.py:50 step", 12, true);
  FailureFacts lost = Killed(0, 9, 3);
  lost.lost_nodes = {2};
  FailureFacts node2_a = Killed(0, 9, 3), node2_b = Killed(1, 6, 8);
  node2_a.culprit_node = node2_b.culprit_node = 2;
  FailureFacts exit3_a = Raised(0, "", "", 5), exit3_b = Raised(1, "", "", 5);
  exit3_a.rank_exit_code = exit3_b.rank_exit_code = 3;
  FailureFacts no_steps_a = Raised(0, "KeyError", "a.py:1 f", -1),
               no_steps_b = Raised(1, "ValueError", "b.py:2 g", -1),
               no_steps_c = Raised(2, "TypeError", "c.py:3 h", -1),
               no_steps_d = Raised(3, "OSError", "d.py:4 i", -1);

  const std::vector<Row> rows = {
      {"one ValueError",
       {Raised(0, "ValueError", "t.py:12 main", 3)},
       RestartAction::kRestart,
       "transient"},
      {"the same ValueError twice",
       {Raised(0, "ValueError", "t.py:12 main", 3), Raised(1, "ValueError", "t.py:12 main", 3)},
       RestartAction::kStop,
       "deterministic"},
      {"the same type elsewhere",
       {Raised(0, "ValueError", "t.py:12 main", 3), Raised(1, "ValueError", "t.py:80 eval", 9)},
       RestartAction::kRestart,
       "transient"},
      {"the same exit at the same step", {exit3_a, exit3_b}, RestartAction::kStop, "deterministic"},
      {"a SIGKILL twice at one step",
       {Killed(0, 9, 5), Killed(1, 9, 5)},
       RestartAction::kRestart,
       "transient"},
      {"an OOM twice", {oom_before, oom}, RestartAction::kRestart, "transient"},
      {"a hang twice", {hang_before, hang}, RestartAction::kRestart, "transient"},
      {"an import error first",
       {Raised(0, "ModuleNotFoundError", "t.py:1 <module>", 0, false)},
       RestartAction::kStop,
       "startup"},
      {"a missing file first",
       {Raised(0, "FileNotFoundError", "t.py:20 load", 0, false)},
       RestartAction::kStop,
       "startup"},
      {"an argument error first", {argparse}, RestartAction::kStop, "startup"},
      {"an exit 2 where no agent spoke", {no_agent}, RestartAction::kRestart, "transient"},
      {"an import error after a collective", {import_late}, RestartAction::kRestart, "transient"},
      {"a lost node", {lost}, RestartAction::kExclude, "node", 2},
      {"one node holds the culprit twice", {node2_a, node2_b}, RestartAction::kExclude, "node", 2},
      {"different nodes", {Killed(0, 9, 3), node2_b}, RestartAction::kRestart, "transient"},
      {"three attempts without progress",
       {Raised(0, "KeyError", "a.py:1 f", 4), Raised(1, "ValueError", "b.py:2 g", 4),
        Raised(2, "TypeError", "c.py:3 h", 2), Raised(3, "OSError", "d.py:4 i", 4)},
       RestartAction::kStop,
       "no-progress"},
      {"progress in the window",
       {Raised(0, "KeyError", "a.py:1 f", 4), Raised(1, "ValueError", "b.py:2 g", 4),
        Raised(2, "TypeError", "c.py:3 h", 6), Raised(3, "OSError", "d.py:4 i", 4)},
       RestartAction::kRestart,
       "transient"},
      {"no steps reported at all",
       {no_steps_a, no_steps_b, no_steps_c, no_steps_d},
       RestartAction::kRestart,
       "transient"},
  };
  for (const Row& row : rows) {
    const RestartDecision d = DecideRestart(row.attempts);
    EXPECT_EQ(RestartActionName(d.action), std::string(RestartActionName(row.action))) << row.name;
    EXPECT_EQ(d.rule, row.rule) << row.name << ": " << d.reason;
    EXPECT_EQ(d.node, row.node) << row.name;
    EXPECT_FALSE(d.reason.empty()) << row.name;
    EXPECT_EQ(d.reason.find('\n'), std::string::npos) << row.name;
  }
}

TEST(RestartPolicyTest, TheReasonSaysWhatTheDecisionRestsOn) {
  const RestartDecision d = DecideRestart(
      {Raised(0, "ValueError", "s.py:7 main", 3), Raised(1, "ValueError", "s.py:7 main", 3)});
  EXPECT_EQ(d.reason,
            "rank 1 raised ValueError at s.py:7 main at step 3 in attempts 0 and 1: a restart "
            "would fail the same way");
  const RestartDecision storm = DecideRestart(
      {Raised(0, "A", "a:1 f", 2), Raised(1, "B", "b:1 f", 1), Raised(2, "C", "c:1 f", 2)},
      RestartPolicyConfig{2});
  EXPECT_EQ(storm.reason, "2 attempts in a row got no step beyond step 2: a restart storm");
}

TEST(RestartPolicyTest, ThePolicyIsOneOfThreeAndSaysWhatItDid) {
  EXPECT_EQ(RestartPolicyNamed("auto"), RestartPolicy::kAuto);
  EXPECT_EQ(RestartPolicyNamed("always"), RestartPolicy::kAlways);
  EXPECT_EQ(RestartPolicyNamed("observe"), RestartPolicy::kObserve);
  EXPECT_FALSE(RestartPolicyNamed("never").has_value());

  const RestartDecision stop{RestartAction::kStop, "deterministic", -1, "why"};
  const RestartDecision restart{RestartAction::kRestart, "transient", -1, "why not"};
  const RestartDecision exclude{RestartAction::kExclude, "node", 2, "lost"};
  struct Case {
    RestartPolicy policy;
    RestartDecision decision;
    bool acted;
    const char* line;
  };
  const std::vector<Case> cases = {
      {RestartPolicy::kAuto, stop, true, "restart policy auto: stop (deterministic): why"},
      {RestartPolicy::kAuto, restart, false, "restart policy auto: restart (transient): why not"},
      {RestartPolicy::kObserve, stop, false,
       "restart policy observe: would stop (deterministic): why; restarting"},
      {RestartPolicy::kObserve, restart, false,
       "restart policy observe: restart (transient): why not"},
      {RestartPolicy::kAlways, stop, false,
       "restart policy always: restart (auto would stop, deterministic: why)"},
      {RestartPolicy::kAuto, exclude, false,
       "restart policy auto: exclude node 2 (node): lost; leaving a node out is not done yet: "
       "restarting every node"},
  };
  for (const Case& c : cases) {
    const AppliedDecision applied = ApplyRestartPolicy(c.policy, c.decision);
    EXPECT_EQ(applied.acted, c.acted) << c.line;
    EXPECT_EQ(DescribeDecision(applied), c.line);
  }
}

}  // namespace
}  // namespace dlaunch::launcher
