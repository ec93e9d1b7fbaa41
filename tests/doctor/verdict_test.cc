// The verdict rules over fixture facts: the clean case and each ✗ the doctor exists to catch.
#include "launcher/doctor/verdict.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "launcher/doctor/cuda_compat.h"
#include "launcher/doctor/doctor.h"
#include "launcher/doctor/doctor_report.h"
#include "launcher/doctor/nccl_ifname_filter.h"

namespace dlaunch::launcher {
namespace {

DoctorFacts LoadFacts(const std::string& name) {
  std::ifstream in(std::string(DLAUNCH_DOCTOR_FIXTURES) + "/" + name);
  EXPECT_TRUE(in.good()) << name;
  return nlohmann::json::parse(in).get<DoctorFacts>();
}

const CheckResult& Get(const std::vector<CheckResult>& checks, const std::string& id) {
  const CheckResult* c = Verdict::Find(checks, id);
  if (c == nullptr) throw std::runtime_error("no check " + id);
  return *c;
}

CheckStatus StatusOf(const DoctorFacts& facts, const std::string& id) {
  return Get(Verdict::Judge(facts), id).status;
}

TEST(CudaCompatTest, MinimumDriverFollowsNvidiaTable) {
  EXPECT_EQ(MinimumDriverForCuda(12000), "525.60.13");
  EXPECT_EQ(MinimumDriverForCuda(12010), "530.30.02");
  EXPECT_EQ(MinimumDriverForCuda(12040), "550.54.14");
  EXPECT_EQ(MinimumDriverForCuda(11080), "520.61.05");
  EXPECT_EQ(MinimumDriverForCuda(13000), "580.65.06");
  // 12.7 was never released: the floor of the newest older 12.x release applies.
  EXPECT_EQ(MinimumDriverForCuda(12070), "560.28.03");
  EXPECT_EQ(MinimumDriverForCuda(14000), "");
}

TEST(CudaCompatTest, DriverVersionsCompareFieldByField) {
  EXPECT_LT(CompareDriverVersions("525.60.13", "530.30.02"), 0);
  EXPECT_LT(CompareDriverVersions("530.30.2", "530.30.10"), 0);
  EXPECT_EQ(CompareDriverVersions("570.26", "570.26.0"), 0);
  EXPECT_GT(CompareDriverVersions("580.95.05", "580.65.06"), 0);
  EXPECT_EQ(NewestCudaForDriver("525.60.13"), 12000);
  EXPECT_EQ(NewestCudaForDriver("535.104.05"), 12020);
  EXPECT_EQ(NewestCudaForDriver("580.65.06"), 13000);
  EXPECT_EQ(NewestCudaForDriver("not a version"), 0);
}

TEST(CudaCompatTest, ComputeCapabilityRanges) {
  int lo = 0, hi = 0;
  ASSERT_TRUE(ComputeCapabilityRange(13000, &lo, &hi));
  EXPECT_EQ(lo, 75);
  ASSERT_TRUE(ComputeCapabilityRange(12010, &lo, &hi));
  EXPECT_EQ(lo, 50);
  EXPECT_EQ(hi, 90);
  ASSERT_TRUE(ComputeCapabilityRange(12080, &lo, &hi));
  EXPECT_EQ(hi, 120);
  EXPECT_FALSE(ComputeCapabilityRange(0, &lo, &hi));
}

TEST(VersionFormatTest, Formats) {
  EXPECT_EQ(FormatCudaVersion(12010), "12.1");
  EXPECT_EQ(FormatNcclVersion(22809), "2.28.9");
  EXPECT_EQ(FormatNcclVersion(2804), "2.8.4");
  EXPECT_EQ(FormatCudnnVersion(90100), "9.1.0");
  EXPECT_EQ(FormatCudnnVersion(8907), "8.9.7");
  EXPECT_EQ(ParseCudaVersion("12.1"), 12010);
  EXPECT_EQ(ParseCudaVersion("?"), 0);
}

TEST(NcclIfnameFilterTest, FollowsNcclSyntax) {
  NcclIfnameFilter prefix = NcclIfnameFilter::Parse("eth");
  EXPECT_TRUE(prefix.Matches("eth0"));
  EXPECT_TRUE(prefix.Matches("eth10"));
  EXPECT_FALSE(prefix.Matches("ib0"));

  NcclIfnameFilter exact = NcclIfnameFilter::Parse("=eth0");
  EXPECT_TRUE(exact.Matches("eth0"));
  EXPECT_FALSE(exact.Matches("eth01"));

  NcclIfnameFilter exclude = NcclIfnameFilter::Parse("^docker,lo");
  EXPECT_TRUE(exclude.Matches("eth0"));
  EXPECT_FALSE(exclude.Matches("docker0"));
  EXPECT_FALSE(exclude.Matches("lo"));

  NcclIfnameFilter exclude_exact = NcclIfnameFilter::Parse("^=docker0");
  EXPECT_TRUE(exclude_exact.Matches("docker1"));
  EXPECT_FALSE(exclude_exact.Matches("docker0"));

  NcclIfnameFilter ports = NcclIfnameFilter::Parse("eth0:5000,ib");
  EXPECT_EQ(ports.names(), (std::vector<std::string>{"eth0", "ib"}));
  EXPECT_TRUE(ports.Matches("ib1"));
}

TEST(NcclIfnameFilterTest, UsableNeedsAnAddress) {
  std::vector<NetInterfaceFacts> nics(2);
  nics[0].name = "eth0";
  nics[0].ipv4 = {"10.0.0.1"};
  nics[1].name = "eth1";  // no address
  EXPECT_EQ(NcclIfnameFilter::Parse("eth").Usable(nics), std::vector<std::string>{"eth0"});
  EXPECT_TRUE(NcclIfnameFilter::Parse("=eth1").Usable(nics).empty());
}

TEST(VerdictTest, CleanNodePassesEverything) {
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  std::vector<CheckResult> checks = Verdict::Judge(facts);
  for (const CheckResult& c : checks) {
    EXPECT_EQ(c.status, CheckStatus::kPass) << c.id << ": " << c.detail << " / " << c.fix;
  }
  EXPECT_FALSE(Verdict::AnyFailed(checks));
  EXPECT_TRUE(FatalProblems(checks).empty());
}

TEST(VerdictTest, Cu121LibtorchOnDriver525Fails) {
  DoctorFacts facts = LoadFacts("facts_cu121_on_525.json");
  std::vector<CheckResult> checks = Verdict::Judge(facts);
  const CheckResult& torch = Get(checks, "torch_cuda_driver");
  EXPECT_EQ(torch.status, CheckStatus::kFail);
  EXPECT_TRUE(torch.fatal);
  EXPECT_NE(torch.detail.find("CUDA 12.1"), std::string::npos) << torch.detail;
  EXPECT_NE(torch.fix.find(">= 530.30.02"), std::string::npos) << torch.fix;
  // dlaunch's own CUDA 12.0 runtime is fine on 525.60.13: only libtorch is the problem.
  EXPECT_EQ(Get(checks, "driver_cuda_runtime").status, CheckStatus::kPass);
  ASSERT_EQ(FatalProblems(checks).size(), 1u);
  EXPECT_NE(FatalProblems(checks)[0].find("Fix: upgrade the NVIDIA driver"), std::string::npos);
}

TEST(VerdictTest, LibtorchCudaNewerThanDriverReportsFails) {
  // The table knows nothing newer than 13.1; the driver's own report still catches it.
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  facts.torch_cuda = "13.9";
  EXPECT_EQ(StatusOf(facts, "torch_cuda_driver"), CheckStatus::kFail);
}

TEST(VerdictTest, DriverTooOldForCudaRuntimeFails) {
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  facts.driver_version = "535.104.05";
  facts.cuda_driver_version = 12020;
  facts.torch_cuda = "12.1";
  std::vector<CheckResult> checks = Verdict::Judge(facts);
  const CheckResult& c = Get(checks, "driver_cuda_runtime");
  EXPECT_EQ(c.status, CheckStatus::kFail);
  EXPECT_NE(c.detail.find("550.54.14"), std::string::npos) << c.detail;
  EXPECT_NE(c.fix.find("CUDA <= 12.2"), std::string::npos) << c.fix;
  EXPECT_EQ(Get(checks, "torch_cuda_driver").status, CheckStatus::kPass);
}

TEST(VerdictTest, MissingCudaRuntimeOnGpuMachineFails) {
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  facts.cuda_runtime_version = 0;  // built against 12.4, no libcudart.so.12 at run time
  const CheckResult c = Get(Verdict::Judge(facts), "driver_cuda_runtime");
  EXPECT_EQ(c.status, CheckStatus::kFail);
  EXPECT_NE(c.detail.find("libcudart.so.12"), std::string::npos) << c.detail;
}

TEST(VerdictTest, DriverTableAloneCatchesOldDriver) {
  // No cuDriverGetVersion (libcuda missing): NVIDIA's table still judges the version string.
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  facts.cuda_driver_version = 0;
  facts.driver_version = "545.23.08";
  EXPECT_EQ(StatusOf(facts, "driver_cuda_runtime"), CheckStatus::kFail);
}

TEST(VerdictTest, ComputeCapabilityBelowToolkitFloorFails) {
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  facts.cuda_compile_version = 13000;
  facts.cuda_runtime_version = 13000;
  facts.driver_version = "580.65.06";
  facts.cuda_driver_version = 13000;
  for (GpuFacts& g : facts.gpus) {
    g.name = "Tesla V100-SXM2-32GB";
    g.cc_major = 7;
    g.cc_minor = 0;
  }
  const CheckResult c = Get(Verdict::Judge(facts), "compute_capability");
  EXPECT_EQ(c.status, CheckStatus::kFail);
  EXPECT_NE(c.detail.find("sm_70"), std::string::npos) << c.detail;
}

TEST(VerdictTest, ComputeCapabilityMissingFromLibtorchArchListFails) {
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  for (GpuFacts& g : facts.gpus) {
    g.name = "NVIDIA B200";
    g.cc_major = 10;
    g.cc_minor = 0;
  }
  EXPECT_EQ(StatusOf(facts, "compute_capability"), CheckStatus::kFail);
  // A +PTX entry lets the driver compile for newer GPUs.
  facts.torch_cuda_arch_list = {"8.0", "9.0+PTX"};
  EXPECT_EQ(StatusOf(facts, "compute_capability"), CheckStatus::kPass);
  // Without an arch list the CUDA release's range decides: 12.1 cannot target sm_100.
  facts.torch_cuda_arch_list.clear();
  EXPECT_EQ(StatusOf(facts, "compute_capability"), CheckStatus::kFail);
  facts.torch_cuda = "12.8";
  facts.driver_version = "570.124.06";
  facts.cuda_driver_version = 12080;
  EXPECT_EQ(StatusOf(facts, "compute_capability"), CheckStatus::kPass);
}

TEST(VerdictTest, CubinRunsOnSameMajorWithHigherMinor) {
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  facts.torch_cuda_arch_list = {"8.0", "9.0"};
  for (GpuFacts& g : facts.gpus) {
    g.cc_major = 8;
    g.cc_minor = 6;
  }
  EXPECT_EQ(StatusOf(facts, "compute_capability"), CheckStatus::kPass);
  for (GpuFacts& g : facts.gpus) g.cc_major = 7, g.cc_minor = 5;
  EXPECT_EQ(StatusOf(facts, "compute_capability"), CheckStatus::kFail);
}

TEST(VerdictTest, NcclRunTimeOlderThanCompileTimeFails) {
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  facts.nccl_runtime_version = 21803;
  const CheckResult c = Get(Verdict::Judge(facts), "nccl_version");
  EXPECT_EQ(c.status, CheckStatus::kFail);
  EXPECT_NE(c.detail.find("2.18.3"), std::string::npos) << c.detail;
  EXPECT_NE(c.fix.find(">= 2.21.5"), std::string::npos) << c.fix;
  facts.nccl_runtime_version = 22203;  // newer at run time is fine
  EXPECT_EQ(StatusOf(facts, "nccl_version"), CheckStatus::kPass);
}

TEST(VerdictTest, SmallDevShmFails) {
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  facts.shm_total_bytes = 64LL << 20;  // Docker's default
  facts.shm_available_bytes = 64LL << 20;
  const CheckResult c = Get(Verdict::Judge(facts), "dev_shm");
  EXPECT_EQ(c.status, CheckStatus::kFail);
  EXPECT_TRUE(c.fatal);
  EXPECT_NE(c.detail.find("64.0 MiB"), std::string::npos) << c.detail;
  EXPECT_NE(c.fix.find("--shm-size"), std::string::npos);
}

TEST(VerdictTest, SmallDevShmWithoutGpuIsNotFatal) {
  DoctorFacts facts = LoadFacts("facts_no_gpu.json");
  facts.shm_total_bytes = 64LL << 20;
  const CheckResult c = Get(Verdict::Judge(facts), "dev_shm");
  EXPECT_EQ(c.status, CheckStatus::kFail);
  EXPECT_FALSE(c.fatal);
}

TEST(VerdictTest, LimitedMemlockWithInfinibandFails) {
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  facts.memlock = LimitFacts{true, false, 64 << 10, 64 << 10, false};
  const CheckResult c = Get(Verdict::Judge(facts), "memlock");
  EXPECT_EQ(c.status, CheckStatus::kFail);
  EXPECT_NE(c.detail.find("mlx5_0"), std::string::npos) << c.detail;
  EXPECT_NE(c.fix.find("memlock=-1"), std::string::npos);
  // With InfiniBand switched off NCCL does not pin: a warning remains.
  facts.env["NCCL_IB_DISABLE"] = "1";
  EXPECT_EQ(StatusOf(facts, "memlock"), CheckStatus::kWarn);
}

TEST(VerdictTest, NcclSocketIfnameNamingNoInterfaceFails) {
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  facts.env["NCCL_SOCKET_IFNAME"] = "ens";
  const CheckResult c = Get(Verdict::Judge(facts), "nccl_socket_ifname");
  EXPECT_EQ(c.status, CheckStatus::kFail);
  EXPECT_NE(c.detail.find("eth0 10.1.0.11"), std::string::npos) << c.detail;
  EXPECT_NE(c.fix.find("NCCL_SOCKET_IFNAME=eth0"), std::string::npos) << c.fix;

  facts.env["NCCL_SOCKET_IFNAME"] = "=eth";  // exact: no interface is called "eth"
  EXPECT_EQ(StatusOf(facts, "nccl_socket_ifname"), CheckStatus::kFail);
  facts.env["NCCL_SOCKET_IFNAME"] = "^lo,eth,ib,docker";  // excludes every interface
  EXPECT_EQ(StatusOf(facts, "nccl_socket_ifname"), CheckStatus::kFail);
  facts.env["NCCL_SOCKET_IFNAME"] = "^docker,lo";
  EXPECT_EQ(StatusOf(facts, "nccl_socket_ifname"), CheckStatus::kPass);
  facts.env["NCCL_SOCKET_IFNAME"] = "ib";
  EXPECT_EQ(StatusOf(facts, "nccl_socket_ifname"), CheckStatus::kPass);
  facts.env.erase("NCCL_SOCKET_IFNAME");
  EXPECT_EQ(StatusOf(facts, "nccl_socket_ifname"), CheckStatus::kPass);
}

TEST(VerdictTest, GlooSocketIfnameMustNameExactInterfaces) {
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  facts.env["GLOO_SOCKET_IFNAME"] = "eth";
  EXPECT_EQ(StatusOf(facts, "gloo_socket_ifname"), CheckStatus::kFail);
  facts.env["GLOO_SOCKET_IFNAME"] = "eth0,ib0";
  EXPECT_EQ(StatusOf(facts, "gloo_socket_ifname"), CheckStatus::kPass);
}

TEST(VerdictTest, CudaVisibleDevicesNamingMissingGpuFails) {
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  facts.env["CUDA_VISIBLE_DEVICES"] = "0,1,8";
  const CheckResult c = Get(Verdict::Judge(facts), "cuda_visible_devices");
  EXPECT_EQ(c.status, CheckStatus::kFail);
  EXPECT_TRUE(c.fatal);
  EXPECT_NE(c.detail.find("names GPU 8"), std::string::npos) << c.detail;
  EXPECT_NE(c.fix.find("0-7"), std::string::npos) << c.fix;

  facts.env["CUDA_VISIBLE_DEVICES"] = "GPU-deadbeef";
  EXPECT_EQ(StatusOf(facts, "cuda_visible_devices"), CheckStatus::kFail);
  facts.env["CUDA_VISIBLE_DEVICES"] = "1,1";
  EXPECT_EQ(StatusOf(facts, "cuda_visible_devices"), CheckStatus::kFail);
  facts.env["CUDA_VISIBLE_DEVICES"] = "";
  EXPECT_EQ(StatusOf(facts, "cuda_visible_devices"), CheckStatus::kFail);
  facts.env["CUDA_VISIBLE_DEVICES"] = "GPU-5a7c0003, 2";  // UUID prefix, spaces tolerated
  EXPECT_EQ(StatusOf(facts, "cuda_visible_devices"), CheckStatus::kPass);
  facts.env.erase("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(StatusOf(facts, "cuda_visible_devices"), CheckStatus::kPass);
}

TEST(VerdictTest, OrphanGpuProcessesWarnWithKillCommand) {
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  facts.gpu_processes = {{0, 4242, 10ULL << 30, "python3"}, {1, 4242, 10ULL << 30, "python3"}};
  std::vector<CheckResult> checks = Verdict::Judge(facts);
  const CheckResult& c = Get(checks, "gpu_processes");
  EXPECT_EQ(c.status, CheckStatus::kWarn);
  EXPECT_NE(c.fix.find("kill 4242"), std::string::npos) << c.fix;
  EXPECT_FALSE(Verdict::AnyFailed(checks));
}

TEST(VerdictTest, DriverModuleWithoutLibcudaFails) {
  DoctorFacts facts = LoadFacts("facts_clean_h100.json");
  facts.libcuda_loaded = false;
  facts.libcuda_error = "libcuda.so.1 not loadable: no such file";
  const CheckResult c = Get(Verdict::Judge(facts), "nvidia_driver");
  EXPECT_EQ(c.status, CheckStatus::kFail);
  EXPECT_NE(c.fix.find("--gpus all"), std::string::npos);
}

TEST(VerdictTest, NoGpuSaysSoAndChecksTheRest) {
  DoctorFacts facts = LoadFacts("facts_no_gpu.json");
  std::vector<CheckResult> checks = Verdict::Judge(facts);
  const CheckResult& driver = Get(checks, "nvidia_driver");
  EXPECT_EQ(driver.status, CheckStatus::kSkip);
  EXPECT_NE(driver.detail.find("no NVIDIA driver or GPU"), std::string::npos);
  for (const char* id :
       {"driver_cuda_runtime", "compute_capability", "cuda_visible_devices", "gpu_processes"}) {
    EXPECT_EQ(Get(checks, id).status, CheckStatus::kSkip) << id;
  }
  for (const char* id : {"nccl_version", "dev_shm", "nofile", "nccl_socket_ifname"}) {
    EXPECT_EQ(Get(checks, id).status, CheckStatus::kPass) << id;
  }
  EXPECT_EQ(Get(checks, "memlock").status, CheckStatus::kWarn);  // 8 MiB, no RDMA
  EXPECT_FALSE(Verdict::AnyFailed(checks));
  // The non-GPU checks still bite without a GPU.
  facts.env["NCCL_SOCKET_IFNAME"] = "bond0";
  EXPECT_EQ(StatusOf(facts, "nccl_socket_ifname"), CheckStatus::kFail);
  EXPECT_NE(
      DoctorReport::Summary(facts, Verdict::Judge(facts)).find("no NVIDIA GPU or driver found"),
      std::string::npos);
}

TEST(ReportTest, TableAndJsonCarryTheVerdicts) {
  DoctorFacts facts = LoadFacts("facts_cu121_on_525.json");
  std::vector<CheckResult> checks = Verdict::Judge(facts);
  std::string table = DoctorReport::Table(facts, checks);
  EXPECT_NE(table.find("\u2717 libtorch's CUDA supported by the driver"), std::string::npos)
      << table;
  EXPECT_NE(table.find("fix: upgrade the NVIDIA driver"), std::string::npos);
  EXPECT_NE(table.find("NVIDIA H100 80GB HBM3, compute 9.0"), std::string::npos);
  nlohmann::json j = DoctorReport::Json(facts, checks);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_TRUE(j["gpu_present"].get<bool>());
  // The facts round-trip, so a saved --json output is itself a fixture.
  DoctorFacts back = j["facts"].get<DoctorFacts>();
  EXPECT_EQ(nlohmann::json(back), nlohmann::json(facts));
}

// Every saved `dlaunch doctor --json` output under fixtures/ (doctor_output_*.json, captured on
// real machines, GPU ones included) is judged again from its facts: the verdicts must not drift.
TEST(CapturedOutputTest, VerdictsReproduceFromFacts) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(DLAUNCH_DOCTOR_FIXTURES)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("doctor_output_", 0) != 0 || entry.path().extension() != ".json") continue;
    ++files;
    std::ifstream in(entry.path());
    nlohmann::json saved = nlohmann::json::parse(in);
    DoctorFacts facts = saved["facts"].get<DoctorFacts>();
    std::vector<CheckResult> checks = Verdict::Judge(facts);
    for (const auto& c : saved["checks"]) {
      const CheckResult* now = Verdict::Find(checks, c["id"].get<std::string>());
      ASSERT_NE(now, nullptr) << name << ": " << c["id"];
      EXPECT_EQ(CheckStatusName(now->status), c["status"].get<std::string>())
          << name << ": " << now->id << ": " << now->detail;
    }
    EXPECT_EQ(saved["ok"].get<bool>(), !Verdict::AnyFailed(checks)) << name;
  }
  EXPECT_GE(files, 1);
}

