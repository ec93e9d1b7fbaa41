// Naming the right cause under faults: a lost node, a non-finite loss, an OOM among fallout,
// ties of silence, stacks that could not all be taken; run directories written as the launcher
// and the ranks write them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "launcher/diagnose/analyzer.h"
#include "launcher/diagnose/rank_facts.h"
#include "launcher/diagnose/run_snapshot.h"
#include "tests/diagnose/test_util.h"

namespace dlaunch::launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

constexpr int64_t kBase = 1764450000000;

class RunDirWriter {
 public:
  explicit RunDirWriter(const std::string& dir) : dir_(dir) {}
  std::string RankDir(int rank) const {
    const std::string d = dir_ + "/rank" + std::to_string(rank);
    ::mkdir(d.c_str(), 0700);
    return d;
  }
  void Summary(const json& summary) const { std::ofstream(dir_ + "/summary.json") << summary; }
  // summary.json of a failed single-node run with these ranks.
  void Failed(const json& ranks) const {
    Summary({{"run_id", "failed"}, {"exit_code", 1}, {"ranks", ranks}});
  }
  void Error(int rank, const std::string& kind, const std::string& message, int64_t at) const {
    std::ofstream(RankDir(rank) + "/error.json")
        << json{{"rank", rank}, {"kind", kind}, {"message", message}, {"unix_ms", at}};
  }
  void Event(int rank, const std::string& kind, const std::string& message, int64_t at) const {
    std::ofstream(RankDir(rank) + "/events.jsonl", std::ios::app)
        << json{{"unix_ms", at}, {"rank", rank}, {"kind", kind}, {"message", message}} << "\n";
  }
  // The rank's last sign of activity, a telemetry line at `at`, and some output (whose file time
  // is no evidence: a copy of the directory would reset it).
  void LastActive(int rank, int64_t at) const {
    const json telemetry = {
        {"unix_ms", at}, {"rank", rank}, {"kind", "telemetry"}, {"step", 1}, {"phase", "forward"}};
    std::ofstream(RankDir(rank) + "/events.jsonl", std::ios::app) << telemetry << "\n";
    std::ofstream(RankDir(rank) + "/stdout.log") << "step 1\n";
  }
  void Stacks(int rank, const std::string& main_thread_frames) const {
    std::ofstream(RankDir(rank) + "/stacks.txt") << "Thread 1 (Thread 0x7f (LWP 1) \"prog\"):\n"
                                                 << main_thread_frames << "\n";
  }

 private:
  std::string dir_;
};

json Rank(int rank, const std::string& status, int exit_code, int64_t end, int signal = 0) {
  json r = {{"rank", rank},     {"local_rank", rank},     {"host", "node0"},   {"pid", 100 + rank},
            {"status", status}, {"exit_code", exit_code}, {"end_unix_ms", end}};
  if (signal) r["signal"] = signal == 9 ? "SIGKILL" : "SIGTERM";
  return r;
}

Diagnosis AnalyzeDir(const std::string& dir) { return Analyze(LoadRunDir(dir)); }

TEST(FaultsDiagnosisTest, ALostNodeIsTheRootCauseAndItsRanksAreLostWithIt) {
  const testing::TestDir tmp("diagnose");
  RunDirWriter w(tmp.string());
  // Node 1's last word had its ranks "exited" with the default code 0: no evidence.
  json ranks = json::array(
      {Rank(0, "killed", -15, kBase + 900, 15), Rank(1, "killed", -15, kBase + 900, 15)});
  // A status the node sent before its ranks started named a default "rank 0".
  ranks.push_back({{"rank", 0}, {"host", "node1"}, {"node_rank", 1}, {"status", "ok"}});
  for (int r : {2, 3}) {
    ranks.push_back({{"rank", r},
                     {"host", "node1"},
                     {"node_rank", 1},
                     {"status", "ok"},
                     {"exit_code", 0},
                     {"pid", 200 + r}});
  }
  w.Summary({{"run_id", "lost"},
             {"exit_code", 1},
             {"error", "node 1 (node1) lost: its agent's stream ended"},
             {"ranks", ranks},
             {"nodes", json::array({{{"node_rank", 0}, {"host", "node0"}, {"status", "failed"}},
                                    {{"node_rank", 1}, {"host", "node1"}, {"status", "lost"}}})}});
  for (int r = 0; r < 4; ++r) w.RankDir(r);
  Diagnosis d = AnalyzeDir(tmp.string());
  EXPECT_EQ(d.kind, DiagnosisKind::kFailure);
  EXPECT_EQ(d.headline,
            "FAILURE: node 1 (node1) lost: its agent's stream ended; ranks 2,3 lost with node 1");
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2, 3));
  ASSERT_EQ(d.ranks.size(), 4u);
  EXPECT_THAT(d.ranks[2].line, HasSubstr("lost with node 1 (node1)"));
  EXPECT_THAT(d.ranks[2].line, Not(HasSubstr("exited with code 0")));
  EXPECT_THAT(d.ranks[0].line, HasSubstr("torn down by the launcher"));
}

