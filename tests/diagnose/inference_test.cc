// Inference over in-memory run snapshots: an even split is a tie unless evidence breaks it, the
// calls before a mismatch break it, collectives line up per process group, exit code 3 means a
// watchdog only from a rank that reported one, and the words of the report.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/proc.h"
#include "launcher/diagnose/analyzer.h"
#include "launcher/diagnose/run_snapshot.h"
#include "launcher/diagnose/stack_parser.h"

namespace dlaunch::launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// A call of a Python rank's flight recorder on the default group unless `pg` says otherwise.
struct Call {
  std::string op;
  std::string site;
  rundir::OpState state = rundir::OpState::kCompleted;
  std::string pg = "0";
  int64_t count = 1024;
};

class RunBuilder {
 public:
  explicit RunBuilder(int world) {
    run_.run_dir = "/nonexistent/run";
    run_.world_size = world;
    run_.ranks.resize(world);
    for (int r = 0; r < world; ++r) {
      RankRecord& rec = run_.ranks[r];
      rec.rank = r;
      rec.dir_present = true;
    }
  }
  RunBuilder& Calls(int rank, const std::vector<Call>& calls) {
    RankRecord& rec = run_.ranks[rank];
    rec.flight_state = rundir::FileState::kOk;
    rec.flight.rank = rank;
    rec.flight.reason = "exit";
    rec.flight.dumped_unix_ms = 1'000'000;
    std::map<std::string, int64_t> pg_seq;
    for (const Call& c : calls) {
      rundir::FlightEntry e;
      e.seq = static_cast<int64_t>(rec.flight.entries.size());
      e.collective_seq = e.seq;
      e.op = c.op;
      e.dtype = c.op == "barrier" ? "" : "float";
      e.count = c.op == "barrier" ? -1 : c.count;
      e.state = c.state;
      e.started_unix_ns = (900'000 + e.seq) * 1'000'000;
      if (c.state == rundir::OpState::kCompleted) e.completed_unix_ns = e.started_unix_ns + 1;
      e.pg = c.pg;
      e.pg_seq = pg_seq[c.pg]++;
      e.call_site = c.site;
      rec.flight.entries.push_back(e);
    }
    return *this;
  }
  RunBuilder& Exit(int rank, int code, int signal = 0) {
    rundir::SummaryRank s;
    s.rank = rank;
    s.status = code == 0 && signal == 0 ? rundir::RankStatus::kOk : rundir::RankStatus::kFailed;
    s.exit_code = signal ? -signal : code;
    s.signal = signal;
    s.end_unix_ms = 1'000'000 + rank;
    run_.ranks[rank].summary = s;
    return *this;
  }
  RunBuilder& LauncherExit(int code) {
    run_.exit_code = code;
    return *this;
  }
  Diagnosis Analyze(bool hang_suspected = false) const {
    AnalyzeOptions o;
    o.hang_suspected = hang_suspected;
    return launcher::Analyze(run_, o);
  }
  RunSnapshot run_;
};

const rundir::OpState kStarted = rundir::OpState::kStarted;

// One step of the loop both ranks ran: all_reduce at line 10, barrier at line 11.
std::vector<Call> Steps(int n) {
  std::vector<Call> calls;
  for (int i = 0; i < n; ++i) {
    calls.push_back({"allreduce", "train.py:10 <module>"});
    calls.push_back({"barrier", "train.py:11 <module>"});
  }
  return calls;
}

TEST(InferenceTest, AnEvenSplitWithoutHistoryIsUndecided) {
  Diagnosis d = RunBuilder(2)
                    .Calls(0, {{"barrier", "train.py:11 <module>", kStarted}})
                    .Calls(1, {{"allreduce", "train.py:10 <module>", kStarted}})
                    .Analyze(true);
  EXPECT_EQ(d.kind, DiagnosisKind::kMismatch);
  EXPECT_THAT(d.culprit_ranks, IsEmpty());
  EXPECT_EQ(d.headline,
            "MISMATCH at collective #0 (COLLECTIVE_TYPE_MISMATCH): rank 0 called barrier at "
            "train.py:11 <module> while rank 1 called allreduce float x1024 at train.py:10 "
            "<module>; one of them skipped a call (undecided: the ranks split evenly and nothing "
            "in the evidence tells which)");
  for (const auto& r : d.ranks) EXPECT_THAT(r.line, Not(HasSubstr("[culprit]"))) << r.line;
}

TEST(InferenceTest, TheRankThatBreaksThePatternOfEarlierCallsIsTheCulprit) {
  // Rank 0 skips the all_reduce of step 3 and meets rank 1's all_reduce with its barrier.
  std::vector<Call> skipped = Steps(3), right = Steps(3);
  skipped.push_back({"barrier", "train.py:11 <module>", kStarted});
  right.push_back({"allreduce", "train.py:10 <module>", kStarted});
  Diagnosis d = RunBuilder(2).Calls(0, skipped).Calls(1, right).Analyze(true);
  EXPECT_EQ(d.kind, DiagnosisKind::kMismatch);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(0));
  EXPECT_THAT(d.headline, HasSubstr("rank 0 called barrier"));
  EXPECT_THAT(d.headline, HasSubstr("(a tie, decided by the calls before it: rank 0 broke the "
                                    "pattern at #6)"));
  EXPECT_THAT(::testing::PrintToString(d.details),
              HasSubstr("they repeat every 2 call(s), so allreduce float x1024 at train.py:10 "
                        "<module> came next; rank 1 called it, rank 0 did not"));
}

