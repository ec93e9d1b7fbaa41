// The Python ranks' evidence in the analysis: flight_tail.jsonl merged over flight.json (also
// hostile tails), Gloo's size-abort mark, and the size-mismatch ties each rank's own history
// settles. Files in a temp folder; no ranks.
#include "launcher/diagnose/python_evidence.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launcher/diagnose/analyzer.h"
#include "tests/common/test_dir.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// One line of the agent's tail, padded to its 1 KiB slot.
std::string Slot(int64_t seq, const std::string& state, int64_t count) {
  std::string line =
      "{\"seq\":" + std::to_string(seq) + ",\"collective_seq\":" + std::to_string(seq) +
      ",\"op\":\"allreduce\",\"dtype\":\"float\",\"count\":" + std::to_string(count) +
      ",\"bytes\":" + std::to_string(count * 4) + ",\"state\":\"" + state +
      "\",\"started_unix_ns\":" + std::to_string(1764450000000000000 + seq) +
      ",\"call_site\":\"train.py:9 main\"}";
  line.resize(1023, ' ');
  return line + "\n";
}

class PythonEvidenceTest : public ::testing::Test {
 protected:
  fs::path Rank(int r) {
    fs::path p = run_ / ("rank" + std::to_string(r));
    fs::create_directories(p);
    return p;
  }
  static void Write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  // flight.json with seqs 0..n-1 completed, of `count` floats each.
  static std::string Flight(int rank, int n, int64_t count) {
    std::string entries;
    for (int s = 0; s < n; ++s) {
      entries += std::string(s ? "," : "") + "{\"seq\":" + std::to_string(s) +
                 ",\"collective_seq\":" + std::to_string(s) +
                 ",\"op\":\"allreduce\",\"dtype\":\"float\",\"count\":" + std::to_string(count) +
                 ",\"state\":\"completed\"}";
    }
    return "{\"schema\":\"dlaunch.flight/1\",\"rank\":" + std::to_string(rank) +
           ",\"world_size\":2,\"backend\":\"gloo\",\"reason\":\"periodic\",\"entries\":[" +
           entries + "]}\n";
  }
  const dlaunch::testing::TestDir test_dir_{"pyev"};
  const fs::path run_ = test_dir_.path();
};

TEST_F(PythonEvidenceTest, TailReplacesAndExtendsFlightJson) {
  Write(Rank(0) / "flight.json", Flight(0, 3, 16));
  // #2 completed since flight.json was written, #3 started; a free slot; a torn line.
  Write(Rank(0) / "flight_tail.jsonl", Slot(2, "completed", 16) + Slot(3, "started", 16) +
                                           std::string(1023, ' ') + "\n" + "{\"seq\":4,\"op");
  RunSnapshot run = LoadRunDir(run_.string());
  const rundir::FlightDump& f = run.ranks[0].flight;
  ASSERT_EQ(f.entries.size(), 4u);
  EXPECT_EQ(f.reason, "periodic");
  EXPECT_EQ(f.backend, "gloo");
  EXPECT_EQ(f.LastCompletedSeq(), 2);
  EXPECT_EQ(f.LastStartedSeq(), 3);
  EXPECT_EQ(f.entries[3].call_site, "train.py:9 main");
}

TEST_F(PythonEvidenceTest, TailAloneIsTheRecorderOfARankThatDiedEarly) {
  Write(Rank(0) / "flight_tail.jsonl", Slot(0, "completed", 16) + Slot(1, "started", 16));
  RunSnapshot run = LoadRunDir(run_.string());
  ASSERT_EQ(run.ranks[0].flight_state, rundir::FileState::kOk);
  EXPECT_EQ(run.ranks[0].flight.reason, "tail");
  EXPECT_EQ(run.ranks[0].flight.rank, 0);
  EXPECT_EQ(run.ranks[0].flight.LastStartedSeq(), 1);
}

TEST_F(PythonEvidenceTest, HostileTailsAreBoundedAndIgnored) {
  Write(Rank(0) / "flight.json", Flight(0, 2, 16));
  // Larger than any agent writes: not read at all.
  Write(Rank(0) / "flight_tail.jsonl", std::string(3 << 20, '{'));
  // Not JSON, wrong types, negative seq, a directory in place of the file.
  Write(Rank(1) / "flight_tail.jsonl",
        "garbage\n[1,2]\n{\"seq\":\"x\"}\n{\"seq\":-4,\"op\":\"allreduce\"}\n\0\0\n");
  fs::create_directories(Rank(2) / "flight_tail.jsonl");
  RunSnapshot run = LoadRunDir(run_.string());
  EXPECT_EQ(run.ranks[0].flight.entries.size(), 2u);
  EXPECT_NE(run.ranks[1].flight_state, rundir::FileState::kOk);
  EXPECT_NE(run.ranks[2].flight_state, rundir::FileState::kOk);
  std::string problems;
  for (const std::string& p : run.problems) problems += p + "\n";
  EXPECT_THAT(problems, HasSubstr("rank0/flight_tail.jsonl is larger than"));
  EXPECT_THAT(problems, HasSubstr("rank2/flight_tail.jsonl is not a regular file"));
}