// Rank 0 of node 0 reports an error of its own, rank 1 is torn down, node 1 is lost with rank 3
// and with rank 2, which node 1 last reported as `rank2`.
void WriteOwnErrorBesideALostNode(const RunDirWriter& w, const json& rank2) {
  json ranks = json::array(
      {Rank(0, "failed", 1, kBase + 500), Rank(1, "killed", -15, kBase + 900, 15), rank2});
  ranks.push_back({{"rank", 3}, {"host", "node1"}, {"node_rank", 1}, {"status", "lost"}});
  w.Summary({{"run_id", "lost"},
             {"exit_code", 1},
             {"ranks", ranks},
             {"nodes", json::array({{{"node_rank", 1}, {"host", "node1"}, {"status", "lost"}}})}});
  w.Error(0, "error", "ValueError: bad batch shape", kBase + 400);
}

TEST(FaultsDiagnosisTest, AnOwnErrorOnASurvivingNodeOutranksTheNodeLoss) {
  const testing::TestDir tmp("diagnose");
  RunDirWriter w(tmp.string());
  WriteOwnErrorBesideALostNode(
      w, {{"rank", 2}, {"host", "node1"}, {"node_rank", 1}, {"status", "lost"}});
  Diagnosis d = AnalyzeDir(tmp.string());
  EXPECT_THAT(d.culprit_ranks, ElementsAre(0));
  EXPECT_THAT(d.headline, HasSubstr("FAILURE: rank 0 reported an error: ValueError"));
}

TEST(FaultsDiagnosisTest, ANonFiniteLossIsTheRootCauseOverEarlierFallout) {
  const testing::TestDir tmp("diagnose");
  RunDirWriter w(tmp.string());
  w.Failed(json::array({Rank(0, "failed", 1, kBase + 100), Rank(1, "failed", 1, kBase + 300),
                        Rank(2, "killed", -15, kBase + 400, 15)}));
  w.Error(0, "error", "Connection closed by peer [127.0.0.1]:4000", kBase + 90);
  w.Event(1, "nan", "loss became NaN at step 12 on rank 1", kBase + 250);
  Diagnosis d = AnalyzeDir(tmp.string());
  EXPECT_THAT(d.culprit_ranks, ElementsAre(1));
  EXPECT_THAT(d.headline, HasSubstr("rank 1 stopped on a non-finite loss: loss became NaN at step "
                                    "12 on rank 1"));
}

TEST(FaultsDiagnosisTest, AnOutOfMemoryOutranksAnEarlierErrorAndAnEarlierExit) {
  const testing::TestDir tmp("diagnose");
  RunDirWriter w(tmp.string());
  // Under ulimit -v the OOM rank's exit can come last: its own cause still names it.
  w.Failed(json::array({Rank(0, "failed", 1, kBase + 100), Rank(1, "failed", 1, kBase + 900)}));
  w.Error(0, "error", "std::runtime_error: gloo::IoException", kBase + 95);
  w.Error(1, "oom", "out of host memory in forward (std::bad_alloc)", kBase + 200);
  Diagnosis d = AnalyzeDir(tmp.string());
  EXPECT_THAT(d.culprit_ranks, ElementsAre(1));
  EXPECT_THAT(d.headline, HasSubstr("rank 1 ran out of memory"));
}

TEST(FaultsDiagnosisTest, AnExitWhoseLastStderrLineIsPeerFalloutComesAfterALaterSignal) {
  const testing::TestDir tmp("diagnose");
  RunDirWriter w(tmp.string());
  // Rank 1's node reaped its SIGKILLed rank after rank 0 had already exited of the loss.
  w.Failed(json::array({Rank(0, "failed", 1, kBase + 100), Rank(1, "failed", -9, kBase + 180, 9)}));
  std::ofstream(w.RankDir(0) + "/stderr.log") << "step 3\nconnection reset by peer\n\n";
  Diagnosis d = AnalyzeDir(tmp.string());
  EXPECT_THAT(d.culprit_ranks, ElementsAre(1));
}