TEST(InferenceTest, AnExtraCallAtALineOfItsOwnIsFoundWhereTheCallSitesDiverge) {
  std::vector<Call> extra = Steps(3), right = Steps(3);
  extra.push_back({"allreduce", "train.py:20 <module>"});  // the extra call
  extra.push_back({"allreduce", "train.py:10 <module>"});
  extra.push_back({"barrier", "train.py:11 <module>", kStarted});
  right.push_back({"allreduce", "train.py:10 <module>"});
  right.push_back({"barrier", "train.py:11 <module>"});
  right.push_back({"allreduce", "train.py:10 <module>", kStarted});
  Diagnosis d = RunBuilder(2).Calls(0, right).Calls(1, extra).Analyze(true);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(1));
  EXPECT_THAT(d.headline, HasSubstr("rank 1 broke the pattern at #6"));
}

TEST(InferenceTest, AMajorityNeedsNoTieBreak) {
  std::vector<Call> a = Steps(2), b = Steps(2);
  a.push_back({"allreduce", "train.py:10 <module>", kStarted, "0", 2048});
  b.push_back({"allreduce", "train.py:10 <module>", kStarted});
  Diagnosis d = RunBuilder(3).Calls(0, b).Calls(1, a).Calls(2, b).Analyze(true);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(1));
  EXPECT_THAT(d.headline, Not(HasSubstr("tie")));
}

TEST(InferenceTest, GroupsCalledInOppositeOrdersAreADeadlock) {
  std::vector<Call> r0 = Steps(1), r1 = Steps(1);
  r0.push_back({"allreduce", "train.py:20 <module>", kStarted, "1"});
  r1.push_back({"allreduce", "train.py:22 <module>", kStarted, "0"});
  Diagnosis d = RunBuilder(2).Calls(0, r0).Calls(1, r1).Analyze(true);
  EXPECT_EQ(d.kind, DiagnosisKind::kHang);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(0, 1));
  EXPECT_EQ(d.headline,
            "HANG: deadlock: rank 0 waits in allreduce on group 1 (seq 0) at train.py:20 <module> "
            "while rank 1 waits in allreduce on the default group (seq 2) at train.py:22 "
            "<module>; the ranks call these groups in different orders");
}

