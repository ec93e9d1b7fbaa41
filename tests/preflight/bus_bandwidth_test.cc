// Bus bandwidth arithmetic against nccl-tests' formulas (src/*.cu GetBw functions).
#include "worker/preflight/bus_bandwidth.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "worker/preflight/p2p_matrix.h"

namespace dlaunch::worker {
namespace {

TEST(BusBandwidthTest, FactorsMatchNcclTests) {
  EXPECT_DOUBLE_EQ(2.0 * 3 / 4, BusBwFactor("allreduce", 4));
  EXPECT_DOUBLE_EQ(2.0 * 7 / 8, BusBwFactor("allreduce", 8));
  EXPECT_DOUBLE_EQ(3.0 / 4, BusBwFactor("allgather", 4));
  EXPECT_DOUBLE_EQ(3.0 / 4, BusBwFactor("reduce_scatter", 4));
  EXPECT_DOUBLE_EQ(7.0 / 8, BusBwFactor("alltoall", 8));
  EXPECT_DOUBLE_EQ(1.0, BusBwFactor("broadcast", 4));
  EXPECT_DOUBLE_EQ(1.0, BusBwFactor("sendrecv", 4));
  EXPECT_DOUBLE_EQ(0.0, BusBwFactor("allreduce", 1));
  EXPECT_THROW(BusBwFactor("gather", 4), UsageError);
}

TEST(BusBandwidthTest, AlgBwIsBytesOverTime) {
  // nccl-tests: 64 MiB allreduce in 10 ms on 8 ranks -> algbw 6.71 GB/s, busbw 11.74 GB/s.
  double algbw = AlgBwGBps(64u << 20, 0.010);
  EXPECT_NEAR(6.7109, algbw, 1e-4);
  EXPECT_NEAR(11.7441, algbw * BusBwFactor("allreduce", 8), 1e-4);
  EXPECT_EQ(0, AlgBwGBps(100, 0));
}

TEST(BusBandwidthTest, SweepSizesFollowBEF) {
  EXPECT_EQ((std::vector<size_t>{8, 16, 32, 64}), SweepSizes(8, 64, 2));
  EXPECT_EQ((std::vector<size_t>{8, 32}), SweepSizes(8, 100, 4));
  EXPECT_EQ((std::vector<size_t>{1024}), SweepSizes(1024, 1024, 2));
  EXPECT_EQ(24u, SweepSizes(8, 64u << 20, 2).size());
}

TEST(BusBandwidthTest, SplitOpsRoundToWholeBlocks) {
  EXPECT_EQ(256u, OpElementCount("allreduce", 1024, 4, 3));
  EXPECT_EQ(255u, OpElementCount("allgather", 1024, 4, 3));  // 85 per rank
  EXPECT_EQ(4u, OpElementCount("alltoall", 8, 4, 4));        // at least one per rank
  EXPECT_EQ(1u, OpElementCount("broadcast", 2, 4, 4));
}

TEST(SlowLinkTest, FlagsLinksAndTheCommonRank) {
  // Five ranks at 10 GB/s except every link of rank 4 at 2 GB/s: 12 fast, 8 slow links.
  P2PResult r;
  r.slow_factor = 0.5;
  r.gbps.assign(5, std::vector<double>(5, 10.0));
  for (int k = 0; k < 5; ++k) {
    r.gbps[k][k] = 0;
    if (k != 4) r.gbps[k][4] = r.gbps[4][k] = 2.0;
  }
  FlagSlowLinks(r);
  EXPECT_DOUBLE_EQ(10, r.median_gbps);
  EXPECT_EQ(8u, r.slow_links.size());
  EXPECT_EQ(std::vector<int>{4}, r.slow_ranks);

  // One bad link only: flagged, but no rank is blamed.
  r.gbps = {{0, 10, 10}, {10, 0, 4}, {10, 10, 0}};
  FlagSlowLinks(r);
  ASSERT_EQ(1u, r.slow_links.size());
  EXPECT_EQ(1, r.slow_links[0].src);
  EXPECT_EQ(2, r.slow_links[0].dst);
  EXPECT_DOUBLE_EQ(4, r.slow_links[0].gbps);
  EXPECT_TRUE(r.slow_ranks.empty());
}

TEST(NodeMatrixTest, FoldsRanksPerNodeAndNamesTheSlowNode) {
  // Five nodes of two ranks: 20 GB/s inside a node, 8 GB/s between nodes, but node 2's links to
  // and from other nodes run at 1 GB/s.
  const int k = 2, n = 10;
  P2PResult r;
  r.slow_factor = 0.5;
  r.gbps.assign(n, std::vector<double>(n, 0));
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      r.gbps[s][d] = s / k == d / k ? 20 : (s / k == 2 || d / k == 2) ? 1 : 8;
    }
  }
  NodeMatrix m = FoldPerNode(r, k);
  ASSERT_EQ(m.gbps.size(), 5u);
  EXPECT_DOUBLE_EQ(m.gbps[0][0], 20);
  EXPECT_DOUBLE_EQ(m.gbps[0][1], 8);
  EXPECT_DOUBLE_EQ(m.gbps[2][3], 1);
  EXPECT_DOUBLE_EQ(m.median_gbps, 8);
  EXPECT_EQ(m.slow_nodes, std::vector<int>{2});
  EXPECT_NE(FormatNodeTable(m).find("slow node 2"), std::string::npos);
  // One node only: nothing to fold.
  EXPECT_TRUE(FoldPerNode(r, n).gbps.empty());
  EXPECT_TRUE(FoldPerNode(r, 0).gbps.empty());
}

}  // namespace
}  // namespace dlaunch::worker