TEST(FaultsDiagnosisTest, PickRootCauseIsWhatTheDiagnosisNames) {
  const testing::TestDir tmp("diagnose");
  RunDirWriter w(tmp.string());
  w.Failed(json::array({Rank(0, "failed", 1, kBase + 100), Rank(1, "failed", 1, kBase + 200),
                        Rank(2, "failed", 1, kBase + 50)}));
  w.Error(2, "error", "connection reset by peer", kBase + 40);
  w.Error(1, "error", "RuntimeError: shapes differ", kBase + 150);
  RunSnapshot run = LoadRunDir(tmp.string());
  const int picked = PickRootCause(GatherRunFacts(run, {}));
  EXPECT_EQ(picked, 0);  // own exit at +100 beats own error at +150; fallout last
  EXPECT_THAT(Analyze(run).culprit_ranks, ElementsAre(picked));
}

// The shared-memory transport's errors (core/comm/shm_group.cc, shm_p2p.cc), as its ranks report
// them: losing or waiting for a peer is fallout; a size or collective mismatch is the rank's own.
TEST(FaultsDiagnosisTest, SharedMemoryPeerLossReadsAsFallout) {
  for (const char* fallout :
       {"shared memory allreduce: rank 2 (pid 4242) died",
        // as train's rank 1 reported it when rank 2 was SIGKILLed (its watchdog's wording around)
        "allreduce seq 186 failed on rank 1: shared memory allreduce: rank 2 (pid 29530) died; "
        "rank 2 missing from seq 186",
        "shared memory allreduce: rank 2 left (its communicator was destroyed)",
        "shared memory barrier: rank 2 aborted its communicator",
        "shared memory allreduce: communicator aborted",
        "shared memory allreduce timed out; not arrived: rank 2",
        "shared memory send timed out; not finished: send to rank 2 (sent 0 of 4096 bytes)",
        "shared memory rendezvous timed out after 30000 ms; never mapped: rank 2"}) {
    EXPECT_TRUE(IsFallout(fallout)) << fallout;
  }
  for (const char* own :
       {"shared memory recv: rank 0 expected 4096 bytes from rank 1, which sent 8192",
        "ranks disagree on a collective: rank 1 called allreduce of 1024 float (sum), rank 0 "
        "called broadcast of 1024 float root 0",
        "RuntimeError: DataLoader worker (pid 4242) exited unexpectedly",
        "loss became nan at step 3"}) {
    EXPECT_FALSE(IsFallout(own)) << own;
  }
}

// A SIGKILLed shared-memory rank: the others saw it die before its launcher reaped it, and their
// errors name it; it is the root cause.
TEST(FaultsDiagnosisTest, ASharedMemoryRankThatDiedIsTheRootCauseNotThoseThatSawIt) {
  const testing::TestDir tmp("diagnose");
  RunDirWriter w(tmp.string());
  w.Failed(json::array({Rank(0, "failed", 1, kBase + 60), Rank(1, "failed", 1, kBase + 70),
                        Rank(2, "failed", -9, kBase + 180, 9)}));
  w.Error(0, "error", "shared memory allreduce: rank 2 (pid 102) died", kBase + 40);
  w.Error(1, "error", "shared memory allreduce: rank 0 left (its communicator was destroyed)",
          kBase + 50);
  RunSnapshot run = LoadRunDir(tmp.string());
  EXPECT_EQ(PickRootCause(GatherRunFacts(run, {})), 2);
  EXPECT_THAT(Analyze(run).culprit_ranks, ElementsAre(2));
}

// A SIGSTOPped shared-memory rank: rank 0's watchdog fired (exit 3) and it left; rank 1 then
// failed on its leaving. That is the hang's fallout, not a root cause: no rank's failure is, and
// the job is a hang.
TEST(FaultsDiagnosisTest, APeerLeftAfterItsWatchdogFiredIsTheHangsFallout) {
  const testing::TestDir tmp("diagnose");
  RunDirWriter w(tmp.string());
  w.Summary(
      {{"run_id", "stop"},
       {"exit_code", 3},
       {"ranks", json::array({Rank(0, "failed", 3, kBase + 100), Rank(1, "failed", 1, kBase + 90),
                              Rank(2, "killed", -15, kBase + 200, 15)})}});
  w.Error(0, "timeout", "shared memory allreduce timed out; not arrived: rank 2", kBase + 80);
  w.Error(1, "error", "shared memory allreduce: rank 0 left (its communicator was destroyed)",
          kBase + 85);
  RunSnapshot run = LoadRunDir(tmp.string());
  const std::vector<RankFacts> facts = GatherRunFacts(run, {});
  EXPECT_EQ(PickRootCause(facts), -1);
  EXPECT_EQ(FirstWatchdogExit(facts), 0);
  EXPECT_EQ(Analyze(run).kind, DiagnosisKind::kHang);
}