TEST(InferenceTest, WaitsInGroupsAPeerIsNotInAreNoDeadlock) {
  // A 2x2 mesh: tp groups 1 = (0,1) and 2 = (2,3), dp groups 3 = (0,2) and 4 = (1,3). Rank 1
  // stalls before its second tp all_reduce: rank 0 waits for it in group 1, ranks 2 and 3 wait
  // in dp groups for ranks 0 and 1. No two of them wait for each other.
  const rundir::OpState done = rundir::OpState::kCompleted;
  RunBuilder b(4);
  b.Calls(0, {{"allreduce", "m.py:1 f", done, "1"},
              {"allreduce", "m.py:2 f", done, "3"},
              {"allreduce", "m.py:1 f", kStarted, "1"}});
  b.Calls(1, {{"allreduce", "m.py:1 f", done, "1"}, {"allreduce", "m.py:2 f", done, "4"}});
  b.Calls(2, {{"allreduce", "m.py:1 f", done, "2"},
              {"allreduce", "m.py:2 f", done, "3"},
              {"allreduce", "m.py:1 f", done, "2"},
              {"allreduce", "m.py:2 f", kStarted, "3"}});
  b.Calls(3, {{"allreduce", "m.py:1 f", done, "2"},
              {"allreduce", "m.py:2 f", done, "4"},
              {"allreduce", "m.py:1 f", done, "2"},
              {"allreduce", "m.py:2 f", kStarted, "4"}});
  for (RankRecord& r : b.run_.ranks) {
    r.flight.process_groups = {{"0", {{0, 1, 2, 3}, "gloo", ""}},
                               {"1", {{0, 1}, "gloo", ""}},
                               {"2", {{2, 3}, "gloo", ""}},
                               {"3", {{0, 2}, "gloo", ""}},
                               {"4", {{1, 3}, "gloo", ""}}};
  }
  Diagnosis d = b.Analyze(true);
  EXPECT_EQ(d.kind, DiagnosisKind::kHang);
  EXPECT_THAT(d.headline, Not(HasSubstr("deadlock"))) << d.headline;
  EXPECT_THAT(d.culprit_ranks, ElementsAre(1)) << d.headline;
}

// A data- x tensor-parallel 2x2 mesh: tp groups 1 = {0,1} and 2 = {2,3}, dp groups 3 = {0,2} and
// 4 = {1,3}. Every rank calls a barrier on the default group, then per step a tp all_reduce of
// 8 KiB and a dp one of 4 KiB. Rank `stopped` is SIGSTOPped before its tp call of step 3: its tp
// peer waits there (its #7, the group's pg_seq 3); the other pair completed their own #7, a call
// of the other tp group, and wait in dp calls. With `local_names` each rank names its own groups
// "1" (tp) and "2" (dp) and lists only those, as ranks that create only their own groups do.
RunBuilder Mesh2x2(int stopped, bool local_names = false) {
  const rundir::OpState done = rundir::OpState::kCompleted;
  RunBuilder b(4);
  for (int r = 0; r < 4; ++r) {
    std::string tp = r < 2 ? "1" : "2", dp = r % 2 == 0 ? "3" : "4";
    if (local_names) tp = "1", dp = "2";
    const bool same_pair = r / 2 == stopped / 2;
    std::vector<Call> calls = {{"barrier", "m.py:5 <module>"}};
    for (int step = 0; step < 3; ++step) {
      calls.push_back({"allreduce", "m.py:9 step", done, tp, 2048});
      calls.push_back({"allreduce", "m.py:10 step", done, dp, 1024});
    }
    if (r != stopped)
      calls.push_back({"allreduce", "m.py:9 step", same_pair ? kStarted : done, tp, 2048});
    if (!same_pair) calls.push_back({"allreduce", "m.py:10 step", kStarted, dp, 1024});
    b.Calls(r, calls);
    for (rundir::FlightEntry& e : b.run_.ranks[r].flight.entries) e.bytes = e.count * 4;
    b.run_.ranks[r].flight.process_groups = {{"0", {{0, 1, 2, 3}, "gloo", "default_pg"}},
                                             {"1", {{0, 1}, "gloo", "mesh_tp"}},
                                             {"2", {{2, 3}, "gloo", "mesh_tp"}},
                                             {"3", {{0, 2}, "gloo", "mesh_dp"}},
                                             {"4", {{1, 3}, "gloo", "mesh_dp"}}};
    if (local_names) {
      b.run_.ranks[r].flight.process_groups = {
          {"1", {{r / 2 * 2, r / 2 * 2 + 1}, "gloo", "mesh_tp"}},
          {"2", {{r % 2, r % 2 + 2}, "gloo", "mesh_dp"}}};
    }
  }
  b.run_.ranks[stopped].process_state = "T (stopped)";
  return b;
}

