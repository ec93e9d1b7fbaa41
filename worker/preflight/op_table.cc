#include "worker/preflight/op_table.h"

#include <algorithm>

namespace dlaunch::worker {
namespace {

// nccl-tests rounds the per-rank block of the ops that split a buffer down to 16 bytes' worth of
// elements.
size_t Block(size_t count, size_t elt_size, int nranks) {
  size_t align = elt_size >= 16 ? 1 : 16 / elt_size;
  return (count / static_cast<size_t>(nranks)) & ~(align - 1);
}

OpCounts Whole(size_t count, size_t, int) { return {count, count, count, 0, 0}; }
OpCounts Gathered(size_t count, size_t elt, int n) {  // allgather, gather
  size_t b = Block(count, elt, n);
  return {b, b * n, b, b, 0};
}
OpCounts Scattered(size_t count, size_t elt, int n) {  // reduce_scatter, scatter
  size_t b = Block(count, elt, n);
  return {b * n, b, b, 0, b};
}
OpCounts Exchanged(size_t count, size_t elt, int n) {  // alltoall
  size_t b = Block(count, elt, n);
  return {b * n, b * n, b, 0, 0};
}

OpCounts VarExchanged(size_t count, size_t elt, int n) {  // alltoallv: whole units per rank
  size_t align = elt >= 16 ? 1 : 16 / elt;
  size_t unit = (count / AllToAllVUnits(n)) & ~(align - 1);
  size_t total = unit * AllToAllVUnits(n);
  return {total, total, total, 0, 0};
}

int OneRank(int) { return 1; }
int EveryRank(int n) { return n; }
double Ring2(int n) { return 2.0 * (n - 1) / n; }
double Ring1(int n) { return static_cast<double>(n - 1) / n; }
double Unit(int) { return 1.0; }
double LeavesRank(int n) { return 1.0 - 1.0 / static_cast<double>(AllToAllVUnits(n)); }

}  // namespace

const std::vector<OpSpec>& AllOps() {
  // clang-format off
  static const std::vector<OpSpec> kOps = {
      // kind                  name              perf_name              redop  root   ranks in-place counts     alg        bus
      {OpKind::kAllReduce,     "allreduce",      "all_reduce_perf",     true,  false, 1, true,  &Whole,     &OneRank,   &Ring2},
      {OpKind::kAllGather,     "allgather",      "all_gather_perf",     false, false, 1, true,  &Gathered,  &EveryRank, &Ring1},
      {OpKind::kReduceScatter, "reduce_scatter", "reduce_scatter_perf", true,  false, 1, true,  &Scattered, &EveryRank, &Ring1},
      {OpKind::kBroadcast,     "broadcast",      "broadcast_perf",      false, true,  1, true,  &Whole,     &OneRank,   &Unit},
      {OpKind::kReduce,        "reduce",         "reduce_perf",         true,  true,  1, true,  &Whole,     &OneRank,   &Unit},
      {OpKind::kAllToAll,      "alltoall",       "alltoall_perf",       false, false, 1, false, &Exchanged, &EveryRank, &Ring1},
      {OpKind::kGather,        "gather",         "gather_perf",         false, true,  1, true,  &Gathered,  &EveryRank, &Ring1},
      {OpKind::kScatter,       "scatter",        "scatter_perf",        false, true,  1, true,  &Scattered, &EveryRank, &Ring1},
      {OpKind::kSendRecv,      "sendrecv",       "sendrecv_perf",       false, false, 2, false, &Whole,     &OneRank,   &Unit},
      // Not an nccl-tests program: PyTorch's all_to_all_single with uneven split sizes.
      {OpKind::kAllToAllV,     "alltoallv",      "alltoallv_perf",      false, false, 1, false, &VarExchanged, &OneRank, &LeavesRank},
  };
  // clang-format on
  return kOps;
}

const OpSpec* FindOp(const std::string& name) {
  for (const OpSpec& op : AllOps()) {
    const std::string perf = op.perf_name;
    if (name == op.name || name == perf || name == perf.substr(0, perf.size() - 5)) return &op;
  }
  return nullptr;
}

std::string OpNames() {
  std::string out;
  for (const OpSpec& op : AllOps()) out += (out.empty() ? "" : ", ") + std::string(op.name);
  return out;
}

size_t AllToAllVUnits(int nranks) {
  const size_t n = static_cast<size_t>(std::max(nranks, 1));
  return n * (n + 1) / 2;
}

size_t AllToAllVBlock(size_t unit, int from, int to, int nranks) {
  const int n = std::max(nranks, 1);
  return unit * static_cast<size_t>(1 + ((to - from) % n + n) % n);
}

std::vector<size_t> AllToAllVCounts(size_t count, int rank, int nranks, bool outgoing) {
  const size_t unit = count / AllToAllVUnits(nranks);
  std::vector<size_t> counts;
  for (int peer = 0; peer < nranks; ++peer) {
    counts.push_back(outgoing ? AllToAllVBlock(unit, rank, peer, nranks)
                              : AllToAllVBlock(unit, peer, rank, nranks));
  }
  return counts;
}

OpCounts CountsFor(const OpSpec& op, size_t bytes, size_t elt_size, int nranks) {
  return op.counts(bytes / elt_size, elt_size, std::max(nranks, 1));
}

size_t RowBytes(const OpCounts& c, size_t elt_size) { return std::max(c.send, c.recv) * elt_size; }

double AlgBwGBps(size_t bytes, double seconds) {
  if (seconds <= 0) return 0;
  return static_cast<double>(bytes) / 1e9 / seconds;
}

double OpAlgBw(const OpSpec& op, size_t param_count, size_t elt_size, double seconds, int nranks) {
  return AlgBwGBps(param_count * elt_size * op.alg_ranks(nranks), seconds);
}

std::vector<size_t> SweepSizes(size_t min_bytes, size_t max_bytes, size_t factor,
                               size_t step_bytes) {
  std::vector<size_t> sizes;
  if (step_bytes == 0 && factor < 2) factor = 2;
  for (size_t s = min_bytes; s <= max_bytes;) {
    sizes.push_back(s);
    // Stop before the next step would overflow or pass max.
    if (step_bytes > 0) {
      if (s > max_bytes - step_bytes) break;
      s += step_bytes;
    } else {
      if (s == 0 || s > max_bytes / factor) break;
      s *= factor;
    }
  }
  return sizes;
}

}  // namespace dlaunch::worker