TEST(FingerprintTest, SameVersionsAgree) {
  DoctorFacts a = LoadFacts("facts_clean_h100.json");
  DoctorFacts b = a;
  b.hostname = "gpu-node-02";
  b.kernel = "5.15.0-106-generic";  // not compared
  EXPECT_TRUE(CompareFingerprints({Fingerprint(a).dump(), Fingerprint(b).dump()}).empty());
}

TEST(FingerprintTest, NamesDifferingVersionsAndNodes) {
  DoctorFacts a = LoadFacts("facts_clean_h100.json");
  DoctorFacts b = a, c = a;
  b.hostname = "gpu-node-02";
  c.hostname = "gpu-node-03";
  c.nccl_runtime_version = 21803;
  c.driver_version = "535.104.05";
  std::vector<std::string> diffs =
      CompareFingerprints({Fingerprint(a).dump(), Fingerprint(b).dump(), Fingerprint(c).dump()});
  ASSERT_EQ(diffs.size(), 2u) << ::testing::PrintToString(diffs);
  EXPECT_EQ(diffs[0],
            "driver differs between nodes: 550.54.15 on node 0 (gpu-node-01), node 1 "
            "(gpu-node-02); 535.104.05 on node 2 (gpu-node-03)");
  EXPECT_NE(diffs[1].find("nccl_runtime differs"), std::string::npos);
  EXPECT_NE(diffs[1].find("2.18.3 on node 2"), std::string::npos);
}

TEST(FingerprintTest, InvalidJsonIsReported) {
  DoctorFacts a = LoadFacts("facts_clean_h100.json");
  std::vector<std::string> diffs = CompareFingerprints({Fingerprint(a).dump(), "{broken"});
  ASSERT_EQ(diffs.size(), 1u);
  EXPECT_NE(diffs[0].find("node 1"), std::string::npos);
  // An empty fingerprint is a node built without doctor: nothing to compare, nothing to say.
  EXPECT_TRUE(CompareFingerprints({Fingerprint(a).dump(), ""}).empty());
}

}  // namespace
}  // namespace dlaunch::launcher
