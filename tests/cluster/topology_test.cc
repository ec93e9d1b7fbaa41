// The topology reader on a made-up sysfs tree (NUMA nodes, CPU packages, PCI devices as the
// kernel lays them out), then the placement it leads to: each local rank's CUDA_VISIBLE_DEVICES
// and the CPUs of its GPU's NUMA node. The launcher's own affinity is this machine's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launcher/supervision/placement.h"
#include "tests/common/test_dir.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

class TopologyTest : public ::testing::Test {
 protected:
  void SetUp() override { cpus_ = ReadTopology().allowed_cpus; }
  void Write(const fs::path& file, const std::string& text) {
    fs::create_directories((root_ / file).parent_path());
    std::ofstream(root_ / file) << text << "\n";
  }
  // The allowed CPUs split in two NUMA nodes on two packages: node 0 the first half.
  void TwoNodes() {
    const size_t half = cpus_.size() / 2;
    std::vector<int> lo(cpus_.begin(), cpus_.begin() + half), hi(cpus_.begin() + half, cpus_.end());
    Write("devices/system/node/node0/cpulist", FormatCpuList(lo));
    Write("devices/system/node/node1/cpulist", FormatCpuList(hi));
    Write("devices/system/node/online", "0-1");  // not a node folder
    for (size_t i = 0; i < cpus_.size(); ++i) {
      const std::string cpu = "devices/system/cpu/cpu" + std::to_string(cpus_[i]) + "/topology/";
      Write(cpu + "physical_package_id", i < half ? "0" : "1");
      Write(cpu + "core_id", std::to_string(i));
    }
  }
  void PciDevice(const std::string& bus_id, const std::string& vendor, const std::string& cls,
                 int numa) {
    const std::string dev = "bus/pci/devices/" + bus_id + "/";
    Write(dev + "vendor", vendor);
    Write(dev + "class", cls);
    Write(dev + "numa_node", std::to_string(numa));
  }
  const dlaunch::testing::TestDir test_dir_{"sysfs"};
  const fs::path root_ = test_dir_.path();
  std::vector<int> cpus_;
};

TEST_F(TopologyTest, GpusInPciOrderWithTheirNumaNodesAndOnlyNvidiaGpus) {
  TwoNodes();
  PciDevice("0000:b1:00.0", "0x10de", "0x030200", 0);   // 3D controller (H100, A100)
  PciDevice("0000:17:00.0", "0x10de", "0x030000", 1);   // VGA controller
  PciDevice("0000:18:00.0", "0x10de", "0x068000", 1);   // an NVSwitch: a bridge, not a GPU
  PciDevice("0000:19:00.0", "0x8086", "0x030000", 0);   // another vendor's GPU
  PciDevice("0000:c0:00.0", "0x10de", "0x030200", -1);  // a GPU the firmware gave no node
  const Topology m = ReadTopology(root_.string());
  EXPECT_EQ(m.gpu_numa, (std::vector<int>{1, 0, -1}));
  EXPECT_EQ(m.allowed_cpus, cpus_);
  ASSERT_EQ(m.numa_cpus.size(), 2u);
  EXPECT_EQ(m.numa_cpus.at(0).size() + m.numa_cpus.at(1).size(), cpus_.size());
  EXPECT_EQ(m.cpu_socket.at(cpus_.back()), cpus_.size() > 1 ? 1 : 0);
}

TEST_F(TopologyTest, EachLocalRankGetsItsGpuAndThatGpusNumaCpus) {
  if (cpus_.size() < 2) GTEST_SKIP() << "needs two CPUs for two NUMA nodes";
  TwoNodes();
  PciDevice("0000:17:00.0", "0x10de", "0x030200", 1);
  PciDevice("0000:b1:00.0", "0x10de", "0x030200", 0);
  const Topology m = ReadTopology(root_.string());
  PlacementRequest req;
  req.nproc = 2;
  req.numa_binding = NumaBinding::kNode;
  // One launcher sees every GPU: rank r uses GPU r through LOCAL_RANK, on its GPU's node.
  auto one = PlanPlacement(req, m);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one[0].gpu, 0);
  EXPECT_FALSE(one[0].cuda_visible_devices);
  EXPECT_EQ(one[0].cpus, m.numa_cpus.at(1));
  EXPECT_EQ(one[1].cpus, m.numa_cpus.at(0));
  // Two launchers of one GPU each (srun -n2 on the node): each its own GPU and node.
  req.nproc = 1;
  req.share_count = 2;
  for (int share : {0, 1}) {
    req.share_index = share;
    auto p = PlanPlacement(req, m);
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].cuda_visible_devices, std::to_string(share));
    EXPECT_EQ(p[0].cpus, m.numa_cpus.at(share == 0 ? 1 : 0));
  }
  // --gpu-binding isolate: CUDA_VISIBLE_DEVICES is the one GPU, numbered as nvidia-smi does.
  req = PlacementRequest{};
  req.nproc = 2;
  req.gpu_binding = GpuBinding::kIsolate;
  auto iso = PlanPlacement(req, m);
  EXPECT_EQ(iso[0].cuda_visible_devices, "0");
  EXPECT_EQ(iso[1].cuda_visible_devices, "1");
}

// Each CPU's last-level cache is the highest level of its cache folders, named by the lowest CPU
// sharing it (an AMD CCX), for --numa-binding core-complex.
TEST_F(TopologyTest, LastLevelCachesAreReadFromEachCpusCacheFolders) {
  TwoNodes();
  const size_t half = cpus_.size() / 2;
  std::vector<int> lo(cpus_.begin(), cpus_.begin() + half), hi(cpus_.begin() + half, cpus_.end());
  for (size_t i = 0; i < cpus_.size(); ++i) {
    const std::string cache = "devices/system/cpu/cpu" + std::to_string(cpus_[i]) + "/cache/";
    Write(cache + "index0/level", "1");
    Write(cache + "index0/shared_cpu_list", std::to_string(cpus_[i]));
    Write(cache + "index3/level", "3");
    Write(cache + "index3/shared_cpu_list", FormatCpuList(i < half ? lo : hi));
    Write(cache + "uevent", "");  // not a cache folder
  }
  const Topology m = ReadTopology(root_.string());
  ASSERT_EQ(m.cpu_llc.size(), cpus_.size());
  EXPECT_EQ(m.cpu_llc.at(cpus_.front()), cpus_.front());
  EXPECT_EQ(m.cpu_llc.at(cpus_.back()), hi.front());
}

TEST_F(TopologyTest, AMachineWithoutNumaOrPciFoldersHasNoGpusAndPlacesNothing) {
  fs::create_directories(root_);
  const Topology m = ReadTopology(root_.string());
  EXPECT_TRUE(m.gpu_numa.empty());
  EXPECT_TRUE(m.numa_cpus.empty());
  PlacementRequest req;
  req.nproc = 2;
  req.numa_binding = NumaBinding::kNode;
  for (const auto& p : PlanPlacement(req, m)) {
    EXPECT_FALSE(p.cuda_visible_devices);
    EXPECT_EQ(p.cpus, cpus_);  // the launcher's own CPUs
  }
}

}  // namespace
}  // namespace dlaunch::launcher
