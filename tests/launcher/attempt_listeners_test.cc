// The agent loop's side duties, each as a listener told of an attempt's events by hand: the
// events file, summary.json, the leftovers sweep, torchrun's file timer, the agent watch. Files in
// a test folder; no processes.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/exit_codes.h"
#include "core/run_dir/summary_file.h"
#include "launcher/job/agent_watch.h"
#include "launcher/job/events_listener.h"
#include "launcher/job/file_timer_listener.h"
#include "launcher/job/leftovers_listener.h"
#include "launcher/job/summary_listener.h"
#include "tests/common/test_dir.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

JobPlan Plan(const std::string& log_dir, int nproc, std::vector<std::string> program = {}) {
  LaunchOptions o;
  o.nproc = nproc;
  o.log_dir = log_dir;
  o.program = std::move(program);
  NodeSetup setup;
  setup.role = NodeRoleKind::kSingleNode;
  JobIdentity id{"run", "127.0.0.1", 29500, "127.0.0.1:29400", Membership{}, false};
  auto program_of = MakeRankProgram(o, ProgramSite{"", "/opt/agent"});
  return JobPlan(o, setup, id, {"/bin/prog"}, {}, program_of);
}

RankOutcome Started(int rank, pid_t pid) {
  RankOutcome r;
  r.rank = r.local_rank = rank;
  r.pid = pid;
  r.start_unix_ms = 1000;
  return r;
}

std::vector<rundir::JobEvent> Events(const std::string& path) {
  std::vector<rundir::JobEvent> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    EXPECT_TRUE(rundir::JobEventFromJson(line, &out.emplace_back())) << line;
  }
  return out;
}

std::string Brief(const rundir::JobEvent& e) {
  const char* kind = e.kind == rundir::JobEventKind::kRankStart         ? "start"
                     : e.kind == rundir::JobEventKind::kRankExit        ? "exit"
                     : e.kind == rundir::JobEventKind::kRestart         ? "restart"
                     : e.kind == rundir::JobEventKind::kRestartDecision ? "decision"
                                                                        : "other";
  return std::string(kind) + ":" + std::to_string(e.rank) + "@" + std::to_string(e.attempt);
}

// A role with nothing of its own to add: one node, no stragglers unless told.
class QuietRole : public NodeRole {
 public:
  JobIdentity Prepare() override { return {}; }
  bool Open(JobPlan*, Supervisor*) override { return true; }
  void OnTick() override {}
  std::string RankError(int) override { return ""; }
  void Conclude(AttemptReport*, SummaryInfo*) override {}
  void Explain(const AttemptReport&) override {}
  bool Next(AttemptReport*, JobPlan*, std::string*, const std::function<void()>&) override {
    return false;
  }
  void Close(const AttemptReport&) override {}
  std::vector<rundir::StragglerVerdict> Stragglers() const override { return stragglers; }
  int straggler_generation() const override { return generation; }

  std::vector<rundir::StragglerVerdict> stragglers;
  int generation = 0;
};

