#include "worker/preflight/p2p_matrix.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "core/comm/reduce_kernels.h"
#include "worker/preflight/op_kernels.h"
#include "worker/preflight/op_table.h"

namespace dlaunch::worker {

using core::DataType;
constexpr core::ReduceOp kSum = core::ReduceOp::kSum;

namespace {

// One link, isolated (nobody else transfers while it is measured). Collective: every rank calls
// it. Returns the receiver's figure on the receiver, 0 elsewhere; adds corrupted elements seen by
// the receiver to *wrong.
double MeasureLink(core::Communicator& comm, core::Buffer buf, std::vector<float>& host, int src,
                   int dst, const PreflightOptions& options, const P2PInject& inject, int round,
                   double* wrong) {
  const auto timeout = options.collective_timeout;
  const int r = comm.rank();
  comm.Barrier()->Wait(timeout);
  if (r == src) {
    for (size_t i = 0; i < buf.count; ++i) host[i] = static_cast<float>(Pattern(src, i, kSum));
    comm.CopyIn(buf, host.data());
    std::vector<std::shared_ptr<core::Work>> works;
    works.push_back(comm.Send(buf, dst));  // warm-up
    for (int i = 0; i < options.p2p_iters; ++i) {
      if (inject) inject(src, dst, round);
      works.push_back(comm.Send(buf, dst));
    }
    for (auto& w : works) w->Wait(timeout);
    return 0;
  }
  if (r != dst) return 0;
  comm.Recv(buf, src)->Wait(timeout);  // warm-up, untimed
  // Best of the timed transfers: load elsewhere on the host only ever slows a transfer down,
  // while a bad link is slow every time.
  double best = 0;
  for (int i = 0; i < options.p2p_iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    comm.Recv(buf, src)->Wait(timeout);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i == 0 || s < best) best = s;
  }
  comm.CopyOut(host.data(), buf);
  for (size_t i = 0; i < buf.count; ++i) {
    if (host[i] != static_cast<float>(Pattern(src, i, kSum))) *wrong += 1;
  }
  return AlgBwGBps(buf.bytes(), best);
}

// Every rank contributes its slots (0 elsewhere) and learns the sums.
std::vector<double> SumEverywhere(core::Communicator& comm, std::vector<double> values,
                                  std::chrono::milliseconds timeout) {
  auto mem = comm.Allocate(values.size() * sizeof(double));
  core::Buffer b = comm.MakeBuffer(mem.get(), values.size(), DataType::kFloat64);
  comm.CopyIn(b, values.data());
  comm.AllReduce(b, core::ReduceOp::kSum)->Wait(timeout);
  comm.CopyOut(values.data(), b);
  return values;
}

}  // namespace

