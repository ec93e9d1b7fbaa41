// What scancel does without Slurm: SIGTERM to every process of the job, the ranks before their
// launcher. The launcher must call that an interruption (exit 143), not a rank failure.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "process_harness.h"
#include "tests/common/test_dir.h"

namespace dlaunch {
namespace {

using std::chrono::seconds;

TEST(StepSignalTest, RanksSignalledBeforeTheirLauncherAreAnInterruption) {
  const testing::TestDir test_dir("step-signal");
  const auto& dir = test_dir.path();
  testing::Launched l({DLAUNCH_BIN, "--log-dir", dir.string(), "--run-id", "job", "--nproc", "2",
                       TEST_RANK_BIN, "sleep"});
  std::vector<pid_t> pids;
  ASSERT_TRUE(l.WaitFor(
      [&](const std::vector<std::string>& lines) {
        pids.clear();
        for (const auto& line : lines) {
          const size_t at = line.find("ready ");
          if (at != std::string::npos) pids.push_back(std::stoi(line.substr(at + 6)));
        }
        return pids.size() == 2;
      },
      seconds(30)))
      << l.err_text();
  for (pid_t pid : pids) ::kill(pid, SIGTERM);
  // The launcher's copy comes only once it has reaped a rank (a slow signal loop or a busy
  // launcher): the case where it must not have judged the rank a failure already.
  const auto deadline = std::chrono::steady_clock::now() + seconds(10);
  while (::kill(pids[0], 0) == 0 && ::kill(pids[1], 0) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    ::usleep(500);
  }
  ::kill(l.pid(), SIGTERM);
  EXPECT_EQ(l.Wait(seconds(30)), 143) << l.err_text();
  std::ifstream in(dir / "job" / "summary.json");
  auto summary = nlohmann::json::parse(in, nullptr, false);
  EXPECT_EQ(summary["exit_code"], 143) << summary.dump();
}

}  // namespace
}  // namespace dlaunch
