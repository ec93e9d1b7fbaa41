// Processes a rank starts die with it, also when the launcher is SIGKILLed: the rank cgroups
// (cgroup.kill) where cgroup v2 is writable, the rank process groups otherwise. Survivors are
// counted by a marker in their environment.
#include <signal.h>

#include <fstream>
#include <set>
#include <thread>

#include "durability_harness.h"
#include "launcher/supervision/rank_janitor.h"

namespace dlaunch::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Every process whose environment holds `marker` (KEY=VAL).
std::set<pid_t> MarkedPids(const std::string& marker) {
  std::set<pid_t> pids;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::ifstream in(e.path() / "environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (env.find(marker + '\0') != std::string::npos || env.find('\0' + marker) == 0) {
      pids.insert(std::stoi(name));
    }
  }
  return pids;
}

std::string InCgroup(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return "";
}

class ContainmentTest : public DurabilityTest {
 protected:
  std::string Marker() const {
    return "DLAUNCH_TEST_MARKER=" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  // Two ranks, each leaving `children` behind; SIGKILL the launcher once every one is there.
  void KillLauncherAndCount(const std::string& children, size_t per_rank,
                            const std::vector<std::string>& launcher_env, bool want_cgroup) {
    const std::string marker = Marker();
    Launched l(Cmd({"--nproc", "2", "--env", marker, "--", "bash", "-c",
                    children + " echo ready $$; exec sleep 302"}),
               launcher_env);
    ASSERT_TRUE(l.WaitFor(ReadyCount(2), seconds(30))) << l.err_text();
    const std::string cg = InCgroup(ReadyPids(l.out_lines).at(0));
    if (want_cgroup && cg.find("/dlaunch-") == std::string::npos) {
      GTEST_SKIP() << "no writable cgroup v2 with cgroup.kill here (rank in '" << cg << "')";
    }
    if (!want_cgroup) {
      EXPECT_EQ(cg.find("/dlaunch-"), std::string::npos) << cg;
    }
    // A rank between its "ready" line and its exec shows no environment for a moment.
    std::set<pid_t> marked = MarkedPids(marker);
    for (int i = 0; i < 100 && marked.size() < 2 * per_rank; ++i) {
      std::this_thread::sleep_for(milliseconds(20));  // /proc has no event to wait on
      marked = MarkedPids(marker);
    }
    ExitWatch before(marked);
    EXPECT_GE(before.watched(), 2 * per_rank) << "not every child was there";
    ASSERT_EQ(::kill(l.pid(), SIGKILL), 0);
    EXPECT_EQ(l.Wait(seconds(10)), 128 + SIGKILL);
    EXPECT_TRUE(before.AllExit(seconds(10))) << "survivors of a SIGKILLed launcher";
    EXPECT_TRUE(MarkedPids(marker).empty());
    if (want_cgroup) {
      const std::string job = launcher::OwnCgroupV2() + "/dlaunch-" + std::to_string(l.pid());
      // The janitor removes the job's cgroup right after the kill.
      for (int i = 0; i < 200 && fs::exists(job); ++i) {
        std::this_thread::sleep_for(milliseconds(10));  // rmdir has no event to wait on
      }
      EXPECT_FALSE(fs::exists(job));
    }
  }
};

TEST_F(ContainmentTest, CgroupEndsEvenChildrenThatLeftTheGroup) {
  KillLauncherAndCount("sleep 300 & setsid sleep 301 &", 3, {}, true);
}

TEST_F(ContainmentTest, ProcessGroupEndsBackgroundChildrenWithoutCgroups) {
  KillLauncherAndCount("sleep 300 &", 2, {"DLAUNCH_CGROUPS=off"}, false);
}

TEST_F(ContainmentTest, ARankThatExitsTakesItsChildrenAlong) {
  const std::string marker = Marker();
  Launched l(Cmd({"--nproc", "2", "--env", marker, "--", "bash", "-c",
                  "sleep 300 & setsid sleep 301 & echo ready $$; exit 0"}));
  EXPECT_EQ(l.Wait(seconds(30)), 0) << l.err_text();
  // Bash's children may still be exiting: wait on them, then count.
  EXPECT_TRUE(ExitWatch(MarkedPids(marker)).AllExit(seconds(10)));
  EXPECT_TRUE(MarkedPids(marker).empty());
}

}  // namespace
}  // namespace dlaunch::testing
