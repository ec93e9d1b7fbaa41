// One message shape per test row, as NCCL 2.4 to 2.28 printed them.
#include "launcher/nccl_log/messages.h"

#include <gtest/gtest.h>

#include "launcher/nccl_log/parser.h"

namespace dlaunch::launcher::nccl_log {
namespace {

struct LinkCase {
  const char* message;
  int channel, src, dst;
  const char* src_dev;
  const char* direction;
  const char* via;
  Transport transport;
  int net_dev;
  bool gdr;
};

TEST(ParseLinkLineTest, EveryTransportShape) {
  const LinkCase cases[] = {
      // 2.4: no device in brackets for NET
      {"Ring 00 : 0 -> 1 [send] via NET/Socket/0", 0, 0, 1, "", "send", "NET/Socket/0",
       Transport::kNetSocket, 0, false},
      // 2.5: "Ring" and bus ids
      {"Ring 01 : 3[b000] -> 0[6000] via direct shared memory", 1, 3, 0, "b000", "",
       "direct shared memory", Transport::kShm, -1, false},
      {"Ring 00 : 0[6000] -> 1[7000] via P2P/IPC", 0, 0, 1, "6000", "", "P2P/IPC", Transport::kP2P,
       -1, false},
      // 2.7 - 2.17: "Channel", bus ids, connIndex from 2.12
      {"Channel 00 : 3[4a000] -> 6[44000] [send] via NET/IB/0/GDRDMA", 0, 3, 6, "4a000", "send",
       "NET/IB/0/GDRDMA", Transport::kNetIb, 0, true},
      {"Channel 01/0 : 1[41000] -> 0[41000] [receive] via NET/IB/3", 1, 1, 0, "41000", "receive",
       "NET/IB/3", Transport::kNetIb, 3, false},
      {"Channel 02 : 0[7000] -> 1[b000] via P2P/indirect/2[d000]", 2, 0, 1, "7000", "",
       "P2P/indirect/2[d000]", Transport::kP2P, -1, false},
      {"Channel 00 : 0[1000] -> 1[2000] via SHM/direct/direct", 0, 0, 1, "1000", "",
       "SHM/direct/direct", Transport::kShm, -1, false},
      // 2.18+: NVML indices, PXN proxies, CUMEM
      {"Channel 03/0 : 15[7] -> 6[6] [send] via NET/Socket/3", 3, 15, 6, "7", "send",
       "NET/Socket/3", Transport::kNetSocket, 3, false},
      {"Channel 07/0 : 2[2] -> 10[2] [send] via NET/IB/1(3)/GDRDMA(PCI)/Shared", 7, 2, 10, "2",
       "send", "NET/IB/1(3)/GDRDMA(PCI)/Shared", Transport::kNetIb, 1, true},
      {"Channel 11/0 : 34[2] -> 33[1] via P2P/CUMEM/read", 11, 34, 33, "2", "", "P2P/CUMEM/read",
       Transport::kP2P, -1, false},
      {"Channel 00/1 : 1[1] -> 0[0] via P2P/direct pointer/read", 0, 1, 0, "1", "",
       "P2P/direct pointer/read", Transport::kP2P, -1, false},
      {"Channel 00/0 : 0[0] -> 8[0] [send] via NET/AWS Libfabric/0/GDRDMA", 0, 0, 8, "0", "send",
       "NET/AWS Libfabric/0/GDRDMA", Transport::kNetOther, 0, true},
      {"CollNet 00/0 : 3 [send] via COLLNET/SHARP/0/GDRDMA", 0, 3, -1, "", "send",
       "COLLNET/SHARP/0/GDRDMA", Transport::kCollNet, -1, true},
  };
  for (const LinkCase& c : cases) {
    SCOPED_TRACE(c.message);
    Link l;
    int channel = -1;
    ASSERT_TRUE(ParseLinkLine(c.message, &l, &channel));
    EXPECT_EQ(channel, c.channel);
    EXPECT_EQ(l.src, c.src);
    EXPECT_EQ(l.dst, c.dst);
    EXPECT_EQ(l.src_dev, c.src_dev);
    EXPECT_EQ(l.direction, c.direction);
    EXPECT_EQ(l.via, c.via);
    EXPECT_EQ(l.transport, c.transport);
    EXPECT_EQ(l.net_dev, c.net_dev);
    EXPECT_EQ(l.gdr, c.gdr);
  }
  Link l;
  int channel;
  EXPECT_FALSE(ParseLinkLine("Channel 00/02 :    0   1   2   3", &l, &channel));
  EXPECT_FALSE(ParseLinkLine("Ring 00 : 3 -> 0 -> 1", &l, &channel));
  EXPECT_FALSE(ParseLinkLine("Channel is busy via nothing", &l, &channel));
}

TEST(ParseRingOrderTest, ListingsOnly) {
  int channel = -1;
  std::vector<int> order;
  ASSERT_TRUE(ParseRingOrder("Channel 01/02 :    0   1   2   3", &channel, &order));
  EXPECT_EQ(channel, 1);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_TRUE(ParseRingOrder("Ring 00 : 0 1", &channel, &order));
  EXPECT_EQ(order, (std::vector<int>{0, 1}));
  EXPECT_FALSE(ParseRingOrder("Ring 00 : 3 -> 0 -> 1", &channel, &order));
  EXPECT_FALSE(ParseRingOrder("Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", &channel, &order));
}

TEST(ParseInterfacesTest, SocketAndIbLists) {
  auto a = ParseInterfaces(" [0]eth0:10.0.0.1<0> [1]ib0:10.1.0.1<0>");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].name, "eth0");
  EXPECT_EQ(a[0].address, "10.0.0.1<0>");
  EXPECT_EQ(a[1].name, "ib0");
  auto b = ParseInterfaces(" ens5:172.31.4.20<0>");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].name, "ens5");
  auto c = ParseInterfaces(" [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]");
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[1].name, "mlx5_1");
  EXPECT_EQ(c[1].address, "1/RoCE");
  auto v6 = ParseInterfaces(" [0]eth0:fe80::1%eth0<0>");
  ASSERT_EQ(v6.size(), 1u);
  EXPECT_EQ(v6[0].address, "fe80::1%eth0<0>");
  EXPECT_TRUE(ParseInterfaces(" ").empty());
}

