// The /proc parsers on fixture files, and the Probe step over a fixture root folder.
#include <gtest/gtest.h>

#include "launcher/doctor/probe.h"
#include "launcher/doctor/system_parsers.h"

namespace dlaunch::launcher {
namespace {

std::string Fixture(const std::string& name) {
  std::string text;
  EXPECT_TRUE(ReadSmallTextFile(std::string(DLAUNCH_DOCTOR_FIXTURES) + "/" + name, &text)) << name;
  return text;
}

TEST(SystemParsersTest, DriverVersionFromProprietaryModule) {
  EXPECT_EQ(ParseNvidiaDriverVersion(Fixture("proc_driver_nvidia_version_535.txt")), "535.104.05");
}

TEST(SystemParsersTest, DriverVersionFromOpenModule) {
  EXPECT_EQ(ParseNvidiaDriverVersion(Fixture("proc_driver_nvidia_version_open_550.txt")),
            "550.54.14");
}

TEST(SystemParsersTest, DriverVersionAbsent) {
  EXPECT_EQ(ParseNvidiaDriverVersion("GCC version: 12\n"), "");
}

TEST(SystemParsersTest, MemInfo) {
  uint64_t total = 0, available = 0;
  ASSERT_TRUE(ParseMemInfo(Fixture("meminfo.txt"), &total, &available));
  EXPECT_EQ(total, 2113389828ULL * 1024);
  EXPECT_EQ(available, 2034567890ULL * 1024);
  EXPECT_FALSE(ParseMemInfo("SwapTotal: 0 kB\n", &total, &available));
}

TEST(SystemParsersTest, CpuInfo) {
  std::string model;
  int count = 0;
  ParseCpuInfo(Fixture("cpuinfo.txt"), &model, &count);
  EXPECT_EQ(model, "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(count, 4);
}

TEST(SystemParsersTest, OsRelease) {
  EXPECT_EQ(ParseOsRelease(Fixture("root_h100/etc/os-release")), "Ubuntu 22.04.4 LTS");
  EXPECT_EQ(ParseOsRelease("NAME=x\n"), "");
}

TEST(SystemParsersTest, FormatByteCount) {
  EXPECT_EQ(FormatByteCount(64ULL << 20), "64.0 MiB");
  EXPECT_EQ(FormatByteCount(512 << 10), "512 KiB");
  EXPECT_EQ(FormatByteCount(100), "100 B");
}

TEST(ProbeTest, ReadsAFixtureRoot) {
  ProbeOptions options;
  options.root = std::string(DLAUNCH_DOCTOR_FIXTURES) + "/root_h100";
  options.load_libraries = false;
  options.read_process_state = false;
  DoctorFacts facts = Probe(options).Run();
  EXPECT_TRUE(facts.proc_driver_present);
  EXPECT_EQ(facts.driver_version, "550.54.14");
  EXPECT_EQ(facts.driver_source, "/proc/driver/nvidia/version");
  EXPECT_EQ(facts.os, "Ubuntu 22.04.4 LTS");
  EXPECT_EQ(facts.cpu_count, 4);
  EXPECT_EQ(facts.memory_total_bytes, 2113389828ULL * 1024);
  EXPECT_EQ(facts.rdma_devices, (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
  EXPECT_FALSE(facts.memlock.known);
  EXPECT_TRUE(facts.env.empty());
}

TEST(ProbeTest, ThisMachine) {
  // No fixture: the real /proc, limits, interfaces and libraries. Facts every Linux box has.
  DoctorFacts facts = Probe().Run();
  EXPECT_FALSE(facts.kernel.empty());
  EXPECT_GT(facts.cpu_count, 0);
  EXPECT_GT(facts.memory_total_bytes, 0u);
  EXPECT_TRUE(facts.nofile.known);
  bool has_loopback = false;
  for (const NetInterfaceFacts& nic : facts.interfaces) has_loopback |= nic.loopback;
  EXPECT_TRUE(has_loopback);
  // Either a GPU was listed, or the probe says why not.
  EXPECT_TRUE(!facts.gpus.empty() || !facts.gpu_error.empty());
}

}  // namespace
}  // namespace dlaunch::launcher
