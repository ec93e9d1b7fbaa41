// Everything preflight knows about one op that is arithmetic, one table entry per op as
// nccl-tests keeps it (src/<op>.cu: GetCollByteCount, GetBw): its names, which of -o and -r it
// uses, the buffer sizes for a requested size, and how time becomes algbw and busbw. Pure, so the
// launcher can validate `--ops` without linking a communicator; what each op runs and expects
// lives in op_kernels.h, indexed by the same OpKind.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dlaunch::worker {

enum class OpKind {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kGather,
  kScatter,
  kSendRecv,
  kAllToAllV,
};

// Element counts of one op at one size (nccl-tests' getCollByteCount).
struct OpCounts {
  size_t send = 0;   // elements of this rank's send view
  size_t recv = 0;   // elements of this rank's receive view
  size_t param = 0;  // the count passed to the op: nccl-tests' "count" column
  // In-place, both views lie in the receive buffer: the send view at rank x send_inplace_offset
  // elements, the receive view at rank x recv_inplace_offset (nccl-tests' *InplaceOffset).
  size_t send_inplace_offset = 0;
  size_t recv_inplace_offset = 0;
};

struct OpSpec {
  OpKind kind;
  const char* name;       // dlaunch's spelling: "allreduce"
  const char* perf_name;  // nccl-tests' program: "all_reduce_perf"
  bool reduces;           // takes -o; else the redop column reads "none"
  bool rooted;            // takes -r; else the root column reads -1
  int min_ranks;          // sendrecv needs a peer
  // nccl-tests leaves in-place alltoall and sendrecv unchecked (#wrong N/A): the send and receive
  // views overlap, so the result is not defined.
  bool checks_in_place;
  OpCounts (*counts)(size_t count, size_t elt_size, int nranks);
  // algbw = param x elt_size x alg_ranks(n) / time; busbw = algbw x bus_factor(n).
  int (*alg_ranks)(int nranks);
  double (*bus_factor)(int nranks);
};

// Every op, in nccl-tests' order of its README.
const std::vector<OpSpec>& AllOps();
// By dlaunch name ("allreduce"), nccl-tests program ("all_reduce_perf") or that without "_perf".
// nullptr when unknown.
const OpSpec* FindOp(const std::string& name);
// "allreduce, allgather, ..." for error messages and --help.
std::string OpNames();

// alltoallv's split rule (PyTorch's all_to_all_single with split sizes; nccl-tests has no
// alltoallv): rank `from` sends 1 + ((to - from) mod n) units to rank `to`. The blocks differ per
// pair, yet every rank sends and receives AllToAllVUnits(n) = n(n+1)/2 units, one of them to
// itself; the "count" column is the elements each rank sends, and busbw counts the bytes that
// leave the rank: algbw x (1 - 1 / AllToAllVUnits(n)) = algbw x (n-1)(n+2) / (n(n+1)).
size_t AllToAllVUnits(int nranks);
size_t AllToAllVBlock(size_t unit, int from, int to, int nranks);
// Rank `rank`'s send (outgoing = true) or receive counts, one per peer, for a count column of
// `count` elements (a multiple of AllToAllVUnits).
std::vector<size_t> AllToAllVCounts(size_t count, int rank, int nranks, bool outgoing);

// nccl-tests' counts for a requested size in bytes.
OpCounts CountsFor(const OpSpec& op, size_t bytes, size_t elt_size, int nranks);
// The "size" column: the larger of the two views, in bytes.
size_t RowBytes(const OpCounts& c, size_t elt_size);
// GB/s (1e9 bytes per second) for `bytes` moved in `seconds`; 0 when seconds <= 0.
double AlgBwGBps(size_t bytes, double seconds);
// algbw and busbw of one measurement, as nccl-tests' GetBw computes them.
double OpAlgBw(const OpSpec& op, size_t param_count, size_t elt_size, double seconds, int nranks);
inline double OpBusBw(const OpSpec& op, double algbw, int nranks) {
  return algbw * op.bus_factor(nranks);
}

// The sizes a sweep visits: min, then x factor (step_bytes == 0) or + step_bytes, up to max
// inclusive (nccl-tests -b/-e/-f/-i).
std::vector<size_t> SweepSizes(size_t min_bytes, size_t max_bytes, size_t factor,
                               size_t step_bytes = 0);

}  // namespace dlaunch::worker
