// `dlaunch diagnose` end to end on fixture run directories: output, exit codes, --json, --trace.
#include "launcher/diagnose/diagnose_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/diagnose/test_util.h"

namespace dlaunch::launcher {
namespace {

using testing::FixturePath;
using ::testing::HasSubstr;

TEST(DiagnoseCommandTest, PrintsTheHangAndExitsZero) {
  ::testing::internal::CaptureStdout();
  int rc = RunDiagnoseCommand({FixturePath("hang_never_entered")});
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  EXPECT_THAT(out, HasSubstr("HANG at collective #5 allreduce float 4 MiB"));
  EXPECT_THAT(out, HasSubstr("rank 2 [culprit]: never entered #5"));
}

TEST(DiagnoseCommandTest, JsonOutputParses) {
  ::testing::internal::CaptureStdout();
  int rc = RunDiagnoseCommand({FixturePath("op_mismatch"), "--json"});
  std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0);
  nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["kind"], "mismatch");
  EXPECT_EQ(j["seq"], 5);
  EXPECT_EQ(j["culprit_ranks"], nlohmann::json::array({2}));
  EXPECT_EQ(j["mismatch_type"], "COLLECTIVE_TYPE_MISMATCH");
  EXPECT_EQ(j["ranks"].size(), 4u);
}

TEST(DiagnoseCommandTest, CorruptDirectoryStillReports) {
  ::testing::internal::CaptureStdout();
  int rc = RunDiagnoseCommand({FixturePath("corrupt")});
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  EXPECT_THAT(out, HasSubstr("missing or unreadable:"));
  EXPECT_THAT(out, HasSubstr("rank3/ missing"));
}

TEST(DiagnoseCommandTest, TraceFlagWritesTraceJson) {
  const testing::TestDir tmp("diagnose");
  const std::string run_dir = testing::CopyFixture("hang_never_entered", tmp);
  ::testing::internal::CaptureStdout();
  int rc = RunDiagnoseCommand({run_dir, "--trace"});
  ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0);
  std::ifstream in(run_dir + "/trace.json");
  ASSERT_TRUE(in.good());
  nlohmann::json trace = nlohmann::json::parse(in);
  EXPECT_TRUE(trace["traceEvents"].is_array());
}

TEST(DiagnoseCommandTest, MissingDirectoryIsExitTwo) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunDiagnoseCommand({"/nonexistent/dlaunch-logs/run"}), 2);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("does not exist"));
}

TEST(DiagnoseCommandTest, BadArgumentsAreExitTwo) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunDiagnoseCommand({}), 2);
  EXPECT_EQ(RunDiagnoseCommand({FixturePath("ok"), "--bogus"}), 2);
  ::testing::internal::GetCapturedStderr();
}

TEST(DiagnoseCommandTest, AFileWhereTheDirectoryShouldBeIsExitTwo) {
  const testing::TestDir tmp("diagnose");
  std::ofstream(tmp.string() + "/file") << "x";
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunDiagnoseCommand({tmp.string() + "/file"}), 2);
  ::testing::internal::GetCapturedStderr();
}

}  // namespace
}  // namespace dlaunch::launcher
