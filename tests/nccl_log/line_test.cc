// The prefix of a line, in every form NCCL and the launchers around it print.
#include "launcher/nccl_log/line.h"

#include <gtest/gtest.h>

namespace dlaunch::launcher::nccl_log {
namespace {

TEST(SplitLineTest, InfoLine) {
  LogLine l;
  ASSERT_TRUE(
      SplitLine("host:985927:986028 [3] NCCL INFO Channel 00 : 3[4a000] -> 6[44000] "
                "[send] via NET/IB/0/GDRDMA",
                &l));
  EXPECT_EQ(l.level, Level::kInfo);
  EXPECT_EQ(l.host, "host");
  EXPECT_EQ(l.pid, 985927);
  EXPECT_EQ(l.tid, 986028);
  EXPECT_EQ(l.dev, 3);
  EXPECT_EQ(l.message, "Channel 00 : 3[4a000] -> 6[44000] [send] via NET/IB/0/GDRDMA");
  EXPECT_EQ(l.mpi_rank, -1);
}

TEST(SplitLineTest, WarnWithTimestampFileAndFunction) {
  LogLine l;
  ASSERT_TRUE(
      SplitLine("[2026-11-30 09:12:44] gpu-d.cluster:8811:8850 [0] init.cc:896 NCCL WARN "
                "Mismatched NCCL version detected : rank 0 version 22105\r",
                &l));
  EXPECT_EQ(l.level, Level::kWarn);
  EXPECT_EQ(l.host, "gpu-d.cluster");
  EXPECT_EQ(l.where, "init.cc:896");
  EXPECT_EQ(l.message, "Mismatched NCCL version detected : rank 0 version 22105");
  ASSERT_TRUE(SplitLine("h:1:2 [1] transport/net_ib.cc:91 (ncclIbGetPciPath) NCCL WARN x", &l));
  EXPECT_EQ(l.where, "transport/net_ib.cc:91 (ncclIbGetPciPath)");
  EXPECT_EQ(l.dev, 1);
}

TEST(SplitLineTest, OtherLaunchersPrefixes) {
  LogLine l;
  ASSERT_TRUE(SplitLine("[1,3]<stdout>:node-h:21009:21049 [1] NCCL INFO Using network Socket", &l));
  EXPECT_EQ(l.mpi_rank, 3);
  EXPECT_EQ(l.host, "node-h");
  EXPECT_EQ(l.message, "Using network Socket");
  ASSERT_TRUE(SplitLine("12: dgx-02:3004:3104 [0] NCCL INFO Using network IB", &l));
  EXPECT_EQ(l.mpi_rank, 12);
  EXPECT_EQ(l.host, "dgx-02");
  ASSERT_TRUE(SplitLine("[default0]:trainer-7:55:66 [0] NCCL INFO Using network IB", &l));
  EXPECT_EQ(l.host, "trainer-7");
  EXPECT_EQ(l.pid, 55);
}

TEST(SplitLineTest, BareVersionAndForeignLines) {
  LogLine l;
  ASSERT_TRUE(SplitLine("NCCL version 2.19.3+cuda12.3", &l));
  EXPECT_EQ(l.level, Level::kVersion);
  EXPECT_TRUE(l.host.empty());
  EXPECT_EQ(l.message, "NCCL version 2.19.3+cuda12.3");
  ASSERT_TRUE(SplitLine("[1,0]<stdout>:NCCL version 2.19.3+cuda12.3", &l));
  EXPECT_EQ(l.mpi_rank, 0);
  EXPECT_FALSE(SplitLine("epoch 3 loss 0.25", &l));
  EXPECT_FALSE(SplitLine("", &l));
  EXPECT_FALSE(SplitLine("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269", &l));
  // No prefix at all (a log someone filtered): still NCCL's, with no host.
  ASSERT_TRUE(SplitLine("NCCL INFO Using network IB", &l));
  EXPECT_TRUE(l.host.empty());
  EXPECT_EQ(l.message, "Using network IB");
}

}  // namespace
}  // namespace dlaunch::launcher::nccl_log
