// dlaunch under a real Slurm (slurm-wlm's munged, slurmctld and slurmd on localhost, started by
// slurm_cluster.sh): the tasks of an srun step form one job, an sbatch job too, and scancel ends
// every rank with exit 143. Skips when not root or slurm-wlm is absent.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "launcher/rendezvous/ports.h"
#include "process_harness.h"

namespace dlaunch {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
using testing::Launched;

const char* kToken = "DLAUNCH_JOB_TOKEN=slurm-test-token-0123456789";
const fs::path kState = "/tmp/dlaunch-slurm-test";

std::string SkipReason() {
  if (::getuid() != 0) return "needs root to run slurmd";
  for (const char* bin : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd",
                          "/usr/bin/srun", "/usr/bin/sbatch", "/usr/bin/scancel"}) {
    if (::access(bin, X_OK) != 0) return std::string(bin) + " is missing (install slurm-wlm)";
  }
  return "";
}

int Shell(const std::string& cmd) { return std::system(cmd.c_str()); }

nlohmann::json ReadJson(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in, nullptr, false);
}

// The run directories dlaunch made under `log_dir`.
std::vector<fs::path> RunDirs(const fs::path& log_dir) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(log_dir, ec))
    if (e.is_directory()) dirs.push_back(e.path());
  return dirs;
}

class SlurmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skip_ = SkipReason();
    if (!skip_.empty()) return;
    Shell("timeout 30 " SLURM_CLUSTER_SCRIPT " stop " + kState.string());
    fs::remove_all(kState);
    if (Shell("timeout 60 " SLURM_CLUSTER_SCRIPT " start " + kState.string() + " >/dev/null") !=
        0) {
      skip_ = "the local Slurm cluster did not start (logs in " + kState.string() + ")";
      failed_start_ = true;
    }
  }
  static void TearDownTestSuite() {
    if (SkipReason().empty()) Shell("timeout 30 " SLURM_CLUSTER_SCRIPT " stop " + kState.string());
  }
  void SetUp() override {
    if (failed_start_) FAIL() << skip_;
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    dir_ = kState / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    port_ = std::to_string(launcher::PickFreePort("0.0.0.0"));
  }
  // `token` "DLAUNCH_JOB_TOKEN=": none, so each task derives the step's from $HOME's secret.
  std::vector<std::string> Env(const std::string& token = kToken) {
    return {token, "SLURM_CONF=" + (kState / "slurm.conf").string(), "DLAUNCH_RDZV_PORT=" + port_};
  }
  std::string Logs() { return (dir_ / "logs").string(); }
  // The one run directory of the test, with its summary.
  nlohmann::json OnlySummary() {
    auto dirs = RunDirs(Logs());
    EXPECT_EQ(dirs.size(), 1u) << "several jobs shared the log directory";
    if (dirs.empty()) return {};
    return ReadJson(dirs.front() / "summary.json");
  }
  fs::path dir_;
  std::string port_;
  static std::string skip_;
  static bool failed_start_;
};
std::string SlurmTest::skip_;
bool SlurmTest::failed_start_ = false;

TEST_F(SlurmTest, SrunTwoTasksFormOneFourRankJob) {
  Launched srun({"/usr/bin/srun", "-N1", "-n2", "--time=2", DLAUNCH_BIN, "--log-dir", Logs(),
                 "--nproc", "2", TEST_RANK_BIN, "register"},
                Env());
  ASSERT_EQ(srun.Wait(seconds(120)), 0) << srun.err_text();
  auto summary = OnlySummary();
  EXPECT_EQ(summary["exit_code"], 0);
  EXPECT_EQ(summary["ranks"].size(), 4u) << summary.dump();
  int registered = 0;
  for (const auto& l : srun.out_lines) registered += l.find("of 4 local") != std::string::npos;
  EXPECT_EQ(registered, 4) << srun.err_text();
}

