// `dlaunch --nproc 2 preflight` end to end: real launcher, real rank processes, real coordinator.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/common/test_dir.h"
#include "tests/preflight/process_util.h"

namespace {

namespace fs = std::filesystem;

using dlaunch::testing::Binary;
using dlaunch::testing::ReadFile;
using dlaunch::testing::RunCommand;

const std::string kDlaunch = Binary("DLAUNCH_TEST_BIN", DLAUNCH_BIN);
const std::string kWorker = Binary("DLAUNCH_TEST_WORKER", DLAUNCH_WORKER_BIN);

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string Launcher(const fs::path& logs, const std::string& run_id) {
  return "timeout 120 env DLAUNCH_WORKER=" + kWorker + " " + kDlaunch +
         " --nproc 2 --skip-doctor --quiet --log-dir " + logs.string() + " --run-id " + run_id;
}

class PreflightProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kDlaunch) || !fs::exists(kWorker)) {
      GTEST_SKIP() << "dlaunch or dlaunch-worker not built: " << kDlaunch << ", " << kWorker;
    }
  }
};

// The worker started as a plain program under the launcher: real rank processes, the real
// coordinator's store, the run directory.
TEST_F(PreflightProcessTest, TwoRanksPassAndWriteTheRunDirectory) {
  const dlaunch::testing::TestDir test_dir("preflight-e2e");
  const fs::path logs = test_dir.path();
  int rc = RunCommand(Launcher(logs, "pf") + " -- " + kWorker +
                      " preflight --backend gloo -b 8 -e 64K -f 64 -w 1 -n 2 --collective-timeout 2"
                      " --p2p-bytes 64K --p2p-iters 3 --slow-link-factor 0.001 > " +
                      (logs / "out.txt").string() + " 2>&1");
  std::ifstream out_text(logs / "out.txt");
  std::string out((std::istreambuf_iterator<char>(out_text)), std::istreambuf_iterator<char>());
  ASSERT_EQ(0, rc) << out;
  fs::path run = logs / "pf";
  std::ifstream in(run / "preflight.json");
  ASSERT_TRUE(in.good()) << out;
  auto doc = nlohmann::json::parse(in);
  EXPECT_EQ("PASS", doc["verdict"]) << doc["reasons"].dump();
  EXPECT_EQ(2, doc["world_size"]);
  EXPECT_EQ(10u, doc["bandwidth"].size());
  EXPECT_TRUE(doc["hang_test"]["passed"].get<bool>()) << doc["hang_test"].dump();
  EXPECT_EQ(nlohmann::json::array({1}), doc["hang_test"]["ranks"][0]["missing_ranks"]);
  for (int r = 0; r < 2; ++r) {
    fs::path rank_dir = run / ("rank" + std::to_string(r));
    std::ifstream f(rank_dir / "flight.json");
    ASSERT_TRUE(f.good()) << "rank " << r;
    EXPECT_EQ("exit", nlohmann::json::parse(f)["reason"]);
    std::ifstream ev(rank_dir / "events.jsonl");
    std::string events((std::istreambuf_iterator<char>(ev)), std::istreambuf_iterator<char>());
    EXPECT_NE(std::string::npos, events.find("\"kind\":\"preflight_hang_test\"")) << events;
    EXPECT_EQ(std::string::npos, events.find("\"kind\":\"timeout\"")) << events;
  }
}

// The built-in command: the launcher validates the flags before it spawns anything.
TEST_F(PreflightProcessTest, MalformedFlagExitsTwoBeforeAnyRankStarts) {
  const dlaunch::testing::TestDir test_dir("preflight-e2e-bad");
  const fs::path logs = test_dir.path();
  fs::path out = logs / "out.txt";
  EXPECT_EQ(2, RunCommand(Launcher(logs, "bad") + " preflight --stepfactor 1 > " + out.string() +
                          " 2>&1"));
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(std::string::npos, text.find("--stepfactor (-f) must be at least 2")) << text;
  EXPECT_FALSE(fs::exists(logs / "bad" / "rank0" / "flight.json"));
}

