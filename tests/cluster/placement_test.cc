// Rank placement on made-up machines: GPUs per local rank, shares of several launchers, and
// torchrun's --numa-binding modes.
#include "launcher/supervision/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.h"

namespace dlaunch::launcher {
namespace {

std::vector<int> Range(int lo, int hi) {
  std::vector<int> v;
  for (int i = lo; i < hi; ++i) v.push_back(i);
  return v;
}

// Two sockets, one NUMA node each, `cores` cores per socket with two hyperthreads (CPU c and
// c + 2*cores share a core), and 8 GPUs: 0-3 on node 0, 4-7 on node 1.
Topology TwoSocketMachine(int cores = 4) {
  Topology m;
  const int n = 2 * cores;
  m.allowed_cpus = Range(0, 2 * n);
  for (int c = 0; c < 2 * n; ++c) {
    const int socket = (c % n) / cores;
    m.cpu_socket[c] = socket;
    m.cpu_core[c] = c % cores;
    m.numa_cpus[socket].push_back(c);
  }
  m.gpu_numa = {0, 0, 0, 0, 1, 1, 1, 1};
  return m;
}

PlacementRequest Request(int nproc, std::string gpu = "local-rank", std::string numa = "") {
  PlacementRequest r;
  r.nproc = nproc;
  r.gpu_binding = *GpuBindingNamed(gpu);
  r.numa_binding = numa.empty() ? NumaBinding::kNone : *NumaBindingNamed(numa);
  return r;
}

TEST(PlacementTest, OneLauncherLeavesCudaVisibleDevicesAndUsesLocalRank) {
  auto p = PlanPlacement(Request(8), TwoSocketMachine());
  ASSERT_EQ(p.size(), 8u);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(p[r].gpu, r);
    EXPECT_FALSE(p[r].cuda_visible_devices);
    EXPECT_TRUE(p[r].cpus.empty());
  }
}

TEST(PlacementTest, TwoLaunchersOnAMachineSplitItsGpus) {
  PlacementRequest r = Request(4);
  r.share_index = 1;
  r.share_count = 2;
  auto p = PlanPlacement(r, TwoSocketMachine());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(p[i].cuda_visible_devices.value_or(""), "4,5,6,7");
    EXPECT_EQ(p[i].gpu, 4 + i);
  }
  r.cuda_visible_devices = "1,3,5,7,0,2,4,6";  // the inherited order is kept
  p = PlanPlacement(r, TwoSocketMachine());
  EXPECT_EQ(p[0].cuda_visible_devices.value_or(""), "0,2,4,6");
}

TEST(PlacementTest, IsolateGivesEachRankItsOneGpu) {
  auto p = PlanPlacement(Request(4, "isolate"), TwoSocketMachine());
  for (int r = 0; r < 4; ++r) EXPECT_EQ(p[r].cuda_visible_devices.value_or(""), std::to_string(r));
  PlacementRequest uuids = Request(2, "isolate");
  uuids.cuda_visible_devices = "GPU-aa,GPU-bb";
  p = PlanPlacement(uuids, TwoSocketMachine());
  EXPECT_EQ(p[1].cuda_visible_devices.value_or(""), "GPU-bb");
  EXPECT_EQ(p[1].gpu, -1);
  EXPECT_THROW(PlanPlacement(Request(9, "isolate"), TwoSocketMachine()), UsageError);
  Topology cpu_only = TwoSocketMachine();
  cpu_only.gpu_numa.clear();
  EXPECT_THROW(PlanPlacement(Request(1, "isolate"), cpu_only), UsageError);
}

TEST(PlacementTest, NodeBindingIsTheGpusNumaNode) {
  const Topology m = TwoSocketMachine();
  auto p = PlanPlacement(Request(8, "local-rank", "node"), m);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(p[r].cpus, m.numa_cpus.at(r < 4 ? 0 : 1)) << r;
}

