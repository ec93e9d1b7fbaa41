// doctor and the Python the ranks run: the verdict on that interpreter's torch over fixture
// facts, and the real probe of /usr/bin/python3 (Debian's, torch 1.13) when it is there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "launcher/doctor/python_probe.h"
#include "launcher/doctor/verdict.h"

namespace dlaunch::launcher {
namespace {

DoctorFacts H100WithDriver525() {
  std::ifstream in(std::string(DLAUNCH_DOCTOR_FIXTURES) + "/facts_cu121_on_525.json");
  DoctorFacts facts = nlohmann::json::parse(in).get<DoctorFacts>();
  facts.python.interpreter = "/opt/venv/bin/python";
  facts.python.source = "--python";
  facts.python.runs = true;
  facts.python.executable = "/opt/venv/bin/python";
  facts.python.version = "3.11.9";
  facts.python.torch = true;
  facts.python.torch_version = "2.3.1+cu121";
  facts.python.torch_cuda = "12.1";
  facts.python.nccl_version = 22003;
  facts.python.cudnn_version = 8902;
  facts.python.distributed = facts.python.gloo = facts.python.nccl = true;
  return facts;
}

const CheckResult& Get(const std::vector<CheckResult>& checks, const std::string& id) {
  const CheckResult* c = Verdict::Find(checks, id);
  if (c == nullptr) throw std::runtime_error("no check " + id);
  return *c;
}

TEST(PythonDoctorTest, Cu121TorchOnDriver525IsRefusedWithTheMinimumDriver) {
  std::vector<CheckResult> checks = Verdict::Judge(H100WithDriver525());
  const CheckResult& python = Get(checks, "python_torch");
  EXPECT_EQ(python.status, CheckStatus::kPass) << python.detail;
  EXPECT_NE(python.detail.find("torch 2.3.1+cu121, CUDA 12.1, NCCL 2.20.3, cuDNN 8.9.2"),
            std::string::npos)
      << python.detail;
  const CheckResult& cuda = Get(checks, "python_torch_cuda_driver");
  EXPECT_EQ(cuda.status, CheckStatus::kFail);
  EXPECT_FALSE(cuda.fatal);  // train and preflight do not run that Python
  EXPECT_NE(cuda.detail.find("needs driver >= 530.30.02"), std::string::npos) << cuda.detail;
  EXPECT_NE(cuda.fix.find("CUDA <= 12.0"), std::string::npos) << cuda.fix;
}

TEST(PythonDoctorTest, InterpreterWithoutTorchGetsTheFix) {
  DoctorFacts facts = H100WithDriver525();
  facts.python.torch = false;
  facts.python.error = "ModuleNotFoundError: No module named 'torch'";
  std::vector<CheckResult> checks = Verdict::Judge(facts);
  EXPECT_EQ(Get(checks, "python_torch").status, CheckStatus::kWarn);
  EXPECT_NE(Get(checks, "python_torch").fix.find("--python PATH"), std::string::npos);
  EXPECT_EQ(Get(checks, "python_torch_cuda_driver").status, CheckStatus::kSkip);
}

TEST(PythonDoctorTest, NotProbedMeansNoPythonChecks) {
  DoctorFacts facts = H100WithDriver525();
  facts.python = PythonFacts{};
  EXPECT_EQ(Verdict::Find(Verdict::Judge(facts), "python_torch"), nullptr);
}

TEST(PythonDoctorTest, ProbeOfDebiansPythonFindsTorch) {
  if (::access("/usr/bin/python3", X_OK) != 0 ||
      std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no /usr/bin/python3 with torch";
  }
  PythonFacts p = ProbePython("/usr/bin/python3", "--python");
  ASSERT_TRUE(p.runs) << p.error;
  EXPECT_TRUE(p.torch) << p.error;
  EXPECT_EQ(p.torch_version.rfind("1.", 0), 0u) << p.torch_version;
  EXPECT_TRUE(p.distributed);
  EXPECT_TRUE(p.gloo);
  EXPECT_TRUE(PythonHasModule("/usr/bin/python3", "torch"));
  EXPECT_FALSE(PythonHasModule("/usr/bin/python3", "no_such_module_xyz"));
}

TEST(PythonDoctorTest, ProbeOfAMissingInterpreterSaysWhy) {
  PythonFacts p = ProbePython("/no/such/python", "PYTHON_EXEC");
  EXPECT_FALSE(p.runs);
  EXPECT_FALSE(p.error.empty());
}

}  // namespace
}  // namespace dlaunch::launcher
