// torch's FileTimerClient (torch.distributed.elastic.timer) in real scripts under the launcher
// with TORCHELASTIC_ENABLE_FILE_TIMER=1, as torchrun's agent serves it: an expires() block that
// overruns kills its rank, one that ends in time does not, and a rank cannot have the launcher
// kill a process outside the job.
#include <gmock/gmock.h>
#include <signal.h>
#include <sys/wait.h>

#include "launcher/rendezvous/ports.h"
#include "python_test_util.h"

namespace dlaunch::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

class FileTimerTest : public PythonJobTest {
 protected:
  std::vector<std::string> Args(const std::string& nproc, std::vector<std::string> script) {
    std::vector<std::string> args = {"--nproc", nproc, "--grace-period", "3",
                                     Script("file_timer.py")};
    args.insert(args.end(), script.begin(), script.end());
    return Cmd(args);
  }
  // The FIFO the script saw in TORCHELASTIC_TIMER_FILE.
  std::string TimerFile(int rank) const {
    const std::string out = ReadText(RankDir(rank) / "stdout.log");
    const size_t at = out.find("timer file ");
    if (at == std::string::npos) return "";
    return out.substr(at + 11, out.find('\n', at) - at - 11);
  }
  const std::string kEnable = "TORCHELASTIC_ENABLE_FILE_TIMER=1";
};

TEST_F(FileTimerTest, OverrunningBlockKillsItsRankAndTheJobFails) {
  const auto start = std::chrono::steady_clock::now();
  Launched l(Args("2", {"overrun"}), {kEnable});
  ASSERT_EQ(l.Wait(seconds(90)), 1) << l.err_text();
  // The block sleeps 60 s; expires(after=1) ends it within seconds (interpreter start included).
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(30));
  const std::string err = l.err_text();
  EXPECT_THAT(err, HasSubstr("dlaunch: rank 1 was killed by its FileTimer: scope 'step' expired "
                             "(SIGKILL)"));
  EXPECT_THAT(err, HasSubstr("  exit      : signal SIGKILL (9)"));
  EXPECT_THAT(err, HasSubstr("  error     : FileTimer scope 'step' expired"));
  EXPECT_THAT(err, Not(HasSubstr("OOM killer")));
  EXPECT_THAT(ReadText(RankDir(1) / "stdout.log"), Not(HasSubstr("was not killed")));
  const nlohmann::json summary = ReadJson(RunDir() / "summary.json");
  EXPECT_EQ(summary.value("exit_code", 0), 1);
  EXPECT_THAT(summary.value("error", ""), HasSubstr("rank 1 failed"));
  EXPECT_THAT(summary.value("error", ""), HasSubstr("FileTimer scope 'step' expired"));
  EXPECT_THAT(ReadText(RunDir() / "diagnosis.txt"),
              HasSubstr("killed by SIGKILL: FileTimer scope 'step' expired"));
  // The FIFO was private to the job and is gone with it.
  const std::string fifo = TimerFile(0);
  ASSERT_FALSE(fifo.empty());
  EXPECT_EQ(fifo, TimerFile(1));
  EXPECT_FALSE(std::filesystem::exists(fifo)) << fifo;
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(fifo).parent_path()));
}

TEST_F(FileTimerTest, KillOnAJoiningNodeReachesNodeZerosDiagnosis) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(launcher::PickFreePort("0.0.0.0"));
  // Two nodes of 2 ranks, each with a run directory of its own as on two machines: node 0 knows
  // rank 3's end only from what node 1 reports.
  auto node = [&](int n) {
    std::vector<std::string> argv =
        TwoNodeArgv(DLAUNCH_BIN, n, endpoint, (dir_ / ("node" + std::to_string(n))).string());
    argv.insert(argv.end(), {"--python", kPython, "--grace-period", "3", "--rdzv-timeout", "60",
                             Script("file_timer.py"), "overrun", "3"});
    return argv;
  };
  const std::vector<std::string> env = {kEnable, "DLAUNCH_JOB_TOKEN=file-timer-test-0123456789"};
  Launched n0(node(0), env), n1(node(1), env);
  const int code1 = n1.Wait(seconds(90));
  ASSERT_EQ(n0.Wait(seconds(90)), 1) << n0.err_text();
  EXPECT_EQ(code1, 1) << n1.err_text();
  EXPECT_THAT(n1.err_text(), HasSubstr("dlaunch: rank 3 was killed by its FileTimer: scope 'step' "
                                       "expired (SIGKILL)"));
  const auto run0 = dir_ / "node0" / "job";
  EXPECT_THAT(ReadText(run0 / "diagnosis.txt"),
              HasSubstr("rank 3 was killed by SIGKILL: FileTimer scope 'step' expired"));
  std::string error;
  const nlohmann::json summary = ReadJson(run0 / "summary.json");
  for (const auto& r : summary["ranks"])
    if (r.value("rank", -1) == 3) error = r.value("error", "");
  EXPECT_EQ(error, "FileTimer scope 'step' expired");
}

TEST_F(FileTimerTest, BlocksThatEndInTimeExitZero) {
  Launched l(Args("2", {"healthy"}), {kEnable, "TORCHELASTIC_TIMER_FILE=/nonexistent/theirs"});
  ASSERT_EQ(l.Wait(seconds(90)), 0) << l.err_text();
  EXPECT_THAT(ReadText(RankDir(1) / "stdout.log"), HasSubstr("rank 1 done"));
  EXPECT_THAT(l.err_text(), Not(HasSubstr("dlaunch: FileTimer")));
  EXPECT_THAT(l.err_text(), Not(HasSubstr("killed by its FileTimer")));
  EXPECT_NE(TimerFile(0), "/nonexistent/theirs");
}

TEST_F(FileTimerTest, ForeignPidAndMalformedLinesKillNothing) {
  const pid_t foreign = ::fork();
  if (foreign == 0) {
    for (;;) ::pause();
  }
  ASSERT_GT(foreign, 0);
  Launched l(Args("1", {"hostile", std::to_string(foreign)}), {kEnable});
  const int code = l.Wait(seconds(90));
  const bool alive = ::kill(foreign, 0) == 0 && ::waitpid(foreign, nullptr, WNOHANG) == 0;
  ::kill(foreign, SIGKILL);
  ::waitpid(foreign, nullptr, 0);
  ASSERT_EQ(code, 0) << l.err_text();
  EXPECT_TRUE(alive);
  EXPECT_THAT(ReadText(RankDir(0) / "stdout.log"),
              HasSubstr("rank 0 survived; the sentinel child ended by signal 9"));
  EXPECT_THAT(l.err_text(), HasSubstr("(a child of rank 0) was killed by its FileTimer: scope "
                                      "'sentinel' expired (SIGKILL)"));
  const std::string err = l.err_text();
  EXPECT_THAT(err, HasSubstr("dlaunch: FileTimer request refused: pid " + std::to_string(foreign) +
                             " is neither a rank of this node nor a child of one"));
  EXPECT_THAT(err, HasSubstr("'not json': not a JSON object"));
  EXPECT_THAT(err, HasSubstr("pid -1 is not a process"));
  EXPECT_THAT(err, HasSubstr("a line longer than 4096 bytes"));
}

}  // namespace
}  // namespace dlaunch::testing