TEST(InferenceTest, AHangInAMeshIsMatchedInTheWaitingRanksGroupByItsSeq) {
  for (int stopped = 0; stopped < 4; ++stopped) {
    SCOPED_TRACE("rank " + std::to_string(stopped) + " stopped");
    const int peer = stopped ^ 1;
    const std::vector<int> group = {std::min(stopped, peer), std::max(stopped, peer)};
    const std::string members = std::to_string(group[0]) + "," + std::to_string(group[1]);
    Diagnosis d = Mesh2x2(stopped).Analyze(true);
    EXPECT_EQ(d.kind, DiagnosisKind::kHang);
    EXPECT_THAT(d.culprit_ranks, ElementsAre(stopped)) << d.headline;
    EXPECT_EQ(d.seq, 7);
    EXPECT_EQ(d.bytes, 8192);
    EXPECT_EQ(d.pg, stopped < 2 ? "1" : "2");
    EXPECT_EQ(d.pg_desc, "mesh_tp");
    EXPECT_EQ(d.pg_ranks, group);
    EXPECT_EQ(d.pg_seq, 3);
    EXPECT_THAT(d.entered_ranks, ElementsAre(peer));
    EXPECT_THAT(d.missing_ranks, ElementsAre(stopped));
    EXPECT_THAT(d.headline,
                HasSubstr("HANG at collective #7 allreduce float 8 KiB on group mesh_tp {" +
                          members + "} (pg_seq 3): rank " + std::to_string(peer) + " waiting "));
    EXPECT_THAT(d.headline, HasSubstr("; rank " + std::to_string(stopped) + " never entered ("));
    EXPECT_THAT(d.headline, Not(HasSubstr("completed it"))) << d.headline;
    EXPECT_EQ(d.ranks[peer].state, rundir::RankState::kWaiting);
    EXPECT_EQ(d.ranks[stopped].state, rundir::RankState::kNeverEntered);
    for (int other : {0, 1, 2, 3}) {
      if (other / 2 == stopped / 2) continue;
      EXPECT_EQ(d.ranks[other].state, rundir::RankState::kRunning);
      EXPECT_THAT(d.ranks[other].line, HasSubstr("not in group mesh_tp {" + members + "}"));
    }
  }
  // The same name for both tp groups: the members are the waiting rank's group's.
  for (int stopped = 0; stopped < 4; ++stopped) {
    const Diagnosis local = Mesh2x2(stopped, true).Analyze(true);
    EXPECT_THAT(local.culprit_ranks, ElementsAre(stopped)) << local.headline;
    EXPECT_THAT(local.pg_ranks, ElementsAre(stopped / 2 * 2, stopped / 2 * 2 + 1));
    EXPECT_EQ(local.pg_seq, 3);
  }
  const Diagnosis d = Mesh2x2(3).Analyze(true);
  EXPECT_EQ(d.headline,
            "HANG at collective #7 allreduce float 8 KiB on group mesh_tp {2,3} (pg_seq 3): rank 2 "
            "waiting 100 s; rank 3 never entered (last completed #6, process T (stopped))");
}

TEST(InferenceTest, CollectivesLineUpPerProcessGroup) {
  // The same calls, interleaved differently across two groups: no mismatch by seq.
  std::vector<Call> r0 = {{"allreduce", "a.py:1 f", rundir::OpState::kCompleted, "1", 8},
                          {"allreduce", "a.py:2 f"}};
  std::vector<Call> r1 = {{"allreduce", "a.py:2 f"},
                          {"allreduce", "a.py:1 f", rundir::OpState::kCompleted, "1", 8}};
  Diagnosis d = RunBuilder(2).Calls(0, r0).Calls(1, r1).Exit(0, 0).Exit(1, 0).Analyze();
  EXPECT_EQ(d.kind, DiagnosisKind::kOk) << d.headline;
}

