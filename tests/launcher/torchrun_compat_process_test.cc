// torchrun 2.15's flags through a real launcher: -r/-t and --local-ranks-filter decide what
// reaches the console (the logs always get everything), --duplicate-*-filters copy lines to a
// file, --virtual-local-rank and --log-line-prefix-template reach the ranks, and the flags
// dlaunch refuses end it with exit code 2 before any rank starts.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/base/proc.h"
#include "process_harness.h"
#include "tests/common/test_dir.h"

namespace dlaunch::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

class TorchrunCompatProcessTest : public ::testing::Test {
 protected:
  // dlaunch --log-dir <tmp> --run-id <run> <flags...>
  std::vector<std::string> Cmd(const std::string& run, std::vector<std::string> args) {
    std::vector<std::string> argv = {DLAUNCH_BIN, "--log-dir", (dir_ / "logs").string(), "--run-id",
                                     run};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  std::vector<std::string> ReadLines(const std::string& run, int rank, const char* file) {
    std::ifstream in(dir_ / "logs" / run / ("rank" + std::to_string(rank)) / file);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }
  // The console lines holding `word`.
  static std::vector<std::string> With(const std::vector<std::string>& lines,
                                       const std::string& word) {
    std::vector<std::string> out;
    std::copy_if(lines.begin(), lines.end(), std::back_inserter(out),
                 [&](const std::string& l) { return l.find(word) != std::string::npos; });
    return out;
  }
  const TestDir test_dir_{"torchrun"};
  const fs::path dir_ = test_dir_.path();
};

const std::vector<std::string> kOutAndErr = {"--", "/bin/sh", "-c",
                                             "echo out $RANK; echo err $RANK >&2"};

TEST_F(TorchrunCompatProcessTest, RedirectsTeeAndLocalRanksFilterShapeTheConsoleOnly) {
  // -r 3: every stream off the console; -t 1:1 brings local rank 1's stdout back.
  std::vector<std::string> args = {"--nproc", "3", "-r", "3", "-t", "1:1"};
  args.insert(args.end(), kOutAndErr.begin(), kOutAndErr.end());
  Launched l(Cmd("redirect", args));
  ASSERT_EQ(l.Wait(seconds(30)), 0) << l.err_text();
  EXPECT_EQ(With(l.out_lines, " out "), std::vector<std::string>{"[rank 1] out 1"});
  EXPECT_TRUE(With(l.err_lines, "] err ").empty()) << l.err_text();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(ReadLines("redirect", r, "stdout.log"),
              std::vector<std::string>{"out " + std::to_string(r)});
    EXPECT_EQ(ReadLines("redirect", r, "stderr.log"),
              std::vector<std::string>{"err " + std::to_string(r)});
  }

  args = {"--nproc", "3", "--local_ranks_filter", "2"};
  args.insert(args.end(), kOutAndErr.begin(), kOutAndErr.end());
  Launched f(Cmd("filter", args));
  ASSERT_EQ(f.Wait(seconds(30)), 0) << f.err_text();
  EXPECT_EQ(With(f.out_lines, " out "), std::vector<std::string>{"[rank 2] out 2"});
  EXPECT_EQ(With(f.err_lines, "] err "), std::vector<std::string>{"[rank 2] err 2"});
}

TEST_F(TorchrunCompatProcessTest, DuplicateFiltersCopyTheLinesThatMatch) {
  Launched l(Cmd("dup", {"--nproc", "2", "--duplicate-stdout-filters", "keep,a,,b",
                         "--duplicate_stderr_filters", "oops", "--", "/bin/sh", "-c",
                         "echo keep $RANK; echo drop $RANK; echo 'a,b'; echo oops $RANK >&2"}));
  ASSERT_EQ(l.Wait(seconds(30)), 0) << l.err_text();
  for (int r = 0; r < 2; ++r) {
    const std::string n = std::to_string(r);
    EXPECT_EQ(ReadLines("dup", r, "filtered_stdout.log"),
              (std::vector<std::string>{"keep " + n, "a,b"}));
    EXPECT_EQ(ReadLines("dup", r, "filtered_stderr.log"), std::vector<std::string>{"oops " + n});
    EXPECT_EQ(ReadLines("dup", r, "stdout.log").size(), 3u);  // the log keeps everything
  }
}

TEST_F(TorchrunCompatProcessTest, VirtualLocalRankAndThePrefixTemplateReachTheRanks) {
  const std::string host = base::Hostname();
  ASSERT_FALSE(host.empty());
  // --env's CUDA_VISIBLE_DEVICES is the launcher's view of the GPUs, whatever this machine has.
  Launched l(
      Cmd("virtual", {"--nproc", "2", "--virtual-local-rank", "--env", "CUDA_VISIBLE_DEVICES=3,5",
                      "--log-line-prefix-template", "${hostname}/${local_rank}: ", "--", "/bin/sh",
                      "-c", "echo lr=$LOCAL_RANK cvd=$CUDA_VISIBLE_DEVICES"}));
  ASSERT_EQ(l.Wait(seconds(30)), 0) << l.err_text();
  auto lines = With(l.out_lines, "lr=");
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{host + "/0: lr=0 cvd=3", host + "/1: lr=0 cvd=5"}))
      << l.err_text();
}

TEST_F(TorchrunCompatProcessTest, LocalAddrIsTheRanksMasterAddr) {
  Launched l(Cmd("local",
                 {"--local_addr", "127.0.0.2", "--", "/bin/sh", "-c", "echo master=$MASTER_ADDR"}));
  ASSERT_EQ(l.Wait(seconds(30)), 0) << l.err_text();
  EXPECT_EQ(With(l.out_lines, "master="), std::vector<std::string>{"[rank 0] master=127.0.0.2"});
}

TEST_F(TorchrunCompatProcessTest, RefusedFlagsExitTwoBeforeAnyRankStarts) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--logs-specs", "mine"}, "dlaunch: --logs-specs is not supported: "},
      {{"--print_completion", "bash"}, "dlaunch: --print_completion is not supported: "},
      {{"--nproc-per-node", "xpu"}, "dlaunch: --nproc-per-node xpu is not supported: "},
      {{"--rdzv_backend", "etcd-v2"}, "dlaunch: --rdzv-backend etcd-v2 is not supported: "},
      {{"--event-log-handler", "console"}, "dlaunch: --event-log-handler console: "},
  };
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> args = flags;
    args.insert(args.end(), {"--", "/bin/sh", "-c", "echo started"});
    Launched l(Cmd("refused", args));
    EXPECT_EQ(l.Wait(seconds(10)), 2) << flags[0];
    EXPECT_NE(l.err_text().find(message), std::string::npos) << flags[0] << ": " << l.err_text();
    EXPECT_TRUE(With(l.out_lines, "started").empty()) << flags[0];
  }
  EXPECT_FALSE(fs::exists(dir_ / "logs" / "refused")) << "a run directory was made";
}

}  // namespace
}  // namespace dlaunch::testing
