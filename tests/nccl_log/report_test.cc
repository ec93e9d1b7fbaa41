// Rendering: the transport matrix, the topology summary, the text report and its JSON.
#include "launcher/nccl_log/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/nccl_log/test_util.h"

namespace dlaunch::launcher::nccl_log {
namespace {

using ::testing::HasSubstr;
using testing::LoadFixture;

TEST(TransportMatrixTest, IntraNodeP2PAndInterNodeIb) {
  TransportMatrix m = BuildTransportMatrix(LoadFixture("srun-v2.20.5-2x4-healthy.log"));
  ASSERT_EQ(m.size, 8);
  EXPECT_EQ(m.cells[0][1], "P2P");
  EXPECT_EQ(m.cells[3][4], "IB/GDR");
  EXPECT_EQ(m.cells[7][0], "IB/GDR");
  EXPECT_EQ(m.cells[0][5], "");
  std::string text = FormatTransportMatrix(m);
  EXPECT_THAT(text, HasSubstr("NCCL transports (rank -> rank, as NCCL connected them):"));
  EXPECT_THAT(text, HasSubstr("  src\\dst       0       1"));
  EXPECT_THAT(text, HasSubstr("  3             .       .       .       -  IB/GDR"));
}

TEST(TransportMatrixTest, EachSideOfALinkCounts) {
  TransportMatrix m = BuildTransportMatrix(LoadFixture("v2.28.9-gdr-off-on-one-node"));
  ASSERT_EQ(m.size, 4);
  EXPECT_EQ(m.cells[0][1], "P2P");
  EXPECT_EQ(m.cells[1][2], "IB+IB/GDR");  // rank 1 sends with GDR, rank 2 receives without
  EXPECT_EQ(m.cells[3][0], "IB+IB/GDR");
  TransportMatrix shm = BuildTransportMatrix(LoadFixture("v2.5.6-single-process-4gpu.log"));
  EXPECT_EQ(shm.cells[3][0], "SHM");
  EXPECT_EQ(shm.cells[2][1], "P2P");
  TransportMatrix sock = BuildTransportMatrix(LoadFixture("v2.4.8-socket-topology.log"));
  EXPECT_EQ(sock.cells[0][1], "SOCK");
  EXPECT_EQ(FormatTransportMatrix(TransportMatrix{}), "");
}

TEST(TopologyTest, PerNodeGpusNicsAndDistances) {
  auto nodes = SummarizeTopology(LoadFixture("v2.28.9-gdr-off-on-one-node"));
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].host, "h100-a");
  EXPECT_EQ(nodes[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(nodes[0].gdr, 1);
  EXPECT_EQ(nodes[1].gdr, 0);
  std::string text = FormatTopology(nodes);
  EXPECT_THAT(text, HasSubstr("h100-a: ranks 0,1, network IB, NICs mlx5_0:1/IB mlx5_1:1/IB, "
                              "bootstrap eth0:10.9.0.1<0>, GDR on\n"));
  EXPECT_THAT(text,
              HasSubstr("  rank 0: CUDA dev 0, bus 19000, NIC distance: mlx5_0 PIX mlx5_1 SYS\n"));
  EXPECT_THAT(text,
              HasSubstr("  rank 1: CUDA dev 1, bus 3b000, NIC distance: mlx5_0 SYS mlx5_1 PIX\n"));
}

TEST(TopologyTest, Nccl24NicDistanceLines) {
  std::string text = FormatTopology(SummarizeTopology(LoadFixture("v2.4.8-socket-topology.log")));
  EXPECT_THAT(text,
              HasSubstr("ip-172-31-10-149: rank 0, network Socket, NICs ens5:172.31.10.149<0>"));
  EXPECT_THAT(text, HasSubstr("  rank 0: CUDA dev 0, NIC distance: ens5 PHB\n"));
}

TEST(ReportTest, TextNamesVerdictsTopologyAndMatrix) {
  NcclReport r = Analyze(LoadFixture("v2.10.3-ib-disabled-on-one-node"));
  std::string text = FormatReport(r);
  EXPECT_THAT(text, HasSubstr("NCCL logs: 4 ranks on 2 nodes, NCCL 2.10.3+cuda11.4"));
  EXPECT_THAT(text,
              HasSubstr("  ✗ NCCL socket_fallback: ranks 2,3 (gpu-b) send inter-node traffic"));
  EXPECT_THAT(text, HasSubstr("      fix: unset NCCL_IB_DISABLE"));
  EXPECT_THAT(text, HasSubstr("    gpu-b: ranks 2,3, network Socket, NICs eth0:10.1.0.12<0>"));
  EXPECT_THAT(text, HasSubstr("NCCL transports (rank -> rank"));
  NcclReport ok = Analyze(LoadFixture("srun-v2.20.5-2x4-healthy.log"));
  EXPECT_THAT(FormatReport(ok), HasSubstr("  no NCCL problem found\n"));
}

TEST(ReportTest, JsonCarriesEverything) {
  NcclReport r = Analyze(LoadFixture("v2.28.9-gdr-off-on-one-node"));
  nlohmann::json j = ReportToJson(r);
  EXPECT_EQ(j["schema"], "dlaunch.nccl/1");
  ASSERT_EQ(j["verdicts"].size(), 1u);
  EXPECT_EQ(j["verdicts"][0]["kind"], "gdr_disabled");
  EXPECT_EQ(j["verdicts"][0]["ranks"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(j["ranks"].size(), 4u);
  EXPECT_EQ(j["ranks"][2]["gdr"], "off");
  EXPECT_EQ(j["ranks"][0]["version"], "2.28.9");
  EXPECT_EQ(j["ranks"][0]["comms"][0]["complete"], true);
  EXPECT_EQ(j["transport_matrix"]["size"], 4);
  EXPECT_EQ(j["transport_matrix"]["cells"][1][2], "IB+IB/GDR");
  EXPECT_EQ(j["nodes"][1]["host"], "h100-b");
  // Round trip: the dump parses.
  EXPECT_EQ(nlohmann::json::parse(j.dump())["schema"], "dlaunch.nccl/1");
}

TEST(ReportTest, LabelsAndRankLists) {
  RankLog r;
  r.host = "n1";
  r.pid = 42;
  r.cuda_dev = 1;
  EXPECT_EQ(RankLabel(r), "n1 pid 42 dev 1");
  r.rank = 5;
  EXPECT_EQ(RankLabel(r), "rank 5 (n1)");
}

}  // namespace
}  // namespace dlaunch::launcher::nccl_log

namespace dlaunch::launcher::nccl_log {
namespace {

TEST(ReportTest, PreflightSectionIsTheMatrixAndTheVerdicts) {
  std::string s = FormatPreflightSection(Analyze(LoadFixture("v2.28.9-gdr-off-on-one-node")));
  EXPECT_THAT(s, HasSubstr("NCCL transports (rank -> rank"));
  EXPECT_THAT(s, HasSubstr("! NCCL gdr_disabled: GPU Direct RDMA is off on ranks 2,3 (h100-b)"));
  EXPECT_EQ(FormatPreflightSection(Analyze(ParseResult{})), "");
}

}  // namespace
}  // namespace dlaunch::launcher::nccl_log