TEST(PlacementTest, SocketBindingIsEveryNumaNodeOfTheGpusSocket) {
  Topology m = TwoSocketMachine();
  // Socket 0 split into NUMA nodes 0 and 2.
  m.numa_cpus[2] = {2, 3, 10, 11};
  m.numa_cpus[0] = {0, 1, 8, 9};
  m.gpu_numa = {0, 2};
  auto p = PlanPlacement(Request(2, "local-rank", "socket"), m);
  EXPECT_EQ(p[0].cpus, (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(p[1].cpus, p[0].cpus);
}

TEST(PlacementTest, ExclusiveSplitsTheNumaNodesCoresWithTheirThreads) {
  auto p = PlanPlacement(Request(8, "local-rank", "exclusive"), TwoSocketMachine());
  std::set<int> seen;
  for (int r = 0; r < 8; ++r) {
    ASSERT_EQ(p[r].cpus.size(), 2u) << r;  // one core, both threads
    EXPECT_EQ(p[r].cpus[1], p[r].cpus[0] + 8);
    for (int c : p[r].cpus) EXPECT_TRUE(seen.insert(c).second) << "CPU " << c << " twice";
  }
  EXPECT_EQ(p[0].cpus, (std::vector<int>{0, 8}));
  EXPECT_EQ(p[4].cpus, (std::vector<int>{4, 12}));
  // Launcher 1 of 2 with 4 ranks on GPUs 4-7 takes node 1's cores, not node 0's.
  PlacementRequest second = Request(4, "local-rank", "exclusive");
  second.share_index = 1;
  second.share_count = 2;
  auto q = PlanPlacement(second, TwoSocketMachine());
  EXPECT_EQ(q[0].cpus, (std::vector<int>{4, 12}));
}

// torchrun's core-complex: each rank one last-level cache's CPUs of its GPU's NUMA node, the
// node's ranks taking its caches in turn; unknown caches are the whole node.
TEST(PlacementTest, CoreComplexGivesEachRankALastLevelCache) {
  Topology m = TwoSocketMachine();
  // Two caches per node, of two cores each: {0,1,8,9} {2,3,10,11} | {4,5,12,13} {6,7,14,15}.
  for (int c = 0; c < 16; ++c) m.cpu_llc[c] = (c % 8) / 2 * 2;
  auto p = PlanPlacement(Request(8, "local-rank", "core-complex"), m);
  EXPECT_EQ(p[0].cpus, (std::vector<int>{0, 1, 8, 9}));
  EXPECT_EQ(p[1].cpus, (std::vector<int>{2, 3, 10, 11}));
  EXPECT_EQ(p[2].cpus, p[0].cpus);  // more ranks than caches: they share in turn
  EXPECT_EQ(p[4].cpus, (std::vector<int>{4, 5, 12, 13}));
  EXPECT_EQ(p[7].cpus, (std::vector<int>{6, 7, 14, 15}));
  EXPECT_EQ(p[0].threads, 1);  // two cores, two ranks
  // The cache with the most usable CPUs comes first.
  m.allowed_cpus = {0, 2, 3, 10};
  m.gpu_numa = {0};
  p = PlanPlacement(Request(1, "local-rank", "core-complex"), m);
  EXPECT_EQ(p[0].cpus, (std::vector<int>{2, 3, 10}));
  m = TwoSocketMachine();  // no cache known
  p = PlanPlacement(Request(1, "local-rank", "core-complex"), m);
  EXPECT_EQ(p[0].cpus, m.numa_cpus.at(0));
}

// torchrun's --virtual-local-rank: every rank's one GPU, as isolate; without any GPU its local
// rank's index all the same, as torchrun does.
TEST(PlacementTest, VirtualLocalRankGivesEachRankItsOneGpu) {
  PlacementRequest r = Request(2);
  r.virtual_local_rank = true;
  r.cuda_visible_devices = "3,5";
  auto p = PlanPlacement(r, TwoSocketMachine());
  EXPECT_EQ(p[0].cuda_visible_devices.value_or(""), "3");
  EXPECT_EQ(p[1].cuda_visible_devices.value_or(""), "5");
  Topology cpu_only = TwoSocketMachine();
  cpu_only.gpu_numa.clear();
  r.cuda_visible_devices.reset();
  p = PlanPlacement(r, cpu_only);
  EXPECT_EQ(p[1].cuda_visible_devices.value_or(""), "1");
  r.nproc = 9;
  try {
    PlanPlacement(r, TwoSocketMachine());
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--virtual-local-rank needs a GPU per rank"),
              std::string::npos)
        << e.what();
  }
}

TEST(PlacementTest, ALauncherBoundAlreadySplitsOnlyItsOwnCpus) {
  Topology m = TwoSocketMachine();
  m.gpu_numa.clear();
  m.allowed_cpus = {4, 5, 12, 13};  // mpirun --bind-to gave launcher 1 of 2 these
  PlacementRequest r = Request(2, "local-rank", "exclusive");
  r.share_index = 1;
  r.share_count = 2;
  auto p = PlanPlacement(r, m);
  EXPECT_EQ(p[0].cpus, (std::vector<int>{4, 12}));
  EXPECT_EQ(p[1].cpus, (std::vector<int>{5, 13}));
}

TEST(PlacementTest, WithoutGpusRanksTakeTheNumaNodesInTurn) {
  Topology m = TwoSocketMachine();
  m.gpu_numa.clear();
  auto p = PlanPlacement(Request(4, "local-rank", "exclusive"), m);
  EXPECT_EQ(p[0].cpus, (std::vector<int>{0, 1, 8, 9}));    // node 0, first half of its 4 cores
  EXPECT_EQ(p[1].cpus, (std::vector<int>{4, 5, 12, 13}));  // node 1
  EXPECT_EQ(p[2].cpus, (std::vector<int>{2, 3, 10, 11}));
  // Only the CPUs the launcher may use count.
  Topology two = m;
  two.allowed_cpus = {0, 1};
  p = PlanPlacement(Request(2, "local-rank", "exclusive"), two);
  EXPECT_EQ(p[0].cpus, std::vector<int>{0});
  EXPECT_EQ(p[1].cpus, std::vector<int>{1});
  try {
    PlanPlacement(Request(3, "local-rank", "exclusive"), two);
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("3 ranks share NUMA node 0's 2 usable cores"),
              std::string::npos)
        << e.what();
  }
}

