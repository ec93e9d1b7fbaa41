// Each fixture log -> exactly the verdicts it should give, naming ranks, hosts and the fix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/nccl_log/report.h"
#include "tests/nccl_log/test_util.h"

namespace dlaunch::launcher::nccl_log {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::LoadFixture;

std::vector<std::string> Kinds(const std::vector<Verdict>& v) {
  std::vector<std::string> out;
  for (const Verdict& x : v) out.push_back(x.kind);
  return out;
}

std::vector<Verdict> VerdictsOf(const std::string& fixture) {
  return FindVerdicts(LoadFixture(fixture), AnalyzeOptions{});
}

TEST(VerdictsTest, HealthyLogsGiveNone) {
  for (const char* f : {"v2.5.6-single-process-4gpu.log", "v2.4.8-socket-topology.log",
                        "srun-v2.20.5-2x4-healthy.log"}) {
    EXPECT_THAT(Kinds(VerdictsOf(f)), ElementsAre()) << f;
  }
}

TEST(VerdictsTest, LoopbackInterfaceOnTwoNodes) {
  auto v = VerdictsOf("v2.7.8-lo-interface");
  ASSERT_THAT(Kinds(v), ElementsAre("bad_interface", "init_incomplete"));
  const Verdict& bad = v[0];
  EXPECT_EQ(bad.severity, "error");
  EXPECT_THAT(bad.ranks, ElementsAre(0, 1));
  EXPECT_THAT(bad.hosts, ElementsAre("node-a", "node-b"));
  EXPECT_EQ(bad.message,
            "ranks 0,1 (node-a, node-b) use the interface lo on a 2-node job: other nodes cannot "
            "reach it");
  EXPECT_EQ(bad.fix,
            "NCCL_SOCKET_IFNAME is set to 'lo' on ranks 0,1 (node-a, node-b): set it to the "
            "interface the nodes share, a NIC every node reaches, or ^docker0,lo to let NCCL "
            "choose");
  EXPECT_THAT(bad.evidence,
              ElementsAre("rank 0: bootstrap lo:127.0.0.1<0>, NET/Socket lo:127.0.0.1<0>",
                          "rank 1: bootstrap lo:127.0.0.1<0>, NET/Socket lo:127.0.0.1<0>"));
  const Verdict& init = v[1];
  EXPECT_EQ(init.message,
            "NCCL init never completed on ranks 0,1 (node-a, node-b): stopped at network setup");
  EXPECT_THAT(init.evidence, ElementsAre("rank 0 last step: Using network Socket",
                                         "rank 1 last step: Using network Socket",
                                         "rank 1 warned: include/socket.h:403 Connect to "
                                         "127.0.0.1<41539> failed : Connection refused"));
}

TEST(VerdictsTest, SocketFallbackBecauseIbIsDisabledOnOneNode) {
  auto v = VerdictsOf("v2.10.3-ib-disabled-on-one-node");
  ASSERT_THAT(Kinds(v), ElementsAre("socket_fallback"));
  EXPECT_THAT(v[0].ranks, ElementsAre(2, 3));
  EXPECT_THAT(v[0].hosts, ElementsAre("gpu-b"));
  EXPECT_EQ(v[0].message,
            "ranks 2,3 (gpu-b) send inter-node traffic over NET/Socket (TCP) while gpu-a has "
            "InfiniBand (mlx5_0): expect several times lower bandwidth");
  EXPECT_EQ(v[0].fix, "unset NCCL_IB_DISABLE (set to 1 on ranks 2,3 (gpu-b))");
  EXPECT_THAT(v[0].evidence[0],
              HasSubstr("rank 2: Channel 0 : 1[b000] -> 2[7000] [receive] via NET/Socket/0"));
}

TEST(VerdictsTest, SocketFallbackBecauseAContainerHidesIb) {
  auto v = VerdictsOf("mpi-v2.19.3-no-ib-on-one-node.log");
  ASSERT_THAT(Kinds(v), ElementsAre("socket_fallback"));
  EXPECT_THAT(v[0].ranks, ElementsAre(2, 3));
  EXPECT_THAT(v[0].hosts, ElementsAre("node-h"));
  EXPECT_EQ(v[0].fix,
            "make the IB devices visible to NCCL on node-h (NCCL logged \"NET/IB : No device "
            "found\"): install rdma-core/libibverbs and, in a container, pass "
            "--device=/dev/infiniband with --ulimit memlock=-1");
}

TEST(VerdictsTest, VersionMismatchThenInitFails) {
  auto v = VerdictsOf("v2.21.5-v2.28.9-version-mismatch.log");
  ASSERT_THAT(Kinds(v), ElementsAre("nccl_version_mismatch", "init_incomplete"));
  EXPECT_EQ(v[0].message,
            "ranks run different NCCL versions: 2.21.5 on rank 0 (gpu-c), 2.28.9 on ranks 2,3 "
            "(gpu-d)");
  EXPECT_THAT(v[0].ranks, ElementsAre(0, 2, 3));
  EXPECT_THAT(v[0].hosts, ElementsAre("gpu-c", "gpu-d"));
  EXPECT_THAT(v[0].evidence, ElementsAre("NCCL WARN: rank 0 has 2.21.5, rank 2 has 2.28.9",
                                         "NCCL WARN: rank 0 has 2.21.5, rank 3 has 2.28.9"));
  EXPECT_THAT(v[0].fix, HasSubstr("install one NCCL version on every node"));
  EXPECT_THAT(v[1].ranks, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(v[1].message,
            "NCCL init never completed on ranks 0-3 (gpu-c, gpu-d): stopped at communicator init "
            "started");
}

TEST(VerdictsTest, MismatchFromNcclsOwnWarningAlone) {
  LogParser parser;
  parser.AddLine(
      "a:1:1 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 1 nranks 2 cudaDev 0 busId 7000 - Init "
      "COMPLETE");
  parser.AddLine(
      "a:1:1 [0] init.cc:896 NCCL WARN Mismatched NCCL version detected : rank 0 version 2506 rank "
      "1 version 21803");
  auto v = FindVerdicts(parser.Finish(), AnalyzeOptions{});
  ASSERT_THAT(Kinds(v), ElementsAre("nccl_version_mismatch"));
  EXPECT_EQ(v[0].message,
            "NCCL found mismatched versions between ranks: rank 0 has 2.5.6, rank 1 has 2.18.3");
  EXPECT_THAT(v[0].ranks, ElementsAre(1));
}

TEST(VerdictsTest, P2PDisabledByTheEnvironment) {
  auto v = VerdictsOf("v2.18.3-p2p-disabled.log");
  ASSERT_THAT(Kinds(v), ElementsAre("p2p_disabled"));
  EXPECT_EQ(v[0].severity, "warning");
  EXPECT_THAT(v[0].ranks, ElementsAre(0, 1));
  EXPECT_THAT(v[0].hosts, ElementsAre("node7"));
  EXPECT_EQ(v[0].message,
            "P2P is disabled by the environment on ranks 0,1 (node7): GPUs of one node exchange "
            "data through host memory instead of NVLink/PCIe");
  EXPECT_THAT(v[0].evidence, ElementsAre("rank 0: NCCL_P2P_DISABLE set by environment to 1",
                                         "rank 1: NCCL_P2P_DISABLE set by environment to 1"));
}

TEST(VerdictsTest, ShmDisabledAndP2PUnavailable) {
  LogParser parser;
  parser.AddLine("n:1:1 [0] NCCL INFO NCCL_SHM_DISABLE set by environment to 1.");
  parser.AddLine(
      "n:1:1 [0] NCCL INFO P2P is disabled between connected GPUs 0 and 1. You can repress this "
      "message with NCCL_IGNORE_DISABLED_P2P=1.");
  parser.AddLine(
      "n:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE");
  auto v = FindVerdicts(parser.Finish(), AnalyzeOptions{});
  ASSERT_THAT(Kinds(v), ElementsAre("p2p_unavailable", "shm_disabled"));
  EXPECT_EQ(v[1].message,
            "shared-memory transport is disabled by the environment on rank 0 (n): without P2P, "
            "ranks of one node talk over the network");
}

TEST(VerdictsTest, GdrOffOnOneNode) {
  auto v = VerdictsOf("v2.28.9-gdr-off-on-one-node");
  ASSERT_THAT(Kinds(v), ElementsAre("gdr_disabled"));
  EXPECT_THAT(v[0].ranks, ElementsAre(2, 3));
  EXPECT_THAT(v[0].hosts, ElementsAre("h100-b"));
  EXPECT_EQ(v[0].message,
            "GPU Direct RDMA is off on ranks 2,3 (h100-b) but on for ranks 0,1 (h100-a): their "
            "network traffic is staged through host memory");
  EXPECT_EQ(v[0].fix, "load the nvidia-peermem kernel module on h100-b (modprobe nvidia-peermem)");
  EXPECT_EQ(v[0].evidence[0],
            "rank 2: NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)");
}

TEST(VerdictsTest, InitHangNamesTheLastStepOfEachRank) {
  auto v = VerdictsOf("v2.21.5-init-hang-bootstrap");
  ASSERT_THAT(Kinds(v), ElementsAre("init_incomplete"));
  EXPECT_THAT(v[0].ranks, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(v[0].message,
            "NCCL init never completed on ranks 0-3 (gpu-e, gpu-f): rank 3 (gpu-f) stopped at "
            "network setup; ranks 0-2 (gpu-e, gpu-f) stopped at communicator init started");
  EXPECT_THAT(v[0].fix, HasSubstr("stuck in bootstrap's exchange with the other ranks"));
  EXPECT_THAT(v[0].evidence, ::testing::Contains("rank 3 last step: Using network IB"));
}

TEST(VerdictsTest, InitHangWhileConnectingChannels) {
  auto v = VerdictsOf("v2.14.3-init-hang-connect.log");
  ASSERT_THAT(Kinds(v), ElementsAre("init_incomplete"));
  EXPECT_THAT(v[0].hosts, ElementsAre("lambda-1", "lambda-2"));
  EXPECT_EQ(v[0].message,
            "NCCL init never completed on ranks 0,1 (lambda-1, lambda-2): stopped at connecting "
            "channels");
  EXPECT_THAT(v[0].fix, HasSubstr("stuck connecting channels to peers"));
  EXPECT_EQ(v[0].evidence[0],
            "rank 0 last step: Channel 01/0 : 0[41000] -> 1[41000] [send] via NET/IB/0");
}

TEST(VerdictsTest, NoInitVerdictWhileTheJobRuns) {
  ParseResult p = LoadFixture("v2.14.3-init-hang-connect.log");
  AnalyzeOptions live;
  live.job_finished = false;
  EXPECT_TRUE(FindVerdicts(p, live).empty());
}

TEST(VerdictsTest, VersionOnlyLogsAreNotInitHangs) {
  LogParser parser;
  parser.AddLine("NCCL version 2.21.5+cuda12.4");
  parser.BeginSource("rank1/nccl.log", 1);
  parser.AddLine("h:2:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4");
  EXPECT_TRUE(FindVerdicts(parser.Finish(), AnalyzeOptions{}).empty());
}

}  // namespace
}  // namespace dlaunch::launcher::nccl_log