TEST(AttemptListenersTest, EventsSayEachRankStartAndExitOnceAndTheRestartsReason) {
  const testing::TestDir tmp("events_listener");
  const std::string path = (tmp.path() / "events.jsonl").string();
  JobEventLog log(path, "run");
  EventsListener events(&log, "hostA");
  AttemptListeners listeners;
  listeners.Add(&events);

  Membership m;
  listeners.AttemptStart(m);
  AttemptResult now;
  now.ranks = {Started(0, 100), Started(1, 0)};  // rank 1 not started yet
  listeners.RankChange(now);
  listeners.RankChange(now);  // nothing new
  now.ranks[1].pid = 101;
  now.ranks[0].exited = true;
  now.ranks[0].exit_code = 7;
  listeners.RankChange(now);
  now.ranks[1].exited = true;
  now.ranks[1].signal = SIGKILL;
  listeners.RanksGone(&now);
  AttemptReport ended;
  ended.error = "rank 0 failed: exit code 7";
  ended.restart_decision = ApplyRestartPolicy(
      RestartPolicy::kObserve, RestartDecision{RestartAction::kStop, "deterministic", -1, "x"});
  Membership next;
  next.attempt = 1;
  listeners.Restart(next, "restart", ended);
  listeners.AttemptStart(next);
  listeners.RankChange(now);  // the new attempt's ranks are said again

  const std::vector<rundir::JobEvent> lines = Events(path);
  std::vector<std::string> said;
  for (const auto& e : lines) said.push_back(Brief(e));
  // One change may start a rank and end another: each rank's events come in rank order.
  EXPECT_EQ(said, (std::vector<std::string>{"start:0@0", "exit:0@0", "start:1@0", "exit:1@0",
                                            "decision:-1@0", "restart:-1@1", "start:0@1",
                                            "exit:0@1", "start:1@1", "exit:1@1"}));
  ASSERT_EQ(lines.size(), 10u);
  EXPECT_EQ(lines[1].exit_code, 7);
  EXPECT_EQ(lines[3].signal, "SIGKILL");
  EXPECT_EQ(lines[4].message, "restart policy observe: would stop (deterministic): x; restarting");
  EXPECT_EQ(lines[5].message, "restart after: rank 0 failed: exit code 7");
  EXPECT_EQ(lines[0].host, "hostA");
  EXPECT_EQ(lines[0].pid, 100);
}

TEST(AttemptListenersTest, TheSummarySaysTheAttemptAsItRunsAndAsItEnded) {
  const testing::TestDir tmp("summary_listener");
  const JobPlan plan = Plan(tmp.path().string(), 2);
  fs::create_directories(plan.run_dir());
  QuietRole role;
  SummaryListener summary(&plan, &role, "hostA");
  const auto read = [&] {
    rundir::Summary written;
    std::vector<std::string> problems;
    rundir::ReadSummary(plan.summary_path(), "summary", &written, &problems);
    EXPECT_TRUE(problems.empty()) << problems.front();
    return written;
  };

  Membership m;
  summary.OnAttemptStart(m);
  AttemptResult now;
  now.ranks = {Started(0, 100), Started(1, 101)};
  summary.OnRankChange(now);
  EXPECT_EQ(read().exit_code, -1);  // running

  // A new straggler verdict rewrites it at the next tick, once.
  role.stragglers.push_back(rundir::StragglerVerdict{});
  role.generation = 1;
  summary.OnTick();
  EXPECT_EQ(read().stragglers.size(), 1u);

  now.ranks[0].exited = true;
  now.ranks[0].exit_code = 1;
  now.truncated_logs = {"rank0/stdout.log"};
  summary.OnRanksGone(&now);
  AttemptReport report;
  report.result = now;
  report.exit_code = kExitRankFailed;
  report.error = "rank 0 failed";
  summary.EndAttempt(&report);
  EXPECT_EQ(report.summary_path, plan.summary_path());
  EXPECT_EQ(read().exit_code, kExitRankFailed);
  EXPECT_EQ(read().error, "rank 0 failed");
  EXPECT_EQ(summary.info()->truncated_logs, now.truncated_logs);

  Membership next;
  next.attempt = 1;
  next.restart_count = 1;
  summary.OnRestart(next, "restart", report);
  summary.OnAttemptStart(next);
  ASSERT_EQ(summary.attempts().size(), 2u);
  EXPECT_EQ(summary.attempts()[0].next, "restart");
  EXPECT_EQ(summary.attempts()[1].restart_count, 1);

  report.exit_code = 130;  // interrupted while the next rendezvous waited
  report.error = "interrupted by SIGINT";
  summary.OnJobEnd(report);
  EXPECT_EQ(read().exit_code, 130);
  EXPECT_EQ(summary.attempts().back().exit_code, 130);
  EXPECT_FALSE(read().attempts.back().decision.has_value());

  // The restart policy's stop is the last attempt's decision, as written.
  report.restart_decision = ApplyRestartPolicy(
      RestartPolicy::kAuto, RestartDecision{RestartAction::kStop, "deterministic", -1, "twice"});
  summary.OnJobEnd(report);
  const std::optional<rundir::SummaryDecision> d = read().attempts.back().decision;
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->policy, "auto");
  EXPECT_EQ(d->action, "stop");
  EXPECT_EQ(d->rule, "deterministic");
  EXPECT_EQ(d->reason, "twice");
  EXPECT_TRUE(d->acted);
}