TEST(PlacementTest, ApplySetsOrReplacesCudaVisibleDevices) {
  ProcessSpec spec;
  spec.env = {"A=1", "CUDA_VISIBLE_DEVICES=0,1,2,3"};
  RankPlacement p;
  p.cuda_visible_devices = "2";
  p.cpus = {3};
  ApplyPlacement(p, &spec);
  EXPECT_EQ(spec.env,
            (std::vector<std::string>{"A=1", "CUDA_VISIBLE_DEVICES=2", "OMP_NUM_THREADS=1"}));
  EXPECT_EQ(spec.cpus, std::vector<int>{3});
  ProcessSpec bare;
  bare.env = {"OMP_NUM_THREADS=2"};
  ApplyPlacement(p, &bare);
  EXPECT_EQ(bare.env, (std::vector<std::string>{"OMP_NUM_THREADS=2", "CUDA_VISIBLE_DEVICES=2"}));
}

TEST(PlacementTest, ThreadsAreTheRanksShareOfThePhysicalCores) {
  const Topology m = TwoSocketMachine();  // 8 cores, 16 CPUs
  auto threads = [&](const PlacementRequest& r, const Topology& t) {
    std::vector<int> out;
    for (const RankPlacement& p : PlanPlacement(r, t)) out.push_back(p.threads);
    return out;
  };
  EXPECT_EQ(threads(Request(1), m), std::vector<int>{8});  // hyperthreads do not count
  EXPECT_EQ(threads(Request(4), m), std::vector<int>(4, 2));
  EXPECT_EQ(threads(Request(16), m), std::vector<int>(16, 1));  // never 0
  PlacementRequest shared = Request(2);
  shared.share_index = 1;
  shared.share_count = 2;  // two launchers on the machine, neither bound
  EXPECT_EQ(threads(shared, m), std::vector<int>(2, 2));
  Topology bound = m;
  bound.allowed_cpus = {4, 5, 12, 13};  // this launcher was bound to 2 cores
  EXPECT_EQ(threads(shared, bound), std::vector<int>(2, 1));
  // Binding: exclusive ranks own their cores; node binding shares the GPU's NUMA node.
  EXPECT_EQ(threads(Request(8, "local-rank", "exclusive"), m), std::vector<int>(8, 1));
  Topology no_gpus = m;
  no_gpus.gpu_numa.clear();
  EXPECT_EQ(threads(Request(4, "local-rank", "exclusive"), no_gpus), std::vector<int>(4, 2));
  EXPECT_EQ(threads(Request(2, "local-rank", "node"), m), std::vector<int>(2, 2));  // GPUs 0, 1
  EXPECT_EQ(threads(Request(8, "local-rank", "node"), m), std::vector<int>(8, 1));
  EXPECT_EQ(threads(Request(2, "local-rank", "socket"), no_gpus), std::vector<int>(2, 4));
}

TEST(PlacementTest, ApplySetsOmpNumThreadsUnlessTheUserDid) {
  RankPlacement p;
  p.threads = 6;
  ProcessSpec bare;
  ApplyPlacement(p, &bare);
  EXPECT_EQ(bare.env, std::vector<std::string>{"OMP_NUM_THREADS=6"});
  ProcessSpec empty;
  empty.env = {"OMP_NUM_THREADS=", "A=1"};
  ApplyPlacement(p, &empty);
  EXPECT_EQ(empty.env, (std::vector<std::string>{"OMP_NUM_THREADS=6", "A=1"}));
  ProcessSpec given;
  given.env = {"OMP_NUM_THREADS=3"};
  ApplyPlacement(p, &given);
  EXPECT_EQ(given.env, std::vector<std::string>{"OMP_NUM_THREADS=3"});
}

TEST(PlacementTest, CpuLists) {
  EXPECT_EQ(ParseCpuList("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({}), "");
  for (const char* bad : {"a", "3-1", "1-", "-2"})
    EXPECT_THROW(ParseCpuList(bad), UsageError) << bad;
}

TEST(PlacementTest, ThisMachinesTopologyIsReadable) {
  Topology m = ReadTopology();
  EXPECT_FALSE(m.allowed_cpus.empty());
  for (int c : m.allowed_cpus) EXPECT_TRUE(m.cpu_socket.count(c));
}

}  // namespace
}  // namespace dlaunch::launcher
