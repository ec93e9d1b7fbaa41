// The options library on its own (what the launcher links): nccl-tests' flags and meanings, and
// every malformed value refused with a UsageError naming it.
#include "worker/preflight/preflight_options.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tests/common/test_dir.h"

namespace dlaunch::worker {
namespace {

using core::DataType;
using core::ReduceOp;

TEST(PreflightOptionsTest, Defaults) {
  PreflightOptions o = ParsePreflightArgs({});
  EXPECT_EQ("auto", o.backend);
  EXPECT_EQ(8u, o.min_bytes);
  EXPECT_EQ(10u, o.ops.size());
  EXPECT_EQ(0, o.graph_launches);
  EXPECT_EQ(core::BufferRegistration::kNone, o.registration);
  EXPECT_EQ(10000, o.collective_timeout.count());
  EXPECT_EQ(1, o.check_iters);
  EXPECT_EQ(0, o.blocking);
  EXPECT_EQ(1, o.average);
  EXPECT_EQ(std::vector<DataType>{DataType::kFloat32}, o.dtypes);
  EXPECT_EQ(std::vector<ReduceOp>{ReduceOp::kSum}, o.redops);
  EXPECT_EQ(OutputFormat::kText, o.format);
  o.ResolveDefaults("gloo");
  EXPECT_EQ(64u << 20, o.max_bytes);
  PreflightOptions g = ParsePreflightArgs({});
  g.ResolveDefaults("nccl");
  EXPECT_EQ(size_t{1} << 30, g.max_bytes);
}

TEST(PreflightOptionsTest, NcclTestsFlags) {
  PreflightOptions o = ParsePreflightArgs({"-b",
                                           "1K",
                                           "-e",
                                           "4M",
                                           "-f",
                                           "4",
                                           "-w",
                                           "1",
                                           "-n",
                                           "3",
                                           "-c",
                                           "0",
                                           "-z",
                                           "3",
                                           "-a",
                                           "2",
                                           "--ops",
                                           "allreduce,sendrecv,reduce_perf",
                                           "--backend",
                                           "gloo",
                                           "-T",
                                           "0.5",
                                           "--no-hang-test",
                                           "--no-p2p",
                                           "-d",
                                           "bfloat16",
                                           "-o",
                                           "prod",
                                           "-r",
                                           "all",
                                           "--min-busbw",
                                           "2.5",
                                           "--slow-link-factor",
                                           "0.25",
                                           "--p2p-retries",
                                           "3",
                                           "-G",
                                           "0",
                                           "-R",
                                           "0"});
  EXPECT_EQ(1024u, o.min_bytes);
  EXPECT_EQ(4u << 20, o.max_bytes);
  EXPECT_EQ(4u, o.step_factor);
  EXPECT_EQ(0u, o.step_bytes);
  EXPECT_EQ(1, o.warmup_iters);
  EXPECT_EQ(3, o.iters);
  EXPECT_EQ(0, o.check_iters);
  EXPECT_EQ(3, o.blocking);
  EXPECT_EQ(2, o.average);
  EXPECT_EQ((std::vector<std::string>{"allreduce", "sendrecv", "reduce"}), o.ops);
  EXPECT_EQ(500, o.collective_timeout.count());
  EXPECT_FALSE(o.hang_test);
  EXPECT_FALSE(o.p2p);
  EXPECT_EQ(std::vector<DataType>{DataType::kBFloat16}, o.dtypes);
  EXPECT_EQ(std::vector<ReduceOp>{ReduceOp::kProd}, o.redops);
  EXPECT_EQ(-1, o.root);
  EXPECT_DOUBLE_EQ(2.5, o.min_busbw);
  EXPECT_DOUBLE_EQ(0.25, o.slow_link_factor);
  EXPECT_EQ(3, o.p2p_retries);
}

TEST(PreflightOptionsTest, AllTypesAndOpsAndLinearSteps) {
  PreflightOptions o = ParsePreflightArgs({"-d", "all", "-o", "all", "-i", "1K", "-r", "2"});
  EXPECT_EQ(8u, o.dtypes.size());
  EXPECT_EQ(DataType::kInt8, o.dtypes[0]);
  EXPECT_EQ(DataType::kUint8, o.dtypes[1]);
  EXPECT_EQ(5u, o.redops.size());
  EXPECT_EQ(1024u, o.step_bytes);
  EXPECT_EQ(2, o.root);
  EXPECT_EQ((std::vector<DataType>{DataType::kInt8, DataType::kFloat32}),
            ParsePreflightArgs({"-d", "int8,float,int8"}).dtypes);
}

TEST(PreflightOptionsTest, OutputFormats) {
  EXPECT_EQ(OutputFormat::kJson, ParsePreflightArgs({"--json"}).format);
  EXPECT_EQ(OutputFormat::kCsv, ParsePreflightArgs({"--csv"}).format);
  EXPECT_TRUE(ParsePreflightArgs({"-h"}).help);
}

TEST(PreflightOptionsTest, WorldSizeChecksRootAndHangRank) {
  EXPECT_NO_THROW(ValidatePreflightArgs({"-r", "3"}, 4));
  EXPECT_THROW(ValidatePreflightArgs({"-r", "4"}, 4), UsageError);
  EXPECT_THROW(ValidatePreflightArgs({"--hang-rank", "4"}, 4), UsageError);
  EXPECT_NO_THROW(ValidatePreflightArgs({"-r", "all"}, 4));
}

std::string UsageMessage(const std::vector<std::string>& args) {
  try {
    ValidatePreflightArgs(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

// On gloo the message names the flag, what it needs and the backend, on one line.
TEST(PreflightOptionsTest, NcclOnlyFlagsAreRefusedOnGlooWithAReason) {
  const std::string g = UsageMessage({"--backend", "gloo", "-G", "1"});
  EXPECT_NE(std::string::npos, g.find("-G (--cudagraph, CUDA graph capture) needs the nccl "
                                      "backend, and this preflight runs on gloo"))
      << g;
  const std::string r = UsageMessage({"--backend", "gloo", "-R", "2"});
  EXPECT_NE(std::string::npos, r.find("-R (--local_register, NCCL buffer registration)")) << r;
  EXPECT_NE(std::string::npos, r.find("runs on gloo")) << r;
  for (const std::string& m : {g, r}) EXPECT_EQ(std::string::npos, m.find('\n')) << m;
  // --backend auto is resolved on the ranks, which check the same way.
  PreflightOptions o = ParsePreflightArgs({"-G", "2", "-R", "1"});
  EXPECT_THROW(CheckBackendFlags(o, "gloo"), UsageError);
  EXPECT_NO_THROW(CheckBackendFlags(o, "nccl"));
  EXPECT_NO_THROW(CheckBackendFlags(ParsePreflightArgs({}), "gloo"));
}

TEST(PreflightOptionsTest, GraphAndRegistrationFlagsOnNccl) {
  PreflightOptions o = ParsePreflightArgs({"--backend", "nccl", "-G", "3", "-R", "1", "-n", "7"});
  EXPECT_EQ(3, o.graph_launches);
  EXPECT_EQ(core::BufferRegistration::kLocal, o.registration);
  EXPECT_EQ(core::BufferRegistration::kSymmetric,
            ParsePreflightArgs({"--backend", "nccl", "-R", "2"}).registration);
  EXPECT_EQ(core::BufferRegistration::kNone, ParsePreflightArgs({"-R", "0"}).registration);
  EXPECT_NE(std::string::npos, UsageMessage({"-R", "3"})
                                   .find("--local_register (-R) must be "
                                         "between 0 and 2"));
  EXPECT_NE(std::string::npos, UsageMessage({"-G", "-1"}).find("--cudagraph (-G)"));
  // A graph records the iterations back to back: -z other than 0 cannot apply.
  for (const char* z : {"1", "2", "3"}) {
    const std::string m = UsageMessage({"--backend", "nccl", "-G", "2", "-z", z});
    EXPECT_NE(std::string::npos, m.find("cannot be combined with -z " + std::string(z))) << m;
  }
  EXPECT_EQ("(accepted)", UsageMessage({"--backend", "nccl", "-G", "2", "-z", "0"}));
}

// nccl-tests' BenchTime: -n ops captured once, the graph launched -G times, the time divided by
// both; without -G the -n ops are issued directly.
TEST(PreflightOptionsTest, TimingPlanFollowsNcclTests) {
  PreflightOptions o = ParsePreflightArgs({"--backend", "nccl", "-n", "20", "-G", "4"});
  TimingPlan plan = PlanTiming(o);
  EXPECT_TRUE(plan.graph);
  EXPECT_EQ(20, plan.captured_ops);
  EXPECT_EQ(4, plan.launches);
  EXPECT_EQ(80, plan.timed_ops());

  PreflightOptions direct = ParsePreflightArgs({"-n", "20"});
  TimingPlan d = PlanTiming(direct);
  EXPECT_FALSE(d.graph);
  EXPECT_EQ(0, d.captured_ops);
  EXPECT_EQ(1, d.launches);
  EXPECT_EQ(20, d.timed_ops());
  // -n left to the backend's default: the plan follows once defaults are resolved.
  PreflightOptions deflt = ParsePreflightArgs({"--backend", "nccl", "-G", "1"});
  deflt.ResolveDefaults("nccl");
  EXPECT_EQ(20, PlanTiming(deflt).timed_ops());
}

TEST(PreflightOptionsTest, SizesAcceptSuffixes) {
  EXPECT_EQ(8u, ParseSize("8"));
  EXPECT_EQ(64u << 10, ParseSize("64K"));
  EXPECT_EQ(4u << 20, ParseSize("4M"));
  EXPECT_EQ(size_t{1} << 30, ParseSize("1G"));
  EXPECT_EQ(size_t{1} << 30, ParseSize("1GB"));
  EXPECT_THROW(ParseSize("1.5M"), UsageError);
}

TEST(PreflightOptionsTest, FailureReportReadsTheVerdict) {
  namespace fs = std::filesystem;
  const dlaunch::testing::TestDir test_dir("preflight-report");
  const fs::path dir = test_dir.path();
  EXPECT_EQ("", PreflightFailureReport((dir / "missing").string()));
  std::ofstream(dir / "preflight.json") << R"({"verdict": "FAIL", "reasons": ["p2p link a", "b"]})";
  std::string report = PreflightFailureReport(dir.string());
  EXPECT_NE(std::string::npos, report.find("dlaunch: preflight FAIL: p2p link a\n")) << report;
  EXPECT_NE(std::string::npos, report.find("dlaunch: preflight FAIL: b\n")) << report;
  std::ofstream(dir / "preflight.json") << R"({"verdict": "PASS", "reasons": []})";
  EXPECT_EQ("", PreflightFailureReport(dir.string()));
}

class MalformedFlagsTest : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(MalformedFlagsTest, ThrowUsageError) {
  EXPECT_THROW(ValidatePreflightArgs(GetParam()), UsageError);
}

INSTANTIATE_TEST_SUITE_P(
    Flags, MalformedFlagsTest,
    ::testing::Values(
        std::vector<std::string>{"--bogus"}, std::vector<std::string>{"stray-positional"},
        std::vector<std::string>{"-b"}, std::vector<std::string>{"-b", "abc"},
        std::vector<std::string>{"-b", "0"}, std::vector<std::string>{"-b", "1M", "-e", "1K"},
        std::vector<std::string>{"-f", "1"}, std::vector<std::string>{"-f", "two"},
        std::vector<std::string>{"-f", "2", "-i", "1K"}, std::vector<std::string>{"-i", "0"},
        std::vector<std::string>{"-n", "0"}, std::vector<std::string>{"-w", "-1"},
        std::vector<std::string>{"-c", "-1"}, std::vector<std::string>{"-z", "4"},
        std::vector<std::string>{"-a", "5"}, std::vector<std::string>{"--ops", "allreduce,bogus"},
        std::vector<std::string>{"--ops", ","}, std::vector<std::string>{"--backend", "mpi"},
        std::vector<std::string>{"-T", "0"}, std::vector<std::string>{"--collective-timeout", "-3"},
        std::vector<std::string>{"--slow-link-factor", "1.5"},
        std::vector<std::string>{"--slow-link-factor", "0"},
        std::vector<std::string>{"--min-busbw", "-1"}, std::vector<std::string>{"-d", "complex"},
        std::vector<std::string>{"-o", "xor"}, std::vector<std::string>{"-r", "-2"},
        std::vector<std::string>{"-r", "one"}, std::vector<std::string>{"--p2p-bytes", "0"},
        std::vector<std::string>{"--p2p-retries", "-1"}, std::vector<std::string>{"-R", "5"},
        std::vector<std::string>{"--json", "--csv"},
        std::vector<std::string>{"--op", "sum", "--op", "max"}));

}  // namespace
}  // namespace dlaunch::worker
