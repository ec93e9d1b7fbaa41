// The root cause of two failing ranks as summary.json and the console give it: rank 0 raised
// first, but rank 1 exited first and the teardown's SIGTERM ended rank 0. Its own error is the
// story, not the teardown's signal (real Python ranks).
#include <gtest/gtest.h>

#include "python_test_util.h"

namespace dlaunch::testing {
namespace {

using std::chrono::seconds;

class RootCauseTest : public PythonJobTest {};

TEST_F(RootCauseTest, ARankTheTeardownEndedAfterItsOwnErrorIsNamedByThatError) {
  Launched job(Cmd({"--nproc", "2", "--grace-period", "5", Script("two_failures.py")}));
  ASSERT_EQ(job.Wait(seconds(60)), 1) << job.err_text();
  const nlohmann::json summary = ReadJson(RunDir() / "summary.json");
  ASSERT_TRUE(summary.is_object());
  EXPECT_EQ(summary.value("error", ""),
            "rank 0 failed: RuntimeError: rank 0 lost its data shard (its process then ended by "
            "the teardown: signal SIGTERM (15))");
  const std::string err = job.err_text();
  EXPECT_NE(err.find("  exit      : signal SIGTERM (15) from dlaunch's teardown"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("  error     : RuntimeError: rank 0 lost its data shard (its own, before the "
                     "teardown)"),
            std::string::npos)
      << err;
  // The diagnosis agrees.
  const nlohmann::json d = Diagnosis();
  ASSERT_TRUE(d.is_object());
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({0})) << d.dump(2);
}

}  // namespace
}  // namespace dlaunch::testing