TEST_F(SlurmTest, WithoutATokenTheTasksOfAStepDeriveOneFromTheUsersSecret) {
  std::vector<std::string> env = Env("DLAUNCH_JOB_TOKEN=");
  env.push_back("HOME=" + (dir_ / "home").string());
  fs::create_directories(dir_ / "home");
  Launched srun({"/usr/bin/srun", "-N1", "-n2", "--time=2", DLAUNCH_BIN, "--log-dir", Logs(),
                 "--nproc", "2", TEST_RANK_BIN, "register"},
                env);
  ASSERT_EQ(srun.Wait(seconds(120)), 0) << srun.err_text();
  auto summary = OnlySummary();
  EXPECT_EQ(summary["exit_code"], 0);
  EXPECT_EQ(summary["ranks"].size(), 4u) << summary.dump();
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "home" / ".dlaunch" / "job-secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(SlurmTest, TasksThatDoNotShareTheSecretAreRefusedSayingWhatToExport) {
  // Each task its own home, as on nodes whose home directories are not shared.
  std::vector<std::string> env = Env("DLAUNCH_JOB_TOKEN=");
  env.push_back("HOMES=" + dir_.string());
  Launched srun({"/usr/bin/srun", "-N1", "-n2", "--time=2", "/bin/sh", "-c",
                 std::string("mkdir -p $HOMES/home$SLURM_PROCID && HOME=$HOMES/home$SLURM_PROCID "
                             "exec ") +
                     DLAUNCH_BIN + " --log-dir " + Logs() + " --rdzv-timeout 5 --nproc 1 " +
                     TEST_RANK_BIN + " register"},
                env);
  EXPECT_NE(srun.Wait(seconds(120)), 0) << srun.err_text();
  EXPECT_NE(srun.err_text().find("wrong or missing job token"), std::string::npos)
      << srun.err_text();
  EXPECT_NE(srun.err_text().find("which must be the same file on every node"), std::string::npos)
      << srun.err_text();
  EXPECT_NE(srun.err_text().find("export DLAUNCH_JOB_TOKEN"), std::string::npos) << srun.err_text();
}

TEST_F(SlurmTest, SbatchTasksFormOneJobWithAndWithoutSrun) {
  const fs::path script = dir_ / "job.sh";
  std::ofstream(script) << "#!/bin/bash\nsrun " << DLAUNCH_BIN << " --log-dir " << Logs()
                        << " --nproc 2 " << TEST_RANK_BIN << " register\n";
  Launched sbatch({"/usr/bin/sbatch", "--wait", "--ntasks=2", "--time=2", "-o",
                   (dir_ / "out.txt").string(), script.string()},
                  Env());
  ASSERT_EQ(sbatch.Wait(seconds(150)), 0) << sbatch.err_text();
  auto summary = OnlySummary();
  EXPECT_EQ(summary["exit_code"], 0);
  EXPECT_EQ(summary["ranks"].size(), 4u) << summary.dump();

  // dlaunch in the batch script itself is the node's one launcher: --ntasks ranks.
  fs::remove_all(Logs());
  Launched wrap(
      {"/usr/bin/sbatch", "--wait", "--ntasks=2", "--time=2", "-o", (dir_ / "wrap.txt").string(),
       "--wrap",
       std::string(DLAUNCH_BIN) + " --log-dir " + Logs() + " " + TEST_RANK_BIN + " register"},
      Env());
  ASSERT_EQ(wrap.Wait(seconds(150)), 0) << wrap.err_text();
  summary = OnlySummary();
  EXPECT_EQ(summary["exit_code"], 0);
  EXPECT_EQ(summary["ranks"].size(), 2u) << summary.dump();
}

TEST_F(SlurmTest, AnNnodesThatWouldSplitTheStepIsRefused) {
  Launched srun({"/usr/bin/srun", "-N1", "-n2", "--time=2", DLAUNCH_BIN, "--log-dir", Logs(),
                 "--nnodes", "1", TEST_RANK_BIN, "register"},
                Env());
  EXPECT_EQ(srun.Wait(seconds(120)), 2);
  EXPECT_NE(srun.err_text().find("--nnodes 1 but this Slurm step runs 2 dlaunch tasks"),
            std::string::npos)
      << srun.err_text();
  EXPECT_TRUE(RunDirs(Logs()).empty());
}

TEST_F(SlurmTest, ScancelEndsEveryRank) {
  const std::string name = "dlaunch-scancel-" + std::to_string(::getpid());
  Launched srun({"/usr/bin/srun", "-N1", "-n2", "--time=2", "-J", name, DLAUNCH_BIN, "--log-dir",
                 Logs(), "--nproc", "2", TEST_RANK_BIN, "sleep"},
                Env());
  std::vector<pid_t> pids;
  auto ready = [&](const std::vector<std::string>& lines) {
    pids.clear();
    for (const auto& l : lines) {
      const size_t at = l.find("ready ");
      if (at != std::string::npos) pids.push_back(std::stoi(l.substr(at + 6)));
    }
    return pids.size() == 4;
  };
  ASSERT_TRUE(srun.WaitFor(ready, seconds(90))) << srun.err_text();
  ASSERT_EQ(Shell("SLURM_CONF=" + (kState / "slurm.conf").string() +
                  " timeout 30 /usr/bin/scancel --name " + name),
            0);
  EXPECT_NE(srun.Wait(seconds(60)), -1) << "srun did not end after scancel";
  for (pid_t pid : pids) {
    // Reaped by its launcher once it ended; a bounded wait for the launcher to get there.
    bool gone = false;
    for (int i = 0; i < 200 && !gone; ++i) {
      gone = ::kill(pid, 0) != 0;
      if (!gone) ::usleep(50000);
    }
    EXPECT_TRUE(gone) << "rank pid " << pid << " outlived scancel";
  }
  auto dirs = RunDirs(Logs());
  ASSERT_EQ(dirs.size(), 1u);
  for (const char* file : {"summary.json", "summary.node1.json"}) {
    auto summary = ReadJson(dirs.front() / file);
    EXPECT_EQ(summary["exit_code"], 143) << file << ": " << summary.dump();
  }
}

