#include "worker/preflight/preflight_options.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "worker/preflight/preflight.h"

namespace dlaunch::worker {
namespace {

TEST(PreflightOptionsTest, DefaultsAndNcclTestsFlags) {
  PreflightOptions o = ParsePreflightArgs({});
  EXPECT_EQ("auto", o.backend);
  EXPECT_EQ(8u, o.min_bytes);
  EXPECT_EQ(6u, o.ops.size());
  EXPECT_EQ(10000, o.collective_timeout.count());
  o.ResolveDefaults("gloo");
  EXPECT_EQ(64u << 20, o.max_bytes);
  PreflightOptions g = ParsePreflightArgs({});
  g.ResolveDefaults("nccl");
  EXPECT_EQ(size_t{1} << 30, g.max_bytes);

  o = ParsePreflightArgs({"-b",
                          "1K",
                          "-e",
                          "4M",
                          "-f",
                          "4",
                          "-w",
                          "1",
                          "-n",
                          "3",
                          "--ops",
                          "allreduce,sendrecv",
                          "--backend",
                          "gloo",
                          "--collective-timeout",
                          "0.5",
                          "--no-hang-test",
                          "--no-p2p",
                          "-d",
                          "bfloat16",
                          "-o",
                          "max",
                          "--min-busbw",
                          "2.5",
                          "--slow-link-factor",
                          "0.25"});
  EXPECT_EQ(1024u, o.min_bytes);
  EXPECT_EQ(4u << 20, o.max_bytes);
  EXPECT_EQ(4u, o.step_factor);
  EXPECT_EQ(1, o.warmup_iters);
  EXPECT_EQ(3, o.iters);
  EXPECT_EQ((std::vector<std::string>{"allreduce", "sendrecv"}), o.ops);
  EXPECT_EQ(500, o.collective_timeout.count());
  EXPECT_FALSE(o.hang_test);
  EXPECT_FALSE(o.p2p);
  EXPECT_EQ(core::DataType::kBFloat16, o.dtype);
  EXPECT_EQ(core::ReduceOp::kMax, o.redop);
  EXPECT_DOUBLE_EQ(2.5, o.min_busbw);
  EXPECT_DOUBLE_EQ(0.25, o.slow_link_factor);
}

TEST(PreflightOptionsTest, SizesTakeSuffixes) {
  EXPECT_EQ(8u, ParseSize("8"));
  EXPECT_EQ(64u << 10, ParseSize("64K"));
  EXPECT_EQ(64u << 20, ParseSize("64MB"));
  EXPECT_EQ(size_t{1} << 30, ParseSize("1g"));
  EXPECT_THROW(ParseSize("x"), UsageError);
  EXPECT_THROW(ParseSize("-1"), UsageError);
  EXPECT_THROW(ParseSize(""), UsageError);
  EXPECT_THROW(ParseSize("1.5M"), UsageError);
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
        std::vector<std::string>{"-b", "1M", "-e", "1K"}, std::vector<std::string>{"-f", "1"},
        std::vector<std::string>{"-f", "two"}, std::vector<std::string>{"-n", "0"},
        std::vector<std::string>{"-w", "-1"}, std::vector<std::string>{"--ops", "allreduce,reduce"},
        std::vector<std::string>{"--backend", "mpi"},
        std::vector<std::string>{"--collective-timeout", "0"},
        std::vector<std::string>{"--collective-timeout", "-3"},
        std::vector<std::string>{"--slow-link-factor", "1.5"},
        std::vector<std::string>{"--slow-link-factor", "0"},
        std::vector<std::string>{"--min-busbw", "-1"}, std::vector<std::string>{"-d", "complex"},
        std::vector<std::string>{"-o", "prod"}, std::vector<std::string>{"--p2p-bytes", "0"},
        std::vector<std::string>{"--op", "sum", "--op", "max"}));

TEST(RunPreflightTest, BadArgumentsExitTwo) {
  PreflightContext ctx;
  EXPECT_EQ(2, RunPreflight(ctx, {"--bogus"}));
  EXPECT_EQ(2, RunPreflight(ctx, {"--root", "3"}));  // not a rank of a world of one
  EXPECT_EQ(2, RunPreflight(ctx, {"--hang-rank", "1"}));
}

}  // namespace
}  // namespace dlaunch::worker