TEST(InferenceTest, ARankStillInACollectiveTheOthersCompletedIsTheCulprit) {
  // Rank 2 was stopped after its part of #4 went out: the others completed #4 and wait in #5.
  std::vector<Call> ahead = Steps(2), behind = Steps(2);
  ahead.push_back({"allreduce", "train.py:10 <module>"});
  ahead.push_back({"barrier", "train.py:11 <module>", kStarted});
  behind.push_back({"allreduce", "train.py:10 <module>", kStarted});
  Diagnosis d =
      RunBuilder(4).Calls(0, ahead).Calls(1, ahead).Calls(2, behind).Calls(3, ahead).Analyze(true);
  EXPECT_EQ(d.kind, DiagnosisKind::kHang);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2));
  EXPECT_THAT(d.headline, HasSubstr("ranks 0,1,3 completed it"));
  EXPECT_THAT(d.headline, HasSubstr("rank 2 still in it after the others completed it"));
  EXPECT_THAT(d.headline, Not(HasSubstr("none completed")));
  EXPECT_THAT(d.headline, Not(HasSubstr("no rank stands out")));
}

TEST(InferenceTest, ARankTornDownInACollectiveTheOthersCompletedIsTheCulprit) {
  // The same stop, found by the ranks' own watchdogs instead of the hang monitor: ranks 0 and 3
  // time out in #5 and exit 3, then the launcher tears down ranks 1 and 2 (the stopped one gets
  // SIGCONT with its SIGTERM). Rank 2 was still in #4 when it went.
  std::vector<Call> ahead = Steps(2), behind = Steps(2);
  ahead.push_back({"allreduce", "train.py:10 <module>"});
  ahead.push_back({"barrier", "train.py:11 <module>", kStarted});
  behind.push_back({"allreduce", "train.py:10 <module>", kStarted});
  RunBuilder b(4);
  b.Calls(0, ahead).Calls(1, ahead).Calls(2, behind).Calls(3, ahead).LauncherExit(3);
  for (int r : {0, 3}) {
    b.Exit(r, 3);
    b.run_.ranks[r].error = rundir::ErrorReport{r, "timeout", "collective #5 timed out", 1, {}};
  }
  for (int r : {1, 2}) {
    b.Exit(r, 0, SIGTERM);
    b.run_.ranks[r].summary->status = rundir::RankStatus::kKilled;
  }
  Diagnosis d = b.Analyze(true);
  EXPECT_EQ(d.kind, DiagnosisKind::kHang);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2));
  EXPECT_THAT(d.headline, HasSubstr("rank 2 still in it after the others completed it"));
  EXPECT_THAT(d.headline, Not(HasSubstr("no rank stands out")));
}

TEST(InferenceTest, ARankFoundStoppedAtTheTeardownIsTheCulprit) {
  // Rank 2 was stopped inside #4 before its part went out: every rank waits in #4, rank 3's
  // watchdog fires first, ranks 0 and 1 see it abort, and the launcher, tearing down, finds rank 2
  // stopped (process state T) and ends it with SIGTERM.
  std::vector<Call> calls = Steps(2);
  calls.push_back({"allreduce", "train.py:10 <module>", kStarted});
  RunBuilder b(4);
  b.Calls(0, calls).Calls(1, calls).Calls(2, calls).Calls(3, calls).LauncherExit(3);
  b.Exit(3, 3);
  b.run_.ranks[3].error = rundir::ErrorReport{3, "timeout", "collective #4 timed out", 1, {}};
  for (int r : {0, 1}) {
    b.Exit(r, 3);
    b.run_.ranks[r].error =
        rundir::ErrorReport{r, "timeout", "collective #4 failed: rank 3 aborted", 1, {}};
  }
  b.Exit(2, 0, SIGTERM);
  b.run_.ranks[2].summary->status = rundir::RankStatus::kKilled;
  b.run_.ranks[2].summary->stopped_at_teardown = true;
  Diagnosis d = b.Analyze(true);
  EXPECT_EQ(d.kind, DiagnosisKind::kHang);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2));
  EXPECT_THAT(d.headline, Not(HasSubstr("no rank stands out")));
  EXPECT_THAT(d.ranks[2].line, HasSubstr("T (stopped)"));
  // Without that, the same evidence names nobody.
  b.run_.ranks[2].summary->stopped_at_teardown = false;
  EXPECT_THAT(b.Analyze(true).culprit_ranks, IsEmpty());
}

