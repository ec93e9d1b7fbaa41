// A run directory is input from processes dlaunch does not control: corrupt or hostile contents
// must give a partial report, bounded in time and memory, never a crash or a hang.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/run_dir/run_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/test_dir.h"

namespace dlaunch::rundir {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::HasSubstr;

bool HasProblem(const RunFiles& files, const std::string& text) {
  for (const std::string& p : files.problems) {
    if (p.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(HostileRunDirTest, HugeRankNumbersAreIgnoredNotAllocated) {
  const testing::TestDir dir("run-dir");
  const RunDir run(dir.string());
  fs::create_directories(run.rank(0).path());
  fs::create_directories(dir.string() + "/rank100000000");
  std::ofstream(run.summary()) << R"({"ranks": [{"rank": 2147483647, "status": "ok"},
                                                 {"rank": 100000000}, {"rank": 1e300},
                                                 {"rank": 1, "pid": 1e300, "exit_code": -1e300}]})";
  std::ofstream(run.rank(0).flight()) << R"({"world_size": 100000000, "entries": []})";
  RunFiles files = ReadRunDir(dir.string());
  EXPECT_EQ(files.world_size, kMaxRanks);
  EXPECT_TRUE(HasProblem(files, "rank folder(s) numbered 65536 or more ignored"));
  EXPECT_TRUE(HasProblem(files, "summary.json: 2 rank(s) numbered 65536 or more ignored"));
  EXPECT_TRUE(HasProblem(files, "claims a world of 100000000"));
  EXPECT_TRUE(HasProblem(files, "rank folders missing for ranks 1-65535"));
  EXPECT_LT(files.problems.size(), 10u);
  ASSERT_TRUE(files.summary.has_value());
  EXPECT_EQ(files.summary->ranks.size(), 1u);

  EXPECT_EQ(ReadRunDir(dir.string(), 2147483647).world_size, kMaxRanks);
  EXPECT_EQ(ReadRunDir(dir.string(), -5).world_size, kMaxRanks);
}

TEST(HostileRunDirTest, FifosAndFoldersInPlaceOfFilesAreSkipped) {
  const testing::TestDir dir("run-dir");
  const RunDir run(dir.string());
  const RankDir rank = run.rank(0);
  fs::create_directories(rank.path());
  ASSERT_EQ(::mkfifo(rank.events().c_str(), 0644), 0);
  ASSERT_EQ(::mkfifo(rank.stderr_log().c_str(), 0644), 0);
  ASSERT_EQ(::mkfifo(rank.nccl_log().c_str(), 0644), 0);
  ASSERT_EQ(::mkfifo(run.summary().c_str(), 0644), 0);
  fs::create_directories(rank.flight());
  fs::create_directories(rank.stacks());
  RunFiles files = ReadRunDir(dir.string());  // returns: nothing waits for a writer
  EXPECT_TRUE(HasProblem(files, "rank0/events.jsonl not a regular file"));
  EXPECT_TRUE(HasProblem(files, "rank0/flight.json not a regular file"));
  EXPECT_TRUE(HasProblem(files, "summary.json not a regular file"));
  EXPECT_TRUE(files.ranks[0].stderr_tail.empty());
  EXPECT_TRUE(files.ranks[0].stacks.empty());
}

TEST(HostileRunDirTest, LargeFilesAreReadOnlyUpToTheirCap) {
  const testing::TestDir dir("run-dir");
  const RunDir run(dir.string());
  const RankDir rank = run.rank(0);
  fs::create_directories(rank.path());
  // Sparse files: huge to a reader, free on disk.
  for (const std::string& path : {rank.flight(), rank.error(), rank.stacks()}) {
    std::ofstream(path).close();
    fs::resize_file(path, 8ull << 30);
  }
  {
    std::ofstream events(rank.events());
    events << R"({"unix_ms": 1, "kind": "error", "message": "old"})"
           << "\n";
  }
  fs::resize_file(rank.events(), 1ull << 30);
  {
    std::ofstream events(rank.events(), std::ios::app);
    events << "\n"
           << R"({"unix_ms": 2, "kind": "oom", "message": "new"})"
           << "\n";
  }
  RunFiles files = ReadRunDir(dir.string());
  EXPECT_TRUE(HasProblem(files, "rank0/flight.json larger than 64 MiB"));
  EXPECT_TRUE(HasProblem(files, "rank0/error.json larger than 4 MiB"));
  EXPECT_TRUE(HasProblem(files, "rank0/events.jsonl: only its last 32 MiB read"));
  ASSERT_FALSE(files.ranks[0].events.events.empty());
  EXPECT_EQ(files.ranks[0].events.events.back().type(), EventKind::kOom);
  EXPECT_EQ(files.ranks[0].stacks.size(), kMaxStacksBytes);
}

TEST(HostileRunDirTest, WrongTypesGiveFallbacks) {
  const testing::TestDir dir("run-dir");
  const RunDir run(dir.string());
  fs::create_directories(run.rank(0).path());
  std::ofstream(run.rank(0).flight())
      << R"({"rank": "x", "world_size": -4, "entries": [7, {"seq": "a"}, {"seq": 3, "count": 1e300,
             "peer": 99999999999, "state": 5, "op": ["allreduce"]}]})";
  std::ofstream(run.rank(0).error()) << R"({"kind": 3, "message": null, "unix_ms": "soon"})";
  RunFiles files = ReadRunDir(dir.string());
  ASSERT_EQ(files.ranks[0].flight_state, FileState::kOk);
  ASSERT_EQ(files.ranks[0].flight.entries.size(), 1u);
  const FlightEntry& e = files.ranks[0].flight.entries[0];
  EXPECT_EQ(e.seq, 3);
  EXPECT_EQ(e.count, -1);
  EXPECT_EQ(e.op, "");
  EXPECT_EQ(e.state, OpState::kScheduled);
  EXPECT_EQ(files.ranks[0].flight.world_size, 0);
  ASSERT_TRUE(files.ranks[0].error.has_value());
  EXPECT_EQ(files.ranks[0].error->kind, "");
  EXPECT_EQ(files.ranks[0].error->unix_ms, 0);
}

TEST(HostileRunDirTest, NotADirectoryIsAnError) {
  const testing::TestDir dir("run-dir");
  EXPECT_THROW(ReadRunDir(dir.string() + "/none"), Error);
  std::ofstream(dir.string() + "/file") << "x";
  EXPECT_THROW(ReadRunDir(dir.string() + "/file"), Error);
}

}  // namespace
}  // namespace dlaunch::rundir
