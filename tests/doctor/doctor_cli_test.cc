// The real doctor command, run as a process on this machine (GPU-less on CI: it must say so
// plainly, check everything else, and exit 0 or 1 consistently with its verdicts).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "launcher/doctor/doctor.h"

namespace dlaunch::launcher {
namespace {

struct Result {
  int exit_code = -1;
  std::string out;
};

// Runs the doctor under `timeout`, so a hang fails the test instead of stalling it.
Result RunCli(const std::string& env, const std::string& args) {
  std::string command = env + " timeout 60 " + DLAUNCH_DOCTOR_CLI + " " + args + " 2>&1";
  Result r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

nlohmann::json RunJson(const std::string& env, int* exit_code) {
  Result r = RunCli(env, "--json");
  *exit_code = r.exit_code;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << r.out;
  return j;
}

bool AnyFail(const nlohmann::json& j) {
  for (const auto& c : j["checks"]) {
    if (c["status"] == "fail") return true;
  }
  return false;
}

const nlohmann::json& Check(const nlohmann::json& j, const std::string& id) {
  for (const auto& c : j["checks"]) {
    if (c["id"] == id) return c;
  }
  throw std::runtime_error("no check " + id);
}

TEST(DoctorCliTest, JsonExitCodeMatchesVerdicts) {
  int code = -1;
  nlohmann::json j = RunJson("env -u NCCL_SOCKET_IFNAME -u CUDA_VISIBLE_DEVICES", &code);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(code, AnyFail(j) ? 1 : 0);
  EXPECT_EQ(j["ok"].get<bool>(), code == 0);
  ASSERT_EQ(j["checks"].size(), 14u);  // 12, and two on the ranks' Python
  for (const auto& c : j["checks"]) {
    std::string status = c["status"];
    EXPECT_TRUE(status == "pass" || status == "warn" || status == "fail" || status == "skip");
    if (status == "fail" || status == "warn") {
      EXPECT_FALSE(c["fix"].get<std::string>().empty()) << c;
    }
  }
  if (!j["gpu_present"].get<bool>() && j["facts"]["driver_version"] == "") {
    // This machine has no GPU: said plainly, GPU checks skipped, the rest still judged.
    EXPECT_EQ(Check(j, "nvidia_driver")["status"], "skip");
    EXPECT_NE(
        Check(j, "nvidia_driver")["detail"].get<std::string>().find("no NVIDIA driver or GPU"),
        std::string::npos);
    EXPECT_EQ(Check(j, "compute_capability")["status"], "skip");
    EXPECT_NE(Check(j, "dev_shm")["status"], "skip");
    EXPECT_NE(Check(j, "nofile")["status"], "skip");
    EXPECT_NE(j["summary"].get<std::string>().find("no NVIDIA GPU or driver found"),
              std::string::npos);
  }
}

TEST(DoctorCliTest, TableSaysWhatItFound) {
  Result r = RunCli("env -u NCCL_SOCKET_IFNAME", "");
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.out;
  EXPECT_NE(r.out.find("dlaunch doctor"), std::string::npos);
  EXPECT_NE(r.out.find("\nChecks\n"), std::string::npos);
  EXPECT_EQ(r.exit_code == 1, r.out.find("\u2717 ") != std::string::npos) << r.out;
}

TEST(DoctorCliTest, BadSocketIfnameFailsWithExitOne) {
  int code = -1;
  nlohmann::json j = RunJson("NCCL_SOCKET_IFNAME==nosuchif0", &code);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(code, 1);
  EXPECT_EQ(Check(j, "nccl_socket_ifname")["status"], "fail");
  // Fatal (stops train/preflight) only where NCCL runs: on GPU machines.
  EXPECT_EQ(Check(j, "nccl_socket_ifname")["fatal"].get<bool>(), j["gpu_present"].get<bool>());
  EXPECT_EQ(j["facts"]["env"]["NCCL_SOCKET_IFNAME"], "=nosuchif0");
}

TEST(DoctorCliTest, BadArgumentsExitTwo) {
  Result r = RunCli("", "--no-such-flag");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("no-such-flag"), std::string::npos) << r.out;
  EXPECT_EQ(RunCli("", "extra").exit_code, 2);
}

// GPUs from the stand-in NVML and libcuda (tests/doctor/fake_nvidia): the dlopen path, the GPU
// and process listing and the GPU verdicts, end to end through the real command.
std::string FakeGpuEnv(const std::string& extra) {
  return std::string(
             "env -u NCCL_SOCKET_IFNAME -u GLOO_SOCKET_IFNAME -u CUDA_VISIBLE_DEVICES "
             "LD_LIBRARY_PATH=") +
         DLAUNCH_DOCTOR_FAKE_NVIDIA_DIR + " " + extra;
}

TEST(DoctorCliTest, FakeGpusBadVisibleDevicesAndOrphanProcess) {
  int code = -1;
  std::string pid = std::to_string(getpid());
  nlohmann::json j = RunJson(
      FakeGpuEnv("FAKE_NVML_GPUS=2 FAKE_NVML_PROCESS_PID=" + pid + " CUDA_VISIBLE_DEVICES=0,5"),
      &code);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(code, 1);
  EXPECT_TRUE(j["gpu_present"].get<bool>());
  const nlohmann::json& facts = j["facts"];
  EXPECT_EQ(facts["gpu_source"], "nvml");
  ASSERT_EQ(facts["gpus"].size(), 2u);
  EXPECT_EQ(facts["gpus"][1]["cc_major"], 9);
  EXPECT_EQ(facts["driver_version"], "550.54.15");
  EXPECT_EQ(facts["cuda_driver_version"], 12040);
  EXPECT_TRUE(facts["libcuda_loaded"].get<bool>());
  EXPECT_EQ(Check(j, "nvidia_driver")["status"], "pass");
  EXPECT_EQ(Check(j, "cuda_visible_devices")["status"], "fail");
  EXPECT_NE(Check(j, "cuda_visible_devices")["detail"].get<std::string>().find("names GPU 5"),
            std::string::npos);
  ASSERT_EQ(facts["gpu_processes"].size(), 1u);
  EXPECT_EQ(facts["gpu_processes"][0]["pid"].get<int64_t>(), getpid());
  std::string comm;
  std::ifstream("/proc/self/comm") >> comm;
  EXPECT_EQ(facts["gpu_processes"][0]["command"], comm);
  EXPECT_EQ(Check(j, "gpu_processes")["status"], "warn");
  EXPECT_NE(Check(j, "gpu_processes")["fix"].get<std::string>().find("kill " + pid),
            std::string::npos);
}

TEST(DoctorCliTest, FakeGpusOnCurrentDriver) {
  int code = -1;
  nlohmann::json j =
      RunJson(FakeGpuEnv("FAKE_NVML_DRIVER=580.95.05 FAKE_CUDA_DRIVER_VERSION=13000"), &code);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(code, AnyFail(j) ? 1 : 0);
  EXPECT_EQ(Check(j, "nvidia_driver")["status"], "pass");
  EXPECT_EQ(Check(j, "cuda_visible_devices")["status"], "pass");
  EXPECT_EQ(Check(j, "gpu_processes")["status"], "pass");
  EXPECT_NE(Check(j, "compute_capability")["status"], "skip");
  int runtime = j["facts"]["cuda_runtime_version"].get<int>();
  if (runtime == 0) runtime = j["facts"]["cuda_compile_version"].get<int>();
  if (runtime > 0) {
    EXPECT_EQ(Check(j, "driver_cuda_runtime")["status"], runtime <= 13000 ? "pass" : "fail");
  }
  // An older driver than the table allows for that runtime fails it.
  nlohmann::json old = RunJson(FakeGpuEnv("FAKE_NVML_DRIVER=525.60.13 "
                                          "FAKE_CUDA_DRIVER_VERSION=12000"),
                               &code);
  if (runtime > 12000) {
    EXPECT_EQ(Check(old, "driver_cuda_runtime")["status"], "fail");
    EXPECT_EQ(code, 1);
  }
}

TEST(DoctorCliTest, LinksNoNvidiaLibraryAndNoTorch) {
  // The doctor must start where none of them is installed: they are dlopen'ed, never linked.
  Result r;
  FILE* pipe = popen((std::string("ldd ") + DLAUNCH_DOCTOR_CLI + " 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << r.out;
  EXPECT_NE(r.out.find("libc.so"), std::string::npos) << r.out;
  for (const char* lib :
       {"libcuda.so", "libcudart", "libnccl", "libnvidia-ml", "libcudnn", "libtorch", "libc10"}) {
    EXPECT_EQ(r.out.find(lib), std::string::npos) << lib << " is linked:\n" << r.out;
  }
}

TEST(DoctorCliTest, LauncherDoctorCommandAgrees) {
#ifdef DLAUNCH_BINARY
  if (access(DLAUNCH_BINARY, X_OK) != 0) GTEST_SKIP() << DLAUNCH_BINARY << " not built";
  std::string command =
      std::string("env -u NCCL_SOCKET_IFNAME timeout 60 ") + DLAUNCH_BINARY + " doctor --json 2>&1";
  Result r;
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
  int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status)) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(WEXITSTATUS(status), AnyFail(j) ? 1 : 0);
  EXPECT_EQ(j["checks"].size(), 14u);
#else
  GTEST_SKIP() << "this build has no dlaunch launcher target";
#endif
}

TEST(DoctorApiTest, FatalProblemsAndFingerprintInProcess) {
  // Same machine, in-process API: the fatal list agrees with the command's verdicts.
  // A wrong GLOO_SOCKET_IFNAME breaks every job, GPU or not.
  setenv("GLOO_SOCKET_IFNAME", "nosuchif0", 1);
  std::vector<std::string> problems = DoctorFatalProblems();
  unsetenv("GLOO_SOCKET_IFNAME");
  bool named = false;
  for (const std::string& p : problems) {
    named |=
        p.find("GLOO_SOCKET_IFNAME") != std::string::npos && p.find("Fix:") != std::string::npos;
  }
  EXPECT_TRUE(named) << ::testing::PrintToString(problems);
  nlohmann::json fp = nlohmann::json::parse(DoctorFingerprintJson());
  EXPECT_TRUE(fp.contains("nccl_runtime"));
  EXPECT_FALSE(fp["host"].get<std::string>().empty());
  EXPECT_TRUE(CompareFingerprints({fp.dump(), fp.dump()}).empty());
}

}  // namespace
}  // namespace dlaunch::launcher