TEST(InferenceTest, ExitCodeThreeOfAnyProgramIsItsOwnExit) {
  // No timeout reported: exit code 3 is the program's, not a collective watchdog's.
  Diagnosis d = RunBuilder(2)
                    .Calls(0, Steps(2))
                    .Calls(1, Steps(2))
                    .Exit(0, 0)
                    .Exit(1, 3)
                    .LauncherExit(1)
                    .Analyze();
  EXPECT_EQ(d.kind, DiagnosisKind::kFailure);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(1));
  EXPECT_THAT(d.headline, HasSubstr("FAILURE: rank 1 exited with code 3"));
  for (const auto& r : d.ranks) EXPECT_THAT(r.line, Not(HasSubstr("watchdog"))) << r.line;
  // A rank that reported its watchdog's timeout is still read as one.
  RunBuilder b(2);
  b.Calls(0, Steps(2)).Calls(1, Steps(2)).Exit(0, 0).Exit(1, 3);
  b.run_.ranks[1].error = rundir::ErrorReport{1, "timeout", "collective #4 timed out", 1, {}};
  Diagnosis w = b.Analyze();
  EXPECT_NE(w.kind, DiagnosisKind::kFailure) << w.headline;
}

TEST(InferenceTest, NoCollectiveYetIsSaidInWords) {
  RunBuilder b(2);
  b.Calls(0, {{"allreduce", "a.py:1 f", kStarted}}).Calls(1, {}).Exit(1, 0, SIGKILL);
  Diagnosis d = b.Analyze();
  EXPECT_THAT(d.headline, Not(HasSubstr("#-1")));
  EXPECT_THAT(d.headline, HasSubstr("no collective completed yet"));
  // A SIGKILL with nothing pointing at memory gets no OOM hint.
  EXPECT_THAT(d.headline, HasSubstr("was killed by SIGKILL"));
  EXPECT_THAT(d.headline, Not(HasSubstr("out of memory")));
  for (const auto& r : d.ranks) EXPECT_THAT(r.line, Not(HasSubstr("#-1"))) << r.line;
}

TEST(InferenceTest, ARunningRankWhosePidIsGoneIsNotRunning) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // reaped: the pid is gone
  RunBuilder b(1);
  rundir::SummaryRank s;
  s.rank = 0;
  s.status = rundir::RankStatus::kRunning;
  s.pid = child;
  s.host = base::Hostname();
  b.run_.ranks[0].summary = s;
  Diagnosis d = b.Analyze();
  EXPECT_THAT(d.ranks[0].line,
              HasSubstr("not running; the launcher died before recording its exit"));
}

