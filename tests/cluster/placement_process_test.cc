// Placement through a real launcher: ranks bound with --numa-binding get disjoint CPU sets
// (read back with sched_getaffinity in each rank), and a binding the machine cannot give is a
// usage error before any rank starts.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "launcher/supervision/placement.h"
#include "process_harness.h"
#include "tests/common/test_dir.h"

namespace dlaunch {
namespace {

using std::chrono::seconds;
using testing::Launched;

int AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  ::sched_getaffinity(0, sizeof(set), &set);
  return CPU_COUNT(&set);
}

// "[rank R] rank R cpus LIST cuda X local L" console lines -> rank -> CPUs.
std::map<int, std::vector<int>> CpusByRank(const std::vector<std::string>& lines) {
  std::map<int, std::vector<int>> out;
  for (const auto& line : lines) {
    const size_t at = line.find("] rank ");
    if (at == std::string::npos) continue;
    std::istringstream in(line.substr(at + 2));
    std::string word, list;
    int rank = -1;
    if (in >> word >> rank >> word >> list && word == "cpus") {
      out[rank] = launcher::ParseCpuList(list);
    }
  }
  return out;
}

class PlacementProcessTest : public ::testing::Test {
 protected:
  std::vector<std::string> Argv(std::vector<std::string> flags) {
    std::vector<std::string> argv = {DLAUNCH_BIN, "--log-dir", dir_.string()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back(AFFINITY_RANK_BIN);
    return argv;
  }
  const dlaunch::testing::TestDir test_dir_{"place"};
  const std::filesystem::path dir_ = test_dir_.path();
};

TEST_F(PlacementProcessTest, ExclusiveBindingGivesRanksDisjointCpus) {
  const int cpus = AllowedCpus();
  if (cpus < 2) GTEST_SKIP() << "needs at least 2 CPUs to split, this process may use " << cpus;
  Launched l(Argv({"--nproc", "2", "--numa-binding", "exclusive"}));
  ASSERT_EQ(l.Wait(seconds(30)), 0) << l.err_text();
  auto by_rank = CpusByRank(l.out_lines);
  ASSERT_EQ(by_rank.size(), 2u);
  std::set<int> seen;
  for (const auto& [rank, set] : by_rank) {
    EXPECT_FALSE(set.empty()) << rank;
    EXPECT_LT(static_cast<int>(set.size()), cpus) << "rank " << rank << " was not bound";
    for (int c : set) EXPECT_TRUE(seen.insert(c).second) << "CPU " << c << " given twice";
  }
}

// Two launchers on one machine (mpirun -np 2, as two nodes of one job) split its cores too.
TEST_F(PlacementProcessTest, LaunchersSharingAMachineSplitItsCores) {
  if (::access(MPIRUN_BIN, X_OK) != 0) GTEST_SKIP() << "mpirun is not installed";
  if (AllowedCpus() < 2) GTEST_SKIP() << "needs at least 2 CPUs";
  // mpirun's own core binding (each launcher on its core), and none (both see the machine).
  for (const char* bind : {"core", "none"}) {
    std::vector<std::string> argv = {
        MPIRUN_BIN, "--allow-run-as-root", "--oversubscribe", "--bind-to", bind, "-np", "2",
        "-x",       "DLAUNCH_JOB_TOKEN"};
    for (const auto& a : Argv({"--nproc", "1", "--run-id", "job", "--numa-binding", "exclusive"}))
      argv.push_back(a);
    Launched l(argv,
               {"DLAUNCH_JOB_TOKEN=placement-test-token-0123", "OMPI_MCA_plm_rsh_agent=false"});
    ASSERT_EQ(l.Wait(seconds(120)), 0) << bind << ": " << l.err_text();
    auto by_rank = CpusByRank(l.out_lines);
    ASSERT_EQ(by_rank.size(), 2u) << bind << ": " << l.err_text();
    std::set<int> seen;
    for (const auto& [rank, set] : by_rank) {
      EXPECT_FALSE(set.empty()) << bind << " rank " << rank;
      for (int c : set) EXPECT_TRUE(seen.insert(c).second) << bind << ": CPU " << c << " twice";
    }
  }
}

TEST_F(PlacementProcessTest, WithoutBindingRanksKeepTheLaunchersCpus) {
  Launched l(Argv({"--nproc", "2"}));
  ASSERT_EQ(l.Wait(seconds(30)), 0) << l.err_text();
  auto by_rank = CpusByRank(l.out_lines);
  ASSERT_EQ(by_rank.size(), 2u);
  for (const auto& [rank, set] : by_rank) {
    EXPECT_EQ(static_cast<int>(set.size()), AllowedCpus()) << rank;
  }
}

TEST_F(PlacementProcessTest, ABindingTheMachineCannotGiveIsAUsageError) {
  const int cpus = AllowedCpus();
  Launched l(Argv({"--nproc", std::to_string(cpus + 1), "--numa-binding", "exclusive"}));
  EXPECT_EQ(l.Wait(seconds(30)), 2);
  EXPECT_NE(l.err_text().find("--numa-binding exclusive needs a physical core per rank"),
            std::string::npos)
      << l.err_text();
  EXPECT_TRUE(CpusByRank(l.out_lines).empty()) << "a rank started";
  Launched bad(Argv({"--numa-binding", "l3"}));
  EXPECT_EQ(bad.Wait(seconds(30)), 2);
  EXPECT_NE(bad.err_text().find("--numa-binding must be"), std::string::npos) << bad.err_text();
}

}  // namespace
}  // namespace dlaunch
