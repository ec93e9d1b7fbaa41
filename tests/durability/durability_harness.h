// What the durability tests share: a scratch folder per test, dlaunch's command line, and waiting
// for a run-directory file to reach a state through inotify (an event, never a sleep).
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/run_dir/summary_file.h"
#include "process_harness.h"
#include "tests/common/test_dir.h"

namespace dlaunch::testing {

namespace fs = std::filesystem;

class DurabilityTest : public ::testing::Test {
 protected:
  void SetUp() override { log_dir_ = dir_ / "logs"; }

  // dlaunch --log-dir <log_dir_> --run-id run <args...>
  std::vector<std::string> Cmd(std::vector<std::string> args) const {
    std::vector<std::string> argv = {DLAUNCH_BIN, "--log-dir", log_dir_.string(), "--run-id",
                                     "run"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  fs::path RunDir() const { return log_dir_ / "run"; }
  fs::path RankDir(int r) const { return RunDir() / ("rank" + std::to_string(r)); }

  // summary.json as the reader of `dlaunch diagnose` sees it; false when absent or invalid.
  bool ReadSummaryFile(rundir::Summary* out, const fs::path& path = {}) const {
    std::vector<std::string> problems;
    *out = rundir::Summary{};
    const fs::path p = path.empty() ? RunDir() / "summary.json" : path;
    return rundir::ReadSummary(p.string(), "summary.json", out, &problems) ==
               rundir::FileState::kOk &&
           problems.empty();
  }

  // Blocks until summary.json satisfies `pred`, at most `timeout`; re-reads it on every inotify
  // event of the run directory (rename or write).
  bool WaitForSummary(const std::function<bool(const rundir::Summary&)>& pred,
                      std::chrono::milliseconds timeout) const {
    const int fd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd < 0) return false;
    fs::create_directories(RunDir());
    ::inotify_add_watch(fd, RunDir().c_str(), IN_MOVED_TO | IN_CLOSE_WRITE);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    bool ok = false;
    while (true) {
      rundir::Summary s;
      if (ReadSummaryFile(&s) && pred(s)) {
        ok = true;
        break;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) > 0) {
        char buf[4096];
        while (::read(fd, buf, sizeof(buf)) > 0) {
        }
      }
    }
    ::close(fd);
    return ok;
  }

  const TestDir test_dir_{"durability"};
  const fs::path dir_ = test_dir_.path();
  fs::path log_dir_;
};

}  // namespace dlaunch::testing
