// Signals to the launcher: --signals-to-handle, SIGUSR1/SIGUSR2 forwarded without ending a
// built-in rank (train checkpoints on SIGUSR1 and goes on), flight.json at a clean exit and on
// SIGINT.
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "durability_harness.h"

namespace dlaunch::testing {
namespace {

using std::chrono::seconds;

bool HasLine(const std::vector<std::string>& lines, const std::string& what) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(what) != std::string::npos; });
}
auto Seen(const std::string& what) {
  return [what](const std::vector<std::string>& lines) { return HasLine(lines, what); };
}

std::string FlightReason(const fs::path& rank_dir) {
  std::ifstream in(rank_dir / "flight.json");
  auto j = nlohmann::json::parse(in, nullptr, false);
  return j.is_object() ? j.value("reason", "") : "";
}

// bash ranks that report each forwarded signal and exit 0 on SIGTERM.
const std::vector<std::string> kSignalRanks = {
    "--", "bash", "-c",
    "trap 'echo got USR1' USR1; trap 'echo got QUIT; exit 0' QUIT; echo ready $$; "
    "while :; do sleep 0.05; done"};

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(DurabilityTest, UnhandleableSignalIsAUsageError) {
  for (const char* bad : {"SIGKILL", "SIGSTOP", "SIGSEGV", "NOPE", "SIGTERM,"}) {
    Launched l(Cmd({"--signals-to-handle", bad, "true"}));
    const int code = l.Wait(seconds(30));
    if (std::string(bad) == "SIGTERM,") {
      EXPECT_EQ(code, 0) << "a trailing comma is harmless";
      continue;
    }
    EXPECT_EQ(code, 2) << bad;
    EXPECT_NE(l.err_text().find("--signals-to-handle"), std::string::npos) << l.err_text();
    EXPECT_FALSE(fs::exists(RunDir())) << "no run directory before a usage error";
  }
}

TEST_F(DurabilityTest, SigquitIsForwardedAndEndsTheJob) {
  Launched l(Cmd(With({"--nproc", "2"}, kSignalRanks)));
  ASSERT_TRUE(l.WaitFor(ReadyCount(2), seconds(30))) << l.err_text();
  ::kill(l.pid(), SIGUSR1);
  ASSERT_TRUE(l.WaitFor(Seen("[rank 1] got USR1"), seconds(10)));
  ::kill(l.pid(), SIGQUIT);
  EXPECT_EQ(l.Wait(seconds(30)), 128 + SIGQUIT) << l.err_text();
  EXPECT_TRUE(HasLine(l.out_lines, "[rank 0] got QUIT"));
}

TEST_F(DurabilityTest, ASignalLeftOutOfTheListIsNotCaught) {
  Launched l(Cmd(With({"--nproc", "2", "--signals-to-handle", "SIGTERM,SIGINT"}, kSignalRanks)));
  ASSERT_TRUE(l.WaitFor(ReadyCount(2), seconds(30))) << l.err_text();
  const auto pids = ReadyPids(l.out_lines);
  ::kill(l.pid(), SIGUSR1);  // its default action: dlaunch ends, and its ranks with it
  EXPECT_EQ(l.Wait(seconds(10)), 128 + SIGUSR1);
  EXPECT_FALSE(HasLine(l.out_lines, "got USR1"));
  for (auto [rank, pid] : pids) {
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) continue;  // gone already
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 5000), 1) << "rank " << rank << " outlived the launcher";
    ::close(fd);
  }
}

#ifdef DLAUNCH_HAVE_TRAIN
const std::vector<std::string> kTrain = {"--skip-doctor", "train", "--data",        "synthetic",
                                         "--model",       "mlp",   "--no-preflight"};

TEST_F(DurabilityTest, TrainCheckpointsOnSigusr1AndCompletes) {
  const fs::path ckpt = dir_ / "ckpt";
  Launched l(Cmd(
      With(With({"--nproc", "2"}, kTrain), {"--steps", "400", "--checkpoint-dir", ckpt.string()})));
  // Before the first step: SIGUSR1 may not end a rank that is still loading libtorch.
  ASSERT_TRUE(
      WaitForSummary([](const rundir::Summary& s) { return s.ranks.size() == 2; }, seconds(30)));
  ::kill(l.pid(), SIGUSR1);
  ASSERT_TRUE(l.WaitFor(Seen("[train] training mlp"), seconds(120))) << l.err_text();
  ::kill(l.pid(), SIGUSR1);
  EXPECT_EQ(l.Wait(seconds(180)), 0) << l.err_text();
  EXPECT_TRUE(HasLine(l.out_lines, "SIGUSR1: checkpoint at step")) << l.err_text();
  EXPECT_TRUE(fs::exists(ckpt / "checkpoint.pt"));
  // A clean exit leaves each rank's flight recorder behind too.
  for (int r = 0; r < 2; ++r) EXPECT_EQ(FlightReason(RankDir(r)), "exit") << r;
}

TEST_F(DurabilityTest, SigintLeavesEachTrainRanksFlightRecorder) {
  Launched l(Cmd(With(With({"--nproc", "2"}, kTrain), {"--steps", "100000"})));
  // A progress line: both ranks are past their communicator's set-up and all-reducing.
  ASSERT_TRUE(l.WaitFor(Seen("[train] step "), seconds(120))) << l.err_text();
  ::kill(l.pid(), SIGINT);
  EXPECT_EQ(l.Wait(seconds(60)), 130) << l.err_text();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(FlightReason(RankDir(r)), "interrupted") << r;
    for (const auto& e : fs::directory_iterator(RankDir(r))) {
      EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
    }
  }
}
#endif

}  // namespace
}  // namespace dlaunch::testing