TEST(GlooSizeAbortTest, ReadsSentAndExpectedBytes) {
  auto a = FindGlooSizeAbort(
      {"terminate called after throwing an instance of 'gloo::EnforceNotMet'",
       "  what():  [enforce fail at ./gloo/transport/tcp/pair.cc:510] op.preamble.length <= "
       "op.nbytes. 66560 vs 65536"});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->sent_bytes, 66560);
  EXPECT_EQ(a->expected_bytes, 65536);
  EXPECT_FALSE(FindGlooSizeAbort({"op.preamble.length <= op.nbytes. x vs 5"}));
  EXPECT_FALSE(FindGlooSizeAbort({"op.preamble.length <= op.nbytes. 5 vs"}));
  EXPECT_FALSE(FindGlooSizeAbort({"op.preamble.length <= op.nbytes. -5 vs 3"}));
  EXPECT_FALSE(FindGlooSizeAbort({"Connection reset by peer"}));
}

// Two ranks disagree on #2's size: a tie. The rank whose size changed from its own earlier calls
// at that call site (the sender, here) is named, whatever the rank numbers; Gloo aborted the other.
TEST_F(PythonEvidenceTest, SizeTieNamesTheSenderNotTheAbortedRank) {
  for (int aborted : {0, 1}) {
    const int sender = 1 - aborted;
    Write(Rank(aborted) / "flight_tail.jsonl",
          Slot(0, "completed", 16) + Slot(1, "completed", 16) + Slot(2, "started", 16));
    Write(Rank(sender) / "flight_tail.jsonl",
          Slot(0, "completed", 16) + Slot(1, "completed", 16) + Slot(2, "started", 20));
    Write(Rank(aborted) / "stderr.log",
          "  what():  [enforce fail at ./gloo/transport/tcp/pair.cc:510] op.preamble.length <= "
          "op.nbytes. 80 vs 64\n");
    Write(Rank(sender) / "stderr.log", "");
    Diagnosis d = Analyze(LoadRunDir(run_.string()));
    EXPECT_EQ(d.kind, DiagnosisKind::kMismatch) << d.headline;
    EXPECT_THAT(d.culprit_ranks, ::testing::ElementsAre(sender)) << d.headline;
    EXPECT_EQ(d.seq, 2);
    std::string details;
    for (const std::string& l : d.details) details += l + "\n";
    EXPECT_THAT(details, HasSubstr("rank " + std::to_string(aborted) + ": aborted by Gloo"));
    EXPECT_THAT(details, HasSubstr("x20 (80 B) at train.py:9 main"));
  }
}

// Rank 1's tensor at #2 is smaller than at #0-#1, at the same call site: Gloo aborts rank 1 (its
// peer sent more than it posted), yet rank 1 changed its own call and is named, at 2 ranks (a tie
// its history settles) as at 3 (a majority); no evidence line argues for the other side.
TEST_F(PythonEvidenceTest, SmallerTensorIsNamedByTheRanksOwnHistory) {
  for (int world : {2, 3}) {
    for (int r = 0; r < world; ++r) {
      Write(Rank(r) / "flight_tail.jsonl", Slot(0, "completed", 16) + Slot(1, "completed", 16) +
                                               Slot(2, "started", r == 1 ? 12 : 16));
      Write(Rank(r) / "stderr.log",
            r == 1 ? "  what():  [enforce fail at ./gloo/transport/tcp/pair.cc:510] "
                     "op.preamble.length <= op.nbytes. 64 vs 48\n"
                   : "");
    }
    Diagnosis d = Analyze(LoadRunDir(run_.string()));
    EXPECT_EQ(d.kind, DiagnosisKind::kMismatch) << d.headline;
    EXPECT_THAT(d.culprit_ranks, ::testing::ElementsAre(1)) << d.headline;
    EXPECT_EQ(d.seq, 2);
    EXPECT_THAT(d.headline, HasSubstr("rank 1 called allreduce float x12")) << d.headline;
    std::string details;
    for (const std::string& l : d.details) details += l + "\n";
    EXPECT_THAT(details, HasSubstr("rank 1: aborted by Gloo: a peer sent 64 bytes")) << details;
    EXPECT_THAT(details, ::testing::Not(HasSubstr("sender"))) << details;
    if (world == 2) {
      EXPECT_THAT(d.headline, HasSubstr("decided by each rank's own earlier calls at "
                                        "train.py:9 main: rank 1 changed its call there"));
      EXPECT_THAT(details, HasSubstr("every rank called allreduce float x16 there last time (#1); "
                                     "rank 0 called it again, rank 1 called something else"));
    }
  }
}

}  // namespace
}  // namespace dlaunch::launcher