TEST(AttemptListenersTest, LeftoversGoOnceTheRanksAreGoneAndAnErrorFileIsKept) {
  const testing::TestDir tmp("leftovers_listener");
  const JobPlan plan = Plan(tmp.path().string(), 1);
  const std::string dir = plan.ranks()[0].dir;
  fs::create_directories(dir);
  std::ofstream(dir + "/flight.json.tmp.12.3") << "{";
  std::ofstream(dir + "/error.json.tmp.12.4") << R"({"kind": "exception", "message": "boom"})";
  LeftoversListener leftovers(&plan);
  AttemptResult gone;
  leftovers.OnRanksGone(&gone);
  EXPECT_FALSE(fs::exists(dir + "/flight.json.tmp.12.3"));
  EXPECT_FALSE(fs::exists(dir + "/error.json.tmp.12.4"));
  EXPECT_TRUE(fs::exists(dir + "/error.json"));
}

TEST(AttemptListenersTest, TheFileTimerIsWantedAsTorchrunReadsItAndReachesEveryRank) {
  ::unsetenv(kFileTimerEnableVar);
  EXPECT_FALSE(FileTimerWanted());
  ::setenv(kFileTimerEnableVar, "0", 1);
  EXPECT_FALSE(FileTimerWanted());
  ::setenv(kFileTimerEnableVar, "1", 1);
  EXPECT_TRUE(FileTimerWanted());
  ::unsetenv(kFileTimerEnableVar);

  Supervisor supervisor(nullptr, SupervisorOptions{});
  FileTimerListener timer(&supervisor);
  ProcessSpec process;
  process.env = {"A=1"};
  timer.OnRankProcess(&process);
  ASSERT_EQ(process.env.size(), 2u);
  const std::string entry = process.env[1];
  ASSERT_EQ(entry.rfind(std::string(kFileTimerFileVar) + "=", 0), 0u) << entry;
  struct stat st {};
  ASSERT_EQ(::stat(entry.substr(entry.find('=') + 1).c_str(), &st), 0) << entry;
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  AttemptResult gone;
  gone.ranks = {Started(0, 100)};
  timer.OnRanksGone(&gone);  // no kill asked: the outcome is as it was
  EXPECT_TRUE(gone.ranks[0].cause.empty());
}

TEST(AttemptListenersTest, TheAgentWatchSaysNothingBeforeAnyRankStarted) {
  const testing::TestDir tmp("agent_watch_listener");
  const JobPlan plan = Plan(tmp.path().string(), 1, {"t.py"});
  AgentWatchListener watch(&plan);
  ::testing::internal::CaptureStderr();
  watch.OnAttemptStart(Membership{});
  watch.OnTick();
  AttemptResult now;
  RankOutcome r = Started(0, 100);
  r.exited = true;  // ended by itself, and no heartbeat.json in its folder
  r.exit_code = 1;
  r.end_unix_ms = 1100;
  now.ranks = {r};
  watch.OnRankChange(now);
  watch.OnTick();  // said once
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "dlaunch: the Python rank agent did not load in rank 0 (no heartbeat.json; python -S "
            "or -I?): its hangs, errors and flight recorder are seen only from outside\n");
}

}  // namespace
}  // namespace dlaunch::launcher
