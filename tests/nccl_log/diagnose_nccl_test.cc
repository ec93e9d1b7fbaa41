// The NCCL analysis through `dlaunch diagnose`: --nccl-log on other launchers' logs, and the
// NCCL verdicts of a run directory's rank<R>/nccl.log in the diagnosis (text and JSON).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "launcher/diagnose/diagnose_command.h"
#include "tests/nccl_log/test_util.h"

namespace dlaunch::launcher {
namespace {

using nccl_log::testing::Fixture;
using ::testing::HasSubstr;

std::string Diagnose(const std::vector<std::string>& args, int* rc) {
  ::testing::internal::CaptureStdout();
  *rc = RunDiagnoseCommand(args);
  return ::testing::internal::GetCapturedStdout();
}

TEST(DiagnoseNcclTest, NcclLogFromAnotherLauncher) {
  int rc = -1;
  std::string out = Diagnose({"--nccl-log", Fixture("mpi-v2.19.3-no-ib-on-one-node.log")}, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_THAT(out, HasSubstr("NCCL logs: 4 ranks on 2 nodes, NCCL 2.19.3+cuda12.3"));
  EXPECT_THAT(out, HasSubstr("✗ NCCL socket_fallback: ranks 2,3 (node-h)"));
  out = Diagnose({"--nccl-log", Fixture("v2.14.3-init-hang-connect.log"),
                  Fixture("v2.18.3-p2p-disabled.log"), "--json"},
                 &rc);
  EXPECT_EQ(rc, 0);
  nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["schema"], "dlaunch.nccl/1");
  EXPECT_EQ(j["sources"].size(), 2u);
}

TEST(DiagnoseNcclTest, UnreadableLogIsAUsageError) {
  int rc = -1;
  ::testing::internal::CaptureStderr();
  Diagnose({"--nccl-log", "/nonexistent/nccl.log"}, &rc);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_THAT(err, HasSubstr("/nonexistent/nccl.log: cannot be read"));
}

TEST(DiagnoseNcclTest, RunDirectoryDiagnosisCarriesNcclVerdicts) {
  int rc = -1;
  std::string out = Diagnose({Fixture("v2.28.9-gdr-off-on-one-node"), "--world-size", "4"}, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_THAT(out, HasSubstr("! NCCL gdr_disabled: GPU Direct RDMA is off on ranks 2,3 (h100-b)"));
  out = Diagnose({Fixture("v2.28.9-gdr-off-on-one-node"), "--world-size", "4", "--json"}, &rc);
  nlohmann::json j = nlohmann::json::parse(out);
  ASSERT_EQ(j["nccl_verdicts"].size(), 1u);
  EXPECT_EQ(j["nccl_verdicts"][0]["kind"], "gdr_disabled");
  EXPECT_EQ(j["nccl_verdicts"][0]["hosts"], nlohmann::json::array({"h100-b"}));
}

}  // namespace
}  // namespace dlaunch::launcher
