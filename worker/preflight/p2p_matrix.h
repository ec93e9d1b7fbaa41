// Pairwise point-to-point bandwidth, one link at a time, so a slow GPU, NIC or node shows up as
// a row or column well below the median.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "worker/preflight/preflight_options.h"

namespace dlaunch::worker {

struct SlowLink {
  int src = 0;
  int dst = 0;
  double gbps = 0;              // the best of every measurement of the link
  std::vector<double> repeats;  // the re-measurements, in order (the first figure is not here)
};

// A link that measured below the threshold at first and at or above it when measured again: noise
// on a shared host, reported but not flagged.
struct RecoveredLink {
  int src = 0;
  int dst = 0;
  double first_gbps = 0;
  std::vector<double> repeats;
};

struct P2PResult {
  size_t bytes = 0;
  int iters = 0;
  std::vector<std::vector<double>> gbps;  // [src][dst]; 0 on the diagonal
  double median_gbps = 0;
  double slow_factor = 0.5;
  std::vector<SlowLink> slow_links;
  std::vector<RecoveredLink> recovered_links;
  int retries = 0;  // re-measurements allowed per slow link
  // Ranks all of whose links (to and from) are slow: the likely culprit.
  std::vector<int> slow_ranks;
  int64_t wrong = 0;  // corrupted elements seen by receivers
  std::string skipped;
};

// Called on the sender before each timed transfer of a link (round 0 = the matrix, k = the k-th
// re-measurement): lets a test slow one link down. Optional.
using P2PInject = std::function<void(int src, int dst, int round)>;

// Collective over every rank; the result is the same everywhere. Each link's figure is the best
// of `iters` timed transfers (after one warm-up), measured by the receiver. A link below
// factor x median is measured again, up to --p2p-retries times, and flagged only when every
// measurement stays below. Blocks for n*(n-1) x (iters + 1) transfers of `bytes` plus the
// re-measurements, each bounded by the collective timeout.
P2PResult RunP2PMatrix(core::Communicator& comm, const PreflightOptions& options,
                       const P2PInject& inject = {});

// Finds the median (unless keep_median) and flags links and ranks below factor x median. Pure;
// does not block.
void FlagSlowLinks(P2PResult& result, bool keep_median = false);

std::string FormatP2PTable(const P2PResult& result);
// "1.95" (two decimals), and "1.95, 2.01" for a list ("none" when empty).
std::string Gbps(double gbps);
std::string JoinGbps(const std::vector<double>& values);

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