// A launcher that waits in the node rendezvous for a task that never comes (a slow start):
// scancel's SIGTERM ends the wait at once, before Slurm's SIGKILL after KillWait, and the
// launcher leaves its summary. `absent` is the task that sleeps instead of running dlaunch.
class SlurmSlowStartTest : public SlurmTest {
 protected:
  void CancelWhileWaiting(int absent, const std::string& waiting_line, const char* summary) {
    const std::string name =
        "dlaunch-slow-" + std::to_string(::getpid()) + "-" + std::to_string(absent);
    const std::string script = "if [ \"$SLURM_PROCID\" = " + std::to_string(absent) +
                               " ]; then exec sleep 600; fi; exec \"$@\"";
    Launched srun({"/usr/bin/srun", "-N1", "-n2", "--time=2", "-J", name, "/bin/sh", "-c", script,
                   "sh", DLAUNCH_BIN, "--log-dir", Logs(), "--nproc", "1", TEST_RANK_BIN, "sleep"},
                  Env());
    ASSERT_TRUE(srun.WaitFor(
        [&](const std::vector<std::string>&) {
          return srun.err_text().find(waiting_line) != std::string::npos;
        },
        seconds(90)))
        << srun.err_text();
    ASSERT_EQ(Shell("SLURM_CONF=" + (kState / "slurm.conf").string() +
                    " timeout 30 /usr/bin/scancel --name " + name),
              0);
    EXPECT_NE(srun.Wait(seconds(60)), -1) << "srun did not end after scancel";
    auto dirs = RunDirs(Logs());
    ASSERT_EQ(dirs.size(), 1u);
    const auto doc = ReadJson(dirs.front() / summary);
    EXPECT_EQ(doc["exit_code"], 143) << summary << ": " << doc.dump() << "\n" << srun.err_text();
  }
};

TEST_F(SlurmSlowStartTest, ScancelWhileNodeZeroWaitsForATaskLeavesItsSummary) {
  CancelWhileWaiting(1, "waiting for 2 nodes", "summary.json");
}

TEST_F(SlurmSlowStartTest, ScancelWhileATaskWaitsForNodeZeroLeavesItsSummary) {
  CancelWhileWaiting(0, "joining", "summary.node1.json");
}

TEST_F(SlurmTest, TwoJobsOnOneNodeEachGetACoordinatorOfTheirOwn) {
  // Partial-node jobs side by side, with no port given and one exported token: each step's
  // tasks meet at their own job's coordinator.
  const fs::path go = dir_ / "go";
  const std::string script = "echo up; while [ ! -e " + go.string() + " ]; do sleep 0.05; done";
  const std::string name = "dlaunch-shared-" + std::to_string(::getpid());
  // A failed assertion kills the sruns, not their tasks: the jobs go with the test.
  struct Cancel {
    std::string name;
    ~Cancel() {
      Shell("SLURM_CONF=" + (kState / "slurm.conf").string() +
            " timeout 30 /usr/bin/scancel --name " + name);
    }
  } cancel{name};
  std::vector<std::unique_ptr<Launched>> jobs;
  for (const char* logs : {"logs-a", "logs-b"}) {
    jobs.push_back(std::make_unique<Launched>(
        std::vector<std::string>{"/usr/bin/srun", "-N1", "-n2", "--time=2", "-J", name, DLAUNCH_BIN,
                                 "--log-dir", (dir_ / logs).string(), "--nproc", "1", "/bin/sh",
                                 "-c", script},
        std::vector<std::string>{kToken, "SLURM_CONF=" + (kState / "slurm.conf").string()}));
  }
  for (auto& job : jobs) {
    ASSERT_TRUE(job->WaitFor(
        [](const std::vector<std::string>& lines) {
          // "[rank 1] up": each rank's line, prefixed on the console.
          return std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
                   return l.size() >= 2 && l.compare(l.size() - 2, 2, "up") == 0;
                 }) == 2;
        },
        seconds(90)))
        << job->err_text();
  }
  std::ofstream(go) << "go\n";
  for (auto& job : jobs) EXPECT_EQ(job->Wait(seconds(60)), 0) << job->err_text();
  for (const char* logs : {"logs-a", "logs-b"}) {
    auto dirs = RunDirs(dir_ / logs);
    ASSERT_EQ(dirs.size(), 1u) << logs;
    const auto summary = ReadJson(dirs.front() / "summary.json");
    EXPECT_EQ(summary["exit_code"], 0) << summary.dump();
    EXPECT_EQ(summary["nodes"].size(), 2u) << summary.dump();
  }
}

}  // namespace
}  // namespace dlaunch