P2PResult RunP2PMatrix(core::Communicator& comm, const PreflightOptions& options,
                       const P2PInject& inject) {
  const int n = comm.size();
  P2PResult result;
  result.bytes = options.p2p_bytes;
  result.iters = options.p2p_iters;
  result.slow_factor = options.slow_link_factor;
  result.retries = options.p2p_retries;
  result.gbps.assign(n, std::vector<double>(n, 0.0));
  if (n < 2) {
    result.skipped = "needs at least 2 ranks";
    return result;
  }
  const auto timeout = options.collective_timeout;
  const size_t count = std::max<size_t>(options.p2p_bytes / sizeof(float), 1);
  auto mem = comm.Allocate(count * sizeof(float));
  core::Buffer buf = comm.MakeBuffer(mem.get(), count, DataType::kFloat32);
  std::vector<float> host(count);

  // Slot s * n + d holds link s->d as its receiver measured it; the last slot, corrupted
  // elements.
  std::vector<double> mine(n * n + 1, 0.0);
  for (int src = 0; src < n; ++src) {
    for (int dst = 0; dst < n; ++dst) {
      if (src == dst) continue;
      mine[src * n + dst] =
          MeasureLink(comm, buf, host, src, dst, options, inject, 0, &mine[n * n]);
    }
  }
  std::vector<double> all = SumEverywhere(comm, mine, timeout);
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) result.gbps[s][d] = all[s * n + d];
  result.wrong = static_cast<int64_t>(all[n * n]);
  FlagSlowLinks(result);

  // Re-measure what looks slow; the median stays that of the first matrix. The list of slow links
  // is the same on every rank, so every rank takes part in the same transfers.
  std::vector<SlowLink> first = result.slow_links;
  std::vector<std::vector<double>> repeats(first.size());
  for (int round = 1; round <= options.p2p_retries && !result.slow_links.empty(); ++round) {
    std::vector<double> again(first.size() + 1, 0.0);
    for (size_t k = 0; k < first.size(); ++k) {
      again[k] = MeasureLink(comm, buf, host, first[k].src, first[k].dst, options, inject, round,
                             &again[first.size()]);
    }
    again = SumEverywhere(comm, again, timeout);
    result.wrong += static_cast<int64_t>(again[first.size()]);
    for (size_t k = 0; k < first.size(); ++k) {
      repeats[k].push_back(again[k]);
      double& cell = result.gbps[first[k].src][first[k].dst];
      cell = std::max(cell, again[k]);
    }
    FlagSlowLinks(result, /*keep_median=*/true);
    // Links that recovered need no further rounds.
    std::vector<SlowLink> still;
    std::vector<std::vector<double>> still_repeats;
    for (size_t k = 0; k < first.size(); ++k) {
      const double limit = result.slow_factor * result.median_gbps;
      if (result.gbps[first[k].src][first[k].dst] >= limit) {
        result.recovered_links.push_back({first[k].src, first[k].dst, first[k].gbps, repeats[k]});
      } else {
        still.push_back(first[k]);
        still_repeats.push_back(repeats[k]);
      }
    }
    first = still;
    repeats = still_repeats;
  }
  for (SlowLink& l : result.slow_links) {
    for (size_t k = 0; k < first.size(); ++k) {
      if (first[k].src == l.src && first[k].dst == l.dst) l.repeats = repeats[k];
    }
  }
  return result;
}

void FlagSlowLinks(P2PResult& result, bool keep_median) {
  const int n = static_cast<int>(result.gbps.size());
  std::vector<double> values;
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d)
      if (s != d) values.push_back(result.gbps[s][d]);
  result.slow_links.clear();
  result.slow_ranks.clear();
  if (values.empty()) return;
  if (!keep_median) {
    std::vector<double> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    size_t m = sorted.size();
    result.median_gbps = m % 2 ? sorted[m / 2] : (sorted[m / 2 - 1] + sorted[m / 2]) / 2;
  }
  const double limit = result.slow_factor * result.median_gbps;
  std::vector<int> slow_count(n, 0);
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (s == d || result.gbps[s][d] >= limit) continue;
      result.slow_links.push_back({s, d, result.gbps[s][d], {}});
      ++slow_count[s];
      ++slow_count[d];
    }
  }
  // Each rank has 2(n-1) links; a rank whose every link is slow is the common factor. With two
  // ranks both ends look alike, so no rank is singled out.
  if (n >= 3) {
    for (int k = 0; k < n; ++k)
      if (slow_count[k] == 2 * (n - 1)) result.slow_ranks.push_back(k);
  }
}

std::string Gbps(double gbps) {
  char cell[32];
  std::snprintf(cell, sizeof(cell), "%.2f", gbps);
  return cell;
}

std::string JoinGbps(const std::vector<double>& values) {
  std::string out;
  for (double v : values) out += (out.empty() ? "" : ", ") + Gbps(v);
  return out.empty() ? "none" : out;
}