TEST(StackParserTest, ADataLoaderWaitLeadsWithTheUsersFrameAndTheDataLoaderFrame) {
  const std::string lib = "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py";
  const std::string stacks =
      "Thread 1 \"MainThread\" (main) (most recent call last):\n"
      "  File \"/job/train.py\", line 12, in <module>\n"
      "    for b in loader:\n"
      "  File \"" +
      lib +
      "\", line 628, in __next__\n"
      "    data = self._next_data()\n"
      "  File \"" +
      lib +
      "\", line 1316, in _next_data\n"
      "    idx, data = self._get_data()\n"
      "  File \"" +
      lib +
      "\", line 1120, in _try_get_data\n"
      "    data = self._data_queue.get(timeout=timeout)\n"
      "  File \"/usr/lib/python3.11/multiprocessing/connection.py\", line 931, in wait\n"
      "    ready = selector.select(timeout)\n"
      "  File \"/usr/lib/python3.11/selectors.py\", line 416, in select\n"
      "    fd_event_list = self._selector.poll(timeout)\n";
  StackSummary s = ParsePythonStacks(stacks);
  EXPECT_EQ(s.top.rfind("train.py:12 for b in loader: > dataloader.py:1316 _next_data; "
                        "innermost: fd_event_list = self._selector.poll(timeout) < selectors.py",
                        0),
            0u)
      << s.top;
}

TEST(StackParserTest, TheWorkerTheLoaderWaitsForIsNamedWithItsOwnFrame) {
  const std::string main =
      "Thread 1 \"MainThread\" (main) (most recent call last):\n"
      "  File \"/job/train.py\", line 12, in <module>\n"
      "    for b in loader:\n"
      "  File \"/usr/lib/python3.11/selectors.py\", line 416, in select\n"
      "    fd_event_list = self._selector.poll(timeout)\n"
      "\n";
  const std::string workers =
      "DataLoader workers of the main thread's loader: worker 0 (pid 4241, S (sleeping)), "
      "worker 1 (pid 4242, S (sleeping)); it waits for worker 1 (batch 7)\n";
  const std::string worker_stacks =
      "Worker 1 (pid 4242) stacks (most recent call first):\n"
      "Thread 0x00007f3c5a1b3000 (most recent call first):\n"
      "  File \"/job/feeder.py\", line 3 in feed\n"
      "\n"
      "Current thread 0x00007f3c5a1b2740 (most recent call first):\n"
      "  File \"/job/data.py\", line 52 in __getitem__\n"
      "  File \"/usr/lib/python3/dist-packages/torch/utils/data/_utils/fetch.py\", line 58 in "
      "<listcomp>\n"
      "  File \"/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py\", line 302 in "
      "_worker_loop\n";
  StackSummary s = ParsePythonStacks(main + workers + worker_stacks);
  EXPECT_THAT(s.top, HasSubstr("fd_event_list = self._selector.poll(timeout) < selectors.py:416 "
                               "select < train.py:12 <module>; waits for DataLoader worker 1 "
                               "(pid 4242, S (sleeping)) at data.py:52 __getitem__"));
  // The workers' lines are no frames of the main thread.
  EXPECT_THAT(s.top, Not(HasSubstr("worker.py")));
  // A worker that did not answer is still named, with its state.
  StackSummary silent = ParsePythonStacks(main + workers);
  EXPECT_THAT(silent.top, HasSubstr("; waits for DataLoader worker 1 (pid 4242, S (sleeping)), "
                                    "whose stacks did not come"));
  // Without a waited-for worker nothing is added.
  StackSummary idle = ParsePythonStacks(
      main + "DataLoader workers of the main thread's loader: worker 0 (pid 4241, S (sleeping))\n");
  EXPECT_THAT(idle.top, Not(HasSubstr("waits for")));
}

TEST(StackParserTest, TheAgentsWrapperFrameIsLeftOut) {
  StackSummary s = ParsePythonStacks(
      "Thread 1 \"MainThread\" (main) (most recent call last):\n"
      "  File \"/job/train.py\", line 5, in <module>\n"
      "    dist.all_reduce(t)\n"
      "  File \"/opt/dlaunch/python/dlaunch/_torch_hooks.py\", line 172, in recorded\n"
      "    work = fn(*args, **kwargs)\n"
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line "
      "1536, in all_reduce\n"
      "    work.wait()\n");
  EXPECT_EQ(s.top, "work.wait() < distributed_c10d.py:1536 all_reduce < train.py:5 <module>");
  EXPECT_EQ(s.activity, StackActivity::kCollective);
}

}  // namespace
}  // namespace dlaunch::launcher