TEST_F(PreflightProcessTest, NcclOnlyFlagOnGlooIsRefusedBeforeAnyRank) {
  for (const char* flag : {"-G 1", "-R 1"}) {
    const dlaunch::testing::TestDir test_dir("preflight-e2e-graph");
    const fs::path logs = test_dir.path();
    fs::path out = logs / "out.txt";
    EXPECT_EQ(2, RunCommand(Launcher(logs, "g") + " preflight --backend gloo " + flag + " > " +
                            out.string() + " 2>&1"));
    std::string text = ReadFile(out);
    EXPECT_NE(std::string::npos, text.find(std::string(flag).substr(0, 2) + " (--")) << text;
    EXPECT_NE(std::string::npos,
              text.find("needs the nccl backend, and this preflight runs on gloo"))
        << text;
    EXPECT_EQ(1u, Count(text, "preflight:")) << text;  // one line, then the launcher's hint
    EXPECT_FALSE(fs::exists(logs / "g"));
  }
}

// --help is the launcher's business: printed once, no rank started, no run directory.
TEST_F(PreflightProcessTest, HelpIsPrintedOnceWithoutStartingRanks) {
  const dlaunch::testing::TestDir test_dir("preflight-e2e-help");
  const fs::path logs = test_dir.path();
  fs::path out = logs / "out.txt";
  EXPECT_EQ(0, RunCommand(Launcher(logs, "h") + " preflight --help > " + out.string() + " 2>&1"));
  std::string text = ReadFile(out);
  EXPECT_EQ(1u, Count(text, "usage: dlaunch --nproc N preflight")) << text;
  EXPECT_NE(std::string::npos, text.find("--stepbytes")) << text;
  EXPECT_FALSE(fs::exists(logs / "h"));
}

// A FAIL verdict is the cluster's result, not a crash: exit 4, the reasons, no root-cause report.
TEST_F(PreflightProcessTest, FailIsReportedAsTheVerdict) {
  const dlaunch::testing::TestDir test_dir("preflight-e2e-fail");
  const fs::path logs = test_dir.path();
  fs::path out = logs / "out.txt";
  EXPECT_EQ(4, RunCommand(Launcher(logs, "f") +
                          " preflight --backend gloo --ops allreduce -b 1K -e 4K -w 0 -n 1"
                          " --no-hang-test --no-p2p --min-busbw 100000 > " +
                          out.string() + " 2>&1"));
  std::string text = ReadFile(out);
  EXPECT_NE(std::string::npos, text.find("dlaunch: preflight FAIL: allreduce: busbw ")) << text;
  EXPECT_NE(std::string::npos, text.find("x --min-busbw 100000.00 GB/s")) << text;
  EXPECT_EQ(std::string::npos, text.find("Root Cause")) << text;
  auto summary = nlohmann::json::parse(ReadFile(logs / "f" / "summary.json"));
  EXPECT_EQ(4, summary["exit_code"]);
  EXPECT_EQ("preflight verdict FAIL", summary["error"]);
}

TEST_F(PreflightProcessTest, JsonOnRankZerosStdout) {
  const dlaunch::testing::TestDir test_dir("preflight-e2e-json");
  const fs::path logs = test_dir.path();
  ASSERT_EQ(0, RunCommand(Launcher(logs, "j") +
                          " preflight --backend gloo --ops reduce,gather -b 1K -e 4K -w 0 -n 1"
                          " --no-hang-test --no-p2p --json > " +
                          (logs / "out.txt").string() + " 2>&1"))
      << ReadFile(logs / "out.txt");
  auto doc = nlohmann::json::parse(ReadFile(logs / "j" / "rank0" / "stdout.log"));
  EXPECT_EQ("PASS", doc["verdict"]);
  EXPECT_EQ("reduce", doc["bandwidth"][0]["op"]);
  EXPECT_EQ("gather_perf", doc["bandwidth"][1]["nccl_tests_name"]);
}

}  // namespace
