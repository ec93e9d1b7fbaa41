// live.json: what node 0 writes the status command reads back, owner-only.
#include "core/run_dir/live_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "core/run_dir/paths.h"
#include "tests/common/test_dir.h"

namespace dlaunch::rundir {
namespace {

TEST(LiveFileTest, RoundTripIsOwnerOnly) {
  const dlaunch::testing::TestDir dir("live");
  const std::string path = RunDir(dir.string()).live();
  EXPECT_EQ(std::filesystem::path(path).filename(), "live.json");
  // An older file of that name, readable by all, must not keep its mode.
  std::ofstream(path) << "{}";
  ::chmod(path.c_str(), 0644);
  WriteLiveEndpoint(path, {"127.0.0.1:4567", "abc123", "node-a", 4242, 1764659702123});
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  LiveEndpoint back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadLiveEndpoint(path, "live.json", &back, &problems), FileState::kOk);
  EXPECT_EQ(back.endpoint, "127.0.0.1:4567");
  EXPECT_EQ(back.status_token, "abc123");
  EXPECT_EQ(back.host, "node-a");
  EXPECT_EQ(back.pid, 4242);
  EXPECT_EQ(back.unix_ms, 1764659702123);
  EXPECT_TRUE(problems.empty());
  // Only the final file is left: no temporary beside it.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(LiveFileTest, AbsentOtherSchemaAndNoEndpointAreTold) {
  const dlaunch::testing::TestDir dir("live");
  LiveEndpoint back;
  std::vector<std::string> problems;
  EXPECT_EQ(ReadLiveEndpoint((dir.path() / "live.json").string(), "live.json", &back, &problems),
            FileState::kAbsent);
  EXPECT_TRUE(problems.empty());
  const std::string other = (dir.path() / "other.json").string();
  std::ofstream(other) << R"({"schema": "dlaunch.summary/1", "endpoint": "x:1"})";
  EXPECT_EQ(ReadLiveEndpoint(other, "live.json", &back, &problems), FileState::kInvalid);
  ASSERT_EQ(problems.size(), 1u);
  problems.clear();
  const std::string empty = (dir.path() / "empty.json").string();
  std::ofstream(empty) << R"({"schema": "dlaunch.live/1"})";
  EXPECT_EQ(ReadLiveEndpoint(empty, "live.json", &back, &problems), FileState::kInvalid);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("no endpoint"), std::string::npos);
}

}  // namespace
}  // namespace dlaunch::rundir
