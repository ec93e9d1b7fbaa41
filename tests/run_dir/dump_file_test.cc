// dumps/<name>/request.json and dump.json: what the writer writes, the reader reads back.
#include "core/run_dir/dump_file.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/base/files.h"
#include "tests/common/test_dir.h"

namespace dlaunch::rundir {
namespace {

TEST(DumpFileTest, RequestAndManifestRoundTrip) {
  const dlaunch::testing::TestDir dir("dump");
  const DumpDir dump((dir.path() / DumpDir::NameAt(1764659702123, "-rank3")).string());
  EXPECT_EQ(std::filesystem::path(dump.path()).filename(), "20251202T071502.123Z-rank3");
  std::filesystem::create_directories(dump.path());
  WriteDumpRequest(dump.request(), {1764659702123, 4242, "SIGUSR1", {3}});
  DumpRequest req;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadDumpRequest(dump.request(), "request.json", &req, &problems), FileState::kOk);
  EXPECT_EQ(req.unix_ms, 1764659702123);
  EXPECT_EQ(req.pid, 4242);
  EXPECT_EQ(req.trigger, "SIGUSR1");
  EXPECT_EQ(req.ranks, std::vector<int>({3}));

  DumpManifest m;
  m.requested_unix_ms = 10;
  m.done_unix_ms = 20;
  m.trigger = "dlaunch dump";
  m.world_size = 2;
  m.attempt = 1;
  m.summary = {"rank 1 has been in allreduce #88 for 41 s while the others are at #90"};
  m.headline = "HANG at collective #88";
  m.ranks.push_back({1, 77, true, false, "S (sleeping)", "rank 1 ...", {"flight.json"}});
  m.problems = {"cannot copy x"};
  WriteDumpManifest(dump.manifest(), m);
  DumpManifest back;
  ASSERT_EQ(ReadDumpManifest(dump.manifest(), "dump.json", &back, &problems), FileState::kOk);
  EXPECT_EQ(back.requested_unix_ms, 10);
  EXPECT_EQ(back.done_unix_ms, 20);
  EXPECT_EQ(back.trigger, m.trigger);
  EXPECT_EQ(back.world_size, 2);
  EXPECT_EQ(back.attempt, 1);
  EXPECT_EQ(back.summary, m.summary);
  EXPECT_EQ(back.headline, m.headline);
  ASSERT_EQ(back.ranks.size(), 1u);
  EXPECT_EQ(back.ranks[0].rank, 1);
  EXPECT_EQ(back.ranks[0].pid, 77);
  EXPECT_TRUE(back.ranks[0].answered);
  EXPECT_EQ(back.ranks[0].process_state, "S (sleeping)");
  EXPECT_EQ(back.ranks[0].files, std::vector<std::string>({"flight.json"}));
  EXPECT_EQ(back.problems, m.problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_NE(base::ReadWholeFile(dump.manifest(), "dump.json").find("\"dlaunch.dump/1\""),
            std::string::npos);
}

TEST(DumpFileTest, AnotherFilesSchemaIsRefused) {
  const dlaunch::testing::TestDir dir("dump");
  const DumpDir dump(dir.path().string());
  WriteDumpRequest(dump.manifest(), {1, 2, "x", {}});  // a request where dump.json belongs
  DumpManifest m;
  std::vector<std::string> problems;
  EXPECT_EQ(ReadDumpManifest(dump.manifest(), "dump.json", &m, &problems), FileState::kInvalid);
  EXPECT_FALSE(problems.empty());
}

}  // namespace
}  // namespace dlaunch::rundir