TEST(ParseCommLineTest, OldAndNewSpellings) {
  CommLine a;
  ASSERT_TRUE(ParseCommLine(
      "comm 0x7f3b14000e00 rank 0 nranks 4 cudaDev 0 busId 6000 - Init COMPLETE", &a));
  EXPECT_EQ(a.ptr, "0x7f3b14000e00");
  EXPECT_EQ(a.rank, 0);
  EXPECT_EQ(a.nranks, 4);
  EXPECT_EQ(a.bus_id, "6000");
  CommLine b;
  ASSERT_TRUE(
      ParseCommLine("ncclCommInitRankConfig comm 0x55e0 rank 12 nranks 16 cudaDev 4 nvmlDev 4 "
                    "busId 9a000 commId 0x71c2a3b4d5e6f708 - Init START",
                    &b));
  EXPECT_EQ(b.rank, 12);
  EXPECT_EQ(b.nranks, 16);
  EXPECT_EQ(b.cuda_dev, 4);
  EXPECT_EQ(b.bus_id, "9a000");
  EXPECT_EQ(b.comm_id, "0x71c2a3b4d5e6f708");
  CommLine c;
  ASSERT_TRUE(
      ParseCommLine("comm 0x55cd rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0", &c));
  EXPECT_EQ(c.nranks, 2);
  EXPECT_EQ(c.nnodes, 1);
  CommLine d;
  EXPECT_FALSE(ParseCommLine("NVLS comm 0x55cd headRank 0 nHeads 4", &d));
}

TEST(ParseEnvLineTest, WithAndWithoutFinalDot) {
  std::string n, v;
  ASSERT_TRUE(ParseEnvLine("NCCL_IB_DISABLE set by environment to 1.", &n, &v));
  EXPECT_EQ(n, "NCCL_IB_DISABLE");
  EXPECT_EQ(v, "1");
  ASSERT_TRUE(ParseEnvLine("NCCL_SOCKET_IFNAME set by environment to ^docker0,lo", &n, &v));
  EXPECT_EQ(v, "^docker0,lo");
  EXPECT_FALSE(ParseEnvLine("NCCL_SOCKET_IFNAME set to lo", &n, &v));
}

TEST(ParseVersionTest, VersionAndCuda) {
  std::string v, c;
  ASSERT_TRUE(ParseVersion("NCCL version 2.28.9+cuda13.0", &v, &c));
  EXPECT_EQ(v, "2.28.9");
  EXPECT_EQ(c, "13.0");
  ASSERT_TRUE(ParseVersion("NCCL version 2.4.8", &v, &c));
  EXPECT_EQ(v, "2.4.8");
  EXPECT_EQ(c, "");
}

TEST(TopologyLinesTest, PathsAndNicDistance) {
  std::string gpu;
  std::vector<NicDistance> nets;
  ASSERT_TRUE(
      ParsePathsLine("GPU/0-19000 : GPU/0-19000 (0/5000.0/LOC) CPU/0-0 (2/48.0/PHB) "
                     "NET/0-0 (2/48.0/PIX) NET/0-1 (4/24.0/SYS) ",
                     &gpu, &nets));
  EXPECT_EQ(gpu, "19000");
  ASSERT_EQ(nets.size(), 2u);
  EXPECT_EQ(nets[0].nic, "NET/0-0");
  EXPECT_EQ(nets[0].path, "PIX");
  EXPECT_EQ(nets[1].path, "SYS");
  ASSERT_TRUE(ParsePathsLine("GPU/7000 : GPU/7000 (0/5000.000000/LOC) NET/0 (3/12.000000/PHB) ",
                             &gpu, &nets));
  EXPECT_EQ(gpu, "7000");
  ASSERT_EQ(nets.size(), 1u);
  EXPECT_EQ(nets[0].nic, "NET/0");
  int dev = -1;
  ASSERT_TRUE(ParseNicDistanceLine("CUDA Dev 1[3], IB NIC distance :  PIX SYS", &dev, &nets));
  EXPECT_EQ(dev, 1);
  ASSERT_EQ(nets.size(), 2u);
  EXPECT_EQ(nets[0].nic, "IB/0");
  EXPECT_EQ(nets[1].path, "SYS");
}

TEST(NormalizeBusIdTest, Spellings) {
  EXPECT_EQ(NormalizeBusId("0000:07:00.0"), "7000");
  EXPECT_EQ(NormalizeBusId("0x7000"), "7000");
  EXPECT_EQ(NormalizeBusId("4A000"), "4a000");
  EXPECT_EQ(NormalizeBusId("0"), "0");
}

}  // namespace
}  // namespace dlaunch::launcher::nccl_log
