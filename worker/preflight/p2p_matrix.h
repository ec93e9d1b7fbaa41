// Pairwise point-to-point bandwidth, one link at a time, so a slow GPU, NIC or node shows up as
// a row or column well below the median.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "worker/preflight/preflight_options.h"

namespace dlaunch::worker {

struct SlowLink {
  int src = 0;
  int dst = 0;
  double gbps = 0;
};

struct P2PResult {
  size_t bytes = 0;
  int iters = 0;
  std::vector<std::vector<double>> gbps;  // [src][dst]; 0 on the diagonal
  double median_gbps = 0;
  double slow_factor = 0.5;
  std::vector<SlowLink> slow_links;
  // Ranks all of whose links (to and from) are slow: the likely culprit.
  std::vector<int> slow_ranks;
  int64_t wrong = 0;  // corrupted elements seen by receivers
  std::string skipped;
};

// Collective over every rank; the result is the same everywhere. Each link's figure is the best
// of `iters` timed transfers (after one warm-up), measured by the receiver. Blocks for n*(n-1)
// x (iters + 1) transfers of `bytes`, each bounded by the collective timeout.
P2PResult RunP2PMatrix(core::Communicator& comm, const PreflightOptions& options);

// Finds the median and flags links and ranks below factor x median. Pure; does not block.
void FlagSlowLinks(P2PResult& result);

std::string FormatP2PTable(const P2PResult& result);

// The p2p matrix folded per node (ranks r*k .. r*k+k-1 on node r, k = ranks_per_node): cell
// [a][b] is the mean of the rank links from node a to node b (intra-node on the diagonal). A node
// whose links to and from every other node sit below slow_factor x the median inter-node cell is
// flagged: the bad NIC, switch port or host.
struct NodeMatrix {
  int ranks_per_node = 0;
  std::vector<std::vector<double>> gbps;  // [src node][dst node]
  double median_gbps = 0;                 // of the inter-node cells
  std::vector<int> slow_nodes;
};

// Pure; does not block. Empty (no cells) when the ranks do not span more than one node.
NodeMatrix FoldPerNode(const P2PResult& p2p, int ranks_per_node);

std::string FormatNodeTable(const NodeMatrix& nodes);

}  // namespace dlaunch::worker
