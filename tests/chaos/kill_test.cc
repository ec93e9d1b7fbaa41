// Faults injected into real jobs: ranks killed at random, the launcher SIGKILLed (its ranks and
// their children must die with it), a SIGSTOPped rank during teardown. Each trial is recorded
// for RELIABILITY.md (scripts/chaos.sh); `make test` runs a few, `make chaos` the campaign.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <tuple>

#include "launcher/rendezvous/ports.h"
#include "process_harness.h"
#include "tests/chaos/chaos_util.h"
#include "tests/common/test_dir.h"

namespace dlaunch::testing::chaos {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// "[rank 2] ready 4242 4243" ("[HOST rank 2] ..." on many nodes): the rank's pid, then its
// child's when it started one.
std::map<int, std::vector<pid_t>> ReadyPids(const std::vector<std::string>& lines) {
  static const std::regex ready(R"(^\[(?:\S+ )?rank (\d+)\] ready((?: \d+)+)\s*$)");
  std::map<int, std::vector<pid_t>> out;
  for (const std::string& l : lines) {
    std::smatch m;
    if (!std::regex_match(l, m, ready)) continue;
    std::istringstream pids(m[2].str());
    pid_t p;
    while (pids >> p) out[std::stoi(m[1].str())].push_back(p);
  }
  return out;
}

class ChaosKillTest : public ::testing::Test {
 protected:
  // dlaunch with `ranks` ranks of `script` (sh -c), its run directory under the scratch dir.
  std::unique_ptr<Launched> Launch(int ranks, const std::string& script, const std::string& id,
                                   std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {
        DLAUNCH_BIN, "--nproc", std::to_string(ranks), "--log-dir", dir_.path().string(),
        "--run-id",  id,        "--hang-timeout",      "0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    for (const char* a : {"--", "/bin/sh", "-c"}) argv.push_back(a);
    argv.push_back(script);
    return std::make_unique<Launched>(argv);
  }

  static bool AllReady(Launched& l, int ranks) {
    return l.WaitFor(
        [&](const std::vector<std::string>& lines) {
          return static_cast<int>(ReadyPids(lines).size()) == ranks;
        },
        seconds(30));
  }

  nlohmann::json Diagnosis(const std::string& id) const {
    std::ifstream in(dir_.path() / id / "diagnosis.json");
    auto j = nlohmann::json::parse(in, nullptr, false);
    return j.is_discarded() ? nlohmann::json::object() : j;
  }

  const TestDir dir_{"chaos"};
  std::mt19937 rng_{std::random_device{}()};
};

TEST_F(ChaosKillTest, ARandomlyKilledRankIsNamedByTheLauncherAndTheDiagnosis) {
  const int trials = Trials(3, 50);
  int right = 0;
  for (int t = 0; t < trials; ++t) {
    const int ranks = std::uniform_int_distribution<int>(2, 4)(rng_);
    const int victim = std::uniform_int_distribution<int>(0, ranks - 1)(rng_);
    const int sig = std::uniform_int_distribution<int>(0, 3)(rng_) == 0 ? SIGTERM : SIGKILL;
    const std::string id = "kill" + std::to_string(t);
    auto job = Launch(ranks, "echo ready $$; exec sleep 300", id);
    ASSERT_TRUE(AllReady(*job, ranks)) << job->err_text();
    const pid_t pid = ReadyPids(job->out_lines).at(victim).front();
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(::kill(pid, sig), 0);
    const int code = job->Wait(seconds(60));
    const int64_t kill_to_exit = MsSince(t0);
    const std::string err = job->err_text();
    const std::string named = "rank " + std::to_string(victim) + " failed";
    auto culprits = Diagnosis(id).value("culprit_ranks", nlohmann::json::array());
    const bool ok = code == 1 && err.find(named) != std::string::npos &&
                    culprits == nlohmann::json::array({victim});
    right += ok;
    Record({{"fault", "rank killed"},
            {"right", ok},
            {"ranks", ranks},
            {"signal", sig == SIGKILL ? "SIGKILL" : "SIGTERM"},
            {"kill_to_exit_ms", kill_to_exit}});
    EXPECT_TRUE(ok) << "trial " << t << ": rank " << victim << " of " << ranks << ", exit " << code
                    << ", diagnosis culprits " << culprits.dump() << "\n"
                    << err;
  }
  EXPECT_EQ(right, trials);
}

// The ranks die with a SIGKILLed launcher (PR_SET_PDEATHSIG).
TEST_F(ChaosKillTest, RanksDieWithASigkilledLauncher) {
  const int trials = Trials(2, 20);
  for (int t = 0; t < trials; ++t) {
    auto job = Launch(3, "echo ready $$; exec sleep 300", "launcher" + std::to_string(t));
    ASSERT_TRUE(AllReady(*job, 3)) << job->err_text();
    std::vector<pid_t> ranks;
    for (const auto& [rank, pids] : ReadyPids(job->out_lines)) ranks.push_back(pids.front());
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(::kill(job->pid(), SIGKILL), 0);
    const int survivors = Survivors(ranks, seconds(5));
    Record({{"fault", "launcher SIGKILLed: ranks"},
            {"right", survivors == 0},
            {"survivors", survivors},
            {"kill_to_exit_ms", MsSince(t0)}});
    EXPECT_EQ(survivors, 0) << "trial " << t;
  }
}

// Processes a rank started die with it even when the launcher is SIGKILLed (`sleep 300 & exec
// prog`): the rank janitor kills every rank's cgroup or process group once the launcher is gone.
TEST_F(ChaosKillTest, GrandchildrenDieWithASigkilledLauncher) {
  const int trials = Trials(2, 20);
  for (int t = 0; t < trials; ++t) {
    auto job =
        Launch(2, "sleep 300 & echo ready $$ $!; exec sleep 301", "grand" + std::to_string(t));
    ASSERT_TRUE(AllReady(*job, 2)) << job->err_text();
    std::vector<pid_t> pids;
    for (const auto& [rank, p] : ReadyPids(job->out_lines))
      pids.insert(pids.end(), p.begin(), p.end());
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(::kill(job->pid(), SIGKILL), 0);
    const int survivors = Survivors(pids, seconds(5));
    Record({{"fault", "launcher SIGKILLed: grandchildren"},
            {"right", survivors == 0},
            {"survivors", survivors},
            {"kill_to_exit_ms", MsSince(t0)}});
    EXPECT_EQ(survivors, 0) << "trial " << t << ": of " << pids.size() << " ranks and children";
  }
}

// A SIGSTOPped rank must not hold the teardown for the whole grace period (30 s by default):
// another rank's failure ends the job within seconds, since SIGCONT follows every SIGTERM.
TEST_F(ChaosKillTest, ASigstoppedRankDoesNotHoldTheTeardown) {
  const int trials = Trials(1, 5);
  for (int t = 0; t < trials; ++t) {
    auto job = Launch(3, "echo ready $$; exec sleep 300", "stop" + std::to_string(t));
    ASSERT_TRUE(AllReady(*job, 3)) << job->err_text();
    auto pids = ReadyPids(job->out_lines);
    ASSERT_EQ(::kill(pids.at(1).front(), SIGSTOP), 0);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(::kill(pids.at(0).front(), SIGKILL), 0);
    const int code = job->Wait(seconds(60));
    const int64_t stop_to_exit = MsSince(t0);
    ::kill(pids.at(1).front(), SIGKILL);
    const bool ok = code == 1 && stop_to_exit < 5000;
    Record({{"fault", "rank SIGSTOPped, another killed"},
            {"right", ok},
            {"stop_to_exit_ms", stop_to_exit}});
    EXPECT_TRUE(ok) << "trial " << t << ": exit " << code << " after " << stop_to_exit << " ms\n"
                    << job->err_text();
  }
}

// #30: a rank killed between writing error.json and renaming it into place lost its error, and
// killed mid-write it left a half-written temporary file. Now the whole one becomes error.json
// and no temporary file is left.
TEST_F(ChaosKillTest, ARankKilledMidWriteLosesNoErrorAndLeavesNoTemporaryFile) {
  auto job = Launch(1,
                    "printf '{\"schema\":\"dlaunch.error/1\",\"rank\":0,\"kind\":\"error\","
                    "\"message\":\"the disk of rank 0 failed\",\"unix_ms\":1}' > "
                    "$DLAUNCH_RANK_DIR/error.json.tmp.77.1.1; printf '{\"sch' > "
                    "$DLAUNCH_RANK_DIR/flight.json.tmp.Ab12Cd; kill -9 $$",
                    "midwrite");
  EXPECT_EQ(job->Wait(seconds(30)), 1) << job->err_text();
  const auto rank = dir_.path() / "midwrite" / "rank0";
  std::ifstream in(rank / "error.json");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("the disk of rank 0 failed"), std::string::npos) << text;
  for (const auto& e : std::filesystem::directory_iterator(rank)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
}

// Rank logs can hold secrets: the run directory is 0700 and its files 0600 unless asked.
TEST_F(ChaosKillTest, TheRunDirectoryIsPrivateUnlessAskedOtherwise) {
  for (const auto& [mode, dir_bits, file_bits] :
       std::vector<std::tuple<std::string, unsigned, unsigned>>{{"", 0700, 0600},
                                                                {"0755", 0755, 0644}}) {
    const std::string id = "mode" + mode;
    std::vector<std::string> extra;
    if (!mode.empty()) extra = {"--run-dir-mode", mode};
    auto job = Launch(1, "echo DLAUNCH_JOB_TOKEN=$DLAUNCH_JOB_TOKEN", id, extra);
    ASSERT_EQ(job->Wait(seconds(30)), 0) << job->err_text();
    const auto bits = [](const std::filesystem::path& p) {
      return static_cast<unsigned>(std::filesystem::status(p).permissions()) & 0777;
    };
    const auto run = dir_.path() / id;
    EXPECT_EQ(bits(run), dir_bits) << mode;
    EXPECT_EQ(bits(run / "rank0"), dir_bits) << mode;
    EXPECT_EQ(bits(run / "rank0" / "stdout.log"), file_bits) << mode;
    EXPECT_EQ(bits(run / "summary.json"), file_bits) << mode;
  }
}

// Out of host memory under `ulimit -v`: no rank crashes (the OOM rank exits with its error), and
// the launcher's root cause and the diagnosis name the same rank.
TEST_F(ChaosKillTest, ACpuOutOfMemoryIsNamedAlikeAndExitsCleanly) {
  const int trials = Trials(1, 4);
  for (int t = 0; t < trials; ++t) {
    const std::string id = "oom" + std::to_string(t);
    Launched job({"/bin/sh", "-c",
                  std::string("ulimit -v 4000000 && exec ") + DLAUNCH_BIN +
                      " --nproc 2 --log-dir " + dir_.path().string() + " --run-id " + id +
                      " --skip-doctor train --device cpu --backend gloo --steps 3 --batch-size "
                      "30000 --model cnn"});
    const int code = job.Wait(seconds(300));
    if (code == 2) GTEST_SKIP() << "train cannot run here: " << job.err_text();
    std::smatch m;
    const std::string err = job.err_text();
    const bool named = std::regex_search(err, m, std::regex(R"(  rank      : (\d+) \(local_rank)"));
    const int launcher_root = named ? std::stoi(m[1].str()) : -1;
    nlohmann::json d = Diagnosis(id);
    const auto culprits = d.value("culprit_ranks", nlohmann::json::array());
    // Both ranks may run out of memory; the later one can be torn down (SIGTERM) while it
    // reports. A crash is a SIGSEGV, SIGBUS or SIGABRT.
    int crashed = 0;
    for (const auto& r : d.value("ranks", nlohmann::json::array())) {
      const int sig = r.value("signal", 0);
      crashed += sig == SIGSEGV || sig == SIGBUS || sig == SIGABRT;
    }
    const bool ok = code == 1 && culprits == nlohmann::json::array({launcher_root}) &&
                    crashed == 0 &&
                    d.value("headline", "").find("out of memory") != std::string::npos;
    Record({{"fault", "CPU out of memory (ulimit -v)"}, {"right", ok}});
    EXPECT_TRUE(ok) << "trial " << t << ": exit " << code << ", launcher names rank "
                    << launcher_root << ", diagnosis " << culprits.dump() << ", crashed " << crashed
                    << "\n"
                    << err;
  }
}

// A node whose launcher is SIGKILLed is named as a lost node, its ranks "lost with node 1", by
// node 0's console and its diagnosis, never as ranks that exited with code 0.
TEST_F(ChaosKillTest, ASigkilledNodeIsDiagnosedAsALostNode) {
  const int trials = Trials(1, 5);
  for (int t = 0; t < trials; ++t) {
    const std::string id = "node" + std::to_string(t);
    const std::string endpoint = "127.0.0.1:" + std::to_string(launcher::PickFreePort("0.0.0.0"));
    auto node = [&](int n) {
      return std::make_unique<Launched>(
          std::vector<std::string>{DLAUNCH_BIN,
                                   "--nnodes",
                                   "2",
                                   "--node-rank",
                                   std::to_string(n),
                                   "--rdzv-endpoint",
                                   endpoint,
                                   "--nproc",
                                   "2",
                                   "--log-dir",
                                   (dir_.path() / ("n" + std::to_string(n))).string(),
                                   "--run-id",
                                   id,
                                   "--heartbeat-timeout",
                                   "3",
                                   "--rdzv-timeout",
                                   "30",
                                   "--hang-timeout",
                                   "0",
                                   "--",
                                   "/bin/sh",
                                   "-c",
                                   "echo ready $$; exec sleep 300"},
          std::vector<std::string>{"DLAUNCH_JOB_TOKEN=chaos-node-loss-token-0123456789"});
    };
    auto n0 = node(0);
    auto n1 = node(1);
    ASSERT_TRUE(AllReady(*n1, 2)) << n1->err_text();
    ASSERT_TRUE(AllReady(*n0, 2)) << n0->err_text();
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(::kill(n1->pid(), SIGKILL), 0);
    const int code = n0->Wait(seconds(60));
    const int64_t kill_to_exit = MsSince(t0);
    std::ifstream in(dir_.path() / "n0" / id / "diagnosis.json");
    auto d = nlohmann::json::parse(in, nullptr, false);
    const std::string headline = d.is_object() ? d.value("headline", "") : "";
    const bool ok = code == 1 && n0->err_text().find("node 1 (") != std::string::npos &&
                    headline.find("lost with node 1") != std::string::npos &&
                    d.value("culprit_ranks", nlohmann::json()) == nlohmann::json::array({2, 3});
    Record(
        {{"fault", "node launcher SIGKILLed"}, {"right", ok}, {"kill_to_exit_ms", kill_to_exit}});
    EXPECT_TRUE(ok) << "trial " << t << ": exit " << code << ", diagnosis: " << headline << "\n"
                    << n0->err_text();
  }
}

}  // namespace
}  // namespace dlaunch::testing::chaos