std::string FormatP2PTable(const P2PResult& result) {
  std::ostringstream out;
  if (!result.skipped.empty()) {
    out << "# p2p matrix skipped: " << result.skipped << "\n\n";
    return out.str();
  }
  const int n = static_cast<int>(result.gbps.size());
  char cell[64];
  out << "# p2p bandwidth (GB/s), " << result.bytes << " B x " << result.iters
      << " per link, row = sender, column = receiver\n";
  out << "#  src\\dst";
  for (int d = 0; d < n; ++d) {
    std::snprintf(cell, sizeof(cell), " %8d", d);
    out << cell;
  }
  out << "\n";
  for (int s = 0; s < n; ++s) {
    std::snprintf(cell, sizeof(cell), "#  %7d", s);
    out << cell;
    for (int d = 0; d < n; ++d) {
      if (s == d) {
        std::snprintf(cell, sizeof(cell), " %8s", "-");
      } else {
        bool slow = false;
        for (const auto& l : result.slow_links) slow |= l.src == s && l.dst == d;
        std::snprintf(cell, sizeof(cell), " %7.2f%s", result.gbps[s][d], slow ? "*" : " ");
      }
      out << cell;
    }
    out << "\n";
  }
  std::snprintf(cell, sizeof(cell), "%.2f", result.median_gbps);
  out << "# median " << cell << " GB/s; * = slower than " << result.slow_factor
      << " x median after " << result.retries
      << " re-measurements; slow links: " << result.slow_links.size() << "\n";
  for (const RecoveredLink& l : result.recovered_links) {
    out << "# link " << l.src << "->" << l.dst << " first measured " << Gbps(l.first_gbps)
        << " GB/s, re-measured " << JoinGbps(l.repeats) << " GB/s: noise, not flagged\n";
  }
  out << "\n";
  return out.str();
}

NodeMatrix FoldPerNode(const P2PResult& p2p, int ranks_per_node) {
  NodeMatrix m;
  m.ranks_per_node = ranks_per_node;
  const int n = static_cast<int>(p2p.gbps.size());
  if (ranks_per_node <= 0 || n <= ranks_per_node || n % ranks_per_node != 0) return m;
  const int nodes = n / ranks_per_node;
  m.gbps.assign(nodes, std::vector<double>(nodes, 0));
  std::vector<std::vector<int>> links(nodes, std::vector<int>(nodes, 0));
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      m.gbps[s / ranks_per_node][d / ranks_per_node] += p2p.gbps[s][d];
      ++links[s / ranks_per_node][d / ranks_per_node];
    }
  }
  std::vector<double> inter;
  for (int a = 0; a < nodes; ++a) {
    for (int b = 0; b < nodes; ++b) {
      if (links[a][b] > 0) m.gbps[a][b] /= links[a][b];
      if (a != b) inter.push_back(m.gbps[a][b]);
    }
  }
  std::sort(inter.begin(), inter.end());
  const size_t mid = inter.size() / 2;
  m.median_gbps = inter.size() % 2 ? inter[mid] : (inter[mid - 1] + inter[mid]) / 2;
  const double limit = p2p.slow_factor * m.median_gbps;
  for (int a = 0; a < nodes; ++a) {
    bool all_slow = true;
    for (int b = 0; b < nodes && all_slow; ++b) {
      if (a != b) all_slow = m.gbps[a][b] < limit && m.gbps[b][a] < limit;
    }
    if (all_slow) m.slow_nodes.push_back(a);
  }
  return m;
}

std::string FormatNodeTable(const NodeMatrix& m) {
  std::ostringstream out;
  const int nodes = static_cast<int>(m.gbps.size());
  if (nodes == 0) return "";
  char cell[64];
  out << "# node x node bandwidth (GB/s, mean of rank links; " << m.ranks_per_node
      << " ranks per node), row = sender node\n#  src\\dst";
  for (int d = 0; d < nodes; ++d) {
    std::snprintf(cell, sizeof(cell), " %8d", d);
    out << cell;
  }
  out << "\n";
  for (int s = 0; s < nodes; ++s) {
    std::snprintf(cell, sizeof(cell), "#  %7d", s);
    out << cell;
    for (int d = 0; d < nodes; ++d) {
      std::snprintf(cell, sizeof(cell), " %8.2f", m.gbps[s][d]);
      out << cell;
    }
    out << "\n";
  }
  for (int k : m.slow_nodes) {
    out << "# slow node " << k << ": every link to and from another node is below "
        << "the factor x median " << m.median_gbps << " GB/s\n";
  }
  out << "\n";
  return out.str();
}

}  // namespace dlaunch::worker
