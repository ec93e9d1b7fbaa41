// A running Python job dumped while it goes on: `dlaunch dump RUN_DIR` (every rank's flight
// recorder, native and Python stacks into dumps/<name>/, the job exits 0), and SIGUSR1 to one rank,
// answered through its agent, unless the script has a SIGUSR1 handler of its own.
#include <gmock/gmock.h>
#include <signal.h>

#include "core/run_dir/dump_file.h"
#include "python_test_util.h"

namespace dlaunch::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
using ::testing::HasSubstr;

bool HasLine(const std::vector<std::string>& lines, const std::string& what) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(what) != std::string::npos; });
}

// "[rank R] ready PID" -> PID of rank R; 0 when not seen.
int ReadyPid(const std::vector<std::string>& lines, int rank) {
  const std::string head = "[rank " + std::to_string(rank) + "] ready ";
  for (const std::string& l : lines) {
    if (l.rfind(head, 0) == 0) return std::stoi(l.substr(head.size()));
  }
  return 0;
}

// The dump folders under dumps/ that are complete (dump.json written).
std::vector<fs::path> DoneDumps(const fs::path& run_dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(run_dir / "dumps", ec), end; !ec && it != end; it.increment(ec)) {
    if (fs::exists(it->path() / "dump.json")) out.push_back(it->path());
  }
  return out;
}

class LiveDumpTorch2Test : public PythonJobTest {};

TEST_F(LiveDumpTorch2Test, DumpCommandTakesEveryRankAndTheJobGoesOn) {
  Launched l(Cmd({"--nproc", "2", "--hang-timeout", "60", Script("steady.py"), "--seconds", "10"}));
  ASSERT_TRUE(l.WaitFor([](const auto& lines) { return ReadyPid(lines, 1) > 0; }, seconds(60)))
      << l.err_text();
  Launched dump({DLAUNCH_BIN, "dump", RunDir().string()});
  ASSERT_EQ(dump.Wait(seconds(30)), 0) << dump.err_text();
  EXPECT_TRUE(HasLine(dump.out_lines, "running")) << dump.err_text();
  EXPECT_TRUE(HasLine(dump.err_lines, "dlaunch dump: 2 ranks in")) << dump.err_text();
  const auto dumps = DoneDumps(RunDir());
  ASSERT_EQ(dumps.size(), 1u);
  rundir::DumpManifest m;
  std::vector<std::string> problems;
  ASSERT_EQ(rundir::ReadDumpManifest((dumps[0] / "dump.json").string(), "dump.json", &m, &problems),
            rundir::FileState::kOk);
  EXPECT_EQ(m.trigger, "dlaunch dump");
  ASSERT_EQ(m.ranks.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(m.ranks[r].answered) << r;
    const fs::path rank = dumps[0] / ("rank" + std::to_string(r));
    EXPECT_THAT(ReadText(rank / "py_stacks.txt"), HasSubstr("steady.py")) << r;
    EXPECT_THAT(ReadText(rank / "stacks.txt"), HasSubstr("#0 ")) << r;
    EXPECT_TRUE(fs::exists(rank / "flight.json")) << r;
  }
  EXPECT_TRUE(fs::exists(dumps[0] / "diagnosis.txt"));
  EXPECT_EQ(l.Wait(seconds(60)), 0) << l.err_text();
  EXPECT_TRUE(HasLine(l.out_lines, "[rank 1] done")) << l.err_text();
  // A finished job: one line, exit 2.
  Launched again({DLAUNCH_BIN, "dump", RunDir().string()});
  EXPECT_EQ(again.Wait(seconds(10)), 2);
  EXPECT_THAT(again.err_text(), HasSubstr("has ended (exit 0)"));
}

TEST_F(LiveDumpTorch2Test, BadRunDirectoryIsOneLineAndExit2) {
  Launched dump({DLAUNCH_BIN, "dump", (dir_ / "nowhere").string()});
  EXPECT_EQ(dump.Wait(seconds(10)), 2);
  EXPECT_THAT(dump.err_text(), HasSubstr("no run directory at"));
  fs::create_directories(dir_ / "empty");
  Launched empty({DLAUNCH_BIN, "dump", (dir_ / "empty").string()});
  EXPECT_EQ(empty.Wait(seconds(10)), 2);
  EXPECT_THAT(empty.err_text(), HasSubstr("not a dlaunch run directory"));
}

TEST_F(LiveDumpTorch2Test, Sigusr1DumpsThatRankAndItGoesOn) {
  Launched l(Cmd({"--nproc", "2", "--hang-timeout", "60", Script("steady.py"), "--seconds", "6"}));
  ASSERT_TRUE(l.WaitFor([](const auto& lines) { return ReadyPid(lines, 1) > 0; }, seconds(60)))
      << l.err_text();
  ASSERT_EQ(::kill(ReadyPid(l.out_lines, 1), SIGUSR1), 0);
  EXPECT_EQ(l.Wait(seconds(60)), 0) << l.err_text();
  EXPECT_TRUE(HasLine(l.out_lines, "[rank 1] done")) << l.err_text();
  EXPECT_TRUE(HasLine(l.err_lines, "dlaunch: dump (SIGUSR1) of 1 rank")) << l.err_text();
  const auto dumps = DoneDumps(RunDir());
  ASSERT_EQ(dumps.size(), 1u);
  EXPECT_THAT(dumps[0].filename().string(), HasSubstr("-rank1"));
  EXPECT_THAT(ReadText(dumps[0] / "rank1" / "py_stacks.txt"), HasSubstr("SIGUSR1"));
  EXPECT_THAT(ReadText(dumps[0] / "rank1" / "stacks.txt"), HasSubstr("#0 "));
}

TEST_F(LiveDumpTorch2Test, AScriptsOwnSigusr1HandlerKeepsItsMeaning) {
  Launched l(Cmd({"--nproc", "2", "--hang-timeout", "60", Script("steady.py"), "--seconds", "4",
                  "--own-sigusr1"}));
  ASSERT_TRUE(l.WaitFor([](const auto& lines) { return ReadyPid(lines, 1) > 0; }, seconds(60)))
      << l.err_text();
  ASSERT_EQ(::kill(ReadyPid(l.out_lines, 1), SIGUSR1), 0);
  EXPECT_EQ(l.Wait(seconds(60)), 0) << l.err_text();
  EXPECT_TRUE(HasLine(l.out_lines, "[rank 1] own handler")) << l.err_text();
  EXPECT_TRUE(DoneDumps(RunDir()).empty());
  EXPECT_FALSE(fs::exists(RunDir() / "dumps"));
}

}  // namespace
}  // namespace dlaunch::testing
