// The op table against nccl-tests' arithmetic (src/<op>.cu: GetCollByteCount, GetBw).
#include "worker/preflight/op_table.h"

#include <gtest/gtest.h>

#include <set>

#include "worker/preflight/op_kernels.h"
#include "worker/preflight/p2p_matrix.h"

namespace dlaunch::worker {
namespace {

double Bus(const char* op, int n) { return FindOp(op)->bus_factor(n); }

TEST(OpTableTest, BusFactorsMatchNcclTests) {
  EXPECT_DOUBLE_EQ(2.0 * 3 / 4, Bus("allreduce", 4));
  EXPECT_DOUBLE_EQ(2.0 * 7 / 8, Bus("allreduce", 8));
  for (const char* op : {"allgather", "reduce_scatter", "alltoall", "gather", "scatter"}) {
    EXPECT_DOUBLE_EQ(3.0 / 4, Bus(op, 4)) << op;
  }
  for (const char* op : {"broadcast", "reduce", "sendrecv"}) EXPECT_DOUBLE_EQ(1.0, Bus(op, 4));
  EXPECT_DOUBLE_EQ(0.0, Bus("allreduce", 1));
}

TEST(OpTableTest, AlgBwCountsEveryRankWhereNcclTestsDoes) {
  // nccl-tests: 64 MiB allreduce in 10 ms on 8 ranks -> algbw 6.71 GB/s, busbw 11.74 GB/s.
  const OpSpec& ar = *FindOp("allreduce");
  double algbw = OpAlgBw(ar, (64u << 20) / 4, 4, 0.010, 8);
  EXPECT_NEAR(6.7109, algbw, 1e-4);
  EXPECT_NEAR(11.7441, OpBusBw(ar, algbw, 8), 1e-4);
  // allgather's count is per rank; algbw covers all of them.
  EXPECT_NEAR(8 * 6.7109 / 8, OpAlgBw(*FindOp("allgather"), (8u << 20) / 4, 4, 0.010, 8), 1e-4);
  EXPECT_EQ(0, AlgBwGBps(100, 0));
}

TEST(OpTableTest, CountsFollowGetCollByteCount) {
  // 1 KiB of floats on 3 ranks: the per-rank block rounds down to 16 bytes (4 floats).
  OpCounts ag = CountsFor(*FindOp("allgather"), 1024, 4, 3);
  EXPECT_EQ(84u, ag.param);  // 85 -> 84
  EXPECT_EQ(84u, ag.send);
  EXPECT_EQ(252u, ag.recv);
  EXPECT_EQ(84u, ag.send_inplace_offset);
  EXPECT_EQ(1008u, RowBytes(ag, 4));
  OpCounts rs = CountsFor(*FindOp("reduce_scatter"), 1024, 4, 3);
  EXPECT_EQ(252u, rs.send);
  EXPECT_EQ(84u, rs.recv);
  EXPECT_EQ(84u, rs.recv_inplace_offset);
  OpCounts a2a = CountsFor(*FindOp("alltoall"), 1024, 4, 3);
  EXPECT_EQ(84u, a2a.param);
  EXPECT_EQ(252u, a2a.send);
  OpCounts ar = CountsFor(*FindOp("allreduce"), 1024, 4, 3);
  EXPECT_EQ(256u, ar.param);
  EXPECT_EQ(0u, ar.send_inplace_offset);
  // Too small to split: nccl-tests prints a row of size 0.
  EXPECT_EQ(0u, CountsFor(*FindOp("gather"), 8, 4, 4).param);
  // int8: blocks of 16 elements.
  EXPECT_EQ(16u, CountsFor(*FindOp("scatter"), 100, 1, 4).param);
}

TEST(OpTableTest, NamesAndRoles) {
  EXPECT_EQ(10u, AllOps().size());
  std::set<std::string> names;
  for (const OpSpec& op : AllOps()) {
    names.insert(op.name);
    EXPECT_EQ(&op, FindOp(op.perf_name));
    EXPECT_EQ(&op, FindOp(op.name));
    // Each kind has its kernel, in the same order.
    EXPECT_NE(nullptr, KernelFor(op.kind).run) << op.name;
  }
  EXPECT_EQ(10u, names.size());
  EXPECT_EQ(FindOp("allreduce"), FindOp("all_reduce"));
  EXPECT_EQ(nullptr, FindOp("hypercube"));
  EXPECT_TRUE(FindOp("reduce")->rooted && FindOp("reduce")->reduces);
  EXPECT_FALSE(FindOp("alltoall")->checks_in_place);
  EXPECT_FALSE(FindOp("alltoallv")->checks_in_place);
  EXPECT_FALSE(FindOp("alltoallv")->rooted || FindOp("alltoallv")->reduces);
  EXPECT_EQ(2, FindOp("sendrecv")->min_ranks);
}

// alltoallv's rule: rank r sends 1 + ((p - r) mod n) units to rank p.
TEST(OpTableTest, AllToAllVSplitsAreUnevenYetBalanced) {
  // 1 KiB of floats on 3 ranks: 256 elements, 6 units per rank, a unit rounded down to 16 bytes.
  OpCounts c = CountsFor(*FindOp("alltoallv"), 1024, 4, 3);
  EXPECT_EQ(240u, c.param);  // 256 / 6 = 42 -> 40 elements a unit
  EXPECT_EQ(240u, c.send);
  EXPECT_EQ(240u, c.recv);
  EXPECT_EQ((std::vector<size_t>{40, 80, 120}), AllToAllVCounts(240, 0, 3, true));
  EXPECT_EQ((std::vector<size_t>{120, 40, 80}), AllToAllVCounts(240, 1, 3, true));
  EXPECT_EQ((std::vector<size_t>{80, 40, 120}), AllToAllVCounts(240, 1, 3, false));
  for (int n = 1; n <= 9; ++n) {
    const size_t count = 7 * AllToAllVUnits(n);
    for (int r = 0; r < n; ++r) {
      std::vector<size_t> out = AllToAllVCounts(count, r, n, true);
      std::vector<size_t> in = AllToAllVCounts(count, r, n, false);
      size_t sent = 0, received = 0;
      for (int p = 0; p < n; ++p) {
        sent += out[p];
        received += in[p];
        // What r sends to p is what p expects from r.
        EXPECT_EQ(out[p], AllToAllVCounts(count, p, n, false)[r]) << n << " " << r << " " << p;
      }
      EXPECT_EQ(count, sent);
      EXPECT_EQ(count, received);
      EXPECT_EQ(7u, out[r]) << "one unit stays on the rank";
    }
  }
  // busbw: the share of the bytes that leave the rank, (n-1)(n+2) / (n(n+1)).
  EXPECT_DOUBLE_EQ(0.9, Bus("alltoallv", 4));
  EXPECT_DOUBLE_EQ(2.0 / 3, Bus("alltoallv", 2));
  EXPECT_DOUBLE_EQ(0.0, Bus("alltoallv", 1));
  EXPECT_EQ(1, FindOp("alltoallv")->alg_ranks(8));  // the count column is what a rank sends
  // Too small for one unit a rank: a row of count 0, as nccl-tests prints for tiny splits.
  EXPECT_EQ(0u, CountsFor(*FindOp("alltoallv"), 64, 4, 4).param);
}

// The expected result of alltoallv, against the exchange simulated in host memory.
TEST(OpKernelsTest, AllToAllVExpectationMatchesTheExchange) {
  for (int n = 1; n <= 5; ++n) {
    const size_t count = 2 * AllToAllVUnits(n);
    for (int r = 0; r < n; ++r) {
      std::vector<double> got;
      for (int q = 0; q < n; ++q) {
        const std::vector<size_t> q_sends = AllToAllVCounts(count, q, n, true);
        size_t at = 0;
        for (int p = 0; p < r; ++p) at += q_sends[p];
        for (size_t j = 0; j < q_sends[r]; ++j) {
          got.push_back(Pattern(q, at + j, core::ReduceOp::kSum));
        }
      }
      ASSERT_EQ(count, got.size());
      ExpectContext ctx;
      ctx.rank = r;
      ctx.nranks = n;
      ctx.param = count;
      for (size_t i = 0; i < count; ++i) {
        EXPECT_EQ(got[i], KernelFor(OpKind::kAllToAllV).expect(ctx, i))
            << n << " " << r << " " << i;
      }
    }
  }
}

TEST(OpTableTest, SweepSizesFollowBEFAndI) {
  EXPECT_EQ((std::vector<size_t>{8, 16, 32, 64}), SweepSizes(8, 64, 2));
  EXPECT_EQ((std::vector<size_t>{8, 32}), SweepSizes(8, 100, 4));
  EXPECT_EQ((std::vector<size_t>{1024}), SweepSizes(1024, 1024, 2));
  EXPECT_EQ(24u, SweepSizes(8, 64u << 20, 2).size());
  EXPECT_EQ((std::vector<size_t>{100, 150, 200}), SweepSizes(100, 220, 2, 50));
}

TEST(OpKernelsTest, ReducedPatternUsesTheDtype) {
  ExpectContext c;
  c.nranks = 4;
  c.dtype = core::DataType::kFloat32;
  c.redop = core::ReduceOp::kSum;
  // Pattern(k, 0) = 1 + k % 7: 1 + 2 + 3 + 4.
  EXPECT_DOUBLE_EQ(10, ReducedPattern(c, 0));
  c.redop = core::ReduceOp::kProd;  // 1, 2, 1, 2
  EXPECT_DOUBLE_EQ(4, ReducedPattern(c, 0));
  c.redop = core::ReduceOp::kMax;
  EXPECT_DOUBLE_EQ(4, ReducedPattern(c, 0));
  c.redop = core::ReduceOp::kAvg;
  c.dtype = core::DataType::kInt32;
  EXPECT_DOUBLE_EQ(2, ReducedPattern(c, 0));  // 10 / 4, integer division
  // int8 products wrap as the backend's kernels wrap them.
  c.nranks = 16;
  c.dtype = core::DataType::kInt8;
  c.redop = core::ReduceOp::kProd;
  EXPECT_DOUBLE_EQ(0, ReducedPattern(c, 0));  // 2^8 wraps to 0
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
