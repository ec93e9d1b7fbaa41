// Lines grouped into ranks: per-rank files, interleaved files, one process driving many GPUs,
// bare version lines, and the odd bytes real files contain.
#include "launcher/nccl_log/parser.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/common/test_dir.h"
#include "tests/nccl_log/test_util.h"

namespace dlaunch::launcher::nccl_log {
namespace {

using testing::LoadFixture;

const RankLog& Rank(const ParseResult& p, int rank) {
  for (const RankLog& r : p.ranks) {
    if (r.rank == rank) return r;
  }
  static RankLog none;
  ADD_FAILURE() << "no rank " << rank;
  return none;
}

TEST(ParserTest, OneProcessDrivingFourGpusBecomesFourRanks) {
  ParseResult p = LoadFixture("v2.5.6-single-process-4gpu.log");
  ASSERT_EQ(p.ranks.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    const RankLog& log = Rank(p, r);
    EXPECT_EQ(log.pid, 41213);
    EXPECT_EQ(log.cuda_dev, r);
    EXPECT_EQ(log.host, "dgx1");
    EXPECT_EQ(log.version, "2.5.6");  // printed once by the process, true for all its GPUs
    EXPECT_EQ(log.cuda_version, "10.2");
    EXPECT_EQ(log.nranks, 4);
    EXPECT_EQ(log.step, InitStep::kComplete);
    ASSERT_EQ(log.bootstrap.size(), 1u);
    EXPECT_EQ(log.bootstrap[0].name, "enp1s0f0");
    EXPECT_TRUE(log.ib_no_device);
  }
  EXPECT_EQ(Rank(p, 0).bus_id, "6000");
  EXPECT_EQ(Rank(p, 3).bus_id, "b000");
  const CommRecord* c = MainComm(Rank(p, 0));
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->complete);
  EXPECT_EQ(c->ptr, "0x7f3b14000e00");
  ASSERT_EQ(c->rings.size(), 2u);
  EXPECT_EQ(c->rings.at(1), (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(c->links.size(), 1u);
  EXPECT_EQ(c->links[0].via, "P2P/IPC");
  EXPECT_EQ(c->links[0].channels, (std::vector<int>{0, 1}));
}

TEST(ParserTest, PerRankFilesUseTheDirectoryRankBeforeNcclNamesIt) {
  ParseResult p = LoadFixture("v2.7.8-lo-interface");
  ASSERT_EQ(p.ranks.size(), 2u);
  EXPECT_EQ(p.ranks[0].rank, 0);
  EXPECT_EQ(p.ranks[0].host, "node-a");
  EXPECT_EQ(p.ranks[1].rank, 1);
  EXPECT_EQ(p.ranks[1].host, "node-b");
  EXPECT_EQ(p.ranks[1].env.at("NCCL_SOCKET_IFNAME"), "lo");
  EXPECT_EQ(p.ranks[1].env.at("NCCL_IB_DISABLE"), "1");
  EXPECT_EQ(p.ranks[1].network, "Socket");
  EXPECT_EQ(p.ranks[1].step, InitStep::kNetwork);
  EXPECT_EQ(p.ranks[1].step_line, "Using network Socket");
  ASSERT_EQ(p.ranks[1].warnings.size(), 1u);
  EXPECT_EQ(p.ranks[1].warnings[0],
            "include/socket.h:403 Connect to 127.0.0.1<41539> failed : Connection refused");
  EXPECT_EQ(p.ranks[0].version, "2.7.8");
}

TEST(ParserTest, MpiPrefixedInterleavedLog) {
  ParseResult p = LoadFixture("mpi-v2.19.3-no-ib-on-one-node.log");
  ASSERT_EQ(p.ranks.size(), 4u);
  EXPECT_EQ(Rank(p, 0).version, "2.19.3");  // the bare "[1,0]<stdout>:NCCL version" line
  EXPECT_EQ(Rank(p, 1).version, "");
  EXPECT_EQ(Rank(p, 2).host, "node-h");
  EXPECT_TRUE(Rank(p, 2).ib_no_device);
  EXPECT_EQ(Rank(p, 2).network, "Socket");
  ASSERT_EQ(Rank(p, 0).ib.size(), 1u);
  EXPECT_EQ(Rank(p, 0).ib[0].name, "mlx5_0");
  EXPECT_EQ(Rank(p, 0).ib_oob, "eth0:10.4.0.7<0>");
  EXPECT_EQ(Rank(p, 0).gdr, 1);
  for (const RankLog& r : p.ranks) EXPECT_EQ(r.step, InitStep::kComplete) << r.rank;
}

TEST(ParserTest, SrunPrefixedEightRanks) {
  ParseResult p = LoadFixture("srun-v2.20.5-2x4-healthy.log");
  ASSERT_EQ(p.ranks.size(), 8u);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(Rank(p, r).host, r < 4 ? "dgx-01" : "dgx-02");
    EXPECT_EQ(MainComm(Rank(p, r))->nnodes, 2);
  }
  EXPECT_EQ(Rank(p, 0).version, "2.20.5");
}

TEST(ParserTest, OldLogWithoutInitStartKeepsTheUnfinishedInit) {
  ParseResult p = LoadFixture("v2.14.3-init-hang-connect.log");
  ASSERT_EQ(p.ranks.size(), 2u);
  // Neither rank printed "comm ... rank"; their Channel lines say who they are.
  EXPECT_EQ(p.ranks[0].rank, 0);
  EXPECT_EQ(p.ranks[0].host, "lambda-1");
  EXPECT_EQ(p.ranks[1].rank, 1);
  for (const RankLog& r : p.ranks) {
    EXPECT_EQ(r.step, InitStep::kConnecting);
    ASSERT_EQ(r.comms.size(), 1u);
    EXPECT_FALSE(r.comms[0].complete);
    EXPECT_EQ(r.comms[0].links.size(), 2u);  // send and receive, two channels each
  }
}

TEST(ParserTest, Nccl228TopologyAndGdr) {
  ParseResult p = LoadFixture("v2.28.9-gdr-off-on-one-node");
  ASSERT_EQ(p.ranks.size(), 4u);
  const RankLog& r0 = Rank(p, 0);
  EXPECT_EQ(r0.version, "2.28.9");
  EXPECT_EQ(r0.bus_id, "19000");
  ASSERT_EQ(r0.bootstrap.size(), 1u);
  EXPECT_EQ(r0.bootstrap[0].address, "10.9.0.1<0>");
  ASSERT_EQ(r0.nic_distance.size(), 2u);
  EXPECT_EQ(r0.nic_distance[0].path, "PIX");
  EXPECT_EQ(Rank(p, 1).nic_distance[1].path, "PIX");
  EXPECT_EQ(r0.gdr, 1);
  EXPECT_EQ(Rank(p, 2).gdr, 0);
  EXPECT_EQ(Rank(p, 3).gdr, 0);
  EXPECT_EQ(MainComm(r0)->nnodes, 2);
}

TEST(ParserTest, CommsOfOneRankStaySeparate) {
  LogParser parser;
  for (const char* line : {
           "h:1:2 [0] NCCL INFO ncclCommInitRank comm 0xa rank 1 nranks 8 cudaDev 0 nvmlDev 0 "
           "busId 7000 commId 0x1 - Init START",
           "h:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 2[1] via P2P/IPC",
           "h:1:2 [0] NCCL INFO ncclCommInitRank comm 0xa rank 1 nranks 8 cudaDev 0 nvmlDev 0 "
           "busId 7000 commId 0x1 - Init COMPLETE",
           // a lazy p2p connection of the same communicator, after its init
           "h:1:2 [0] NCCL INFO Channel 00/1 : 1[0] -> 5[1] via P2P/IPC",
           "h:1:2 [0] NCCL INFO ncclCommSplit comm 0xb rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId "
           "7000 parent 0xa color 1 key 0 commId 0x2 - Init START",
           "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
       }) {
    parser.AddLine(line);
  }
  ParseResult p = parser.Finish();
  ASSERT_EQ(p.ranks.size(), 1u);
  const RankLog& r = p.ranks[0];
  EXPECT_EQ(r.rank, 1);  // the rank in the biggest communicator
  ASSERT_EQ(r.comms.size(), 2u);
  EXPECT_TRUE(r.comms[0].complete);
  EXPECT_EQ(r.comms[0].links.size(), 2u);
  EXPECT_FALSE(r.comms[1].complete);
  EXPECT_EQ(r.comms[1].nranks, 2);
  EXPECT_EQ(r.step, InitStep::kConnecting);
}

TEST(ParserTest, ToleratesCrlfLongLinesAndNoFinalNewline) {
  const dlaunch::testing::TestDir test_dir("nccl-parser");
  const std::string path = test_dir.string() + "/odd.log";
  {
    std::ofstream f(path, std::ios::binary);
    f << "h:1:1 [0] NCCL INFO Using network IB\r\n";
    f << std::string(200000, 'x') << " NCCL INFO Using network Socket\n";  // cut, not parsed
    f << "\n\n\xff\xfe garbage\n";
    f << "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>";
  }
  LogParser parser;
  ASSERT_TRUE(parser.AddFile(path, 2));
  ParseResult p = parser.Finish();
  ASSERT_EQ(p.ranks.size(), 1u);
  EXPECT_EQ(p.ranks[0].rank, 2);
  EXPECT_EQ(p.ranks[0].network, "IB");
  ASSERT_EQ(p.ranks[0].ib.size(), 1u);
  EXPECT_EQ(p.lines, 6);
}

TEST(ParserTest, UnreadableFileIsAProblemNotAnError) {
  ParseResult p = ParseFiles({"/nonexistent/nccl.log"});
  EXPECT_TRUE(p.ranks.empty());
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_EQ(p.problems[0], "/nonexistent/nccl.log: cannot be read");
}

}  // namespace
}  // namespace dlaunch::launcher::nccl_log
