#include "worker/preflight/op_kernels.h"

#include <array>

#include "core/comm/reduce_kernels.h"

namespace dlaunch::worker {
namespace {

using core::Communicator;
using core::Work;
using Result = std::optional<double>;

double P(const ExpectContext& c, int rank, size_t i) { return Pattern(rank, i, c.redop); }

std::shared_ptr<Work> RunAllReduce(Communicator& comm, const OpArgs& a) {
  return comm.AllReduce(a.send, a.recv, a.redop);
}
Result ExpectAllReduce(const ExpectContext& c, size_t i) { return ReducedPattern(c, i); }

std::shared_ptr<Work> RunAllGather(Communicator& comm, const OpArgs& a) {
  return comm.AllGather(a.send, a.recv);
}
// Block p of the output is rank p's input.
Result ExpectGathered(const ExpectContext& c, size_t i) {
  return P(c, static_cast<int>(i / c.param), i % c.param);
}

std::shared_ptr<Work> RunReduceScatter(Communicator& comm, const OpArgs& a) {
  return comm.ReduceScatter(a.send, a.recv, a.redop);
}
Result ExpectReduceScatter(const ExpectContext& c, size_t i) {
  return ReducedPattern(c, c.rank * c.param + i);
}

std::shared_ptr<Work> RunBroadcast(Communicator& comm, const OpArgs& a) {
  return comm.Broadcast(a.send, a.recv, a.root);
}
Result ExpectBroadcast(const ExpectContext& c, size_t i) { return P(c, c.root, i); }

std::shared_ptr<Work> RunReduce(Communicator& comm, const OpArgs& a) {
  return comm.Reduce(a.send, a.recv, a.redop, a.root);
}
Result ExpectReduce(const ExpectContext& c, size_t i) {
  if (c.rank != c.root) return std::nullopt;
  return ReducedPattern(c, i);
}

std::shared_ptr<Work> RunAllToAll(Communicator& comm, const OpArgs& a) {
  return comm.AllToAll(a.send, a.recv);
}
// Block p of my output is block `rank` of rank p's input.
Result ExpectAllToAll(const ExpectContext& c, size_t i) {
  return P(c, static_cast<int>(i / c.param), c.rank * c.param + i % c.param);
}

std::shared_ptr<Work> RunGather(Communicator& comm, const OpArgs& a) {
  return comm.Gather(a.send, a.recv, a.root);
}
Result ExpectGather(const ExpectContext& c, size_t i) {
  if (c.rank != c.root) return std::nullopt;
  return ExpectGathered(c, i);
}

std::shared_ptr<Work> RunScatter(Communicator& comm, const OpArgs& a) {
  return comm.Scatter(a.send, a.recv, a.root);
}
Result ExpectScatter(const ExpectContext& c, size_t i) {
  return P(c, c.root, c.rank * c.param + i);
}

// nccl-tests' sendrecv: a ring, each rank sending to the next and receiving from the previous.
std::shared_ptr<Work> RunSendRecv(Communicator& comm, const OpArgs& a) {
  const int n = comm.size(), r = comm.rank();
  return comm.SendRecv(a.send, (r + 1) % n, a.recv, (r + n - 1) % n);
}
Result ExpectSendRecv(const ExpectContext& c, size_t i) {
  return P(c, (c.rank + c.nranks - 1) % c.nranks, i);
}

// The split rule lives in the op table, so that the counts the op runs with are the ones the
// table's count column and busbw assume.
std::shared_ptr<Work> RunAllToAllV(Communicator& comm, const OpArgs& a) {
  const int n = comm.size(), r = comm.rank();
  return comm.AllToAllV(a.send, AllToAllVCounts(a.param, r, n, true), a.recv,
                        AllToAllVCounts(a.param, r, n, false));
}
// Element i of my output lies in the block from some rank q; it is that block's j-th element,
// which q keeps after the blocks it sends to ranks before me.
Result ExpectAllToAllV(const ExpectContext& c, size_t i) {
  const size_t unit = c.param / AllToAllVUnits(c.nranks);
  for (int q = 0; q < c.nranks; ++q) {
    const size_t block = AllToAllVBlock(unit, q, c.rank, c.nranks);
    if (i >= block) {
      i -= block;
      continue;
    }
    size_t at = i;
    for (int p = 0; p < c.rank; ++p) at += AllToAllVBlock(unit, q, p, c.nranks);
    return P(c, q, at);
  }
  return std::nullopt;
}

// In OpKind order.
constexpr std::array<OpKernel, 10> kKernels = {{
    {&RunAllReduce, &ExpectAllReduce},
    {&RunAllGather, &ExpectGathered},
    {&RunReduceScatter, &ExpectReduceScatter},
    {&RunBroadcast, &ExpectBroadcast},
    {&RunReduce, &ExpectReduce},
    {&RunAllToAll, &ExpectAllToAll},
    {&RunGather, &ExpectGather},
    {&RunScatter, &ExpectScatter},
    {&RunSendRecv, &ExpectSendRecv},
    {&RunAllToAllV, &ExpectAllToAllV},
}};

}  // namespace

const OpKernel& KernelFor(OpKind kind) { return kKernels.at(static_cast<size_t>(kind)); }

double Pattern(int rank, size_t i, core::ReduceOp redop) {
  if (redop == core::ReduceOp::kProd) return 1.0 + static_cast<double>((rank + i) % 2);
  return 1.0 + static_cast<double>((rank + i) % 7);
}

double ReducedPattern(const ExpectContext& c, size_t i) {
  alignas(8) char acc[8], cell[8];
  core::ReduceFn fn = core::GetReduceFn(c.dtype, c.redop);
  core::StoreFromDouble(acc, 0, c.dtype, P(c, 0, i));
  for (int k = 1; k < c.nranks; ++k) {
    core::StoreFromDouble(cell, 0, c.dtype, P(c, k, i));
    fn(acc, acc, cell, 1);
  }
  if (c.redop == core::ReduceOp::kAvg) core::DivideInPlace(acc, 1, c.dtype, c.nranks);
  return core::LoadAsDouble(acc, 0, c.dtype);
}

}  // namespace dlaunch::worker