// The launcher's root-cause block picks over GatherRunFacts (HostedCoordinator::RootCause); over
// the facts of the records alone it would name `records_alone` in the run under `dir`, not the
// diagnosis' `root`.
void ExpectTheRunFactsPickTheDiagnosisRoot(const std::string& dir, int records_alone, int root) {
  RunSnapshot run = LoadRunDir(dir);
  std::vector<RankFacts> facts;
  for (const RankRecord& rec : run.ranks) facts.push_back(GatherFacts(rec, {}));
  ASSERT_EQ(PickRootCause(facts), records_alone);
  EXPECT_EQ(PickRootCause(GatherRunFacts(run, {})), root);
  EXPECT_THAT(Analyze(run).culprit_ranks, ElementsAre(root));
}

TEST(FaultsDiagnosisTest, PickRootCauseWeighsThePythonEvidenceAsTheDiagnosisDoes) {
  const testing::TestDir tmp("diagnose");
  RunDirWriter w(tmp.string());
  // Gloo aborted rank 0 first because rank 1 sent it too many bytes: rank 1 is at fault.
  w.Failed(json::array({Rank(0, "failed", 1, kBase + 100), Rank(1, "failed", 1, kBase + 200)}));
  std::ofstream(w.RankDir(0) + "/stderr.log")
      << "  what():  [enforce fail at ./gloo/transport/tcp/pair.cc:510] op.preamble.length <= "
         "op.nbytes. 80 vs 64\n";
  ExpectTheRunFactsPickTheDiagnosisRoot(tmp.string(), 0, 1);
}

TEST(FaultsDiagnosisTest, PickRootCauseDiscountsALostNodesExitsAsTheDiagnosisDoes) {
  const testing::TestDir tmp("diagnose");
  RunDirWriter w(tmp.string());
  // Node 1's last word on rank 2 is an early bad exit; the node was then lost, so that exit is no
  // evidence, and rank 0's own error on the surviving node is the root cause.
  WriteOwnErrorBesideALostNode(w, {{"rank", 2},
                                   {"host", "node1"},
                                   {"node_rank", 1},
                                   {"status", "failed"},
                                   {"exit_code", 1},
                                   {"end_unix_ms", kBase + 50}});
  ExpectTheRunFactsPickTheDiagnosisRoot(tmp.string(), 2, 0);
}

TEST(FaultsDiagnosisTest, SilencesWithinTheMarginAreReportedAsATie) {
  const testing::TestDir tmp("diagnose");
  RunDirWriter w(tmp.string());
  json ranks = json::array();
  for (int r = 0; r < 4; ++r) ranks.push_back(Rank(r, "killed", -15, 0, 15));
  w.Summary({{"run_id", "tie"}, {"exit_code", 3}, {"ranks", ranks}});
  // Ranks 1 and 2 went quiet 0.5 s apart, the others a minute later.
  for (int r = 0; r < 4; ++r)
    w.LastActive(r, r == 1 ? kBase : r == 2 ? kBase + 500 : kBase + 60000);
  Diagnosis d = AnalyzeDir(tmp.string());
  EXPECT_EQ(d.kind, DiagnosisKind::kHang);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(1, 2));
  EXPECT_THAT(d.headline, HasSubstr("ranks 1,2 silent longest, a tie"));
}

TEST(FaultsDiagnosisTest, StackEvidenceOutranksSilenceEvenWithAStackMissing) {
  const testing::TestDir tmp("diagnose");
  RunDirWriter w(tmp.string());
  json ranks = json::array();
  for (int r = 0; r < 4; ++r) ranks.push_back(Rank(r, "killed", -15, 0, 15));
  w.Summary({{"run_id", "stacks"}, {"exit_code", 3}, {"ranks", ranks}});
  // Rank 0 is silent longest (a CPU hog starved its output) but rank 3's stack stands apart;
  // gdb timed out on rank 1 under load, so it has no stack.
  for (int r = 0; r < 4; ++r) w.LastActive(r, r == 0 ? kBase : kBase + 30000);
  w.Stacks(0, "#0  0x1 in __GI___clock_nanosleep ()\n#1  0x2 in main ()");
  w.Stacks(2, "#0  0x1 in __GI___clock_nanosleep ()\n#1  0x2 in main ()");
  w.Stacks(3, "#0  0x1 in compute_step ()\n#1  0x2 in main ()");
  Diagnosis d = AnalyzeDir(tmp.string());
  EXPECT_EQ(d.kind, DiagnosisKind::kHang);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(3));
  EXPECT_THAT(d.headline, HasSubstr("stands apart by the stack"));
}

}  // namespace
}  // namespace dlaunch::launcher
